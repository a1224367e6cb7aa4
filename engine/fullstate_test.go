package engine

import (
	"context"
	"fmt"
	"strconv"
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
	infos, err := StateFolder(cp, "totals", 0, "").List(context.Background(), "")
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

// TestGroupByUpdateOutputBuiltWithState pins update mode's output when it
// is built together with the state (kernel StateOutput, ChangesOutput):
// batch by batch it lists the changed groups in order of first touch with
// their running sum, count and average, whether the batch committed the
// whole state (10 of 16 groups changed) or only its changes (3 of 16),
// and across restarts that load the whole-state deltas (their rows in
// touched-first order) back.
func TestGroupByUpdateOutputBuiltWithState(t *testing.T) {
	cp := localStore(t)
	sink := memsink.New("totals")
	type acc struct{ sum, n int64 }
	state := map[string]*acc{}
	var want [][][]any // per batch id
	runs := []struct{ end, perTrigger int64 }{{200, 10}, {230, 3}, {330, 10}}
	start := int64(0)
	for _, r := range runs {
		for a := start; a < r.end; a += r.perTrigger {
			var rows [][]any
			seen := map[string]bool{}
			var order []string
			for i := a; i < min(a+r.perTrigger, r.end); i++ {
				k := "k" + strconv.FormatInt(i%16, 10)
				if state[k] == nil {
					state[k] = &acc{}
				}
				state[k].sum += i % 10
				state[k].n++
				if !seen[k] {
					seen[k] = true
					order = append(order, k)
				}
			}
			for _, k := range order {
				s := state[k]
				rows = append(rows, []any{k, s.sum, s.n, float64(s.sum) / float64(s.n)})
			}
			want = append(want, rows)
		}
		src := newSeq(r.end, r.perTrigger, 16)
		src.avail.Store(r.end)
		stream := ReadStream(src).GroupBy("key").ID("totals").Agg(
			batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"), batch.Avg(batch.Col("amount")).As("mean"))
		if _, err := runQuery(t, stream, WithCheckpoint(cp), WithSink(sink), WithTrigger(AvailableNow()),
			WithStatePartitions(2), WithOutputMode(Update)); err != nil {
			t.Fatal(err)
		}
		start = r.end
	}
	ids := sink.BatchIDs()
	if len(ids) != len(want) {
		t.Fatalf("%d batches reached the sink, want %d", len(ids), len(want))
	}
	for _, id := range ids {
		got := sink.Batch(id)
		// Two partitions each emit their groups in touch order; compare
		// as sets of rows per batch, and the order within a partition
		// is the kernel's (pinned by its own tests).
		if len(got) != len(want[id]) {
			t.Fatalf("batch %d: %d rows, want %d:\n%v\n%v", id, len(got), len(want[id]), got, want[id])
		}
		byKey := map[any][]any{}
		for _, r := range want[id] {
			byKey[r[0]] = r
		}
		for _, r := range got {
			w := byKey[r[0]]
			if w == nil || fmt.Sprint(r) != fmt.Sprint(w) {
				t.Fatalf("batch %d: row %v, want %v", id, r, w)
			}
			delete(byKey, r[0])
		}
	}
}
