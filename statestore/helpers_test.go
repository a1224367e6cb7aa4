package statestore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/storage"
)

// The test state: key (user utf8, shard int64), value (count int64,
// seen list<utf8>, nullable: the set a count-distinct keeps).
var (
	testKey = arrow.NewSchema([]arrow.Field{
		{Name: "user", Type: arrow.BinaryTypes.String},
		{Name: "shard", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	testValue = arrow.NewSchema([]arrow.Field{
		{Name: "count", Type: arrow.PrimitiveTypes.Int64},
		{Name: "seen", Type: arrow.ListOf(arrow.BinaryTypes.String), Nullable: true},
	}, nil)
)

type row struct {
	user  string
	shard int64
	count int64
	seen  []string // nil is a null list
}

func (r row) key() string { return fmt.Sprintf("%s|%d", r.user, r.shard) }

func (r row) String() string {
	if r.seen == nil {
		return fmt.Sprintf("{%s %d %d null}", r.user, r.shard, r.count)
	}
	return fmt.Sprintf("{%s %d %d %q}", r.user, r.shard, r.count, r.seen)
}

func newMem(t testing.TB) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

func newLocal(t testing.TB, dir string) storage.Store {
	st, err := storage.OpenLocal(dir, storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func openTest(t testing.TB, st storage.Store, mem memory.Allocator, k, retain int) *Store {
	t.Helper()
	s, err := Open(context.Background(), st, Options{KeySchema: testKey, ValueSchema: testValue, SnapshotEvery: k, MinVersionsToRetain: retain, Allocator: mem})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func buildUpserts(mem memory.Allocator, rows []row) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, Join(testKey, testValue))
	defer b.Release()
	for _, r := range rows {
		b.Field(0).(*array.StringBuilder).Append(r.user)
		b.Field(1).(*array.Int64Builder).Append(r.shard)
		b.Field(2).(*array.Int64Builder).Append(r.count)
		lb := b.Field(3).(*array.ListBuilder)
		if r.seen == nil {
			lb.AppendNull()
			continue
		}
		lb.Append(true)
		for _, s := range r.seen {
			lb.ValueBuilder().(*array.StringBuilder).Append(s)
		}
	}
	return b.NewRecordBatch()
}

func buildDeletes(mem memory.Allocator, keys []row) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, testKey)
	defer b.Release()
	for _, r := range keys {
		b.Field(0).(*array.StringBuilder).Append(r.user)
		b.Field(1).(*array.Int64Builder).Append(r.shard)
	}
	return b.NewRecordBatch()
}

func readRows(t testing.TB, recs []arrow.RecordBatch) []row {
	t.Helper()
	var out []row
	for _, rec := range recs {
		if !rec.Schema().Equal(Join(testKey, testValue)) {
			t.Fatalf("record schema %s", rec.Schema())
		}
		users := rec.Column(0).(*array.String)
		shards := rec.Column(1).(*array.Int64)
		counts := rec.Column(2).(*array.Int64)
		seen := rec.Column(3).(*array.List)
		vals := seen.ListValues().(*array.String)
		for i := 0; i < int(rec.NumRows()); i++ {
			r := row{user: users.Value(i), shard: shards.Value(i), count: counts.Value(i)}
			if seen.IsValid(i) {
				r.seen = []string{}
				s, e := seen.ValueOffsets(i)
				for j := s; j < e; j++ {
					r.seen = append(r.seen, vals.Value(int(j)))
				}
			}
			out = append(out, r)
		}
	}
	return out
}

// checkKeyOrder fails unless recs are in strictly ascending key-encoding
// order, the order Load promises.
func checkKeyOrder(t testing.TB, recs []arrow.RecordBatch, nkeys int) {
	t.Helper()
	var prev, cur []byte
	first := true
	for _, r := range recs {
		enc := newKeyEncoder(r, nkeys)
		for i := 0; i < int(r.NumRows()); i++ {
			cur = enc.encode(cur[:0], i)
			if !first && bytes.Compare(prev, cur) >= 0 {
				t.Fatalf("Load output not in ascending key order at %s", formatKey(r, nkeys, i))
			}
			first = false
			prev, cur = cur, prev
		}
	}
}

// modelRows returns the model's rows sorted by key.
func modelRows(m map[string]row) []row {
	out := make([]row, 0, len(m))
	for _, r := range m {
		out = append(out, r)
	}
	slices.SortFunc(out, func(a, b row) int { return strings.Compare(a.key(), b.key()) })
	return out
}

func sortedRows(rows []row) []row {
	out := slices.Clone(rows)
	slices.SortFunc(out, func(a, b row) int { return strings.Compare(a.key(), b.key()) })
	return out
}

func rowsEqual(a, b []row) bool {
	return slices.EqualFunc(a, b, func(x, y row) bool {
		return x.user == y.user && x.shard == y.shard && x.count == y.count &&
			(x.seen == nil) == (y.seen == nil) && slices.Equal(x.seen, y.seen)
	})
}

// loadRows loads version and returns its rows in Load's order, checking the
// order and releasing the records.
func loadRows(t testing.TB, s *Store, version int64) []row {
	t.Helper()
	recs, err := s.Load(context.Background(), version)
	if err != nil {
		t.Fatal(err)
	}
	defer releaseAll(recs)
	checkKeyOrder(t, recs, s.nkeys)
	return readRows(t, recs)
}

func diff(got, want []row) string {
	if len(got) > 20 || len(want) > 20 {
		return fmt.Sprintf("got %d rows, want %d", len(got), len(want))
	}
	return fmt.Sprintf("got  %v\nwant %v", got, want)
}

func newSyncedLocal(t testing.TB, dir string) storage.Store {
	st, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}
