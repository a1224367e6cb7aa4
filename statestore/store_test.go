package statestore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// randomChanges returns one batch's changes to m (applied to m): up to n
// distinct keys, each upserted or deleted.
func randomChanges(rng *rand.Rand, m map[string]row, n int, version int64) (ups, dels []row) {
	touched := map[string]bool{}
	for i := 0; i < n; i++ {
		r := row{user: fmt.Sprintf("user-%02d", rng.IntN(40)), shard: rng.Int64N(5) - 2}
		if touched[r.key()] {
			continue
		}
		touched[r.key()] = true
		if _, ok := m[r.key()]; ok && rng.IntN(4) == 0 || rng.IntN(20) == 0 {
			dels = append(dels, r) // deleting an absent key is allowed
			delete(m, r.key())
			continue
		}
		r.count = version*1000 + int64(i)
		switch rng.IntN(5) {
		case 0: // null list
		case 1:
			r.seen = []string{}
		default:
			for j := rng.IntN(4); j >= 0; j-- {
				r.seen = append(r.seen, fmt.Sprintf("v%d-%d", version, j))
			}
		}
		ups = append(ups, r)
		m[r.key()] = r
	}
	return ups, dels
}

func commitRows(t testing.TB, s *Store, mem memory.Allocator, version int64, ups, dels []row) {
	t.Helper()
	u := buildUpserts(mem, ups)
	defer u.Release()
	var d arrow.RecordBatch
	if len(dels) > 0 || version%2 == 0 { // exercise both nil and empty deletes
		d = buildDeletes(mem, dels)
		defer d.Release()
	}
	if err := s.Commit(context.Background(), version, u, d); err != nil {
		t.Fatal(err)
	}
}

