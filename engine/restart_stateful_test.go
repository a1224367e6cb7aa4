package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/memsink"
)

// Regression: adding a stateful step to a checkpoint of stateless batches
// passed checkRestart but then failed for ever loading state that was never
// written; now it is either refused with ErrIncompatibleRestart or runs,
// restarts with the same options and counts only rows since it was added.
//
// Before the fix: checkRestart lets a query add a stateful step to a checkpoint
// whose committed batches were stateless ("new and the checkpoint has 0
// other(s)" is allowed), but openState then loads version <committed> of
// the new operator, which has no files: the query never starts again, with
// a statestore error about a missing delta instead of a clear refusal.
// Either refuse it in checkRestart (ErrIncompatibleRestart), or open the
// new operator empty; in that case mind that main() records
// lastPlan.Conf.StatePartitions (the stateless run's P) while the executor
// partitions by the query's P, so the next restart with the same options
// would be refused, and the P it asks for would misroute keys.
func TestStatefulStepAddedToStatelessCheckpoint(t *testing.T) {
	cp := localStore(t)
	src := newSeq(10, 10, 4)
	if _, err := runQuery(t, ReadStream(src), WithCheckpoint(cp), WithSink(memsink.New("raw")), WithTrigger(AvailableNow()), WithStatePartitions(4)); err != nil {
		t.Fatal(err)
	}
	totals := func() *Stream {
		return ReadStream(src).GroupBy("key").ID("totals").Agg(batch.CountRows().As("n"))
	}
	opts := func(sink *memsink.Sink) []Option {
		return []Option{WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()), WithStatePartitions(2), WithOutputMode(Complete)}
	}
	src.avail.Store(30)
	_, err := runQuery(t, totals(), opts(memsink.New("a"))...)
	if errors.Is(err, ErrIncompatibleRestart) {
		return // a clear refusal is a fix
	}
	if err != nil {
		t.Fatalf("adding a stateful step: neither refused as incompatible nor run: %v", err)
	}
	// Accepted: the next restart with the same options must work and count
	// rows 10..39 once (k0..k3: 8, 8, 7, 7 in key order within partitions).
	src.avail.Store(40)
	same := memsink.New("b")
	if _, err := runQuery(t, totals(), opts(same)...); err != nil {
		t.Fatalf("restart with the options of the previous run: %v", err)
	}
	ids := same.BatchIDs()
	n := int64(0)
	for _, r := range same.Batch(ids[len(ids)-1]) {
		n += r[1].(int64)
	}
	if n != 30 {
		t.Fatalf("the new operator counted %d rows since it was added, want 30 (%s)", n, fmt.Sprint(same.Batch(ids[len(ids)-1])))
	}
}
