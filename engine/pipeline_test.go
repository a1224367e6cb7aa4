package engine

import (
	"context"
	"reflect"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// TestPlanAheadChangesNoBatch pins what planning batch N+1 while commits/N
// is written (Every(0)) and syncing the state beside the sinks may change:
// nothing a reader sees. A stateful query run under Every(0), stopped in
// the middle (the plan made ahead of the stop is dropped: as many plans
// as commits) and continued by a second run, writes the same batches as
// one AvailableNow run, and each plan starts where the one before ended.
func TestPlanAheadChangesNoBatch(t *testing.T) {
	const rows, per = 300, 10
	stream := func(src Source) *Stream {
		return ReadStream(src).GroupBy("key").Agg(batch.CountRows().As("n"), batch.Sum(batch.Col("amount")).As("total"))
	}
	ref := memsink.New("ref")
	if _, err := runQuery(t, stream(newSeq(rows, per, 7)), WithCheckpoint(localStore(t)), WithSink(ref), WithTrigger(AvailableNow()), WithOutputMode(Update)); err != nil {
		t.Fatal(err)
	}

	cp := localStore(t)
	out := memsink.New("out")
	var q *Query
	var n atomic.Int64
	q, err := NewQuery(stream(newSeq(rows, per, 7)), WithCheckpoint(cp), WithSink(out), WithTrigger(Every(0)), WithOutputMode(Update),
		WithProgressListener(func(Progress) {
			if n.Add(1) == 12 {
				q.Stop()
			}
		}))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
	checkLogs(t, cp, 12)
	if _, err := runQuery(t, stream(newSeq(rows, per, 7)), WithCheckpoint(cp), WithSink(out), WithTrigger(AvailableNow()), WithOutputMode(Update)); err != nil {
		t.Fatal(err)
	}
	checkLogs(t, cp, rows/per)
	if len(out.Repeats()) != 0 {
		t.Errorf("repeated batches %v", out.Repeats())
	}
	if got, want := out.BatchIDs(), ref.BatchIDs(); !reflect.DeepEqual(got, want) {
		t.Fatalf("batches %v, want %v", got, want)
	}
	for _, id := range ref.BatchIDs() {
		if got, want := out.Batch(id), ref.Batch(id); !reflect.DeepEqual(got, want) {
			t.Errorf("batch %d: %v, want %v", id, got, want)
		}
	}
}

// checkLogs checks that the checkpoint holds n plans and n commits and
// that each plan starts where the one before ended.
func checkLogs(t *testing.T, cp storage.Store, n int) {
	t.Helper()
	ctx := context.Background()
	plans := offsetlog.New[OffsetsEntry](cp, checkpoint.OffsetsDir)
	ids, err := plans.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cids, err := offsetlog.New[CommitEntry](cp, checkpoint.CommitsDir).List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != n || len(cids) != n {
		t.Fatalf("%d plans and %d commits, want %d of each", len(ids), len(cids), n)
	}
	var prev *OffsetsEntry
	for _, id := range ids {
		e, err := plans.Get(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if prev != nil && string(e.Sources[0].Start) != string(prev.Sources[0].End) {
			t.Errorf("offsets/%d starts at %s, offsets/%d ended at %s", id, e.Sources[0].Start, prev.BatchID, prev.Sources[0].End)
		}
		prev = &e
	}
}
