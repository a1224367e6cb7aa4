package kernel_test

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/internal/kernel"
)

// TestStateIsEveryGroupsChanges pins State and Changed: the rows of every group, keys
// then state columns (PerBatch aggregates left out), in insertion order,
// equal to Changes when a batch touched every group in that order.
func TestStateIsEveryGroupsChanges(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "merchant", Type: arrow.BinaryTypes.String},
		{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	g, err := kernel.NewGroupBy(mem, schema, []string{"merchant"}, []kernel.Agg{
		{Func: batch.AggSum, Column: "amount", Name: "total"},
		{Func: batch.AggAvg, Column: "amount", Name: "mean"},
		{Func: batch.AggCount, Name: "batch_payments", PerBatch: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	merge := func(ms []string, a int64) {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		for _, m := range ms {
			b.Field(0).(*array.StringBuilder).Append(m)
			b.Field(1).(*array.Int64Builder).Append(a)
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		if err := g.Merge(rec); err != nil {
			t.Fatal(err)
		}
	}
	merge([]string{"acme", "bolt", "acme", "cola"}, 10)
	g.ClearChanges()
	merge([]string{"bolt"}, 5) // one group of three changed
	if g.Changed() != 1 {
		t.Fatalf("Changed() = %d after a batch that touched one group, want 1", g.Changed())
	}
	st := g.State()
	defer st.Release()
	if st.NumRows() != 3 || st.NumCols() != 4 {
		t.Fatalf("State has %d rows and %d columns, want 3 and 4 (key, total, mean's sum and count)", st.NumRows(), st.NumCols())
	}
	g.ClearChanges()
	merge([]string{"acme", "bolt", "cola"}, 0) // every group, in insertion order
	ch := g.Changes()
	defer ch.Release()
	st2 := g.State()
	defer st2.Release()
	if !array.RecordEqual(ch, st2) {
		t.Fatalf("State differs from Changes of a batch that touched every group:\n%v\n%v", st2, ch)
	}
	if v := st2.Column(1).(*array.Int64).Value(1); v != 15 {
		t.Fatalf("bolt's total %d, want 15", v)
	}
}
