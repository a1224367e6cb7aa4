package pebblestore

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cockroachdb/pebble/v2"

	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// The index tests' state: key (user utf8, ts timestamp[ms]), value (n
// int64, tags list<utf8>, exp timestamp[us] nullable): ts is a key column
// (a window's end), exp a value column after a variable-width one (the
// stored expiry of DropDuplicatesWithinWatermark).
var (
	ixKey = arrow.NewSchema([]arrow.Field{
		{Name: "user", Type: arrow.BinaryTypes.String},
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}},
	}, nil)
	ixVal = arrow.NewSchema([]arrow.Field{
		{Name: "n", Type: arrow.PrimitiveTypes.Int64},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
		{Name: "exp", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
	}, nil)
)

// ixRow is one state row; exp < 0 is null.
type ixRow struct {
	user   string
	ts     int64 // ms
	n, exp int64 // exp in ms
}

func (r ixRow) String() string { return fmt.Sprintf("%s@%d:%d:%d", r.user, r.ts, r.n, r.exp) }

func ixRows(mem memory.Allocator, rs []ixRow) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, statestore.Join(ixKey, ixVal))
	defer b.Release()
	for _, r := range rs {
		b.Field(0).(*array.StringBuilder).Append(r.user)
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(r.ts))
		b.Field(2).(*array.Int64Builder).Append(r.n)
		lb := b.Field(3).(*array.ListBuilder)
		lb.Append(true)
		for j := int64(0); j < r.n%3; j++ {
			lb.ValueBuilder().(*array.StringBuilder).Append(fmt.Sprint("tag", j))
		}
		if r.exp < 0 {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.TimestampBuilder).Append(arrow.Timestamp(r.exp * 1000))
		}
	}
	return b.NewRecordBatch()
}

func ixKeys(mem memory.Allocator, rs []ixRow) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, ixKey)
	defer b.Release()
	for _, r := range rs {
		b.Field(0).(*array.StringBuilder).Append(r.user)
		b.Field(1).(*array.TimestampBuilder).Append(arrow.Timestamp(r.ts))
	}
	return b.NewRecordBatch()
}

