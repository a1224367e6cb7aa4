package kernel

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
)

// ---- test data ----

// gbGen makes a column of n random values of type dt, a fraction nulls of
// them null, drawn from a small domain so that groups repeat values.
func gbGen(mem memory.Allocator, dt arrow.DataType, n int, rng *rand.Rand, nulls float64) arrow.Array {
	b := array.NewBuilder(mem, dt)
	defer b.Release()
	for range n {
		if rng.Float64() < nulls {
			b.AppendNull()
			continue
		}
		k := rng.IntN(40) - 15
		switch bb := b.(type) {
		case *array.Int8Builder:
			bb.Append(int8(k))
		case *array.Int16Builder:
			bb.Append(int16(k * 100))
		case *array.Int32Builder:
			bb.Append(int32(k * 10000))
		case *array.Int64Builder:
			bb.Append(int64(k) * 1_000_000_007)
		case *array.Uint8Builder:
			bb.Append(uint8(k + 15))
		case *array.Uint16Builder:
			bb.Append(uint16(k+15) * 1000)
		case *array.Uint32Builder:
			bb.Append(uint32(k+15) * 100000)
		case *array.Uint64Builder:
			bb.Append(uint64(k+15) * 1_000_000_000_000)
		case *array.Float32Builder:
			bb.Append(float32(k) / 4)
		case *array.Float64Builder:
			switch k {
			case 0:
				bb.Append(math.Copysign(0, -1))
			case 1:
				bb.Append(math.NaN())
			default:
				bb.Append(float64(k) / 8)
			}
		case *array.BooleanBuilder:
			bb.Append(k%3 == 0)
		case *array.StringBuilder:
			bb.Append(fmt.Sprintf("s%02d", k+15))
		case *array.LargeStringBuilder:
			bb.Append(strings.Repeat("x", k+15))
		case *array.BinaryBuilder:
			bb.Append([]byte{byte(k), 0, byte(k * 7)})
		case *array.TimestampBuilder:
			bb.Append(arrow.Timestamp(int64(k) * 1_000_000))
		case *array.Date32Builder:
			bb.Append(arrow.Date32(k + 19000))
		case *array.Decimal128Builder:
			bb.Append(decimal128Of(int64(k)))
		default:
			panic(fmt.Sprintf("gbGen: %s", dt))
		}
	}
	return b.NewArray()
}

// gbCell is row i of c as a comparable Go value; nil for null.
func gbCell(c arrow.Array, i int) any {
	if c.IsNull(i) {
		return nil
	}
	switch a := c.(type) {
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Uint8:
		return uint64(a.Value(i))
	case *array.Uint16:
		return uint64(a.Value(i))
	case *array.Uint32:
		return uint64(a.Value(i))
	case *array.Uint64:
		return a.Value(i)
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Binary:
		return string(a.Value(i))
	case *array.Timestamp:
		return int64(a.Value(i))
	case *array.Date32:
		return int64(a.Value(i))
	case *array.Decimal128:
		return a.ValueStr(i)
	case *array.List:
		s, e := a.ValueOffsets(i)
		var out []any
		for k := s; k < e; k++ {
			out = append(out, gbCell(a.ListValues(), int(k)))
		}
		return fmt.Sprint(out)
	}
	panic(fmt.Sprintf("gbCell: %s", c.DataType()))
}

// gbLess orders test values, NaN above every number.
func gbLess(a, b any) bool {
	switch x := a.(type) {
	case int64:
		return x < b.(int64)
	case uint64:
		return x < b.(uint64)
	case float64:
		y := b.(float64)
		return x < y || (y != y && x == x)
	case bool:
		return !x && b.(bool)
	case string:
		return x < b.(string)
	}
	panic(fmt.Sprintf("gbLess %T", a))
}

func gbNorm(v any) any {
	if f, ok := v.(float64); ok {
		if f == 0 {
			return 0.0
		}
		if f != f {
			return "NaN"
		}
	}
	return v
}

