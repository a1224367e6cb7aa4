package monitor

import (
	"encoding/json"
	"testing"

	"github.com/onceflow/onceflow/engine"
)

// The page keeps the last n batches in id order; a batch re-run after a
// restart replaces its id's record and what came after it.
func TestHistoryKeepsTheLastBatches(t *testing.T) {
	h := history{n: 3}
	add := func(id int64, rows int64) { h.add(&engine.Progress{BatchID: id, NumInputRows: rows}) }
	ids := func() (out []int64) {
		for _, p := range h.recs {
			out = append(out, p.BatchID)
		}
		return out
	}
	for id := range int64(5) {
		add(id, 1)
	}
	if got := ids(); len(got) != 3 || got[0] != 2 || got[2] != 4 {
		t.Fatalf("kept %v, want [2 3 4]", got)
	}
	add(3, 7) // re-run of 3 (a restart from an earlier listener's view)
	if got := ids(); len(got) != 2 || got[1] != 3 || h.get(3).NumInputRows != 7 || h.get(4) != nil {
		t.Errorf("after re-run of 3: %v", got)
	}
	if h.get(1) != nil || h.get(2) == nil {
		t.Errorf("get: 1 is gone, 2 is kept")
	}
}

// A batch's point: phases by the page's names, lag per partition (with
// the source named when there are several), watermark delay only once a
// watermark exists, late rows summed over operators.
func TestPointOfProgress(t *testing.T) {
	p := engine.Progress{BatchID: 9, Timestamp: "2026-01-01T00:01:00.000Z", BatchDurationMs: 40,
		DurationMs: map[string]int64{engine.PhaseWALCommit: 3, engine.PhaseAddBatch: 5, engine.PhaseTriggerExecution: 40},
		EventTime:  map[string]string{"watermark": "2026-01-01T00:00:50.000Z"},
		StateOperators: []engine.StateOperatorProgress{
			{OperatorID: "a", NumRowsTotal: 4, MemoryUsedBytes: 10, NumRowsDroppedByWatermark: 2},
			{OperatorID: "b", NumRowsTotal: 1, NumRowsDroppedByWatermark: 3},
		},
		Sources: []engine.SourceProgress{
			{Description: "k1", StartOffset: json.RawMessage(`{"0": 1}`), EndOffset: json.RawMessage(`{"0": 5}`),
				Metrics: map[string]any{"partitions": []map[string]any{{"topic": "t", "partition": 0, "lag": 4}}}},
			{Description: "k2", StartOffset: json.RawMessage(`0`), EndOffset: json.RawMessage(`2`), Metrics: map[string]any{"lag": map[string]int{"p": 1}}},
		},
	}
	b := pointOf(&p)
	if b.Phases["wal"] != 3 || b.Phases["sink"] != 5 || b.Phases["read"] != 0 || len(b.Phases) != 6 {
		t.Errorf("phases %v", b.Phases)
	}
	if b.Lag["k1 t/0"] != 4 || b.Lag["k2 p"] != 1 || len(b.Lag) != 2 {
		t.Errorf("lag %v", b.Lag)
	}
	if b.WatermarkDelayMs == nil || *b.WatermarkDelayMs != 10000 {
		t.Errorf("watermark delay %v, want 10000 ms", b.WatermarkDelayMs)
	}
	if b.LateRowsDropped != 5 || len(b.State) != 2 || b.State[0].Rows != 4 || b.State[0].Bytes != 10 {
		t.Errorf("state %+v, late %d", b.State, b.LateRowsDropped)
	}
	if len(b.Offsets) != 2 || b.Offsets[0] != `k1: {"0":1} → {"0":5}` {
		t.Errorf("offsets %q", b.Offsets)
	}
	p.EventTime = map[string]string{"watermark": "1970-01-01T00:00:00.000Z"}
	if b := pointOf(&p); b.WatermarkDelayMs != nil {
		t.Errorf("delay %d before any watermark", *b.WatermarkDelayMs)
	}
}
