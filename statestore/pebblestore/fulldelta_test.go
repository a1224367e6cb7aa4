package pebblestore

import (
	"context"
	"slices"
	"testing"

	"github.com/onceflow/onceflow/statestore"
)

// TestTakesOverAMemoryFolderOfFullDeltas: a folder of the in-memory
// backend whose versions were committed whole (statestore.CommitFull), with
// the files before the newest full deltas purged and no snapshot, is taken
// over by pebble from its newest full delta.
func TestTakesOverAMemoryFolderOfFullDeltas(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	dir := t.TempDir()
	st := local(t, dir)
	o := statestore.Options{KeySchema: kSchema, ValueSchema: vSchema, Allocator: mem, MinVersionsToRetain: 2}
	m, err := statestore.Open(ctx, st, o)
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(0); v < 6; v++ {
		u := rows(mem, v, []int64{1, 2, 3, 4 + v})
		if v == 0 {
			err = m.Commit(ctx, v, u, nil)
		} else {
			all := rows(mem, v, []int64{1, 2, 3, 4, 5, 6, 7, 8, 9}[:3+v])
			err = m.CommitFull(ctx, v, all)
			all.Release()
		}
		u.Release()
		if err != nil {
			t.Fatal(err)
		}
		if err := m.Maintain(ctx, v); err != nil {
			t.Fatal(err)
		}
		if err := m.Purge(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	deltas, snaps, err := m.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) != 0 || deltas[0] == 0 {
		t.Fatalf("the memory folder holds deltas %v and snapshots %v; want the early deltas purged and no snapshot", deltas, snaps)
	}
	recs, err := m.Load(ctx, 5)
	if err != nil {
		t.Fatal(err)
	}
	want := dump(recs...)
	releaseAll(recs)
	s := openAt(t, st, dir+".w", mem, 5, 1)
	if got := loadAll(t, s, 5); !slices.Equal(got, want) {
		t.Fatalf("pebble over a memory folder of full deltas: %v, want %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