// gbRef computes an aggregate of a group's non-null values the plain way.
func gbRef(fn batch.AggFunc, vals []any, rows int) any {
	switch fn {
	case batch.AggCount:
		return int64(len(vals))
	case batch.AggCountDistinct:
		set := map[any]bool{}
		for _, v := range vals {
			set[gbNorm(v)] = true
		}
		return int64(len(set))
	}
	if len(vals) == 0 {
		return nil
	}
	switch fn {
	case batch.AggSum, batch.AggAvg:
		var fs float64
		var is int64
		isFloat := false
		for _, v := range vals {
			switch x := v.(type) {
			case int64:
				is += x
			case uint64:
				is += int64(x)
			case float64:
				fs += x
				isFloat = true
			}
		}
		if fn == batch.AggAvg {
			if isFloat {
				return fs / float64(len(vals))
			}
			return float64(is) / float64(len(vals))
		}
		if isFloat {
			return fs
		}
		return is
	case batch.AggMin, batch.AggMax:
		best := vals[0]
		for _, v := range vals[1:] {
			if (fn == batch.AggMin && gbLess(v, best)) || (fn == batch.AggMax && gbLess(best, v)) {
				best = v
			}
		}
		return best
	case batch.AggFirst:
		return vals[0]
	case batch.AggLast:
		return vals[len(vals)-1]
	}
	panic(fn)
}

func gbSame(a, b any) bool {
	fa, ok1 := a.(float64)
	fb, ok2 := b.(float64)
	if ok1 && ok2 {
		return fa == fb || (fa != fa && fb != fb) || math.Abs(fa-fb) <= 1e-9*math.Max(math.Abs(fa), math.Abs(fb))
	}
	return a == b
}

// gbKeyString is the key of output row i as a string (a map key).
func gbKeyString(cols []arrow.Array, i int) string {
	var parts []string
	for _, c := range cols {
		parts = append(parts, fmt.Sprintf("%v", gbNorm(gbCell(c, i))))
	}
	return strings.Join(parts, "|")
}

// gbRecord builds a record of the columns (released by the caller; the
// columns are released here).
func gbRecord(names []string, cols ...arrow.Array) arrow.RecordBatch {
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = arrow.Field{Name: names[i], Type: c.DataType(), Nullable: true}
	}
	rec := array.NewRecordBatch(arrow.NewSchema(fields, nil), cols, int64(cols[0].Len()))
	for _, c := range cols {
		c.Release()
	}
	return rec
}

var gbValueTypes = []arrow.DataType{
	arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
	arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Uint64,
	arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64,
	arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary,
	arrow.FixedWidthTypes.Boolean, arrow.FixedWidthTypes.Timestamp_us, arrow.FixedWidthTypes.Date32,
}

var gbAllFuncs = []batch.AggFunc{batch.AggCount, batch.AggSum, batch.AggMin, batch.AggMax, batch.AggAvg, batch.AggFirst, batch.AggLast, batch.AggCountDistinct}

func gbSupported(fn batch.AggFunc, dt arrow.DataType) bool {
	if fn != batch.AggSum && fn != batch.AggAvg {
		return true
	}
	switch dt.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.BOOL, arrow.TIMESTAMP, arrow.DATE32:
		return false
	}
	return true
}

