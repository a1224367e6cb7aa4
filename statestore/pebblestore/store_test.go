package pebblestore

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// The unit tests' state: key (g int64), value (sum int64, count int64,
// tags list<utf8> nullable) — a group-by's sum and count, and a list.
var (
	kSchema = arrow.NewSchema([]arrow.Field{{Name: "g", Type: arrow.PrimitiveTypes.Int64}}, nil)
	vSchema = arrow.NewSchema([]arrow.Field{
		{Name: "sum", Type: arrow.PrimitiveTypes.Int64},
		{Name: "count", Type: arrow.PrimitiveTypes.Int64},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
)

func newMem(t testing.TB) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

func local(t testing.TB, dir string) storage.Store {
	st, err := storage.OpenLocal(dir, storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func openAt(t testing.TB, st storage.Store, work string, mem memory.Allocator, version int64, every int) *Store {
	t.Helper()
	s, err := Open(context.Background(), st, Options{
		State: statestore.Options{KeySchema: kSchema, ValueSchema: vSchema, MinVersionsToRetain: 3, Allocator: mem},
		Dir:   work, UploadEvery: every, MemTableSize: 1 << 20, MaxSSTableSize: 1 << 20,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(context.Background(), version); err != nil {
		t.Fatal(err)
	}
	return s
}

// rows builds upserts g → (sum, count=version, tags) for keys gs.
func rows(mem memory.Allocator, version int64, gs []int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, statestore.Join(kSchema, vSchema))
	defer b.Release()
	for _, g := range gs {
		b.Field(0).(*array.Int64Builder).Append(g)
		b.Field(1).(*array.Int64Builder).Append(g * version)
		b.Field(2).(*array.Int64Builder).Append(version)
		lb := b.Field(3).(*array.ListBuilder)
		if g%3 == 0 {
			lb.AppendNull()
		} else {
			lb.Append(true)
			lb.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprint("t", g))
		}
	}
	return b.NewRecordBatch()
}

func keys(mem memory.Allocator, gs []int64) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, kSchema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).AppendValues(gs, nil)
	return b.NewRecordBatch()
}

// dump renders rows as "g:sum:count:tags" strings.
func dump(recs ...arrow.RecordBatch) []string {
	var out []string
	for _, r := range recs {
		for i := 0; i < int(r.NumRows()); i++ {
			out = append(out, fmt.Sprintf("%s:%s:%s:%s", r.Column(0).ValueStr(i), r.Column(1).ValueStr(i), r.Column(2).ValueStr(i), r.Column(3).ValueStr(i)))
		}
	}
	return out
}

func loadAll(t testing.TB, s *Store, v int64) []string {
	t.Helper()
	recs, err := s.Load(context.Background(), v)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(recs)
	return dump(recs...)
}

func commit(t testing.TB, s *Store, mem memory.Allocator, v int64, ups, dels []int64) {
	t.Helper()
	u, d := rows(mem, v, ups), keys(mem, dels)
	defer u.Release()
	defer d.Release()
	if err := s.Commit(context.Background(), v, u, d); err != nil {
		t.Fatal(err)
	}
}

// TestRestoreOnAnotherMachineFromUploadedSnapshot: with the deltas before
// the newest snapshot purged, a fresh working directory restores from the
// uploaded files plus the later deltas, and a second upload after a few
// changes uploads only the new files.
func TestRestoreOnAnotherMachineFromUploadedSnapshot(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	dir := t.TempDir()
	st := local(t, dir)
	s := openAt(t, st, filepath.Join(dir+".w", "a"), mem, -1, 5)
	var all []int64
	for g := range int64(240_000) { // several 1 MiB SSTs: a compaction of the low end rewrites only its own
		all = append(all, g)
	}
	commit(t, s, mem, 0, all, nil)
	var firstUpload, laterUpload UploadStats
	for v := int64(1); v < 23; v++ {
		commit(t, s, mem, v, []int64{v, v*7 + 1, v*11 + 2}, []int64{500 + v})
		if err := s.Maintain(ctx, v); err != nil {
			t.Fatal(err)
		}
		if u := s.LastUpload(); u.Version == v {
			if firstUpload.Version == 0 {
				firstUpload = u
			} else {
				laterUpload = u
			}
		}
		if err := s.Purge(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	if firstUpload.Version == 0 || laterUpload.Version == 0 {
		t.Fatalf("no uploads: %+v %+v", firstUpload, laterUpload)
	}
	// The changed keys sit at the low end of the key range: the files
	// of the rest of it are referenced, not sent again.
	if laterUpload.NewBytes*2 > laterUpload.Bytes {
		t.Errorf("an upload after 3 changed keys a version sent %d of the snapshot's %d bytes: not incremental", laterUpload.NewBytes, laterUpload.Bytes)
	}
	t.Logf("first upload %+v, later %+v", firstUpload, laterUpload)
	want := loadAll(t, s, 22)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, statestore.FileName(0, false))); !os.IsNotExist(err) {
		t.Fatalf("delta 0 still in the folder (%v): the restore below would not need the snapshot", err)
	}
	b := openAt(t, local(t, dir), filepath.Join(dir+".w", "b"), mem, 22, 5)
	defer b.Close()
	if got := loadAll(t, b, 22); !slices.Equal(got, want) {
		t.Fatalf("restored on another machine: %d rows, want %d", len(got), len(want))
	}
	// An object the manifests no longer name is collected by Purge.
	objs, err := st.List(ctx, objectPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatal("no uploaded SSTs in the folder")
	}
}

// TestRestoreDiscardsWorkingCopyAheadOfCommitted: a crashed attempt of
// version 3 applied and flushed its changes; the restart restores 2 and
// re-runs 3 with other changes, and the working copy must not keep the
// first attempt's rows. Regression guard for a working copy trusted by
// its version alone.
func TestRestoreDiscardsWorkingCopyAheadOfCommitted(t *testing.T) {
	mem := newMem(t)
	dir := t.TempDir()
	work := filepath.Join(dir+".w", "a")
	s := openAt(t, local(t, dir), work, mem, -1, 100)
	commit(t, s, mem, 0, []int64{1, 2, 3}, nil)
	commit(t, s, mem, 1, []int64{4}, nil)
	commit(t, s, mem, 2, []int64{5}, []int64{1})
	want := loadAll(t, s, 2)
	commit(t, s, mem, 3, []int64{99}, []int64{2}) // the crashed attempt
	if err := s.Close(); err != nil {             // flushed: the copy holds 3
		t.Fatal(err)
	}
	s = openAt(t, local(t, dir), work, mem, 2, 100)
	if got := loadAll(t, s, 2); !slices.Equal(got, want) {
		t.Fatalf("restored 2 over a copy at 3:\n got %v\nwant %v", got, want)
	}
	commit(t, s, mem, 3, []int64{7}, nil) // the re-run
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openAt(t, local(t, dir), work, mem, 3, 100)
	defer s.Close()
	got := strings.Join(loadAll(t, s, 3), " ")
	if strings.Contains(got, "99:") || !strings.Contains(got, "2:") || !strings.Contains(got, "7:") {
		t.Fatalf("version 3 after the re-run: %s", got)
	}
}

// TestLookupSortedAndScanByKeyPrefix: Lookup returns the keys present
// once each in key order whatever the order and repeats asked; Scan takes
// [lo, hi) by a key prefix.
func TestLookupSortedAndScanByKeyPrefix(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	dir := t.TempDir()
	s := openAt(t, local(t, dir), dir+".w", mem, -1, 100)
	defer s.Close()
	commit(t, s, mem, 0, []int64{-5, 0, 3, 9, 12, 40}, nil)
	k := keys(mem, []int64{40, 3, -5, 7, 3, 1000})
	defer k.Release()
	got, err := s.Lookup(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	defer got.Release()
	if d := strings.Join(dump(got), " "); d != `-5:0:0:["t-5"] 3:0:0:(null) 40:0:0:["t40"]` {
		t.Fatalf("lookup: %s", d)
	}
	lo, hi := keys(mem, []int64{0}), keys(mem, []int64{12})
	defer lo.Release()
	defer hi.Release()
	var seen []string
	if err := s.Scan(ctx, lo, hi, 2, func(r arrow.RecordBatch) error {
		seen = append(seen, dump(r)...)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 3 || !strings.HasPrefix(seen[0], "0:") || !strings.HasPrefix(seen[2], "9:") {
		t.Fatalf("scan [0, 12): %v", seen)
	}
	bad := keys(mem, []int64{1, 2})
	defer bad.Release()
	if err := s.Scan(ctx, nil, bad, 0, func(arrow.RecordBatch) error { return nil }); err == nil || !strings.Contains(err.Error(), "one row") {
		t.Fatalf("scan with a two-row bound: %v", err)
	}
}

// TestBackendMarker: the in-memory store refuses a pebble folder with a
// message naming both backends; a folder of the in-memory backend is taken
// over by pebble with its state (a migration).
func TestBackendMarker(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	dir := t.TempDir()
	st := local(t, dir)
	o := statestore.Options{KeySchema: kSchema, ValueSchema: vSchema, Allocator: mem, SnapshotEvery: 1, SnapshotMaxEvery: 1}
	m, err := statestore.Open(ctx, st, o)
	if err != nil {
		t.Fatal(err)
	}
	for v := int64(0); v < 3; v++ {
		u := rows(mem, v, []int64{v, 10 + v})
		if err := m.Commit(ctx, v, u, nil); err != nil {
			t.Fatal(err)
		}
		u.Release()
		if err := m.Maintain(ctx, v); err != nil {
			t.Fatal(err)
		}
		if err := m.Purge(ctx, v); err != nil {
			t.Fatal(err)
		}
	}
	recs, err := m.Load(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	want := dump(recs...)
	releaseAll(recs)

	s := openAt(t, st, dir+".w", mem, 2, 1)
	if got := loadAll(t, s, 2); !slices.Equal(got, want) {
		t.Fatalf("pebble over a memory folder: %v, want %v", got, want)
	}
	commit(t, s, mem, 3, []int64{77}, nil)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = statestore.Open(ctx, st, o)
	var be *statestore.BackendMismatchError
	if !errors.As(err, &be) || !errors.Is(err, statestore.ErrBackendMismatch) || be.Have != "pebble" || be.Want != "memory" {
		t.Fatalf("memory store on a pebble folder: %v", err)
	}
	if !strings.Contains(err.Error(), dir) {
		t.Fatalf("the message does not name the folder: %v", err)
	}
}
