package kernel_test

import (
	"slices"
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

// recordRows renders each row of rec as one string, for comparisons of
// rows whatever their array layout (slices or not).
func recordRows(rec arrow.RecordBatch) []string {
	rows := make([]string, rec.NumRows())
	for i := range rows {
		for _, c := range rec.Columns() {
			rows[i] += c.ValueStr(i) + "|"
		}
	}
	return rows
}

// TestStateOutputIsStateAndOutput pins StateOutput: out is Output(true)
// row for row, state holds State's rows with the touched groups first in
// order of first touch (Changes), and neither changes when the GroupBy
// merges the next batch (the arrays it shares between them are its own,
// not the accumulators' memory).
func TestStateOutputIsStateAndOutput(t *testing.T) {
	for _, keyType := range []arrow.DataType{arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64} {
		t.Run(keyType.String(), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			schema := arrow.NewSchema([]arrow.Field{
				{Name: "merchant", Type: keyType},
				{Name: "amount", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
			}, nil)
			g, err := kernel.NewGroupBy(mem, schema, []string{"merchant"}, []kernel.Agg{
				{Func: batch.AggSum, Column: "amount", Name: "total"},
				{Func: batch.AggAvg, Column: "amount", Name: "mean"},
				{Func: batch.AggCount, Name: "payments"},
				{Func: batch.AggMax, Column: "amount", Name: "largest"},
				{Func: batch.AggCountDistinct, Column: "amount", Name: "amounts"},
				{Func: batch.AggCount, Name: "batch_payments", PerBatch: true},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Release()
			merge := func(keys []int, amount int64) {
				b := array.NewRecordBuilder(mem, schema)
				defer b.Release()
				for i, k := range keys {
					if sb, ok := b.Field(0).(*array.StringBuilder); ok {
						sb.Append(string(rune('a' + k)))
					} else {
						b.Field(0).(*array.Int64Builder).Append(int64(k))
					}
					if i%3 == 2 {
						b.Field(1).AppendNull()
					} else {
						b.Field(1).(*array.Int64Builder).Append(amount + int64(i))
					}
				}
				rec := b.NewRecordBatch()
				defer rec.Release()
				if err := g.Merge(rec); err != nil {
					t.Fatal(err)
				}
			}
			merge([]int{0, 1, 2, 3, 4, 5}, 10)
			g.ClearChanges()
			merge([]int{4, 2, 6, 2, 0, 5}, 100) // 1 and 3 untouched, 6 new
			want := g.Output(true)
			defer want.Release()
			changes := g.Changes()
			defer changes.Release()
			whole := g.State()
			defer whole.Release()
			state, out := g.StateOutput()
			defer state.Release()
			defer out.Release()
			if !array.RecordEqual(out, want) {
				t.Fatalf("StateOutput's out differs from Output(true):\n%v\n%v", out, want)
			}
			stRows, chRows := recordRows(state), recordRows(changes)
			if len(stRows) != int(whole.NumRows()) || len(chRows) != g.Changed() {
				t.Fatalf("state %d rows, State %d; changes %d, Changed %d", len(stRows), whole.NumRows(), len(chRows), g.Changed())
			}
			if !slices.Equal(stRows[:len(chRows)], chRows) {
				t.Fatalf("state does not start with the changes in touch order:\n%q\n%q", stRows, chRows)
			}
			wholeRows := recordRows(whole)
			if !slices.Equal(slices.Sorted(slices.Values(stRows)), slices.Sorted(slices.Values(wholeRows))) {
				t.Fatalf("state's rows are not State's:\n%q\n%q", stRows, wholeRows)
			}
			outRows := recordRows(out)
			g.ClearChanges()
			merge([]int{0, 1, 2, 3, 4, 5, 6, 7}, 1000)
			if got := recordRows(state); !slices.Equal(got, stRows) {
				t.Fatalf("state changed under the next merge:\n%q\n%q", got, stRows)
			}
			if got := recordRows(out); !slices.Equal(got, outRows) {
				t.Fatalf("out changed under the next merge:\n%q\n%q", got, outRows)
			}
			// Every group touched: state is Changes exactly.
			state2, out2 := g.StateOutput()
			defer state2.Release()
			defer out2.Release()
			changes2 := g.Changes()
			defer changes2.Release()
			if !array.RecordEqual(state2, changes2) {
				t.Fatalf("state of a batch that touched every group differs from Changes:\n%v\n%v", state2, changes2)
			}
		})
	}
}

// TestChangesOutputIsChangesAndOutput pins ChangesOutput: Changes and
// Output(true) exactly, and unchanged by the next batch's merge.
func TestChangesOutputIsChangesAndOutput(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "merchant", Type: arrow.PrimitiveTypes.Int32},
		{Name: "amount", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	}, nil)
	g, err := kernel.NewGroupBy(mem, schema, []string{"merchant"}, []kernel.Agg{
		{Func: batch.AggCount, Name: "payments"},
		{Func: batch.AggSum, Column: "amount", Name: "total"},
		{Func: batch.AggAvg, Column: "amount", Name: "mean"},
		{Func: batch.AggFirst, Column: "amount", Name: "first"},
		{Func: batch.AggSum, Column: "amount", Name: "batch_total", PerBatch: true},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	merge := func(keys []int32, amount float64) {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		for i, k := range keys {
			b.Field(0).(*array.Int32Builder).Append(k)
			if i == 1 {
				b.Field(1).AppendNull()
			} else {
				b.Field(1).(*array.Float64Builder).Append(amount + float64(i))
			}
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		if err := g.Merge(rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, batchKeys := range [][]int32{nil, {7, 3, 7, 9, 1}, {9, 2}, {1, 2, 3, 7, 9, 4}} {
		g.ClearChanges()
		merge(batchKeys, 1.5)
		wantCh, wantOut := g.Changes(), g.Output(true)
		ch, out := g.ChangesOutput()
		if !array.RecordEqual(ch, wantCh) || !array.RecordEqual(out, wantOut) {
			t.Fatalf("keys %v: ChangesOutput\n%v\n%v\nwant\n%v\n%v", batchKeys, ch, out, wantCh, wantOut)
		}
		chRows, outRows := recordRows(ch), recordRows(out)
		merge([]int32{1, 2, 3, 4, 7, 9}, 100)
		if !slices.Equal(recordRows(ch), chRows) || !slices.Equal(recordRows(out), outRows) {
			t.Fatalf("keys %v: ChangesOutput's records changed under the next merge", batchKeys)
		}
		for _, r := range []arrow.RecordBatch{wantCh, wantOut, ch, out} {
			r.Release()
		}
	}
}
