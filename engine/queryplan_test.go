package engine

import (
	"testing"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/memsink"
)

// planRecorder keeps the QueryInfo and the last progress of a run.
type planRecorder struct {
	info QueryInfo
	last Progress
}

func (r *planRecorder) OnQueryStart(info QueryInfo) error { r.info = info; return nil }
func (r *planRecorder) OnBatchCommitted(p Progress)       { r.last = p }

// The plan a listener is told names what the progress records then
// report: the sources, each stateful operator with the id and kind of its
// progress, and the sinks with their guarantee.
func TestQueryInfoPlanMatchesProgress(t *testing.T) {
	rec := &planRecorder{}
	stream := ReadStream(newSeq(20, 10, 3)).
		Where(batch.Gt(batch.Col("amount"), batch.Lit(int64(0)))).
		GroupBy("key").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"))
	if _, err := runQuery(t, stream, WithName("plan"), WithCheckpoint(localStore(t)), WithSink(memsink.New("out")),
		WithTrigger(AvailableNow()), WithOutputMode(Update), WithListener(rec)); err != nil {
		t.Fatal(err)
	}
	p := rec.info.Plan
	if len(p.Sources) != 1 || p.Sources[0] != "seq" {
		t.Errorf("plan sources %q, want [seq]", p.Sources)
	}
	if p.Steps != stream.describe() || p.Steps == "" {
		t.Errorf("plan steps %q, want %q", p.Steps, stream.describe())
	}
	if len(p.Operators) != len(rec.last.StateOperators) || len(p.Operators) != 1 {
		t.Fatalf("plan operators %+v, progress %+v", p.Operators, rec.last.StateOperators)
	}
	if op, got := p.Operators[0], rec.last.StateOperators[0]; op.ID != got.OperatorID || op.Kind != got.OperatorName {
		t.Errorf("plan operator %+v, progress reports %s %s", op, got.OperatorID, got.OperatorName)
	}
	if len(p.Sinks) != 1 || p.Sinks[0].Description != rec.last.Sinks[0].Description || p.Sinks[0].Guarantee != ExactlyOnce {
		t.Errorf("plan sinks %+v, progress %+v", p.Sinks, rec.last.Sinks)
	}
}
