package engine

import (
	"context"
	"time"

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

func (r *run) report(ctx context.Context, id int64, plan *OffsetsEntry, recovered bool, durs map[string]int64, total time.Duration) {
	ex := r.ex
	secs := total.Seconds()
	var in int64
	for _, n := range ex.inRows {
		in += n
	}
	p := Progress{
		ID: r.cp.meta.ID, RunID: r.runID, Name: r.cfg.name,
		Timestamp:       fmtMillis(plan.TimestampMs),
		BatchID:         id,
		BatchDurationMs: total.Milliseconds(),
		NumInputRows:    in,
		DurationMs:      durs,
		Recovered:       recovered,
	}
	if secs > 0 {
		p.ProcessedRowsPerSecond = float64(in) / secs
	}
	if prev := r.q.LastProgress(); prev != nil {
		if prevT, err := time.Parse(millisLayout, prev.Timestamp); err == nil {
			if d := time.UnixMilli(plan.TimestampMs).Sub(prevT).Seconds(); d > 0 {
				p.InputRowsPerSecond = float64(in) / d
			}
		}
	}
	for i, so := range plan.Sources {
		sp := SourceProgress{Description: so.Description, StartOffset: so.Start, EndOffset: so.End, NumInputRows: ex.inRows[i]}
		if secs > 0 {
			sp.ProcessedRowsPerSecond = float64(ex.inRows[i]) / secs
		}
		if m, ok := r.srcs[i].(SourceMetrics); ok {
			sp.Metrics = m.Metrics()
		}
		p.Sources = append(p.Sources, sp)
	}
	for _, s := range r.cfg.sinks {
		p.Sinks = append(p.Sinks, SinkProgress{Description: describe(s), NumOutputRows: ex.outRows, Guarantee: guarantee(s)})
	}
	for i, c := range ex.ops {
		op := StateOperatorProgress{OperatorID: c.op.id(), OperatorName: c.op.kind(), NumPartitions: c.nParts, CommitTimeMs: c.commitTime.Milliseconds(), NumRowsDroppedByWatermark: c.late.Load()}
		if i == 0 {
			op.NumRowsDroppedByWatermark += ex.lateRows
		}
		for p, part := range c.parts {
			rows, bytes := part.size()
			op.NumRowsTotal += rows
			op.MemoryUsedBytes += bytes
			op.NumRowsUpdated += c.updated[p]
			op.NumRowsRemoved += c.removed[p]
			for k, v := range c.custom[p] {
				if op.CustomMetrics == nil {
					op.CustomMetrics = map[string]int64{}
				}
				op.CustomMetrics[k] += v
			}
		}
		if cb := c.comb; cb != nil && cb.combined > 0 {
			if op.CustomMetrics == nil {
				op.CustomMetrics = map[string]int64{}
			}
			op.CustomMetrics["numRowsCombined"] = cb.combined
			op.CustomMetrics["numPartialGroups"] = cb.groups
		}
		p.StateOperators = append(p.StateOperators, op)
	}
	if ex.watermarked() {
		p.EventTime = map[string]string{"watermark": fmtMillis(plan.WatermarkMs)}
		if ex.ev.n > 0 {
			p.EventTime["min"] = fmtMillis(ex.ev.min)
			p.EventTime["max"] = fmtMillis(ex.ev.max)
			p.EventTime["avg"] = fmtMillis(ex.ev.sum / ex.ev.n)
		}
	}
	// The progress log is for people: a failure to write it must not
	// fail a committed batch, but it is logged. No recovery reads it, so
	// it is written without waiting for the disk (storage.PutVolatile: two
	// fsyncs fewer in every batch's loop); a crash may leave the newest
	// record missing or torn, and its readers skip a torn one.
	if err := storage.PutVolatile(ctx, r.cp.store, checkpoint.ProgressFile(id), mustEncode(p)); err != nil {
		r.log.Warn("write progress", "batchId", id, "err", err)
	}
	r.q.mu.Lock()
	r.q.mu.last = &p
	r.q.mu.Unlock()
	r.log.Info("batch committed", "batchId", id, "inputRows", in, "outputRows", ex.outRows, "durationMs", total.Milliseconds(), "recovered", recovered)
	r.cfg.notifyCommitted(p)
}

// millisLayout is how progress records print times (UTC, milliseconds).
const millisLayout = "2006-01-02T15:04:05.000Z"

func fmtMillis(ms int64) string {
	return time.UnixMilli(ms).UTC().Format(millisLayout)
}

func mustEncode(v any) []byte {
	b, err := offsetlog.Encode(v)
	if err != nil {
		panic(err) // Progress always encodes
	}
	return b
}
