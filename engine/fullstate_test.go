package engine

import (
	"context"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/statestore"
)

// TestGroupByCommitsWholeStateWhenMostGroupsChange pins the full-delta
// path of the group-by commit: when at least half the groups change in a
// batch, the version is committed whole (statestore.CommitFull), so no
// snapshot is written however many batches run, the purge keeps only the
// retention's deltas, and a restart loads the state from the newest full
// delta and counts on from it.
func TestGroupByCommitsWholeStateWhenMostGroupsChange(t *testing.T) {
	cp := localStore(t)
	src := newSeq(300, 10, 16) // 10 rows a batch over 16 keys: 10 of 16 groups change
	totals := func(sink *memsink.Sink) (*Query, error) {
		stream := ReadStream(src).GroupBy("key").ID("totals").Agg(batch.CountRows().As("n"))
		return runQuery(t, stream, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()),
			WithStatePartitions(1), WithOutputMode(Complete), WithMinBatchesToRetain(3), WithSnapshotEvery(2))
	}
	if _, err := totals(memsink.New("a")); err != nil {
		t.Fatal(err)
	}
	infos, err := cp.List(context.Background(), "state/totals/0/")
	if err != nil {
		t.Fatal(err)
	}
	var deltas []int64
	for _, in := range infos {
		name := in.Name[strings.LastIndex(in.Name, "/")+1:]
		v, snap, ok := statestore.ParseFileName(name)
		switch {
		case !ok:
		case snap:
			t.Errorf("state holds snapshot %s; full deltas make snapshots needless", in.Name)
		default:
			deltas = append(deltas, v)
		}
	}
	// 30 batches (0..29), retention 3 purged in steps of 1: 27..29.
	if len(deltas) == 0 || deltas[0] < 27 || deltas[len(deltas)-1] != 29 {
		t.Errorf("state keeps deltas %v, want the retained ones (27 to 29)", deltas)
	}
	src.avail.Store(400)
	sink := memsink.New("b")
	if _, err := totals(sink); err != nil {
		t.Fatal(err)
	}
	ids := sink.BatchIDs()
	rows := sink.Batch(ids[len(ids)-1])
	if len(rows) != 16 {
		t.Fatalf("last batch has %d groups, want 16: %v", len(rows), rows)
	}
	for _, r := range rows {
		if r[1].(int64) != 25 {
			t.Fatalf("after the restart, %v counted %d rows, want 25 (400 rows over 16 keys): %v", r[0], r[1], rows)
		}
	}
}