func ixOpen(t testing.TB, st storage.Store, work, index string, mem memory.Allocator, version int64) *Store {
	t.Helper()
	s, err := Open(context.Background(), st, Options{
		State: statestore.Options{KeySchema: ixKey, ValueSchema: ixVal, MinVersionsToRetain: 3, Allocator: mem},
		Dir:   work, UploadEvery: 4, MemTableSize: 1 << 20, MaxSSTableSize: 1 << 20, TimeIndex: index,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Restore(context.Background(), version); err != nil {
		t.Fatal(err)
	}
	return s
}

// indexLen counts the time index's entries.
func indexLen(t testing.TB, s *Store) int {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	it, err := s.mu.db.NewIter(&pebble.IterOptions{LowerBound: indexLower, UpperBound: indexUpper})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for ok := it.First(); ok; ok = it.Next() {
		n++
	}
	if err := it.Close(); err != nil {
		t.Fatal(err)
	}
	return n
}

// scanBefore returns ScanBefore's rows as strings, and checks their order.
func scanBefore(t testing.TB, s *Store, boundMs int64, col int) []string {
	t.Helper()
	var out []string
	last := int64(-1 << 63)
	err := s.ScanBefore(context.Background(), boundMs, 7, func(r arrow.RecordBatch) error {
		for i := 0; i < int(r.NumRows()); i++ {
			ts := r.Column(col).(*array.Timestamp)
			v := int64(-1 << 63)
			if ts.IsValid(i) {
				v = int64(ts.Value(i))
			}
			if v < last {
				t.Errorf("ScanBefore: row %d's time %d after %d: not in time order", i, v, last)
			}
			last = v
			exp := int64(-1)
			if e := r.Column(4).(*array.Timestamp); e.IsValid(i) {
				exp = int64(e.Value(i)) / 1000
			}
			out = append(out, ixRow{r.Column(0).(*array.String).Value(i), int64(r.Column(1).(*array.Timestamp).Value(i)), r.Column(2).(*array.Int64).Value(i), exp}.String())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// ixModel is the expected state.
type ixModel map[string]ixRow // by user@ts

func (m ixModel) before(boundMs int64, byExp bool) []string {
	var out []string
	for _, r := range m {
		t := r.ts
		if byExp {
			t = r.exp
			if r.exp < 0 {
				t = -1 << 62
			}
		}
		if t < boundMs {
			out = append(out, r.String())
		}
	}
	sort.Strings(out)
	return out
}

// TestTimeIndexScanBeforeMatchesModel: random commits of upserts (which
// move a row's expiry) and deletes; at every version, ScanBefore by a key
// column and by a value column returns exactly the rows below the bound,
// and the index holds one entry per row. It holds after a restart that
// keeps the working copy, after a kill that loses the memtables, after a
// restore on a fresh directory from the uploaded SSTs plus deltas, and
// after a working copy written without the index (rebuilt once); deleting
// every row leaves the index empty.
func TestTimeIndexScanBeforeMatchesModel(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		index string
		col   int
	}{{"ts", 1}, {"exp", 4}} {
		t.Run(tc.index, func(t *testing.T) {
			mem := newMem(t)
			dir := t.TempDir()
			st := local(t, dir)
			rng := rand.New(rand.NewPCG(3, 9))
			model := ixModel{}
			work := filepath.Join(dir+".w", "a")
			s := ixOpen(t, st, work, tc.index, mem, -1)
			check := func(v int64) {
				t.Helper()
				if n := indexLen(t, s); n != len(model) {
					t.Fatalf("version %d: the index has %d entries for %d rows", v, n, len(model))
				}
				for _, bound := range []int64{-5, 0, 250, 500, 1001, 5000} {
					got, want := scanBefore(t, s, bound, tc.col), model.before(bound, tc.index == "exp")
					if !slices.Equal(got, want) {
						t.Fatalf("version %d: ScanBefore(%d) by %s:\n got %v\nwant %v", v, bound, tc.index, got, want)
					}
				}
			}
			for v := int64(0); v < 30; v++ {
				var ups, dels []ixRow
				seen := map[string]bool{}
				for range 20 {
					r := ixRow{user: fmt.Sprint("u", rng.IntN(8)), ts: int64(rng.IntN(10)) * 100, n: v, exp: int64(rng.IntN(1200)) - 100}
					if r.exp < 0 {
						r.exp = -1 // null
					}
					k := fmt.Sprintf("%s@%d", r.user, r.ts)
					if seen[k] {
						continue
					}
					seen[k] = true
					if _, ok := model[k]; ok && rng.IntN(3) == 0 {
						dels = append(dels, model[k])
						delete(model, k)
						continue
					}
					ups = append(ups, r)
					model[k] = r
				}
				u, d := ixRows(mem, ups), ixKeys(mem, dels)
				err := s.Commit(ctx, v, u, d)
				u.Release()
				d.Release()
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Maintain(ctx, v); err != nil {
					t.Fatal(err)
				}
				if err := s.Purge(ctx, v); err != nil {
					t.Fatal(err)
				}
				check(v)
				switch v % 6 {
				case 1: // restart, working copy kept
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					mark := filepath.Join(work, "db", "kept")
					if err := os.WriteFile(mark, nil, 0o644); err != nil {
						t.Fatal(err)
					}
					s = ixOpen(t, local(t, dir), work, tc.index, mem, v)
					if _, err := os.Stat(mark); err != nil {
						t.Fatalf("a restart on the same machine did not keep the working copy: %v", err)
					}
				case 2: // killed: the memtables are lost
					s.crash()
					s = ixOpen(t, local(t, dir), work, tc.index, mem, v)
				case 3: // another machine: from the uploaded SSTs and deltas
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					work = filepath.Join(dir+".w", fmt.Sprint("m", v))
					s = ixOpen(t, local(t, dir), work, tc.index, mem, v)
				case 4: // a working copy written without the index
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					plain := ixOpen(t, local(t, dir), work, "", mem, v)
					if n := indexLen(t, plain); n != 0 {
						t.Fatalf("a store without a time index holds %d index entries", n)
					}
					if err := plain.Close(); err != nil {
						t.Fatal(err)
					}
					s = ixOpen(t, local(t, dir), work, tc.index, mem, v)
				case 5: // a torn working copy: its manifest marker is gone
					if err := s.Close(); err != nil {
						t.Fatal(err)
					}
					ms, err := filepath.Glob(filepath.Join(work, "db", "marker.manifest.*"))
					if err != nil || len(ms) == 0 {
						t.Fatalf("no manifest marker in the working copy (%v)", err)
					}
					for _, m := range ms {
						if err := os.Remove(m); err != nil {
							t.Fatal(err)
						}
					}
					s = ixOpen(t, local(t, dir), work, tc.index, mem, v)
				}
				check(v)
			}
			// The watermark passes everything: every row is deleted.
			var all []ixRow
			for _, r := range model {
				all = append(all, r)
			}
			d := ixKeys(mem, all)
			if err := s.Commit(ctx, 30, nil, d); err != nil {
				t.Fatal(err)
			}
			d.Release()
			clear(model)
			check(30)
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestScanBeforeNeedsAnIndex: a store opened without TimeIndex refuses
// ScanBefore, and Open refuses a TimeIndex that is not a timestamp column.
func TestScanBeforeNeedsAnIndex(t *testing.T) {
	mem := newMem(t)
	dir := t.TempDir()
	s := ixOpen(t, local(t, dir), filepath.Join(dir+".w", "a"), "", mem, -1)
	defer s.Close()
	if err := s.ScanBefore(context.Background(), 10, 0, func(arrow.RecordBatch) error { return nil }); err == nil {
		t.Fatal("ScanBefore without a time index: no error")
	}
	for _, col := range []string{"n", "nope"} {
		_, err := Open(context.Background(), local(t, dir), Options{
			State: statestore.Options{KeySchema: ixKey, ValueSchema: ixVal, Allocator: mem},
			Dir:   filepath.Join(dir+".w", "b"), TimeIndex: col,
		})
		if err == nil {
			t.Fatalf("TimeIndex %q: no error", col)
		}
		t.Logf("TimeIndex %q: %v", col, err)
	}
}

// BenchmarkFindExpired compares, on one state of 200k rows, finding the
// 1k rows a watermark expires through the time index (ScanBefore) with a
// scan of the whole state filtered by time: the cost eviction would pay
// each batch without the index.
//
//	cd statestore/pebblestore && go test -run '^$' -bench FindExpired -benchtime 20x ./
func BenchmarkFindExpired(b *testing.B) {
	ctx := context.Background()
	mem := memory.NewGoAllocator()
	dir := b.TempDir()
	s := ixOpen(b, local(b, dir), filepath.Join(dir+".w", "a"), "exp", mem, -1)
	defer s.Close()
	const n, due = 200_000, 1_000
	for v := int64(0); v < n/20_000; v++ {
		rs := make([]ixRow, 0, 20_000)
		for i := v * 20_000; i < (v+1)*20_000; i++ {
			// exp is a permutation of [0, n): the rows due below `due` are
			// spread over the key range.
			rs = append(rs, ixRow{user: fmt.Sprintf("u%07d", i), ts: 0, n: i, exp: (i * 7919) % n})
		}
		u := ixRows(mem, rs)
		if err := s.Commit(ctx, v, u, nil); err != nil {
			b.Fatal(err)
		}
		u.Release()
	}
	b.Run("ScanBefore", func(b *testing.B) {
		for b.Loop() {
			got := 0
			if err := s.ScanBefore(ctx, due, 0, func(r arrow.RecordBatch) error { got += int(r.NumRows()); return nil }); err != nil {
				b.Fatal(err)
			}
			if got != due {
				b.Fatalf("%d rows due, want %d", got, due)
			}
		}
	})
	b.Run("ScanAllAndFilter", func(b *testing.B) {
		for b.Loop() {
			got := 0
			err := s.Scan(ctx, nil, nil, 0, func(r arrow.RecordBatch) error {
				e := r.Column(4).(*array.Timestamp)
				for i := 0; i < int(r.NumRows()); i++ {
					if e.IsValid(i) && int64(e.Value(i)) < due*1000 {
						got++
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			if got != due {
				b.Fatalf("%d rows due, want %d", got, due)
			}
		}
	})
}
