package kernel

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
)

// recString renders every row of rec, columns in order.
func recString(rec arrow.RecordBatch) string {
	var b strings.Builder
	for r := range int(rec.NumRows()) {
		for c := range int(rec.NumCols()) {
			if c > 0 {
				b.WriteByte('|')
			}
			b.WriteString(rec.Column(c).ValueStr(r))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// combineAggs is every aggregate Combinable accepts, over columns v
// (int64), w (int32), s (string), f (float64), b (bool).
func combineAggs() []Agg {
	return []Agg{
		countOf("*"), countOf("v"), sumOf("v"), avgOf("v"), sumOf("w").as("sw"), avgOf("w").as("aw"),
		minOf("v"), maxOf("v"), firstOf("v"), lastOf("v"),
		minOf("s"), maxOf("s"), firstOf("s"), lastOf("s"),
		minOf("f"), maxOf("f"), firstOf("f"), lastOf("f"),
		minOf("b"), maxOf("b"),
	}
}

func TestGroupByCombinable(t *testing.T) {
	sch := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.PrimitiveTypes.Int64}, {Name: "f", Type: arrow.PrimitiveTypes.Float64}}, nil)
	for _, tc := range []struct {
		aggs []Agg
		want bool
	}{
		{[]Agg{countOf("*"), sumOf("v"), avgOf("v"), minOf("f"), maxOf("f"), firstOf("v"), lastOf("v")}, true},
		{[]Agg{sumOf("f")}, false},
		{[]Agg{avgOf("f")}, false},
		{[]Agg{distinctOf("v")}, false},
		{[]Agg{countOf("*").perBatch()}, false},
	} {
		g, err := NewGroupBy(memory.DefaultAllocator, sch, []string{"k"}, tc.aggs)
		if err != nil {
			t.Fatal(err)
		}
		if got := g.Combinable(); got != tc.want {
			t.Errorf("%v: Combinable %v, want %v", tc.aggs, got, tc.want)
		}
		g.Release()
	}
}

