package iceberg

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var testSchema = arrow.NewSchema([]arrow.Field{
	{Name: "i", Type: arrow.PrimitiveTypes.Int64},
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

// rows builds one record of rows [from, to): i, key k<i%5>, amount i*7,
// ts i hours after the epoch.
func rows(t testing.TB, from, to int64) arrow.RecordBatch {
	t.Helper()
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	kb := array.NewStringBuilder(memory.DefaultAllocator)
	ab := array.NewInt64Builder(memory.DefaultAllocator)
	tb := array.NewTimestampBuilder(memory.DefaultAllocator, testSchema.Field(3).Type.(*arrow.TimestampType))
	for i := from; i < to; i++ {
		ib.Append(i)
		kb.Append(fmt.Sprintf("k%d", i%5))
		ab.Append(i * 7)
		tb.Append(arrow.Timestamp(i * 3_600_000_000))
	}
	cols := []arrow.Array{ib.NewArray(), kb.NewArray(), ab.NewArray(), tb.NewArray()}
	rec := array.NewRecordBatch(testSchema, cols, to-from)
	for _, c := range cols {
		c.Release()
	}
	return rec
}

func sqliteCatalog(t testing.TB) *Catalog {
	t.Helper()
	cat, err := OpenCatalog(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "catalog.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cat.Close() })
	return cat
}

// tableInts reads column col (int64) of every row of the table through
// the catalog, sorted.
func tableInts(t testing.TB, cat *Catalog, name, col string) []int64 {
	t.Helper()
	ctx := context.Background()
	tbl, err := cat.LoadTable(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	at, err := tbl.Scan().ToArrowTable(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer at.Release()
	idx := at.Schema().FieldIndices(col)
	if len(idx) == 0 {
		t.Fatalf("no column %s in %s", col, at.Schema())
	}
	var out []int64
	for _, chunk := range at.Column(idx[0]).Data().Chunks() {
		a := chunk.(*array.Int64)
		for j := 0; j < a.Len(); j++ {
			out = append(out, a.Value(j))
		}
	}
	slices.Sort(out)
	return out
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

func addBatch(t testing.TB, s *Sink, id, from, to int64) {
	t.Helper()
	rec := rows(t, from, to)
	defer rec.Release()
	if err := s.AddBatch(context.Background(), id, testSchema, []arrow.RecordBatch{rec}); err != nil {
		t.Fatalf("AddBatch(%d): %v", id, err)
	}
}
