package statestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/onceflow/onceflow/storage"
)

// reviewCommit commits rows as partition st's version under ctx.
func reviewCommit(t *testing.T, ctx context.Context, st *Store, version int64, rows []row) {
	t.Helper()
	rec := buildUpserts(st.mem, rows)
	defer rec.Release()
	if err := st.Commit(ctx, version, rec, nil); err != nil {
		t.Fatal(err)
	}
}

// A view made after a Bundle began staging the group (more partitions
// than the index reserved) must still give a whole, readable bundle.
func TestReviewBundleLateView(t *testing.T) {
	ctx := context.Background()
	root := newLocal(t, t.TempDir())
	g := NewGroup(storage.Sub(root, "state/op"), "")
	st0 := openTest(t, g.Partition(0, storage.Sub(root, "state/op/0")), newMem(t), 1000, 100)
	b := NewBundle()
	bctx := WithBundle(ctx, b)
	reviewCommit(t, bctx, st0, 0, []row{{user: "a", count: 1}})
	// Partitions 1 and 2 open now (a lazily opened partition).
	st1 := openTest(t, g.Partition(1, storage.Sub(root, "state/op/1")), newMem(t), 1000, 100)
	st2 := openTest(t, g.Partition(2, storage.Sub(root, "state/op/2")), newMem(t), 1000, 100)
	reviewCommit(t, bctx, st1, 0, []row{{user: "b", shard: 1, count: 2}})
	reviewCommit(t, bctx, st2, 0, []row{{user: "c", shard: 2, count: 3}})
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	name := "state/op/deltas/" + FileName(0, false)
	data, err := root.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyBundle(name, data, 0); err != nil {
		t.Errorf("bundle written with a view made after staging began: %v", err)
	}
	_, fresh := groupStores(t, root, 3, 1000, 100)
	for p, want := range [][]row{{{user: "a", count: 1}}, {{user: "b", shard: 1, count: 2}}, {{user: "c", shard: 2, count: 3}}} {
		recs, err := fresh[p].Load(ctx, 0)
		if err != nil {
			t.Errorf("partition %d: %v", p, err)
			continue
		}
		if got := readRows(t, recs); !rowsEqual(got, want) {
			t.Errorf("partition %d: %s", p, diff(got, want))
		}
		releaseAll(recs)
	}
}

// A bundle whose index lacks a partition (which has no delta of its own):
// the load of that partition fails loudly, naming the missing delta.
func TestReviewBundleMissingPartitionFailsLoad(t *testing.T) {
	ctx := context.Background()
	root := newLocal(t, t.TempDir())
	_, sts := groupStores(t, root, 3, 1000, 100)
	commitBundled(t, sts, 0, [][]row{{{user: "a"}}, {{user: "b", shard: 1}}, {{user: "c", shard: 2}}})
	// Version 1's bundle, written elsewhere with partitions 0 and 2 only,
	// replaces the real one: an index that lost partition 1.
	other := newLocal(t, t.TempDir())
	_, osts := groupStores(t, other, 3, 1000, 100)
	b := NewBundle()
	for _, p := range []int{0, 2} {
		reviewCommit(t, WithBundle(ctx, b), osts[p], 1, []row{{user: "x", shard: int64(p), count: 1}})
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	commitBundled(t, sts, 1, [][]row{{{user: "x", count: 1}}, {{user: "x", shard: 1, count: 1}}, {{user: "x", shard: 2, count: 1}}})
	name := "state/op/deltas/" + FileName(1, false)
	data, err := other.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if err := root.Put(ctx, name, data); err != nil {
		t.Fatal(err)
	}
	// A bundle may hold fewer partitions than the store has (the format
	// allows it: a Bundle writes the partitions that committed), so the
	// partition's version 1 is missing, not corrupt: the load fails,
	// naming the missing delta and the partition's folder.
	_, fresh := groupStores(t, root, 3, 1000, 100)
	_, err = fresh[1].Load(ctx, 1)
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), FileName(1, false)) || !strings.Contains(err.Error(), "state/op/1") {
		t.Fatalf("partition 1 version 1, missing from its bundle's index: %v; want ErrMissing naming the delta and the folder", err)
	}
	for _, p := range []int{0, 2} {
		recs, err := fresh[p].Load(ctx, 1)
		if err != nil {
			t.Errorf("partition %d version 1: %v", p, err)
		}
		releaseAll(recs)
	}
}

