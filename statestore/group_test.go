package statestore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/storage"
)

// groupStores opens n partitions' Stores on views of one Group over root's
// operator folder "state/op", as the engine does.
func groupStores(t *testing.T, root storage.Store, n, k, retain int) (*Group, []*Store) {
	t.Helper()
	g := NewGroup(storage.Sub(root, "state/op"), "")
	sts := make([]*Store, n)
	for p := range n {
		sts[p] = openTest(t, g.Partition(p, storage.Sub(root, "state/op/"+strconv.Itoa(p))), newMem(t), k, retain)
	}
	return g, sts
}

// names lists root's objects below prefix.
func names(t *testing.T, root storage.Store, prefix string) []string {
	t.Helper()
	infos, err := root.List(context.Background(), prefix)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range infos {
		out = append(out, in.Name)
	}
	return out
}

// commitBundled commits each partition's rows as version under one
// Bundle and flushes it.
func commitBundled(t *testing.T, sts []*Store, version int64, rows [][]row) {
	t.Helper()
	ctx := context.Background()
	b := NewBundle()
	bctx := WithBundle(ctx, b)
	for p, st := range sts {
		rec := buildUpserts(st.mem, rows[p])
		err := st.Commit(bctx, version, rec, nil)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Flush(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestGroupBundleOneFilePerVersion(t *testing.T) {
	ctx := context.Background()
	root := newLocal(t, t.TempDir())
	_, sts := groupStores(t, root, 4, 1000, 2)
	want := make([]map[string]row, 4)
	for p := range want {
		want[p] = map[string]row{}
	}
	for v := range int64(6) {
		rows := make([][]row, 4)
		for p := range rows {
			r := row{user: fmt.Sprintf("u%d", p), shard: v % 3, count: v*10 + int64(p)}
			rows[p] = []row{r}
			want[p][r.key()] = r
		}
		commitBundled(t, sts, v, rows)
	}
	// One bundle a version, no delta in a partition's folder.
	for _, n := range names(t, root, "state/op/") {
		if strings.HasSuffix(n, ".delta") && !strings.HasPrefix(n, "state/op/deltas/") {
			t.Errorf("%s: a delta outside the bundles", n)
		}
	}
	if got := names(t, root, "state/op/deltas/"); len(got) != 6 {
		t.Fatalf("bundles %v, want 6", got)
	}
	check := func(sts []*Store, version int64) {
		t.Helper()
		for p, st := range sts {
			if got, w := loadRows(t, st, version), sortedRows(modelRows(want[p])); !rowsEqual(got, w) {
				t.Errorf("partition %d version %d: %s", p, version, diff(got, w))
			}
		}
	}
	check(sts, 5)
	// A new Group (a restart) finds the bundles.
	_, again := groupStores(t, root, 4, 1, 1)
	check(again, 5)
	// Each partition lists its bundled deltas as its own.
	deltas, _, err := again[2].Versions(ctx)
	if err != nil || !slices.Equal(deltas, []int64{0, 1, 2, 3, 4, 5}) {
		t.Fatalf("versions %v, %v", deltas, err)
	}
	// Purge: a bundle goes once every partition is done with it.
	for p, st := range again {
		if err := st.Maintain(ctx, 5); err != nil {
			t.Fatalf("maintain %d: %v", p, err)
		}
	}
	for p, st := range again[:3] {
		if err := st.Purge(ctx, 5); err != nil {
			t.Fatalf("purge %d: %v", p, err)
		}
	}
	if got := names(t, root, "state/op/deltas/"); len(got) != 6 {
		t.Fatalf("after 3 of 4 purges: bundles %v, want all 6", got)
	}
	if d, _, _ := again[0].Versions(ctx); len(d) != 0 {
		t.Errorf("partition 0 still lists version 0 after its purge: %v", d)
	}
	if err := again[3].Purge(ctx, 5); err != nil {
		t.Fatal(err)
	}
	if got := names(t, root, "state/op/deltas/"); len(got) != 0 {
		t.Fatalf("after every partition's purge (each has a snapshot of 5): bundles %v", got)
	}
	check(again, 5)
}

// A format 2 folder (a delta file per partition) continues with bundles:
// loads read both; a re-run replaces one kind with the other.
func TestGroupMixedAndReruns(t *testing.T) {
	ctx := context.Background()
	root := newLocal(t, t.TempDir())
	_, sts := groupStores(t, root, 2, 1000, 100)
	// Versions 0 and 1 as format 2: a delta Put without a bundle.
	for v := range int64(2) {
		for p, st := range sts {
			rec := buildUpserts(st.mem, []row{{user: "a", shard: int64(p), count: v}})
			if err := st.Commit(ctx, v, rec, nil); err != nil {
				t.Fatal(err)
			}
			rec.Release()
		}
	}
	// Version 2 half written on its own in partition 0 (an attempt that
	// crashed), then re-run bundled: the bundle is what loads.
	rec := buildUpserts(sts[0].mem, []row{{user: "stale", count: 99}})
	if err := sts[0].Commit(ctx, 2, rec, nil); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	commitBundled(t, sts, 2, [][]row{{{user: "b", count: 2}}, {{user: "b", shard: 1, count: 2}}})
	if _, err := root.Get(ctx, "state/op/0/"+FileName(2, false)); !storage.IsNotExist(err) {
		t.Fatalf("the earlier attempt's delta of version 2 is still there: %v", err)
	}
	want0 := []row{{user: "a", count: 1}, {user: "b", count: 2}}
	_, fresh := groupStores(t, root, 2, 1000, 100)
	for _, s := range [][]*Store{sts, fresh} {
		if got := loadRows(t, s[0], 2); !rowsEqual(got, want0) {
			t.Fatalf("partition 0 version 2: %s", diff(got, want0))
		}
	}
	// Version 3 bundled, then re-run on its own (say, by a disk-backed
	// backend): the bundle of 3 goes, partition 1 misses 3 until its own
	// re-run, and no bundle shadows the re-run.
	commitBundled(t, fresh, 3, [][]row{{{user: "c", count: 3}}, {{user: "c", shard: 1, count: 3}}})
	rec = buildUpserts(fresh[0].mem, []row{{user: "d", count: 4}})
	if err := fresh[0].Commit(ctx, 3, rec, nil); err != nil {
		t.Fatal(err)
	}
	rec.Release()
	if got := names(t, root, "state/op/deltas/"); slices.Contains(got, "state/op/deltas/"+FileName(3, false)) {
		t.Fatalf("bundle 3 survived a re-run of version 3: %v", got)
	}
	if _, err := fresh[1].Load(ctx, 3); !errors.Is(err, ErrMissing) {
		t.Fatalf("partition 1 version 3 before its re-run: %v, want ErrMissing", err)
	}
	want0 = []row{{user: "a", count: 1}, {user: "b", count: 2}, {user: "d", count: 4}}
	if got := loadRows(t, fresh[0], 3); !rowsEqual(got, want0) {
		t.Fatalf("partition 0 version 3: %s", diff(got, want0))
	}
}

// Damaged bundles fail the load naming the bundle file and the byte.
func TestGroupCorruptBundle(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		hurt func([]byte) []byte
		want string
	}{
		{"index byte flipped", func(b []byte) []byte { b[headerSize+9] ^= 1; return b }, "index checksum mismatch"},
		{"delta byte flipped", func(b []byte) []byte { b[len(b)-40] ^= 1; return b }, "checksum"},
		{"cut short", func(b []byte) []byte { return b[:len(b)-30] }, "truncated"},
		{"version changed", func(b []byte) []byte { b[8]++; return b }, "holds version 1, its name says 0"},
		{"format version", func(b []byte) []byte { b[4] = 9; return b }, "format version 9"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := newLocal(t, t.TempDir())
			_, sts := groupStores(t, root, 2, 1000, 100)
			commitBundled(t, sts, 0, [][]row{{{user: "a"}}, {{user: "b"}}})
			name := "state/op/deltas/" + FileName(0, false)
			data, err := root.Get(ctx, name)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := VerifyBundle(name, data, 0); err != nil {
				t.Fatalf("intact bundle: %v", err)
			}
			if err := root.Put(ctx, name, tc.hurt(slices.Clone(data))); err != nil {
				t.Fatal(err)
			}
			_, fresh := groupStores(t, root, 2, 1000, 100)
			_, err = fresh[1].Load(ctx, 0)
			var ce *CorruptionError
			if !errors.As(err, &ce) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("load: %v, want a *CorruptionError saying %q", err, tc.want)
			}
			if !strings.Contains(err.Error(), "deltas/"+FileName(0, false)) && !strings.Contains(err.Error(), "state/op/1") {
				t.Errorf("error names neither the bundle nor the partition: %v", err)
			}
		})
	}
}

