package kernel

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestReviewCombResetChunked: a combiner reused batch after batch (Reset)
// across the size where its arrays turn into chunks (more than 65536
// groups), then small, then large again, with int and string keys: the
// partition that folds its partial states ends as the one that folds the
// rows, output and changes batch by batch, the whole state at the end.
func TestReviewCombResetChunked(t *testing.T) {
	for _, kt := range []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String} {
		t.Run(kt.String(), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			sch := reviewSchema(kt)
			newGB := func() *GroupBy {
				g, err := NewGroupBy(mem, sch, []string{"k0"}, []Agg{
					countOf("*"), sumOf("v"), avgOf("w"), minOf("s"), lastOf("s"), firstOf("v"), maxOf("b"), minOf("f"),
				})
				if err != nil {
					t.Fatal(err)
				}
				return g
			}
			raw, merged, comb := newGB(), newGB(), newGB()
			defer raw.Release()
			defer merged.Release()
			defer comb.Release()
			// batch: first key, number of keys, rows a key
			batches := [][3]int{{0, 70000, 1}, {5, 10, 3}, {100, 70000, 1}, {7, 3, 2}}
			for bi, bt := range batches {
				rec := reviewRecord(mem, sch, bt[0], bt[1], bt[2], bi)
				if err := raw.Merge(rec); err != nil {
					t.Fatal(err)
				}
				if err := comb.Merge(rec); err != nil {
					t.Fatal(err)
				}
				rec.Release()
				st := comb.State()
				if err := merged.MergeState(st); err != nil {
					t.Fatal(err)
				}
				st.Release()
				comb.Reset()
				if comb.Len() != 0 || comb.Changed() != 0 {
					t.Fatalf("batch %d: after Reset %d groups, %d changed", bi, comb.Len(), comb.Changed())
				}
				fs := []func(*GroupBy) arrow.RecordBatch{
					func(g *GroupBy) arrow.RecordBatch { return g.Output(true) },
					(*GroupBy).Changes,
				}
				if bi == len(batches)-1 {
					fs = append(fs, (*GroupBy).State)
				}
				for _, f := range fs {
					a, b := f(raw), f(merged)
					as, bs := recString(a), recString(b)
					a.Release()
					b.Release()
					if as != bs {
						t.Fatalf("batch %d: rows and partial states differ (%d and %d bytes)\n%s", bi, len(as), len(bs), firstLineDiff(as, bs))
					}
				}
				if raw.Changed() != merged.Changed() {
					t.Fatalf("batch %d: changed %d and %d", bi, raw.Changed(), merged.Changed())
				}
				raw.ClearChanges()
				merged.ClearChanges()
			}
		})
	}
}

func firstLineDiff(a, b string) string {
	for i := 0; i < min(len(a), len(b)); i++ {
		if a[i] != b[i] {
			s := max(0, i-80)
			return fmt.Sprintf("at byte %d:\nrows:   %q\nstates: %q", i, a[s:min(len(a), i+80)], b[s:min(len(b), i+80)])
		}
	}
	return "one is a prefix of the other"
}

// reviewRecord is keys first..first+n-1, each in per rows (interleaved),
// with values derived from the key and the batch, nulls sprinkled.
func reviewRecord(mem memory.Allocator, sch *arrow.Schema, first, n, per, batch int) arrow.RecordBatch {
	bld := array.NewRecordBuilder(mem, sch)
	defer bld.Release()
	for r := range per {
		for i := range n {
			k := first + i
			switch kb := bld.Field(0).(type) {
			case *array.Int64Builder:
				if k%997 == 0 {
					kb.AppendNull()
				} else {
					kb.Append(int64(k))
				}
			case *array.StringBuilder:
				if k%997 == 0 {
					kb.AppendNull()
				} else {
					kb.Append(fmt.Sprintf("key-%d", k))
				}
			}
			x := k*31 + r*7 + batch
			if x%5 == 0 {
				bld.Field(1).AppendNull()
			} else {
				bld.Field(1).(*array.Int64Builder).Append(int64(x%2001 - 1000))
			}
			bld.Field(2).(*array.Int32Builder).Append(int32(x % 77))
			if x%3 == 0 {
				bld.Field(3).AppendNull()
			} else {
				bld.Field(3).(*array.StringBuilder).Append(fmt.Sprintf("s%d", x%13))
			}
			bld.Field(4).(*array.Float64Builder).Append(float64(x%17) / 4)
			bld.Field(5).(*array.BooleanBuilder).Append(x%2 == 0)
		}
	}
	return bld.NewRecordBatch()
}

// reviewSchema is the review tests' input: a key k0 of type kt, then
// nullable int64, int32, string, float64 and boolean columns.
func reviewSchema(kt arrow.DataType) *arrow.Schema {
	return arrow.NewSchema([]arrow.Field{
		{Name: "k0", Type: kt, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "w", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	}, nil)
}