// TestLoadMatchesReplay checks that loading through snapshots gives the
// same rows, in the same order, as replaying every delta from the empty
// state, and as a plain map model, for every version.
func TestLoadMatchesReplay(t *testing.T) {
	for _, k := range []int{1, 3, 10} {
		for seed := uint64(1); seed <= 2; seed++ {
			t.Run(fmt.Sprintf("K=%d/seed=%d", k, seed), func(t *testing.T) {
				mem := newMem(t)
				ctx := context.Background()
				snap := openTest(t, newLocal(t, t.TempDir()), mem, k, 1000)
				snap.snapshotRows = 7
				snap.opts.SnapshotDeltaRatio = math.SmallestNonzeroFloat64 // every K versions, whatever the sizes
				plain := openTest(t, newLocal(t, t.TempDir()), mem, k, 1000)
				plain.snapshotRows = 7
				// Snapshot chunks built from slices (snap) and by gathering
				// (plain) must write the same bytes.
				snap.concatRun, plain.concatRun = 1, 1000
				rng := rand.New(rand.NewPCG(seed, uint64(k)))
				model := map[string]row{}
				var history []map[string]row
				const versions = 30
				for v := int64(0); v < versions; v++ {
					ups, dels := randomChanges(rng, model, 1+rng.IntN(30), v)
					commitRows(t, snap, mem, v, ups, dels)
					commitRows(t, plain, mem, v, ups, dels)
					history = append(history, maps.Clone(model))
					if err := snap.Maintain(ctx, v); err != nil {
						t.Fatal(err)
					}
					checkSnapshotChunks(t, snap, v)
					got, want := loadRows(t, snap, v), loadRows(t, plain, v)
					if !rowsEqual(got, want) {
						t.Fatalf("version %d: snapshot load differs from replay\n%s", v, diff(got, want))
					}
					if m := modelRows(model); !rowsEqual(sortedRows(got), m) {
						t.Fatalf("version %d: load differs from model\n%s", v, diff(sortedRows(got), m))
					}
				}
				_, snaps, err := snap.Versions(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if want := versions / k; len(snaps) != want {
					t.Fatalf("K=%d: %d snapshots %v, want %d", k, len(snaps), snaps, want)
				}
				for v := int64(0); v < versions; v += 3 { // old versions too
					got := loadRows(t, snap, v)
					if m := modelRows(history[v]); !rowsEqual(sortedRows(got), m) {
						t.Fatalf("reload of version %d differs from model\n%s", v, diff(sortedRows(got), m))
					}
				}
				// A snapshot's bytes depend on the state alone: one built
				// from 30 deltas equals one built through 30/K snapshots.
				if err := plain.Maintain(ctx, versions-1); err != nil {
					t.Fatal(err)
				}
				a, errA := snap.st.Get(ctx, FileName(versions-1, true))
				b, errB := plain.st.Get(ctx, FileName(versions-1, true))
				if err := errors.Join(errA, errB); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(a, b) {
					t.Fatalf("snapshots of version %d differ (%d and %d bytes) though the states are equal", versions-1, len(a), len(b))
				}
				if recs, err := snap.Load(ctx, -1); err != nil || len(recs) != 0 {
					t.Fatalf("Load(-1) = %d records, %v; want the empty state", len(recs), err)
				}
			})
		}
	}
}

// TestSnapshotScalesWithState checks when Maintain writes snapshots: not
// before SnapshotEvery versions, then only once the deltas weigh
// SnapshotDeltaRatio of the newest snapshot, and always at
// SnapshotMaxEvery versions.
func TestSnapshotScalesWithState(t *testing.T) {
	mem := newMem(t)
	ctx := context.Background()
	s, err := Open(ctx, newLocal(t, t.TempDir()), Options{KeySchema: testKey, ValueSchema: testValue, SnapshotEvery: 2, SnapshotDeltaRatio: 0.5, SnapshotMaxEvery: 6, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	many := func(prefix string) []row {
		rows := make([]row, 2000)
		for i := range rows {
			rows[i] = row{user: fmt.Sprintf("%s%05d", prefix, i), count: int64(i), seen: []string{"a", "b", "c"}}
		}
		return rows
	}
	model := map[string]row{}
	for v := int64(0); v <= 16; v++ {
		var ups []row
		switch v {
		case 0:
			ups = many("a") // the state: far more bytes than a one-row delta
		case 14:
			ups = many("b") // a delta as heavy as the state
		default:
			ups = []row{{user: "x", shard: v, count: v}}
		}
		for _, r := range ups {
			model[r.key()] = r
		}
		commitRows(t, s, mem, v, ups, nil)
		if err := s.Maintain(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	// 1: K versions after the empty state. 7, 13: small deltas never
	// reach half the snapshot, SnapshotMaxEvery forces one. 15: K versions
	// after 13, and delta 14 outweighs half of snapshot 13.
	_, snaps, err := s.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(snaps); got != "[1 7 13 15]" {
		t.Fatalf("snapshots %s, want [1 7 13 15]", got)
	}
	if got := sortedRows(loadRows(t, s, 16)); !rowsEqual(got, modelRows(model)) {
		t.Fatalf("version 16 differs from the model\n%s", diff(got, modelRows(model)))
	}
}

// TestMaintainConcurrentWithCommit runs maintenance and purging in a
// goroutine while versions are committed and checks nothing is lost.
func TestMaintainConcurrentWithCommit(t *testing.T) {
	mem := newMem(t)
	ctx := context.Background()
	s := openTest(t, newLocal(t, t.TempDir()), mem, 4, 8)
	committed := make(chan int64, 200)
	var wg sync.WaitGroup
	var bgErr error
	wg.Go(func() {
		for c := range committed {
			if err := s.Maintain(ctx, c); err != nil {
				bgErr = err
				return
			}
			if err := s.Purge(ctx, c); err != nil {
				bgErr = err
				return
			}
		}
	})
	rng := rand.New(rand.NewPCG(7, 7))
	model := map[string]row{}
	const versions = 120
	for v := int64(0); v < versions; v++ {
		ups, dels := randomChanges(rng, model, 1+rng.IntN(40), v)
		commitRows(t, s, mem, v, ups, dels)
		committed <- v
	}
	close(committed)
	wg.Wait()
	if bgErr != nil {
		t.Fatal(bgErr)
	}
	got := loadRows(t, s, versions-1)
	if m := modelRows(model); !rowsEqual(sortedRows(got), m) {
		t.Fatalf("final state differs from model\n%s", diff(sortedRows(got), m))
	}
	_, snaps, err := s.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(snaps) == 0 {
		t.Fatal("maintenance wrote no snapshot")
	}
}

func TestRecommitReplacesVersion(t *testing.T) {
	mem := newMem(t)
	ctx := context.Background()
	s := openTest(t, newLocal(t, t.TempDir()), mem, 10, 100)
	a := row{user: "a", shard: 1, count: 1, seen: []string{"x"}}
	b := row{user: "b", shard: 2, count: 2}
	commitRows(t, s, mem, 0, []row{a}, nil)
	commitRows(t, s, mem, 1, []row{b}, nil) // the attempt that crashed
	b2 := row{user: "b", shard: 2, count: 20, seen: []string{"y", "z"}}
	commitRows(t, s, mem, 1, []row{b2}, []row{a}) // the re-run
	got := loadRows(t, s, 1)
	if want := []row{b2}; !rowsEqual(got, want) {
		t.Fatalf("after re-commit: %s", diff(got, want))
	}
	deltas, _, err := s.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(deltas) != "[0 1]" {
		t.Fatalf("deltas %v, want [0 1]", deltas)
	}
}

func TestCommitRejects(t *testing.T) {
	mem := newMem(t)
	ctx := context.Background()
	s := openTest(t, newLocal(t, t.TempDir()), mem, 10, 100)
	a := row{user: "a", shard: 1}
	for _, tc := range []struct {
		name       string
		ups, dels  []row
		badSchema  bool
		wantSubstr string
	}{
		{name: "dup upsert", ups: []row{a, a}, wantSubstr: "key (user=a, shard=1) appears in upserts and again in upserts"},
		{name: "upsert and delete", ups: []row{a}, dels: []row{a}, wantSubstr: "appears in upserts and again in deletes"},
		{name: "schema", ups: []row{a}, badSchema: true, wantSubstr: "upserts have schema"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := buildUpserts(mem, tc.ups)
			defer u.Release()
			d := buildDeletes(mem, tc.dels)
			defer d.Release()
			var err error
			if tc.badSchema {
				err = s.Commit(ctx, 0, d, nil)
			} else {
				err = s.Commit(ctx, 0, u, d)
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantSubstr) {
				t.Fatalf("Commit error %v, want one containing %q", err, tc.wantSubstr)
			}
		})
	}
	if deltas, _, _ := s.Versions(ctx); len(deltas) != 0 {
		t.Fatalf("rejected commits wrote deltas %v", deltas)
	}
}

func TestPurgeKeepsWhatRetentionNeeds(t *testing.T) {
	mem := newMem(t)
	ctx := context.Background()
	s := openTest(t, newLocal(t, t.TempDir()), mem, 3, 5)
	model := map[string]row{}
	rng := rand.New(rand.NewPCG(3, 3))
	var history []map[string]row
	for v := int64(0); v < 30; v++ {
		ups, dels := randomChanges(rng, model, 10, v)
		commitRows(t, s, mem, v, ups, dels)
		history = append(history, maps.Clone(model))
		if err := s.Maintain(ctx, v); err != nil {
			t.Fatal(err)
		}
		if v == 4 { // nothing is purgeable while no snapshot precedes the retained versions
			if err := s.Purge(ctx, v); err != nil {
				t.Fatal(err)
			}
			if d, _, _ := s.Versions(ctx); len(d) != 5 {
				t.Fatalf("purge at 4 left deltas %v", d)
			}
		}
	}
	// Snapshots at 2, 5, …, 29. Retained versions 25..29 need snapshot 23
	// (older than 25, kept) and deltas 24..29.
	if err := s.Purge(ctx, 29); err != nil {
		t.Fatal(err)
	}
	deltas, snaps, err := s.Versions(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(deltas, snaps), "[24 25 26 27 28 29] [23 26 29]"; got != want {
		t.Fatalf("after purge: deltas, snapshots = %s, want %s", got, want)
	}
	for v := int64(25); v <= 29; v++ {
		got := loadRows(t, s, v)
		if m := modelRows(history[v]); !rowsEqual(sortedRows(got), m) {
			t.Fatalf("retained version %d differs from model\n%s", v, diff(sortedRows(got), m))
		}
	}
	_, err = s.Load(ctx, 22)
	if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "version 22 is older than the oldest kept (23): purged") {
		t.Fatalf("Load(22) after purge: %v, want ErrMissing saying it was purged", err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if info.NewestVersion != 29 || info.NewestSnapshot != 29 || info.Files != 10 || info.Bytes <= 0 {
		t.Fatalf("info %+v", info)
	}
}

func TestMissingDeltaNamed(t *testing.T) {
	mem := newMem(t)
	dir := t.TempDir()
	st := newLocal(t, dir)
	s := openTest(t, st, mem, 10, 100)
	for v := int64(0); v <= 42; v++ {
		commitRows(t, s, mem, v, []row{{user: "u", shard: v}}, nil)
	}
	if err := os.Remove(filepath.Join(dir, "00000000000000000040.delta")); err != nil {
		t.Fatal(err)
	}
	_, err := s.Load(context.Background(), 42)
	want := "statestore: load version 42: missing 00000000000000000040.delta in " + st.URL()
	if err == nil || err.Error() != want || !errors.Is(err, ErrMissing) {
		t.Fatalf("got %v\nwant %s", err, want)
	}
}

func TestSchemaMismatch(t *testing.T) {
	otherValue := arrow.NewSchema([]arrow.Field{{Name: "count", Type: arrow.PrimitiveTypes.Float64}}, nil)
	otherKey := arrow.NewSchema([]arrow.Field{{Name: "user", Type: arrow.BinaryTypes.String}}, nil)
	for _, tc := range []struct {
		name     string
		key, val *arrow.Schema
		what     string
	}{
		{"value", testKey, otherValue, "the value schema changed"},
		{"key", otherKey, testValue, "the key schema changed"},
		{"both", otherKey, otherValue, "the key and value schemas changed"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := newMem(t)
			ctx := context.Background()
			dir := t.TempDir()
			st := newLocal(t, dir)
			s := openTest(t, st, mem, 10, 100)
			commitRows(t, s, mem, 0, []row{{user: "a", shard: 1}}, nil)
			before := dirContents(t, dir)
			_, err := Open(ctx, st, Options{KeySchema: tc.key, ValueSchema: tc.val, Allocator: mem})
			if !errors.Is(err, ErrSchemaMismatch) {
				t.Fatalf("Open with other schema: %v, want ErrSchemaMismatch", err)
			}
			msg := err.Error()
			for _, want := range []string{st.URL(), tc.what, schemaString(testKey), schemaString(testValue), schemaString(tc.key), schemaString(tc.val)} {
				if !strings.Contains(msg, want) {
					t.Errorf("message lacks %q:\n%s", want, msg)
				}
			}
			if after := dirContents(t, dir); !maps.Equal(before, after) {
				t.Fatalf("a failed Open changed the folder: %v → %v", before, after)
			}
			if _, err := Open(ctx, st, Options{KeySchema: testKey, ValueSchema: testValue, Allocator: mem}); err != nil {
				t.Fatalf("reopen with the original schemas: %v", err)
			}
		})
	}
}

func dirContents(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		out[p] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestCorruptFiles(t *testing.T) {
	flip := func(b []byte) []byte { b[len(b)/2] ^= 0x10; return b }
	for _, file := range []string{"00000000000000000001.delta", "00000000000000000000.snapshot", "schema"} {
		for _, tc := range []struct {
			name   string
			mangle func([]byte) []byte
			reason string
		}{
			{"torn tail", func(b []byte) []byte { return b[:len(b)-5] }, "truncated"},
			{"torn half", func(b []byte) []byte { return b[:len(b)/2] }, "truncated"},
			{"torn header", func(b []byte) []byte { return b[:10] }, "torn write"},
			{"flipped byte", flip, "checksum mismatch"},
			{"empty", func([]byte) []byte { return nil }, "empty file"},
			{"wrong magic", func(b []byte) []byte { b[0] = 'X'; return b }, "bad magic"},
			{"future format", func(b []byte) []byte { b[4] = 9; return b }, "format version 9"},
		} {
			t.Run(file+"/"+tc.name, func(t *testing.T) {
				mem := newMem(t)
				ctx := context.Background()
				dir := t.TempDir()
				st := newLocal(t, dir)
				s := openTest(t, st, mem, 1, 100)
				commitRows(t, s, mem, 0, []row{{user: "a", shard: 1, seen: []string{"x"}}}, nil)
				if err := s.Maintain(ctx, 0); err != nil {
					t.Fatal(err)
				}
				commitRows(t, s, mem, 1, []row{{user: "b", shard: 1}}, nil)
				p := filepath.Join(dir, file)
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, tc.mangle(b), 0o644); err != nil {
					t.Fatal(err)
				}
				if file == "schema" {
					_, err = Open(ctx, st, Options{KeySchema: testKey, ValueSchema: testValue, Allocator: mem})
				} else {
					var recs []arrow.RecordBatch
					recs, err = s.Load(ctx, 1)
					releaseAll(recs)
				}
				want := "statestore: corrupt state file " + st.URL() + "/" + file + ": "
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), tc.reason) {
					t.Fatalf("got %v\nwant an ErrCorrupt containing %q and %q", err, want, tc.reason)
				}
			})
		}
	}
}

func TestOptionsValidateReportsEverything(t *testing.T) {
	o := Options{
		KeySchema: arrow.NewSchema([]arrow.Field{
			{Name: "k", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)},
			{Name: "v", Type: arrow.PrimitiveTypes.Int64},
		}, nil),
		ValueSchema:         arrow.NewSchema([]arrow.Field{{Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil),
		SnapshotEvery:       -1,
		SnapshotDeltaRatio:  -0.5,
		MinVersionsToRetain: -2,
	}
	o.EnsureDefaults()
	err := o.Validate()
	if err == nil {
		t.Fatal("Validate accepted bad options")
	}
	for _, want := range []string{`key column "k"`, `"v" appears twice`, "SnapshotEvery is -1", "SnapshotDeltaRatio is -0.5", "MinVersionsToRetain is -2"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Validate error lacks %q:\n%v", want, err)
		}
	}
	o = Options{KeySchema: testKey, ValueSchema: testValue, SnapshotEvery: 5, SnapshotMaxEvery: 3}
	o.EnsureDefaults()
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "SnapshotMaxEvery is 3") {
		t.Errorf("Validate of SnapshotMaxEvery < SnapshotEvery: %v", err)
	}
	if err := (Options{}).Validate(); err == nil || !strings.Contains(err.Error(), "KeySchema is required") || !strings.Contains(err.Error(), "ValueSchema is required") {
		t.Errorf("zero Options: %v", err)
	}
}

func TestReadSchemas(t *testing.T) {
	mem := newMem(t)
	ctx := context.Background()
	st := newLocal(t, t.TempDir())
	if _, _, err := ReadSchemas(ctx, st); err == nil {
		t.Fatal("ReadSchemas of an empty folder succeeded")
	}
	openTest(t, st, mem, 10, 100)
	k, v, err := ReadSchemas(ctx, st)
	if err != nil {
		t.Fatal(err)
	}
	if !k.Equal(testKey) || !v.Equal(testValue) {
		t.Fatalf("ReadSchemas = %s, %s", k, v)
	}
}

// TestKeySet stores keys with no value columns (a dedup set) and commits
// versions with no changes at all.
func TestKeySet(t *testing.T) {
	mem := newMem(t)
	ctx := context.Background()
	key := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	s, err := Open(ctx, newLocal(t, t.TempDir()), Options{KeySchema: key, ValueSchema: arrow.NewSchema(nil, nil), SnapshotEvery: 2, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	ids := func(vals ...int64) arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, key)
		defer b.Release()
		b.Field(0).(*array.Int64Builder).AppendValues(vals, nil)
		return b.NewRecordBatch()
	}
	steps := []struct{ ups, dels []int64 }{{ups: []int64{5, 1, 256}}, {}, {ups: []int64{2}, dels: []int64{5}}, {}}
	for v, st := range steps {
		var u, d arrow.RecordBatch
		if st.ups != nil {
			u = ids(st.ups...)
		}
		if st.dels != nil {
			d = ids(st.dels...)
		}
		err := s.Commit(ctx, int64(v), u, d)
		for _, r := range []arrow.RecordBatch{u, d} {
			if r != nil {
				r.Release()
			}
		}
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Maintain(ctx, int64(v)); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := s.Load(ctx, 3)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(recs)
	var got []int64
	for _, r := range recs {
		got = append(got, r.Column(0).(*array.Int64).Int64Values()...)
	}
	if fmt.Sprint(got) != "[1 2 256]" {
		t.Fatalf("Load(3) = %v, want [1 2 256] (ascending key order)", got)
	}
}

// TestStoreLevelCorruption covers files that pass the envelope checks but
// are not what their name or the store says.
func TestStoreLevelCorruption(t *testing.T) {
	ctx := context.Background()
	setup := func(t *testing.T) (*Store, string, *memory.CheckedAllocator) {
		mem := newMem(t)
		dir := t.TempDir()
		s := openTest(t, newLocal(t, dir), mem, 10, 100)
		commitRows(t, s, mem, 0, []row{{user: "a", shard: 1}}, nil)
		commitRows(t, s, mem, 1, []row{{user: "b", shard: 1}}, nil)
		return s, dir, mem
	}
	t.Run("renamed delta", func(t *testing.T) {
		s, dir, _ := setup(t)
		b, err := os.ReadFile(filepath.Join(dir, FileName(0, false)))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, FileName(1, false)), b, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = s.Load(ctx, 1)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "holds version 0, its name says 1") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("unsorted snapshot", func(t *testing.T) {
		s, _, mem := setup(t)
		recs := []arrow.RecordBatch{buildUpserts(mem, []row{{user: "z", shard: 1}, {user: "a", shard: 1}})}
		data, err := encodeFile(kindSnapshot, 0, []section{{schema: s.rowSchema, recs: recs}}, mem)
		releaseAll(recs)
		if err != nil {
			t.Fatal(err)
		}
		if err := s.st.Put(ctx, FileName(0, true), data); err != nil {
			t.Fatal(err)
		}
		_, err = s.Load(ctx, 1)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "00000000000000000000.snapshot") || !strings.Contains(err.Error(), "not in ascending order") {
			t.Fatalf("got %v", err)
		}
	})
	t.Run("beyond newest", func(t *testing.T) {
		s, _, _ := setup(t)
		_, err := s.Load(ctx, 5)
		if !errors.Is(err, ErrMissing) || !strings.Contains(err.Error(), "missing 00000000000000000002.delta") || !strings.Contains(err.Error(), "newer than the newest committed (1)") {
			t.Fatalf("got %v", err)
		}
	})
}

// checkSnapshotChunks fails unless version's snapshot, if it has one, is
// made of records of exactly snapshotRows rows (the last may be shorter).
func checkSnapshotChunks(t *testing.T, s *Store, version int64) {
	t.Helper()
	f, err := s.readFile(context.Background(), version, kindSnapshot)
	if errors.Is(err, ErrMissing) {
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer f.release()
	recs := f.sections[0].recs
	for i, r := range recs {
		if n := int(r.NumRows()); n != s.snapshotRows && !(i == len(recs)-1 && n > 0 && n < s.snapshotRows) {
			t.Fatalf("snapshot %d: record %d of %d has %d rows, want %d", version, i, len(recs), n, s.snapshotRows)
		}
	}
}