// gbCheck merges batches into a GroupBy of aggs by keys and compares its
// complete output with the reference over all merged rows.
func gbCheck(t *testing.T, g *GroupBy, batches []arrow.RecordBatch, keys []string, aggs []Agg) {
	t.Helper()
	type group struct {
		vals [][]any
		rows int
	}
	ref := map[string]*group{}
	var order []string
	for _, rec := range batches {
		if err := g.Merge(rec); err != nil {
			t.Fatalf("merge: %v", err)
		}
		var kc []arrow.Array
		for _, k := range keys {
			kc = append(kc, rec.Column(rec.Schema().FieldIndices(k)[0]))
		}
		for i := range int(rec.NumRows()) {
			ks := gbKeyString(kc, i)
			gr := ref[ks]
			if gr == nil {
				gr = &group{vals: make([][]any, len(aggs))}
				ref[ks] = gr
				order = append(order, ks)
			}
			gr.rows++
			for ai, a := range aggs {
				if a.countsRows() {
					gr.vals[ai] = append(gr.vals[ai], true)
					continue
				}
				if v := gbCell(rec.Column(rec.Schema().FieldIndices(a.Column)[0]), i); v != nil {
					gr.vals[ai] = append(gr.vals[ai], v)
				}
			}
		}
	}
	out := g.Output(false)
	defer out.Release()
	if int(out.NumRows()) != len(order) || g.Len() != len(order) {
		t.Fatalf("output has %d groups (Len %d), want %d", out.NumRows(), g.Len(), len(order))
	}
	nk := len(keys)
	for i := range int(out.NumRows()) {
		ks := gbKeyString(out.Columns()[:nk], i)
		if ks != order[i] {
			t.Fatalf("row %d: key %s, want %s (insertion order)", i, ks, order[i])
		}
		gr := ref[ks]
		for ai, a := range aggs {
			got := gbCell(out.Column(nk+ai), i)
			want := gbRef(a.Func, gr.vals[ai], gr.rows)
			if !gbSame(got, want) {
				t.Errorf("group %s: %s = %v (%T), want %v (%T)", ks, a.Name, got, got, want, want)
			}
		}
	}
}

func TestGroupByEveryFunctionAndType(t *testing.T) {
	for _, dt := range gbValueTypes {
		t.Run(dt.String(), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rng := rand.New(rand.NewPCG(1, uint64(dt.ID())))
			var aggs []Agg
			for _, fn := range gbAllFuncs {
				if gbSupported(fn, dt) {
					aggs = append(aggs, aggOf(fn, "v"))
				}
			}
			aggs = append(aggs, countOf("*"))
			var batches []arrow.RecordBatch
			for b := range 4 {
				n := 300 + 50*b
				batches = append(batches, gbRecord([]string{"k", "v"},
					gbGen(mem, arrow.PrimitiveTypes.Int64, n, rng, 0.05),
					gbGen(mem, dt, n, rng, 0.2)))
			}
			// A slice: arrays with an offset.
			batches = append(batches, batches[0].NewSlice(7, 250))
			defer func() {
				for _, b := range batches {
					b.Release()
				}
			}()
			g, err := NewGroupBy(mem, batches[0].Schema(), []string{"k"}, aggs)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Release()
			gbCheck(t, g, batches, []string{"k"}, aggs)
		})
	}
}

func TestGroupByUnsupported(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, dt := range gbValueTypes {
		for _, fn := range gbAllFuncs {
			if gbSupported(fn, dt) {
				continue
			}
			sch := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "amount", Type: dt}}, nil)
			_, err := NewGroupBy(mem, sch, []string{"k"}, []Agg{aggOf(fn, "amount")})
			if !errors.Is(err, batch.ErrAggUnsupported) || !strings.Contains(err.Error(), `"amount"`) || !strings.Contains(err.Error(), dt.String()) {
				t.Errorf("%s over %s: %v", fn, dt, err)
			}
		}
	}
	sch := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}}, nil)
	if _, err := NewGroupBy(mem, sch, []string{"k"}, []Agg{sumOf("nope")}); !errors.Is(err, batch.ErrAggSchema) || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("missing column: %v", err)
	}
	if _, err := NewGroupBy(mem, sch, []string{"nokey"}, []Agg{countOf("*")}); !errors.Is(err, batch.ErrAggSchema) || !strings.Contains(err.Error(), `"nokey"`) {
		t.Errorf("missing key: %v", err)
	}
	lsch := arrow.NewSchema([]arrow.Field{{Name: "l", Type: arrow.ListOf(arrow.PrimitiveTypes.Int64)}}, nil)
	if _, err := NewGroupBy(mem, lsch, []string{"l"}, []Agg{countOf("*")}); !errors.Is(err, batch.ErrAggUnsupported) || !strings.Contains(err.Error(), `"l"`) {
		t.Errorf("list key: %v", err)
	}
	if _, err := NewGroupBy(mem, sch, []string{"k"}, []Agg{countOf("*"), countOf("")}); !errors.Is(err, batch.ErrAggSchema) {
		t.Errorf("duplicate output: %v", err)
	}
}

