package kafka

// Metrics reports the source's figures for the engine's progress record
// (the engine's SourceMetrics interface): per partition the batch's start
// and end offsets, the latest offset seen at planning and the lag
// (latest − end), plus the data-loss, recreated-topic and dead-letter
// counters (see Stats).
//
//	{"partitions":[{"topic":"payments","partition":0,"start":10,"end":42,"latest":50,"lag":8}],
//	 "lag":8,"dataLossGaps":0,"skippedOffsets":0,"topicsRecreated":0,"deadLetters":0,"deadLettersSkipped":0}
func (s *Source) Metrics() map[string]any {
	st := s.Stats()
	parts := make([]map[string]any, 0, len(st.Partitions))
	var lag int64
	for _, p := range st.Partitions {
		parts = append(parts, map[string]any{
			"topic": p.Topic, "partition": p.Partition,
			"start": p.Start, "end": p.End, "latest": p.Latest, "lag": p.Lag,
		})
		lag += p.Lag
	}
	return map[string]any{
		"partitions":     parts,
		"lag":            lag,
		"dataLossGaps":   st.DataLossGaps,
		"skippedOffsets": st.SkippedOffsets,
		// topics deleted and created again, read again from their start
		"topicsRecreated": st.TopicsRecreated,
		"deadLetters":     st.DeadLetters,
		// dead letters an earlier run of the batch had committed
		"deadLettersSkipped": st.DeadLettersSkipped,
	}
}

// SourceID identifies what the source reads, for the engine's restart
// check: the recorded offsets belong to these topics (or this pattern).
func (s *Source) SourceID() string { return s.Description() }