// A model: random batches over 3 partitions, bundled or not, with
// maintenance, purges, re-runs of the newest version and restarts; every
// committed version in the retained range loads as the model says.
func TestGroupModel(t *testing.T) {
	ctx := context.Background()
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rnd := rand.New(rand.NewPCG(seed, 7))
			root := newLocal(t, t.TempDir())
			const parts = 3
			_, sts := groupStores(t, root, parts, 3, 4)
			model := make([]map[string]row, parts)
			history := map[int64][][]row{} // committed version → rows per partition
			for p := range model {
				model[p] = map[string]row{}
			}
			for v := range int64(40) {
				attempts := 1 + rnd.IntN(2)
				var next []map[string]row
				for range attempts {
					bundled := rnd.IntN(4) != 0
					var b *Bundle
					cctx := ctx
					if bundled {
						b = NewBundle()
						cctx = WithBundle(ctx, b)
					}
					next = make([]map[string]row, parts)
					for p, st := range sts {
						next[p] = map[string]row{}
						for k, r := range model[p] {
							next[p][k] = r
						}
						var ups, dels []row
						for range rnd.IntN(4) {
							r := row{user: fmt.Sprintf("k%d", rnd.IntN(6)), shard: int64(p), count: rnd.Int64N(100)}
							if _, dup := next[p][r.key()]; dup && rnd.IntN(3) == 0 {
								if !slices.ContainsFunc(ups, func(u row) bool { return u.key() == r.key() }) && !slices.ContainsFunc(dels, func(u row) bool { return u.key() == r.key() }) {
									dels = append(dels, r)
									delete(next[p], r.key())
								}
								continue
							}
							if slices.ContainsFunc(ups, func(u row) bool { return u.key() == r.key() }) || slices.ContainsFunc(dels, func(u row) bool { return u.key() == r.key() }) {
								continue
							}
							ups = append(ups, r)
							next[p][r.key()] = r
						}
						ur, dr := buildUpserts(st.mem, ups), buildDeletes(st.mem, dels)
						err := st.Commit(cctx, v, ur, dr)
						ur.Release()
						dr.Release()
						if err != nil {
							t.Fatal(err)
						}
					}
					if b != nil {
						if err := b.Flush(ctx); err != nil {
							t.Fatal(err)
						}
					}
				}
				model = next
				rows := make([][]row, parts)
				for p := range rows {
					rows[p] = sortedRows(modelRows(model[p]))
				}
				history[v] = rows
				for _, st := range sts {
					if err := st.Maintain(ctx, v); err != nil {
						t.Fatal(err)
					}
					if err := st.Purge(ctx, v); err != nil {
						t.Fatal(err)
					}
				}
				if rnd.IntN(5) == 0 {
					_, sts = groupStores(t, root, parts, 3, 4)
				}
				for back := range int64(4) {
					if v-back < 0 {
						break
					}
					for p, st := range sts {
						if got, want := loadRows(t, st, v-back), history[v-back][p]; !rowsEqual(got, want) {
							t.Fatalf("version %d partition %d (at %d): %s", v-back, p, v, diff(got, want))
						}
					}
				}
			}
			// What is left is what retention needs: at most a few bundles.
			if n := len(names(t, root, "state/op/deltas/")); n > 12 {
				t.Errorf("%d bundles left after 40 versions with 4 retained", n)
			}
		})
	}
}