var gbKeyTypes = []arrow.DataType{
	arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64,
	arrow.PrimitiveTypes.Uint8, arrow.PrimitiveTypes.Uint64, arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Float64,
	arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary, arrow.FixedWidthTypes.Boolean,
	arrow.FixedWidthTypes.Timestamp_us, arrow.FixedWidthTypes.Date32, &arrow.Decimal128Type{Precision: 20, Scale: 2},
}

func TestGroupByKeyTypes(t *testing.T) {
	aggs := []Agg{countOf("*"), sumOf("v"), minOf("s"), lastOf("s"), distinctOf("v")}
	for _, dt := range gbKeyTypes {
		for _, multi := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/multi=%v", dt, multi), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				rng := rand.New(rand.NewPCG(2, uint64(dt.ID())))
				keys := []string{"k"}
				if multi {
					keys = []string{"k", "k2", "k3"}
				}
				var batches []arrow.RecordBatch
				for range 3 {
					n := 500
					cols := []arrow.Array{
						gbGen(mem, dt, n, rng, 0.1),
						gbGen(mem, arrow.PrimitiveTypes.Int32, n, rng, 0.2),
						gbGen(mem, arrow.BinaryTypes.String, n, rng, 0.2),
					}
					names := []string{"k", "v", "s"}
					if multi {
						k2 := gbGen(mem, arrow.PrimitiveTypes.Int8, n, rng, 0.1)
						k3 := gbGen(mem, arrow.BinaryTypes.String, n, rng, 0.1)
						// fewer distinct second keys so groups repeat
						cols = append(cols, k2, k3)
						names = append(names, "k2", "k3")
					}
					batches = append(batches, gbRecord(names, cols...))
				}
				batches = append(batches, batches[1].NewSlice(13, 400))
				defer func() {
					for _, b := range batches {
						b.Release()
					}
				}()
				g, err := NewGroupBy(mem, batches[0].Schema(), keys, aggs)
				if err != nil {
					t.Fatal(err)
				}
				defer g.Release()
				gbCheck(t, g, batches, keys, aggs)
			})
		}
	}
}

// gbEqualRecords compares two records cell by cell.
func gbEqualRecords(t *testing.T, what string, a, b arrow.RecordBatch) {
	t.Helper()
	if !a.Schema().Equal(b.Schema()) {
		t.Fatalf("%s: schema %s vs %s", what, a.Schema(), b.Schema())
	}
	if a.NumRows() != b.NumRows() {
		t.Fatalf("%s: %d rows vs %d", what, a.NumRows(), b.NumRows())
	}
	for c := range int(a.NumCols()) {
		for i := range int(a.NumRows()) {
			if x, y := gbCell(a.Column(c), i), gbCell(b.Column(c), i); !gbSame(x, y) {
				t.Fatalf("%s: row %d column %s: %v vs %v", what, i, a.ColumnName(c), x, y)
			}
		}
	}
}

func gbAllAggs(cols ...string) []Agg {
	var aggs []Agg
	for _, c := range cols {
		for _, fn := range gbAllFuncs {
			if (c == "s" || c == "b") && (fn == batch.AggSum || fn == batch.AggAvg) {
				continue
			}
			aggs = append(aggs, aggOf(fn, c))
		}
	}
	return aggs
}

