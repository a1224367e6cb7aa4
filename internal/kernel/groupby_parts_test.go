package kernel_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/internal/kernel"
)

// TestStateOutputPartsIsPartition pins StateOutputParts to what it
// replaces: StateOutput (whole) or ChangesOutput, each split by
// kernel.Partition on the key columns. Piece by piece the rows and their
// order must be equal, batch after batch (groups hashed once, at first
// sight), across evictions (which renumber groups), with nullable
// multi-column keys, an average (a result that is not its state) and a
// per-batch count, for 1, 3 and 8 partitions.
func TestStateOutputPartsIsPartition(t *testing.T) {
	for _, n := range []int{1, 3, 8} {
		for _, keys := range []string{"string", "int64,string"} {
			t.Run(fmt.Sprintf("parts=%d/keys=%s", n, keys), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				testStateOutputParts(t, mem, n, keys == "int64,string")
			})
		}
	}
}

func testStateOutputParts(t *testing.T, mem memory.Allocator, n int, twoKeys bool) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "shop", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "merchant", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	keyNames := []string{"merchant"}
	if twoKeys {
		keyNames = []string{"shop", "merchant"}
	}
	aggs := []kernel.Agg{
		{Func: batch.AggSum, Column: "amount", Name: "total"},
		{Func: batch.AggAvg, Column: "amount", Name: "mean"},
		{Func: batch.AggCount, Name: "batch_payments", PerBatch: true},
		{Func: batch.AggMax, Column: "amount", Name: "biggest"},
	}
	g, err := kernel.NewGroupBy(mem, schema, keyNames, aggs)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	nk := len(keyNames)
	keyCols := make([]int, nk)
	for i := range keyCols {
		keyCols[i] = i
	}
	rng := rand.New(rand.NewPCG(uint64(n), 7))
	for b := range 40 {
		// Batches touch few or most groups, so both commits come up;
		// new groups keep arriving.
		rows := 1 + rng.IntN(300)
		span := 20 + b*15
		bld := array.NewRecordBuilder(mem, schema)
		for range rows {
			k := rng.IntN(span)
			if k%17 == 0 {
				bld.Field(0).AppendNull()
			} else {
				bld.Field(0).(*array.Int64Builder).Append(int64(k % 5))
			}
			if k%23 == 0 {
				bld.Field(1).AppendNull()
			} else {
				bld.Field(1).(*array.StringBuilder).Append(fmt.Sprintf("m-%d", k))
			}
			bld.Field(2).(*array.Int64Builder).Append(int64(rng.IntN(1000)))
		}
		rec := bld.NewRecordBatch()
		bld.Release()
		err := g.Merge(rec)
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
		for _, whole := range []bool{false, true} {
			var st, out arrow.RecordBatch
			if whole {
				st, out = g.StateOutput()
			} else {
				st, out = g.ChangesOutput()
			}
			wantSt, err := kernel.Partition(mem, st, keyCols, n)
			if err != nil {
				t.Fatal(err)
			}
			wantOut, err := kernel.Partition(mem, out, keyCols, n)
			if err != nil {
				t.Fatal(err)
			}
			st.Release()
			out.Release()
			gotSt, gotOut, err := g.StateOutputParts(n, whole)
			if err != nil {
				t.Fatal(err)
			}
			for p := range n {
				for _, c := range []struct {
					what      string
					got, want arrow.RecordBatch
				}{{"state", gotSt[p], wantSt[p]}, {"output", gotOut[p], wantOut[p]}} {
					if (c.got == nil) != (c.want == nil) {
						t.Fatalf("batch %d whole=%v partition %d: %s piece %v, Partition gives %v", b, whole, p, c.what, c.got, c.want)
					}
					if c.got == nil {
						continue
					}
					if !c.got.Schema().Equal(c.want.Schema()) {
						t.Fatalf("batch %d partition %d: %s schema %s, want %s", b, p, c.what, c.got.Schema(), c.want.Schema())
					}
					g, w := recordRows(c.got), recordRows(c.want)
					if fmt.Sprint(g) != fmt.Sprint(w) {
						t.Fatalf("batch %d whole=%v partition %d: %s rows\n%v\nwant (Partition)\n%v", b, whole, p, c.what, g, w)
					}
				}
			}
			for _, rs := range [][]arrow.RecordBatch{gotSt, gotOut, wantSt, wantOut} {
				for _, r := range rs {
					if r != nil {
						r.Release()
					}
				}
			}
		}
		g.ClearChanges()
		if b%9 == 8 {
			// Evict about a third of the groups: the rest are renumbered.
			rem, err := g.Remove(func(_ []arrow.Array, keep []bool) {
				for i := range keep {
					keep[i] = rng.IntN(3) != 0
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			rem.Release()
		}
	}
}

// TestStateOutputPartsOutlivesMerge: the pieces are built from fresh
// buffers, so they read the same after the table takes more rows.
func TestStateOutputPartsOutlivesMerge(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "merchant", Type: arrow.BinaryTypes.String},
		{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	g, err := kernel.NewGroupBy(mem, schema, []string{"merchant"}, []kernel.Agg{{Func: batch.AggSum, Column: "amount", Name: "total"}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	merge := func(lo, hi int) {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		for i := lo; i < hi; i++ {
			b.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("merchant-%d", i))
			b.Field(1).(*array.Int64Builder).Append(int64(i))
		}
		rec := b.NewRecordBatch()
		defer rec.Release()
		if err := g.Merge(rec); err != nil {
			t.Fatal(err)
		}
	}
	merge(0, 100)
	st, out, err := g.StateOutputParts(4, true)
	if err != nil {
		t.Fatal(err)
	}
	var before []string
	for p := range 4 {
		if out[p] != nil {
			before = append(before, recordRows(out[p])...)
		}
	}
	g.ClearChanges()
	merge(0, 5000) // grows the table past its first size
	var after []string
	for p := range 4 {
		if out[p] != nil {
			after = append(after, recordRows(out[p])...)
			out[p].Release()
		}
		if st[p] != nil {
			st[p].Release()
		}
	}
	if fmt.Sprint(before) != fmt.Sprint(after) || len(before) != 100 {
		t.Fatalf("output pieces changed under a later merge: %d rows before, %d after", len(before), len(after))
	}
	if _, _, err := g.StateOutputParts(0, true); err == nil {
		t.Fatal("StateOutputParts(0) succeeded, want an error")
	}
}