// GetRange through every kind of store the views sit on.
func TestGroupRangeReads(t *testing.T) {
	ctx := context.Background()
	root := newLocal(t, t.TempDir())
	if err := root.Put(ctx, "a/b", []byte("0123456789")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		off, n int64
		want   string
	}{{0, 4, "0123"}, {8, 10, "89"}, {10, 3, ""}, {20, 3, ""}, {3, 0, ""}} {
		got, err := storage.GetRange(ctx, storage.Sub(root, "a"), "b", tc.off, tc.n)
		if err != nil || string(got) != tc.want {
			t.Errorf("GetRange(%d, %d) = %q, %v; want %q", tc.off, tc.n, got, err, tc.want)
		}
	}
	if _, err := storage.GetRange(ctx, root, "a/c", 0, 1); !storage.IsNotExist(err) {
		t.Errorf("missing object: %v", err)
	}
	if _, err := storage.GetRange(ctx, root, "a", 0, 1); !storage.IsNotExist(err) {
		t.Errorf("a folder: %v", err)
	}
}

// A damaged bundle of a version no load needs any more does not block the
// store (as an unneeded damaged delta file never did): loads of later
// versions work, a load that needs it fails naming it, and purge removes
// it.
func TestGroupDamagedOldBundle(t *testing.T) {
	ctx := context.Background()
	root := newLocal(t, t.TempDir())
	_, sts := groupStores(t, root, 2, 1, 1)
	for v := range int64(4) {
		commitBundled(t, sts, v, [][]row{{{user: "a", count: v}}, {{user: "b", shard: 1, count: v}}})
	}
	for _, st := range sts {
		if err := st.Maintain(ctx, 2); err != nil {
			t.Fatal(err)
		}
	}
	name := "state/op/deltas/" + FileName(0, false)
	data, err := root.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	data[headerSize+9] ^= 0xff // the index's bytes: its checksum fails
	if err := root.Put(ctx, name, data); err != nil {
		t.Fatal(err)
	}
	_, fresh := groupStores(t, root, 2, 1, 1)
	for p, st := range fresh {
		want := []row{{user: "a", count: 3}}
		if p == 1 {
			want = []row{{user: "b", shard: 1, count: 3}}
		}
		if got := loadRows(t, st, 3); !rowsEqual(got, want) {
			t.Fatalf("partition %d version 3: %s", p, diff(got, want))
		}
	}
	var ce *CorruptionError
	if _, err := fresh[0].Load(ctx, 1); !errors.As(err, &ce) || !strings.Contains(err.Error(), "deltas/"+FileName(0, false)) {
		t.Fatalf("load of version 1, which needs the damaged bundle: %v", err)
	}
	for _, st := range fresh {
		if err := st.Purge(ctx, 3); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := root.Get(ctx, name); !storage.IsNotExist(err) {
		t.Errorf("the damaged bundle outlived every partition's purge: %v", err)
	}
}