func TestGroupByLoadChangesRoundTrip(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rng := rand.New(rand.NewPCG(3, 3))
	newBatch := func() arrow.RecordBatch {
		n := 400
		return gbRecord([]string{"k", "i", "f", "s", "b"},
			gbGen(mem, arrow.BinaryTypes.String, n, rng, 0.05),
			gbGen(mem, arrow.PrimitiveTypes.Int64, n, rng, 0.2),
			gbGen(mem, arrow.PrimitiveTypes.Float64, n, rng, 0.2),
			gbGen(mem, arrow.BinaryTypes.String, n, rng, 0.2),
			gbGen(mem, arrow.FixedWidthTypes.Boolean, n, rng, 0.2))
	}
	aggs := append(gbAllAggs("i", "f", "s", "b"), countOf("*"), sumOf("i").perBatch().as("batch_sum"))
	first := newBatch()
	defer first.Release()
	live, err := NewGroupBy(mem, first.Schema(), []string{"k"}, aggs)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Release()
	restored, err := NewGroupBy(mem, first.Schema(), []string{"k"}, aggs)
	if err != nil {
		t.Fatal(err)
	}
	defer restored.Release()
	for b := range 5 {
		rec := first
		if b > 0 {
			rec = newBatch()
			defer rec.Release()
		}
		if err := live.Merge(rec); err != nil {
			t.Fatal(err)
		}
		ch := live.Changes()
		if err := restored.Load(ch); err != nil {
			t.Fatal(err)
		}
		ch.Release()
		live.ClearChanges()
	}
	// Loaded groups are not changes.
	gbExpect(t, "changes after load", restored.Changes())
	gbExpect(t, "update output after load", restored.Output(true))
	// PerBatch aggregates are empty on both sides after ClearChanges.
	a, b := live.Output(false), restored.Output(false)
	defer a.Release()
	defer b.Release()
	gbEqualRecords(t, "restored vs live", a, b)
	// And both go on alike.
	next := newBatch()
	defer next.Release()
	if err := live.Merge(next); err != nil {
		t.Fatal(err)
	}
	if err := restored.Merge(next); err != nil {
		t.Fatal(err)
	}
	a2, b2 := live.Output(true), restored.Output(true)
	defer a2.Release()
	defer b2.Release()
	gbEqualRecords(t, "after one more batch", a2, b2)
}

func decimal128Of(v int64) decimal128.Num { return decimal128.FromI64(v) }

func gbInt64s(mem memory.Allocator, vals ...any) arrow.Array {
	b := array.NewInt64Builder(mem)
	defer b.Release()
	for _, v := range vals {
		if v == nil {
			b.AppendNull()
		} else {
			b.Append(int64(v.(int)))
		}
	}
	return b.NewArray()
}

func gbStrings(mem memory.Allocator, vals ...string) arrow.Array {
	b := array.NewStringBuilder(mem)
	defer b.Release()
	b.AppendValues(vals, nil)
	return b.NewArray()
}

// gbRows renders a record as lines "a b c" for compact comparisons.
func gbRows(rec arrow.RecordBatch) []string {
	var out []string
	for i := range int(rec.NumRows()) {
		var parts []string
		for c := range int(rec.NumCols()) {
			parts = append(parts, fmt.Sprint(gbCell(rec.Column(c), i)))
		}
		out = append(out, strings.Join(parts, " "))
	}
	return out
}

func gbExpect(t *testing.T, what string, rec arrow.RecordBatch, want ...string) {
	t.Helper()
	defer rec.Release()
	if got := gbRows(rec); !slices.Equal(got, want) {
		t.Errorf("%s:\n got %q\nwant %q", what, got, want)
	}
}

