package monitor

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"

	"github.com/onceflow/onceflow/engine"
)

// goldenProgress is a batch's progress with every part the status shows.
func goldenProgress() engine.Progress {
	return engine.Progress{ID: "q-id", RunID: "r-id", Name: "payments", Timestamp: "2026-01-01T00:00:04.500Z", BatchID: 7, BatchDurationMs: 12,
		NumInputRows: 3, InputRowsPerSecond: 1.5, ProcessedRowsPerSecond: 250,
		DurationMs: map[string]int64{engine.PhaseAddBatch: 3, engine.PhaseTriggerExecution: 12},
		EventTime:  map[string]string{"watermark": "2026-01-01T00:00:00.000Z"},
		StateOperators: []engine.StateOperatorProgress{
			{OperatorID: "totals", OperatorName: "groupBy", NumRowsTotal: 3, NumPartitions: 2, MemoryUsedBytes: 100},
		},
		Sources: []engine.SourceProgress{{Description: "seq", StartOffset: json.RawMessage(`0`), EndOffset: json.RawMessage(`3`), NumInputRows: 3,
			Metrics: map[string]any{"lag": map[string]int{"0": 1}}}},
		Sinks:     []engine.SinkProgress{{Description: "memory[out]", NumOutputRows: 3, Guarantee: engine.ExactlyOnce}},
		Recovered: true,
	}
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	want, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s changed; it is a contract, extend it only compatibly\n got:\n%s\nwant:\n%s", name, got, want)
	}
}

// The /status document through a run's life, byte for byte as the
// engine's status server served it before it moved here
// (testdata/status.golden was written by that code).
func TestStatusJSONIsUnchanged(t *testing.T) {
	var out bytes.Buffer
	clock := newFakeNow()
	l := New(WithHealthRule(HealthRule{Intervals: 3, MinAge: time.Second}))
	l.now = clock.now
	dump := func(label string) {
		enc := json.NewEncoder(&out)
		enc.SetIndent("", "  ") // as /status serves it
		fmt.Fprintf(&out, "== %s\n", label)
		if err := enc.Encode(l.status()); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.OnQueryStart(engine.QueryInfo{ID: "q-id", RunID: "r-id", Name: "payments", Trigger: engine.Every(time.Second)}); err != nil {
		t.Fatal(err)
	}
	clock.add(1500 * time.Millisecond)
	dump("started, no commit")
	clock.add(3 * time.Second)
	dump("started, stale, no commit")
	l.OnBatchRecovered(7)
	l.OnBatchCommitted(goldenProgress())
	clock.add(250 * time.Millisecond)
	dump("committed")
	l.OnQueryStop(errors.New("engine: boom"))
	clock.add(time.Hour)
	dump("stopped")
	checkGolden(t, "testdata/status.golden", out.Bytes())
}

// The metrics' names, help, labels and values, as the engine exported them
// before they moved here (testdata/metrics.golden was written by that
// code).
func TestMetricsExpositionIsUnchanged(t *testing.T) {
	clock := newFakeNow()
	reg := prometheus.NewRegistry()
	l := New(WithMetrics(reg))
	l.now = clock.now
	if err := l.OnQueryStart(engine.QueryInfo{ID: "q-id", RunID: "r-id", Name: "payments", Trigger: engine.Every(time.Second)}); err != nil {
		t.Fatal(err)
	}
	clock.add(1500 * time.Millisecond)
	l.OnBatchRecovered(7)
	l.OnBatchCommitted(engine.Progress{BatchID: 7, BatchDurationMs: 12,
		StateOperators: []engine.StateOperatorProgress{{OperatorID: "totals", NumRowsTotal: 3, MemoryUsedBytes: 100, NumRowsDroppedByWatermark: 2}},
		Sources: []engine.SourceProgress{{Description: "kafka[pay]", NumInputRows: 3,
			Metrics: map[string]any{"partitions": []map[string]any{{"topic": "pay", "partition": 0, "lag": 4}}}}},
		Sinks: []engine.SinkProgress{{Description: "memory[out]", NumOutputRows: 3, Guarantee: engine.ExactlyOnce}}})
	clock.add(250 * time.Millisecond)
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	for _, f := range fams {
		if _, err := expfmt.MetricFamilyToText(&out, f); err != nil {
			t.Fatal(err)
		}
	}
	checkGolden(t, "testdata/metrics.golden", out.Bytes())
}