// After a SyncGroup abort of a Flush that rewrote a version's bundle, the
// group must not read the file on disk (an earlier attempt's) with the
// aborted attempt's index: a read gives that file's delta of the
// partition, or nothing, never other bytes.
func TestReviewBundleStaleIndexAfterAbort(t *testing.T) {
	ctx := context.Background()
	root := newLocal(t, t.TempDir())
	_, sts := groupStores(t, root, 2, 1000, 100)
	commitBundled(t, sts, 0, [][]row{{{user: "a"}}, {{user: "b", shard: 1}}})
	// Attempt 1 of version 1: durable, not committed.
	commitBundled(t, sts, 1, [][]row{{{user: "small", count: 1}}, {{user: "a-much-longer-key-" + strings.Repeat("z", 300), shard: 1, count: 1}}})
	name := "state/op/deltas/" + FileName(1, false)
	first, err := root.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	want, err := VerifyBundle(name, first, 1)
	if err != nil {
		t.Fatal(err)
	}
	// Attempt 2, in the same process, is flushed under a sync group that
	// is then aborted (a sink failed).
	sg := storage.NewSyncGroup()
	b := NewBundle()
	bctx := WithBundle(storage.WithSyncGroup(ctx, sg), b)
	reviewCommit(t, bctx, sts[0], 1, []row{{user: "p0-" + strings.Repeat("y", 200), count: 2}})
	reviewCommit(t, bctx, sts[1], 1, []row{{user: "p1", shard: 1, count: 2}})
	if err := b.Flush(bctx); err != nil {
		t.Fatal(err)
	}
	sg.Abort()
	if now, err := root.Get(ctx, name); err != nil || !bytes.Equal(now, first) {
		t.Fatalf("after the abort the bundle on disk changed: %v", err)
	}
	for p, st := range sts {
		got, err := st.st.Get(ctx, FileName(1, false))
		if err != nil {
			if storage.IsNotExist(err) {
				continue
			}
			var ce *CorruptionError
			if errors.As(err, &ce) {
				continue // reported, not misread
			}
			t.Fatalf("partition %d: %v", p, err)
		}
		if !bytes.Equal(got, want[p]) {
			t.Errorf("partition %d reads %d bytes of version 1 that are not the file's delta of it (%d bytes): the aborted attempt's index read the earlier attempt's bundle", p, len(got), len(want[p]))
		}
	}
}

// A Bundle flushed twice, and used again after its Flush, writes every
// delta somewhere the loads find it.
func TestReviewBundleReusedAndFlushedTwice(t *testing.T) {
	ctx := context.Background()
	root := newLocal(t, t.TempDir())
	_, sts := groupStores(t, root, 2, 1000, 100)
	b := NewBundle()
	bctx := WithBundle(ctx, b)
	for p, st := range sts {
		reviewCommit(t, bctx, st, 0, []row{{user: "a", shard: int64(p)}})
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for p, st := range sts {
		reviewCommit(t, bctx, st, 1, []row{{user: "b", shard: int64(p)}})
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	_, fresh := groupStores(t, root, 2, 1000, 100)
	for p, st := range fresh {
		want := []row{{user: "a", shard: int64(p)}, {user: "b", shard: int64(p)}}
		if got := loadRows(t, st, 1); !rowsEqual(got, want) {
			t.Errorf("partition %d: %s", p, diff(got, want))
		}
	}
}

// A purge that some partitions finished before a restart, and the rest
// after it, still deletes every bundle no retained version needs.
func TestReviewBundlePurgeAcrossRestart(t *testing.T) {
	ctx := context.Background()
	root := newLocal(t, t.TempDir())
	_, sts := groupStores(t, root, 3, 2, 2)
	for v := range int64(6) {
		commitBundled(t, sts, v, [][]row{{{user: "a", count: v}}, {{user: "a", shard: 1, count: v}}, {{user: "a", shard: 2, count: v}}})
		for _, st := range sts {
			if err := st.Maintain(ctx, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Partitions 0 and 1 purge, then the process stops.
	for _, st := range sts[:2] {
		if err := st.Purge(ctx, 5); err != nil {
			t.Fatal(err)
		}
	}
	_, sts = groupStores(t, root, 3, 2, 2)
	for v := int64(6); v < 9; v++ {
		commitBundled(t, sts, v, [][]row{{{user: "a", count: v}}, {{user: "a", shard: 1, count: v}}, {{user: "a", shard: 2, count: v}}})
		for _, st := range sts {
			if err := st.Maintain(ctx, v); err != nil {
				t.Fatal(err)
			}
			if err := st.Purge(ctx, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	var needed []string
	for p, st := range sts {
		d, s, err := st.Versions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		needed = append(needed, fmt.Sprintf("p%d deltas %v snapshots %v", p, d, s))
		if got := loadRows(t, st, 8); len(got) != 1 || got[0].count != 8 {
			t.Errorf("partition %d version 8: %v", p, got)
		}
	}
	left := names(t, root, "state/op/deltas/")
	if len(left) > 2 {
		t.Errorf("bundles left: %v (%s)", left, strings.Join(needed, "; "))
	}
}

// Commits of many partitions under one Bundle race a Maintain and a Purge
// of the version before, as the engine runs them; every version loads.
func TestReviewBundleConcurrent(t *testing.T) {
	ctx := context.Background()
	root := newLocal(t, t.TempDir())
	const parts = 8
	_, sts := groupStores(t, root, parts, 2, 2)
	var bg sync.WaitGroup
	errs := make(chan error, 1000)
	for v := range int64(12) {
		b := NewBundle()
		bctx := WithBundle(ctx, b)
		var wg sync.WaitGroup
		for p, st := range sts {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rows := []row{{user: "k" + strconv.Itoa(int(v)%3), shard: int64(p), count: v}}
				rec := buildUpserts(st.mem, rows)
				defer rec.Release()
				if err := st.Commit(bctx, v, rec, nil); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		if err := b.Flush(ctx); err != nil {
			t.Fatal(err)
		}
		bg.Wait()
		for _, st := range sts {
			bg.Add(2)
			go func() {
				defer bg.Done()
				if err := st.Maintain(ctx, v); err != nil {
					errs <- err
				}
			}()
			go func() {
				defer bg.Done()
				if err := st.Purge(ctx, v); err != nil {
					errs <- err
				}
			}()
		}
	}
	bg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	_, fresh := groupStores(t, root, parts, 2, 2)
	for p, st := range fresh {
		got := loadRows(t, st, 11)
		if len(got) != 3 {
			t.Errorf("partition %d version 11: %v", p, got)
		}
	}
}