func TestGroupByPerBatchAndChanges(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	aggs := []Agg{sumOf("amount"), countOf("*"), sumOf("amount").perBatch().as("batch_sum"), countOf("").perBatch().as("batch_n"), avgOf("amount")}
	b1 := gbRecord([]string{"merchant", "amount"}, gbStrings(mem, "b", "a", "b", "c"), gbInt64s(mem, 10, 1, nil, 5))
	defer b1.Release()
	b2 := gbRecord([]string{"merchant", "amount"}, gbStrings(mem, "c", "b", "d"), gbInt64s(mem, 7, 3, nil))
	defer b2.Release()
	g, err := NewGroupBy(mem, b1.Schema(), []string{"merchant"}, aggs)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	if got := g.StateSchema().String(); !strings.Contains(got, "sum(amount)") || strings.Contains(got, "batch_sum") || !strings.Contains(got, "avg(amount).count") {
		t.Errorf("state schema %s", got)
	}
	if err := g.Merge(b1); err != nil {
		t.Fatal(err)
	}
	gbExpect(t, "batch 1 update", g.Output(true), "b 10 2 10 2 10", "a 1 1 1 1 1", "c 5 1 5 1 5")
	gbExpect(t, "batch 1 changes", g.Changes(), "b 10 2 10 1", "a 1 1 1 1", "c 5 1 5 1")
	g.ClearChanges()
	gbExpect(t, "after clear", g.Output(true))
	if err := g.Merge(b2); err != nil {
		t.Fatal(err)
	}
	gbExpect(t, "batch 2 update", g.Output(true), "c 12 2 7 1 6", "b 13 3 3 1 6.5", "d <nil> 1 <nil> 1 <nil>")
	gbExpect(t, "batch 2 complete", g.Output(false),
		"b 13 3 3 1 6.5", "a 1 1 <nil> 0 1", "c 12 2 7 1 6", "d <nil> 1 <nil> 1 <nil>")
	gbExpect(t, "batch 2 changes", g.Changes(), "c 12 2 12 2", "b 13 3 13 2", "d <nil> 1 0 0")
	g.ClearChanges()
	gbExpect(t, "batch 3 complete", g.Output(false),
		"b 13 3 <nil> 0 6.5", "a 1 1 <nil> 0 1", "c 12 2 <nil> 0 6", "d <nil> 1 <nil> 0 <nil>")
}

func TestGroupBySumOverflow(t *testing.T) {
	for _, tc := range []struct {
		name string
		col  func(memory.Allocator) arrow.Array
	}{
		{"int64 up", func(m memory.Allocator) arrow.Array { return gbInt64s(m, math.MaxInt64-1, 1, 1) }},
		{"int64 down", func(m memory.Allocator) arrow.Array { return gbInt64s(m, math.MinInt64+1, -1, -1) }},
		{"uint64", func(m memory.Allocator) arrow.Array {
			b := array.NewUint64Builder(m)
			defer b.Release()
			b.AppendValues([]uint64{1, math.MaxInt64 + 1}, nil)
			b.Append(0)
			return b.NewArray()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rec := gbRecord([]string{"merchant", "amount"}, gbStrings(mem, "acme", "acme", "acme"), tc.col(mem))
			defer rec.Release()
			g, err := NewGroupBy(mem, rec.Schema(), []string{"merchant"}, []Agg{sumOf("amount")})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Release()
			err = g.Merge(rec)
			if !errors.Is(err, batch.ErrSumOverflow) || !strings.Contains(err.Error(), "merchant=acme") || !strings.Contains(err.Error(), `"amount"`) {
				t.Fatalf("merge: %v", err)
			}
		})
	}
}