// TestGroupByMergeStateEqualsMerge folds random batches into one GroupBy
// row by row and into another through a combiner (a GroupBy whose State is
// merged with MergeState, then Reset), sometimes flushing the combiner in
// the middle of a batch and sometimes merging the batch's last records raw
// after the partial states (the engine's adaptive path). After every batch
// the update output, the changes and the whole state must be equal, order
// included.
func TestGroupByMergeStateEqualsMerge(t *testing.T) {
	kinds := []struct {
		name  string
		types []arrow.DataType
	}{
		{"int64", []arrow.DataType{arrow.PrimitiveTypes.Int64}},
		{"string", []arrow.DataType{arrow.BinaryTypes.String}},
		{"string+int64", []arrow.DataType{arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64}},
		{"bool", []arrow.DataType{arrow.FixedWidthTypes.Boolean}},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rng := rand.New(rand.NewPCG(5, uint64(len(kind.name))))
			var fields []arrow.Field
			var keys []string
			for i, dt := range kind.types {
				keys = append(keys, fmt.Sprintf("k%d", i))
				fields = append(fields, arrow.Field{Name: keys[i], Type: dt, Nullable: true})
			}
			fields = append(fields,
				arrow.Field{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
				arrow.Field{Name: "w", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
				arrow.Field{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
				arrow.Field{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
				arrow.Field{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true})
			sch := arrow.NewSchema(fields, nil)
			newGB := func() *GroupBy {
				g, err := NewGroupBy(mem, sch, keys, combineAggs())
				if err != nil {
					t.Fatal(err)
				}
				if !g.Combinable() {
					t.Fatal("not combinable")
				}
				return g
			}
			raw, merged, comb := newGB(), newGB(), newGB()
			defer raw.Release()
			defer merged.Release()
			defer comb.Release()
			flush := func() {
				st := comb.State()
				defer st.Release()
				if err := merged.MergeState(st); err != nil {
					t.Fatal(err)
				}
				comb.Reset()
				if comb.Len() != 0 || comb.Changed() != 0 {
					t.Fatalf("after Reset: %d groups, %d changed", comb.Len(), comb.Changed())
				}
			}
			for step := range 18 {
				domain := 5 + step*step*3
				for r, nrec := 0, 1+rng.IntN(4); r < nrec; r++ {
					rec := randomCombineRecord(mem, rng, sch, len(keys), domain, rng.IntN(400))
					if err := raw.Merge(rec); err != nil {
						t.Fatal(err)
					}
					switch rng.IntN(6) {
					case 0: // the adaptive path: partials so far, then raw rows
						flush()
						if err := merged.Merge(rec); err != nil {
							t.Fatal(err)
						}
					default:
						if err := comb.Merge(rec); err != nil {
							t.Fatal(err)
						}
						if rng.IntN(4) == 0 { // the memory limit
							flush()
						}
					}
					rec.Release()
				}
				flush()
				for _, f := range []func(*GroupBy) arrow.RecordBatch{
					func(g *GroupBy) arrow.RecordBatch { return g.Output(true) },
					(*GroupBy).Changes,
					(*GroupBy).State,
					func(g *GroupBy) arrow.RecordBatch { return g.Output(false) },
				} {
					a, b := f(raw), f(merged)
					as, bs := recString(a), recString(b)
					a.Release()
					b.Release()
					if as != bs {
						t.Fatalf("step %d: merged rows\n%s\nmerged states\n%s", step, as, bs)
					}
				}
				if raw.Changed() != merged.Changed() {
					t.Fatalf("step %d: changed %d and %d", step, raw.Changed(), merged.Changed())
				}
				raw.ClearChanges()
				merged.ClearChanges()
			}
		})
	}
}

// randomCombineRecord is n random rows of sch: nk key columns over a
// domain of distinct values, then v, w, s, f, b, every column with nulls.
func randomCombineRecord(mem memory.Allocator, rng *rand.Rand, sch *arrow.Schema, nk, domain, n int) arrow.RecordBatch {
	var cols []arrow.Array
	for ci, f := range sch.Fields() {
		b := array.NewBuilder(mem, f.Type)
		for range n {
			if rng.IntN(15) == 0 {
				b.AppendNull()
				continue
			}
			k := rng.IntN(domain)
			if ci >= nk {
				k = rng.IntN(1000) - 500
			}
			switch bb := b.(type) {
			case *array.Int64Builder:
				bb.Append(int64(k) * 0x1_0000_0001)
			case *array.Int32Builder:
				bb.Append(int32(k))
			case *array.StringBuilder:
				bb.Append(gbRandKey((k + 500) % 200))
			case *array.Float64Builder:
				vals := []float64{math.NaN(), math.Copysign(0, -1), 0, math.Inf(1)}
				if k%9 == 0 {
					bb.Append(vals[(k/9+100)%len(vals)])
				} else {
					bb.Append(float64(k) / 8)
				}
			case *array.BooleanBuilder:
				bb.Append(k%2 == 0)
			}
		}
		cols = append(cols, b.NewArray())
		b.Release()
	}
	rec := array.NewRecordBatch(sch, cols, int64(n))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

// TestGroupByMergeStateOverflow: a partial sum that takes a group's sum
// past int64 fails naming the column and group, as Merge does.
func TestGroupByMergeStateOverflow(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sch := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.BinaryTypes.String}, {Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for _, agg := range []Agg{sumOf("v"), avgOf("v")} {
		mk := func() *GroupBy {
			g, err := NewGroupBy(mem, sch, []string{"k"}, []Agg{agg})
			if err != nil {
				t.Fatal(err)
			}
			return g
		}
		rec := func(keys []string, vals []int64) arrow.RecordBatch {
			kb := array.NewStringBuilder(mem)
			vb := array.NewInt64Builder(mem)
			kb.AppendValues(keys, nil)
			vb.AppendValues(vals, nil)
			k, v := kb.NewArray(), vb.NewArray()
			kb.Release()
			vb.Release()
			r := array.NewRecordBatch(sch, []arrow.Array{k, v}, int64(len(keys)))
			k.Release()
			v.Release()
			return r
		}
		target, comb, raw := mk(), mk(), mk()
		first := rec([]string{"a", "big"}, []int64{1, math.MaxInt64 - 10})
		for _, g := range []*GroupBy{target, raw} {
			if err := g.Merge(first); err != nil {
				t.Fatal(err)
			}
		}
		first.Release()
		next := rec([]string{"a", "big", "big"}, []int64{2, 6, 6})
		if err := comb.Merge(next); err != nil {
			t.Fatal(err)
		}
		rawErr := raw.Merge(next)
		next.Release()
		st := comb.State()
		err := target.MergeState(st)
		st.Release()
		for _, e := range []error{err, rawErr} {
			if !errors.Is(e, batch.ErrSumOverflow) || !strings.Contains(e.Error(), "k=big") || !strings.Contains(e.Error(), `column "v"`) {
				t.Errorf("%s: error %v, want a sum overflow naming column v and group k=big", agg.Name, e)
			}
		}
		target.Release()
		comb.Release()
		raw.Release()
	}
}

func TestGroupByMergeStateChecksSchema(t *testing.T) {
	sch := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	g, err := NewGroupBy(memory.DefaultAllocator, sch, []string{"k"}, []Agg{sumOf("v")})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	rec := array.NewRecordBatch(sch, nil, 0)
	if err := g.MergeState(rec); !errors.Is(err, batch.ErrAggSchema) {
		t.Fatalf("MergeState of input rows: %v, want ErrAggSchema", err)
	}
	f, err := NewGroupBy(memory.DefaultAllocator, sch, []string{"k"}, []Agg{distinctOf("v")})
	if err != nil {
		t.Fatal(err)
	}
	defer f.Release()
	st := f.State()
	defer st.Release()
	if err := f.MergeState(st); !errors.Is(err, batch.ErrAggUnsupported) {
		t.Fatalf("MergeState of a distinct count: %v, want ErrAggUnsupported", err)
	}
}
