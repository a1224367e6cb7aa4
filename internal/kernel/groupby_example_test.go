package kernel_test

import (
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/internal/kernel"
)

// The settlement query: per merchant, the running total and count, and
// this batch's sum and count beside them.
func ExampleGroupBy() {
	mem := memory.NewGoAllocator()
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "merchant", Type: arrow.BinaryTypes.String},
		{Name: "amount", Type: arrow.PrimitiveTypes.Int64}, // cents
	}, nil)
	g, err := kernel.NewGroupBy(mem, schema, []string{"merchant"}, []kernel.Agg{
		{Func: batch.AggSum, Column: "amount", Name: "total"},
		{Func: batch.AggCount, Name: "payments"}, // Column "": count(*)
		{Func: batch.AggSum, Column: "amount", Name: "batch_total", PerBatch: true},
		{Func: batch.AggCount, Name: "batch_payments", PerBatch: true},
	})
	if err != nil {
		panic(err)
	}
	defer g.Release()
	for _, rows := range [][]struct {
		m string
		a int64
	}{{{"acme", 1000}, {"bolt", 250}, {"acme", 500}}, {{"bolt", 100}}} {
		b := array.NewRecordBuilder(mem, schema)
		for _, r := range rows {
			b.Field(0).(*array.StringBuilder).Append(r.m)
			b.Field(1).(*array.Int64Builder).Append(r.a)
		}
		rec := b.NewRecordBatch()
		b.Release()
		if err := g.Merge(rec); err != nil {
			panic(err)
		}
		rec.Release()
		out := g.Output(true) // update mode: the merchants of this batch
		for i := range int(out.NumRows()) {
			fmt.Println(out.Column(0).ValueStr(i), out.Column(1).ValueStr(i), out.Column(2).ValueStr(i),
				out.Column(3).ValueStr(i), out.Column(4).ValueStr(i))
		}
		out.Release()
		changes := g.Changes() // to the state store: keys + StateSchema
		fmt.Println("state rows:", changes.NumRows(), "columns:", changes.Schema().Field(1).Name, changes.Schema().Field(2).Name)
		changes.Release()
		g.ClearChanges()
	}
	// Output:
	// acme 1500 2 1500 2
	// bolt 250 1 250 1
	// state rows: 2 columns: total payments
	// bolt 350 2 100 1
	// state rows: 1 columns: total payments
}