func TestGroupByRemove(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, keyType := range []string{"int", "string"} {
		t.Run(keyType, func(t *testing.T) {
			mkKeys := func(vals ...int) arrow.Array {
				if keyType == "int" {
					var a []any
					for _, v := range vals {
						a = append(a, v)
					}
					return gbInt64s(mem, a...)
				}
				var s []string
				for _, v := range vals {
					s = append(s, fmt.Sprint(v))
				}
				return gbStrings(mem, s...)
			}
			b1 := gbRecord([]string{"k", "v"}, mkKeys(1, 2, 3, 4, 5, 6), gbInt64s(mem, 1, 2, 3, 4, 5, 6))
			defer b1.Release()
			g, err := NewGroupBy(mem, b1.Schema(), []string{"k"}, []Agg{sumOf("v"), distinctOf("v"), lastOf("v")})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Release()
			if err := g.Merge(b1); err != nil {
				t.Fatal(err)
			}
			g.ClearChanges()
			b2 := gbRecord([]string{"k", "v"}, mkKeys(5, 2), gbInt64s(mem, 50, 20))
			defer b2.Release()
			if err := g.Merge(b2); err != nil {
				t.Fatal(err)
			}
			removed, err := g.Remove(func(keys []arrow.Array, out []bool) {
				for i := range out {
					out[i] = fmt.Sprint(gbCell(keys[0], i)) > "3" // keep 4, 5, 6
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			gbExpect(t, "removed", removed, "1", "2", "3")
			if g.Len() != 3 {
				t.Fatalf("Len %d after remove", g.Len())
			}
			gbExpect(t, "complete after remove", g.Output(false), "4 4 1 4", "5 55 2 50", "6 6 1 6")
			gbExpect(t, "update after remove", g.Output(true), "5 55 2 50")
			b3 := gbRecord([]string{"k", "v"}, mkKeys(2, 6, 7), gbInt64s(mem, 7, 7, 7))
			defer b3.Release()
			if err := g.Merge(b3); err != nil {
				t.Fatal(err)
			}
			gbExpect(t, "complete after re-merge", g.Output(false), "4 4 1 4", "5 55 2 50", "6 13 2 7", "2 7 1 7", "7 7 1 7")
			gbExpect(t, "update after re-merge", g.Output(true), "5 55 2 50", "2 7 1 7", "6 13 2 7", "7 7 1 7")
			none, err := g.Remove(func(keys []arrow.Array, out []bool) {})
			if err != nil {
				t.Fatal(err)
			}
			gbExpect(t, "nothing removed", none)
		})
	}
}

func TestGroupByFloatKeysNormalised(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	col := func() arrow.Array {
		b := array.NewFloat64Builder(mem)
		defer b.Release()
		b.AppendValues([]float64{0, math.Copysign(0, -1), math.NaN(), math.Float64frombits(0x7ff8000000000042), 1.5}, nil)
		b.AppendNull()
		return b.NewArray()
	}
	rec := gbRecord([]string{"k", "k2"}, col(), col())
	defer rec.Release()
	for _, tc := range []struct {
		keys []string
		want []string
	}{
		{[]string{"k"}, []string{"0 2", "NaN 2", "1.5 1", "<nil> 1"}},
		{[]string{"k", "k2"}, []string{"0 0 2", "NaN NaN 2", "1.5 1.5 1", "<nil> <nil> 1"}},
	} {
		g, err := NewGroupBy(mem, rec.Schema(), tc.keys, []Agg{countOf("*")})
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Merge(rec); err != nil {
			t.Fatal(err)
		}
		gbExpect(t, fmt.Sprint(tc.keys), g.Output(false), tc.want...)
		g.Release()
	}
}

// TestGroupByManyGroups crosses many table resizes (in the middle of
// batches) and checks the result against the reference.
func TestGroupByManyGroups(t *testing.T) {
	for _, kind := range []string{"int64", "string", "multi"} {
		t.Run(kind, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rng := rand.New(rand.NewPCG(9, 9))
			var batches []arrow.RecordBatch
			for range 3 {
				const n = 20_000
				ib := array.NewInt64Builder(mem)
				sb := array.NewStringBuilder(mem)
				for range n {
					k := rng.IntN(30_000)
					if k == 0 {
						ib.AppendNull()
						sb.AppendNull()
						continue
					}
					ib.Append(int64(k) << 20)
					sb.Append(fmt.Sprintf("key-%d", k))
				}
				ki, ks := ib.NewArray(), sb.NewArray()
				ib.Release()
				sb.Release()
				batches = append(batches, gbRecord([]string{"ki", "ks", "v"}, ki, ks, gbGen(mem, arrow.PrimitiveTypes.Int32, n, rng, 0.1)))
			}
			defer func() {
				for _, b := range batches {
					b.Release()
				}
			}()
			keys := map[string][]string{"int64": {"ki"}, "string": {"ks"}, "multi": {"ks", "ki"}}[kind]
			aggs := []Agg{sumOf("v"), countOf("*"), maxOf("v"), lastOf("v")}
			g, err := NewGroupBy(mem, batches[0].Schema(), keys, aggs)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Release()
			gbCheck(t, g, batches, keys, aggs)
			if g.Len() < 20_000 {
				t.Fatalf("only %d groups", g.Len())
			}
		})
	}
}

func TestGroupByMergeSchemaAndMemory(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := gbRecord([]string{"merchant", "amount"}, gbStrings(mem, "a", "b"), gbInt64s(mem, 1, 2))
	defer rec.Release()
	g, err := NewGroupBy(mem, rec.Schema(), []string{"merchant"}, []Agg{sumOf("amount")})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	before := g.MemoryBytes()
	if err := g.Merge(rec); err != nil {
		t.Fatal(err)
	}
	if g.MemoryBytes() <= before {
		t.Errorf("MemoryBytes %d after a merge, %d before", g.MemoryBytes(), before)
	}
	other := gbRecord([]string{"merchant", "amount"}, gbStrings(mem, "a"), gbStrings(mem, "x"))
	defer other.Release()
	if err := g.Merge(other); !errors.Is(err, batch.ErrAggSchema) || !strings.Contains(err.Error(), `"amount"`) {
		t.Errorf("merge of a record of another schema: %v", err)
	}
	bad := gbRecord([]string{"merchant", "sum(amount)"}, gbStrings(mem, "a"), gbStrings(mem, "x"))
	defer bad.Release()
	if err := g.Load(bad); !errors.Is(err, batch.ErrAggSchema) {
		t.Errorf("load of a bad state record: %v", err)
	}
}

func TestGroupByPerBatchDistinctAndStrings(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	aggs := []Agg{
		distinctOf("item").perBatch().as("items_now"), distinctOf("item"),
		minOf("item").perBatch().as("min_now"), lastOf("item"), firstOf("item"),
	}
	b1 := gbRecord([]string{"k", "item"}, gbInt64s(mem, 1, 1, 2, 1), gbStrings(mem, "x", "y", "x", "x"))
	defer b1.Release()
	b2 := gbRecord([]string{"k", "item"}, gbInt64s(mem, 1, 2, 2), gbStrings(mem, "z", "a", "x"))
	defer b2.Release()
	g, err := NewGroupBy(mem, b1.Schema(), []string{"k"}, aggs)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	if err := g.Merge(b1); err != nil {
		t.Fatal(err)
	}
	gbExpect(t, "batch 1", g.Output(false), "1 2 2 x x x", "2 1 1 x x x")
	gbExpect(t, "batch 1 state", g.Changes(), "1 [x y] x x", "2 [x] x x")
	g.ClearChanges()
	if err := g.Merge(b2); err != nil {
		t.Fatal(err)
	}
	gbExpect(t, "batch 2", g.Output(false), "1 1 3 z z x", "2 2 2 a x x")
	g.ClearChanges()
	gbExpect(t, "batch 3", g.Output(false), "1 0 3 <nil> z x", "2 0 2 <nil> x x")
}

// TestGroupByAllNullWithoutValues merges columns of nulls that have no
// values buffer at all.
func TestGroupByAllNullWithoutValues(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	nulls := func() arrow.Array {
		bm := memory.NewResizableBuffer(mem)
		bm.Resize(1)
		bm.Bytes()[0] = 0
		data := array.NewData(arrow.PrimitiveTypes.Int64, 3, []*memory.Buffer{bm, nil}, nil, 3, 0)
		bm.Release()
		defer data.Release()
		return array.MakeFromData(data)
	}
	rec := gbRecord([]string{"k", "v"}, nulls(), nulls())
	defer rec.Release()
	g, err := NewGroupBy(mem, rec.Schema(), []string{"k"}, []Agg{sumOf("v"), countOf("*"), countOf("v")})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	if err := g.Merge(rec); err != nil {
		t.Fatal(err)
	}
	gbExpect(t, "all null", g.Output(false), "<nil> <nil> 3 0")
	h := make([]uint64, 3)
	if err := HashRows([]arrow.Array{rec.Column(0)}, h); err != nil || h[0] != h[1] {
		t.Errorf("hash of nulls: %v %#x", err, h)
	}
}
