package kernel_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/internal/kernel"
)

// Review of GroupBy.StateOutputParts (groupby_parts.go): the pieces must be
// what kernel.Partition gives of StateOutput (whole) or ChangesOutput
// (!whole) split by the key columns, piece for piece and row for row, over
// every way the table's groups are numbered and renumbered: a restart
// (Load, partition by partition), MergeState, Reset (a reused combiner),
// Remove of some, none or every group, a partition count that changes
// between calls, no groups at all, every group in one partition, every key
// type, and a table that grows between calls. The pieces are slices of one
// record: their null counts and values must read right at their offsets,
// and they must outlive the table.

var rpSchema = arrow.NewSchema([]arrow.Field{
	{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "n", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
}, nil)

// rpCombinable are aggregates whose partial states merge (MergeState).
func rpCombinable() []kernel.Agg {
	return []kernel.Agg{
		{Func: batch.AggSum, Column: "v", Name: "sv"},
		{Func: batch.AggAvg, Column: "v", Name: "av"},
		{Func: batch.AggCount, Column: "v", Name: "cv"},
		{Func: batch.AggCount, Name: "rows"},
		{Func: batch.AggMin, Column: "s", Name: "mins"},
		{Func: batch.AggMax, Column: "s", Name: "maxs"},
		{Func: batch.AggFirst, Column: "b", Name: "fb"},
		{Func: batch.AggLast, Column: "b", Name: "lb"},
		{Func: batch.AggLast, Column: "s", Name: "ls"},
	}
}

// rpOthers are aggregates that do not combine: per batch, distinct counts
// (a list state), float sums and averages (a result that is not its state).
func rpOthers() []kernel.Agg {
	return []kernel.Agg{
		{Func: batch.AggCount, Name: "batch_rows", PerBatch: true},
		{Func: batch.AggSum, Column: "v", Name: "batch_sv", PerBatch: true},
		{Func: batch.AggCountDistinct, Column: "s", Name: "ds"},
		{Func: batch.AggAvg, Column: "f", Name: "af"},
		{Func: batch.AggSum, Column: "f", Name: "sf"},
		{Func: batch.AggFirst, Column: "s", Name: "fs", PerBatch: true},
		{Func: batch.AggMax, Column: "f", Name: "maxf"},
	}
}

// rpBatch is a record of rows rows over keys drawn from span (nulls among
// them, and NaN and -0 among the floats).
func rpBatch(mem memory.Allocator, rng *rand.Rand, rows, lo, span int) arrow.RecordBatch {
	bld := array.NewRecordBuilder(mem, rpSchema)
	defer bld.Release()
	strs := []string{"", "a", "zz", "a-much-longer-string-than-inline-storage", "é"}
	for range rows {
		k := lo + rng.IntN(span)
		if k%19 == 0 {
			bld.Field(0).AppendNull()
		} else {
			bld.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("key-%d", k))
		}
		if k%13 == 0 {
			bld.Field(1).AppendNull()
		} else {
			bld.Field(1).(*array.Int32Builder).Append(int32(k % 7))
		}
		if rng.IntN(6) == 0 {
			bld.Field(2).AppendNull()
		} else {
			bld.Field(2).(*array.Int64Builder).Append(rng.Int64N(2001) - 1000)
		}
		switch rng.IntN(8) {
		case 0:
			bld.Field(3).AppendNull()
		case 1:
			bld.Field(3).(*array.Float64Builder).Append(math.NaN())
		case 2:
			bld.Field(3).(*array.Float64Builder).Append(math.Copysign(0, -1))
		default:
			bld.Field(3).(*array.Float64Builder).Append(float64(rng.IntN(9)) - 4)
		}
		if rng.IntN(5) == 0 {
			bld.Field(4).AppendNull()
		} else {
			bld.Field(4).(*array.BooleanBuilder).Append(rng.IntN(2) == 0)
		}
		if rng.IntN(5) == 0 {
			bld.Field(5).AppendNull()
		} else {
			bld.Field(5).(*array.StringBuilder).Append(strs[rng.IntN(len(strs))])
		}
	}
	return bld.NewRecordBatch()
}

func rpMerge(t *testing.T, g *kernel.GroupBy, rec arrow.RecordBatch) {
	t.Helper()
	err := g.Merge(rec)
	rec.Release()
	if err != nil {
		t.Fatal(err)
	}
}

func rpRelease(rs ...[]arrow.RecordBatch) {
	for _, s := range rs {
		for _, r := range s {
			if r != nil {
				r.Release()
			}
		}
	}
}

func rpKeyCols(g *kernel.GroupBy) []int {
	keys := make([]int, g.KeySchema().NumFields())
	for i := range keys {
		keys[i] = i
	}
	return keys
}

// rpSound checks that every column of rec reads consistently at its
// offset: the null count is the number of null rows, and the row count is
// the record's.
func rpSound(t *testing.T, what string, rec arrow.RecordBatch) {
	t.Helper()
	for ci, c := range rec.Columns() {
		if int64(c.Len()) != rec.NumRows() {
			t.Fatalf("%s: column %d has %d rows, the record %d", what, ci, c.Len(), rec.NumRows())
		}
		nulls := 0
		for i := range c.Len() {
			if c.IsNull(i) {
				nulls++
			}
		}
		if nulls != c.NullN() {
			t.Fatalf("%s: column %q counts %d nulls, %d rows are null", what, rec.ColumnName(ci), c.NullN(), nulls)
		}
	}
}

// rpCheck compares StateOutputParts(n, whole) with Partition of
// StateOutput or ChangesOutput, and returns the rows of the pieces
// (state, then output) for comparisons between tables.
func rpCheck(t *testing.T, mem memory.Allocator, g *kernel.GroupBy, n int, whole bool, what string) (stRows, outRows [][]string) {
	t.Helper()
	var st, out arrow.RecordBatch
	if whole {
		st, out = g.StateOutput()
	} else {
		st, out = g.ChangesOutput()
	}
	keys := rpKeyCols(g)
	wantSt, err := kernel.Partition(mem, st, keys, n)
	if err != nil {
		t.Fatal(err)
	}
	wantOut, err := kernel.Partition(mem, out, keys, n)
	if err != nil {
		t.Fatal(err)
	}
	st.Release()
	out.Release()
	gotSt, gotOut, err := g.StateOutputParts(n, whole)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	defer rpRelease(wantSt, wantOut, gotSt, gotOut)
	if len(gotSt) != n || len(gotOut) != n {
		t.Fatalf("%s: %d state and %d output pieces for %d partitions", what, len(gotSt), len(gotOut), n)
	}
	stSch := arrow.NewSchema(append(g.KeySchema().Fields(), g.StateSchema().Fields()...), nil)
	stRows, outRows = make([][]string, n), make([][]string, n)
	for p := range n {
		for _, c := range []struct {
			what      string
			got, want arrow.RecordBatch
			sch       *arrow.Schema
			rows      *[]string
		}{{"state", gotSt[p], wantSt[p], stSch, &stRows[p]}, {"output", gotOut[p], wantOut[p], g.OutputSchema(), &outRows[p]}} {
			label := fmt.Sprintf("%s whole=%v n=%d partition %d %s", what, whole, n, p, c.what)
			if (c.got == nil) != (c.want == nil) {
				t.Fatalf("%s: piece %v, Partition gives %v", label, c.got, c.want)
			}
			if c.got == nil {
				continue
			}
			if c.got.NumRows() == 0 {
				t.Fatalf("%s: an empty piece (want nil)", label)
			}
			if !c.got.Schema().Equal(c.sch) {
				t.Fatalf("%s: schema %s, want %s", label, c.got.Schema(), c.sch)
			}
			rpSound(t, label, c.got)
			gr, wr := recordRows(c.got), recordRows(c.want)
			if !slices.Equal(gr, wr) {
				t.Fatalf("%s: rows\n%v\nwant (Partition)\n%v", label, gr, wr)
			}
			*c.rows = gr
		}
	}
	return stRows, outRows
}

// rpCheckBoth checks both commits of the batch.
func rpCheckBoth(t *testing.T, mem memory.Allocator, g *kernel.GroupBy, n int, what string) {
	t.Helper()
	rpCheck(t, mem, g, n, false, what)
	rpCheck(t, mem, g, n, true, what)
}

// rpRestart is a restart from the whole state committed in n partitions:
// a fresh table loads them in partition order (the engine's loadWhole).
func rpRestart(t *testing.T, mem memory.Allocator, g *kernel.GroupBy, n int, aggs []kernel.Agg) *kernel.GroupBy {
	t.Helper()
	st, out, err := g.StateOutputParts(n, true)
	if err != nil {
		t.Fatal(err)
	}
	defer rpRelease(st, out)
	for p, o := range out {
		if o != nil {
			t.Fatalf("partition %d: output %v after ClearChanges", p, o)
		}
	}
	r, err := kernel.NewGroupBy(mem, rpSchema, keyNamesOf(g), aggs)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if s == nil {
			continue
		}
		if err := r.Load(s); err != nil {
			t.Fatal(err)
		}
	}
	if r.Len() != g.Len() {
		t.Fatalf("restart loaded %d groups of %d", r.Len(), g.Len())
	}
	return r
}

func keyNamesOf(g *kernel.GroupBy) []string {
	var names []string
	for _, f := range g.KeySchema().Fields() {
		names = append(names, f.Name)
	}
	return names
}

// TestReviewPartsLifecycle runs a table through a random sequence of
// batches and of everything that renumbers or refills its groups, and
// checks the pieces against Partition after each step, for both commits.
// A restarted twin (loaded from the pieces) runs beside the original for
// a while: their output pieces and their state changes must be equal row
// for row (the touched groups' order is the batch's, not the table's).
func TestReviewPartsLifecycle(t *testing.T) {
	for _, tc := range []struct {
		name string
		keys []string
		aggs func() []kernel.Agg
	}{
		{"combinable/k", []string{"k"}, rpCombinable},
		{"combinable/n,k", []string{"n", "k"}, rpCombinable},
		{"others/k,b", []string{"k", "b"}, rpOthers},
		{"others/f", []string{"f"}, rpOthers},
		{"combinable/n", []string{"n"}, rpCombinable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rpLifecycle(t, mem, tc.keys, tc.aggs)
		})
	}
}

func rpLifecycle(t *testing.T, mem memory.Allocator, keys []string, aggs func() []kernel.Agg) {
	g, err := kernel.NewGroupBy(mem, rpSchema, keys, aggs())
	if err != nil {
		t.Fatal(err)
	}
	defer func() { g.Release() }()
	combinable := g.Combinable()
	var comb *kernel.GroupBy
	if combinable {
		if comb, err = kernel.NewGroupBy(mem, rpSchema, keys, aggs()); err != nil {
			t.Fatal(err)
		}
		defer comb.Release()
	}
	var twin *kernel.GroupBy // a restart of g, fed the same batches
	defer func() {
		if twin != nil {
			twin.Release()
		}
	}()
	rng := rand.New(rand.NewPCG(uint64(len(keys)), uint64(len(aggs()))))
	ns := []int{3, 8, 1, 5, 2, 8}
	n := ns[0]
	lo := 0
	for b := range 40 {
		what := fmt.Sprintf("batch %d", b)
		// Few groups of many, or most of them: both commits come up, and
		// new groups keep arriving.
		span := 10 + b*6
		if b%4 == 1 {
			span = 3
		}
		if b%7 == 3 {
			lo += 20 // keys move on: older groups go untouched
		}
		nrecs := 1 + rng.IntN(3)
		for range nrecs {
			rows := rng.IntN(90)
			seed := rng.Uint64()
			rpMerge(t, g, rpBatch(mem, rand.New(rand.NewPCG(seed, 1)), rows, lo, span))
			if twin != nil {
				rpMerge(t, twin, rpBatch(mem, rand.New(rand.NewPCG(seed, 1)), rows, lo, span))
			}
		}
		if combinable && b%5 == 2 {
			// A combiner reused batch after batch (Reset): its own pieces
			// first (their partitions cached), then a Reset renumbers its
			// groups with other keys; then its state merges into g.
			rpMerge(t, comb, rpBatch(mem, rng, 50, lo+1000, 30))
			rpCheckBoth(t, mem, comb, n, what+" combiner before reset")
			comb.Reset()
			rpMerge(t, comb, rpBatch(mem, rng, 80, lo, span+40))
			rpCheckBoth(t, mem, comb, n, what+" combiner after reset")
			st := comb.State()
			err := g.MergeState(st)
			if err == nil && twin != nil {
				err = twin.MergeState(st)
			}
			st.Release()
			if err != nil {
				t.Fatal(err)
			}
			comb.Reset()
		}
		gs, gout := rpCheck(t, mem, g, n, false, what)
		rpCheck(t, mem, g, n, true, what)
		if twin != nil {
			ts, tout := rpCheck(t, mem, twin, n, false, what+" restarted")
			rpCheck(t, mem, twin, n, true, what+" restarted")
			if fmt.Sprint(gout) != fmt.Sprint(tout) || fmt.Sprint(gs) != fmt.Sprint(ts) {
				t.Fatalf("%s: the restarted table's pieces differ from the table's:\n%v\n%v\nwant\n%v\n%v", what, ts, tout, gs, gout)
			}
		}
		// Twice in a row: the scratch StateOutputParts keeps is not what
		// it hands out.
		rpCheck(t, mem, g, n, b%2 == 0, what+" again")
		g.ClearChanges()
		if twin != nil {
			twin.ClearChanges()
		}
		switch b % 10 {
		case 4:
			// Evict about a third: the rest are renumbered.
			rem, err := g.Remove(func(_ []arrow.Array, keep []bool) {
				for i := range keep {
					keep[i] = rng.IntN(3) != 0
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			rem.Release()
			if twin != nil {
				twin.Release()
				twin = nil
			}
		case 6:
			// Evict nothing.
			rem, err := g.Remove(func([]arrow.Array, []bool) {})
			if err != nil {
				t.Fatal(err)
			}
			rem.Release()
		case 8:
			// A restart, and a twin that goes on from it.
			r := rpRestart(t, mem, g, n, aggs())
			if twin == nil {
				twin = r
			} else {
				g.Release()
				g = r
			}
		}
		if b%9 == 5 {
			n = ns[(b/9)%len(ns)]
		}
		if b == 33 {
			// Evict every group: the table is empty, then refills.
			rem, err := g.Remove(func(_ []arrow.Array, keep []bool) { clear(keep) })
			if err != nil {
				t.Fatal(err)
			}
			rem.Release()
			if g.Len() != 0 {
				t.Fatalf("%d groups after evicting all", g.Len())
			}
			rpCheckBoth(t, mem, g, n, "no groups left")
			if twin != nil {
				twin.Release()
				twin = nil
			}
		}
	}
}

// TestReviewPartsNoGroups: a table without groups (new, after an empty
// record, after evicting every group) gives n nil pieces of each.
func TestReviewPartsNoGroups(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	g, err := kernel.NewGroupBy(mem, rpSchema, []string{"k"}, rpOthers())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	none := func(what string) {
		t.Helper()
		for _, n := range []int{1, 3, 8} {
			for _, whole := range []bool{false, true} {
				st, out, err := g.StateOutputParts(n, whole)
				if err != nil {
					t.Fatal(err)
				}
				if len(st) != n || len(out) != n {
					t.Fatalf("%s: %d and %d pieces for %d partitions", what, len(st), len(out), n)
				}
				for p := range n {
					if st[p] != nil || out[p] != nil {
						t.Fatalf("%s n=%d whole=%v: partition %d holds %v and %v", what, n, whole, p, st[p], out[p])
					}
				}
			}
		}
	}
	none("new table")
	rpMerge(t, g, rpBatch(mem, rand.New(rand.NewPCG(1, 2)), 0, 0, 10))
	none("after an empty record")
	rpMerge(t, g, rpBatch(mem, rand.New(rand.NewPCG(1, 2)), 40, 0, 10))
	rpCheckBoth(t, mem, g, 3, "some groups")
	g.ClearChanges()
	rpCheck(t, mem, g, 3, false, "nothing touched")
	rem, err := g.Remove(func(_ []arrow.Array, keep []bool) { clear(keep) })
	if err != nil {
		t.Fatal(err)
	}
	rem.Release()
	rpCheckBoth(t, mem, g, 3, "every group evicted")
	rpMerge(t, g, rpBatch(mem, rand.New(rand.NewPCG(3, 2)), 40, 100, 10))
	rpCheckBoth(t, mem, g, 3, "refilled")
}

// TestReviewPartsOnePartition: with one partition, or keys that all hash
// to one of eight, that partition's pieces hold every row (Partition then
// hands back its record itself) and the others are nil.
func TestReviewPartsOnePartition(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	// Keys of partition 5 among 8.
	var keys []string
	for i := 0; len(keys) < 40; i++ {
		k := fmt.Sprintf("one-%d", i)
		b := array.NewStringBuilder(mem)
		b.Append(k)
		a := b.NewArray()
		b.Release()
		h := make([]uint64, 1)
		err := kernel.HashRows([]arrow.Array{a}, h)
		a.Release()
		if err != nil {
			t.Fatal(err)
		}
		if kernel.PartitionOf(h[0], 8) == 5 {
			keys = append(keys, k)
		}
	}
	sch := arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.BinaryTypes.String}, {Name: "v", Type: arrow.PrimitiveTypes.Int64}}, nil)
	g, err := kernel.NewGroupBy(mem, sch, []string{"k"}, []kernel.Agg{{Func: batch.AggSum, Column: "v", Name: "sv"}, {Func: batch.AggAvg, Column: "v", Name: "av"}})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	merge := func(ks []string) {
		b := array.NewRecordBuilder(mem, sch)
		defer b.Release()
		for i, k := range ks {
			b.Field(0).(*array.StringBuilder).Append(k)
			b.Field(1).(*array.Int64Builder).Append(int64(i))
		}
		rpMerge(t, g, b.NewRecordBatch())
	}
	merge(keys)
	for _, n := range []int{8, 1} {
		for _, whole := range []bool{false, true} {
			_, out := rpCheck(t, mem, g, n, whole, "one partition")
			full := 5
			if n == 1 {
				full = 0
			}
			for p := range n {
				if (p == full) != (len(out[p]) > 0) {
					t.Fatalf("n=%d: partition %d output %v", n, p, out[p])
				}
			}
			if len(out[full]) != len(keys) {
				t.Fatalf("n=%d: %d rows out, want %d", n, len(out[full]), len(keys))
			}
		}
	}
	g.ClearChanges()
	merge(keys[10:20]) // a delta: the touched ones, in partition 5
	rpCheckBoth(t, mem, g, 8, "one partition, a delta")
}

// rpAppend appends value i (null when null) to a builder of any key type.
func rpAppend(t *testing.T, b array.Builder, i int, null bool) {
	if null {
		b.AppendNull()
		return
	}
	switch b := b.(type) {
	case *array.Int8Builder:
		b.Append(int8(i))
	case *array.Uint8Builder:
		b.Append(uint8(i))
	case *array.BooleanBuilder:
		b.Append(i%2 == 0)
	case *array.Int16Builder:
		b.Append(int16(i * 37))
	case *array.Uint16Builder:
		b.Append(uint16(i * 37))
	case *array.Int32Builder:
		b.Append(int32(i * 1001))
	case *array.Uint32Builder:
		b.Append(uint32(i * 1001))
	case *array.Float32Builder:
		switch i % 9 {
		case 0:
			b.Append(float32(math.NaN()))
		case 1:
			b.Append(float32(math.Copysign(0, -1)))
		default:
			b.Append(float32(i) / 4)
		}
	case *array.Date32Builder:
		b.Append(arrow.Date32(i))
	case *array.Time32Builder:
		b.Append(arrow.Time32(i * 1000))
	case *array.Int64Builder:
		b.Append(int64(i) << 33)
	case *array.Uint64Builder:
		b.Append(uint64(i) << 40)
	case *array.Float64Builder:
		switch i % 9 {
		case 0:
			b.Append(math.NaN())
		case 1:
			b.Append(math.Copysign(0, -1))
		default:
			b.Append(float64(i) / 8)
		}
	case *array.Date64Builder:
		b.Append(arrow.Date64(int64(i) * 86400000))
	case *array.Time64Builder:
		b.Append(arrow.Time64(int64(i) * 1000))
	case *array.TimestampBuilder:
		b.Append(arrow.Timestamp(int64(i) * 1000))
	case *array.DurationBuilder:
		b.Append(arrow.Duration(int64(i) * 7))
	case *array.Decimal128Builder:
		b.Append(decimal128.New(int64(i), uint64(i)*3))
	case *array.StringBuilder:
		b.Append(fmt.Sprintf("s%d", i))
	case *array.LargeStringBuilder:
		b.Append(fmt.Sprintf("large-%d", i))
	case *array.BinaryBuilder:
		b.Append([]byte{byte(i), byte(i >> 8), 0})
	default:
		t.Fatalf("no value for %T", b)
	}
}

// TestReviewPartsKeyTypes: every key type the table takes, alone (the
// one-word table for fixed widths up to 8) and beside a string, nullable,
// through evictions.
func TestReviewPartsKeyTypes(t *testing.T) {
	types := []arrow.DataType{
		arrow.PrimitiveTypes.Int8, arrow.PrimitiveTypes.Uint8, arrow.FixedWidthTypes.Boolean,
		arrow.PrimitiveTypes.Int16, arrow.PrimitiveTypes.Uint16, arrow.PrimitiveTypes.Int32,
		arrow.PrimitiveTypes.Uint32, arrow.PrimitiveTypes.Float32, arrow.FixedWidthTypes.Date32,
		arrow.FixedWidthTypes.Time32ms, arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Uint64,
		arrow.PrimitiveTypes.Float64, arrow.FixedWidthTypes.Date64, arrow.FixedWidthTypes.Time64us,
		arrow.FixedWidthTypes.Timestamp_ms, arrow.FixedWidthTypes.Duration_ms,
		&arrow.Decimal128Type{Precision: 30, Scale: 2},
		arrow.BinaryTypes.String, arrow.BinaryTypes.LargeString, arrow.BinaryTypes.Binary,
	}
	for _, dt := range types {
		for _, pair := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/pair=%v", dt, pair), func(t *testing.T) {
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				defer mem.AssertSize(t, 0)
				sch := arrow.NewSchema([]arrow.Field{
					{Name: "x", Type: dt, Nullable: true},
					{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true},
					{Name: "v", Type: arrow.PrimitiveTypes.Int64},
				}, nil)
				keys := []string{"x"}
				if pair {
					keys = []string{"k", "x"}
				}
				g, err := kernel.NewGroupBy(mem, sch, keys, []kernel.Agg{
					{Func: batch.AggSum, Column: "v", Name: "sv"},
					{Func: batch.AggAvg, Column: "v", Name: "av"},
					{Func: batch.AggFirst, Column: "k", Name: "fk"},
					{Func: batch.AggCount, Name: "b", PerBatch: true},
				})
				if err != nil {
					t.Fatal(err)
				}
				defer g.Release()
				rng := rand.New(rand.NewPCG(7, uint64(dt.ID())))
				for b := range 8 {
					bld := array.NewRecordBuilder(mem, sch)
					span := 5 + b*20
					if b%3 == 2 {
						span = 4
					}
					for range 1 + rng.IntN(100) {
						i := rng.IntN(span)
						rpAppend(t, bld.Field(0), i, i%11 == 3)
						if i%5 == 0 {
							bld.Field(1).AppendNull()
						} else {
							bld.Field(1).(*array.StringBuilder).Append(fmt.Sprint("k", i%4))
						}
						bld.Field(2).(*array.Int64Builder).Append(int64(i))
					}
					rpMerge(t, g, bld.NewRecordBatch())
					bld.Release()
					rpCheckBoth(t, mem, g, 3+5*(b%2), fmt.Sprint("batch ", b))
					g.ClearChanges()
					if b%4 == 3 {
						rem, err := g.Remove(func(_ []arrow.Array, keep []bool) {
							for i := range keep {
								keep[i] = i%3 != 1
							}
						})
						if err != nil {
							t.Fatal(err)
						}
						rem.Release()
					}
				}
			})
		}
	}
}

// TestReviewPartsGrowingTable: tens of thousands of groups arriving over
// batches (the key table doubles several times between calls, the
// partitions of the older groups cached), most of them touched in some
// batches and few in others, with evictions.
func TestReviewPartsGrowingTable(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	for _, keys := range [][]string{{"id"}, {"name", "id"}} {
		g, err := kernel.NewGroupBy(mem, sch, keys, []kernel.Agg{
			{Func: batch.AggSum, Column: "v", Name: "sv"},
			{Func: batch.AggAvg, Column: "v", Name: "av"},
		})
		if err != nil {
			t.Fatal(err)
		}
		total := 0
		for b := range 6 {
			bld := array.NewRecordBuilder(mem, sch)
			lo, hi := 0, total+1200*(b+1)
			if b%2 == 1 {
				lo, hi = total/3, total/3+50
			}
			for i := lo; i < hi; i++ {
				bld.Field(0).(*array.Int64Builder).Append(int64(i))
				bld.Field(1).(*array.StringBuilder).Append(fmt.Sprint("name-", i%97))
				bld.Field(2).(*array.Int64Builder).Append(int64(i % 1000))
			}
			rpMerge(t, g, bld.NewRecordBatch())
			bld.Release()
			total = g.Len()
			rpCheckBoth(t, mem, g, 8, fmt.Sprintf("%v batch %d (%d groups)", keys, b, total))
			g.ClearChanges()
			if b == 4 {
				rem, err := g.Remove(func(_ []arrow.Array, keep []bool) {
					for i := range keep {
						keep[i] = i%4 != 0
					}
				})
				if err != nil {
					t.Fatal(err)
				}
				rem.Release()
			}
		}
		g.Release()
	}
}

// TestReviewPartsOutliveTable: the pieces read the same after the table
// merges more, evicts, resets and is released.
func TestReviewPartsOutliveTable(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	g, err := kernel.NewGroupBy(mem, rpSchema, []string{"k", "n"}, rpOthers())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 5))
	rpMerge(t, g, rpBatch(mem, rng, 300, 0, 80))
	var held [][]arrow.RecordBatch
	var before []string
	for _, whole := range []bool{false, true} {
		st, out, err := g.StateOutputParts(8, whole)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, st, out)
		for _, r := range append(slices.Clone(st), out...) {
			if r != nil {
				before = append(before, recordRows(r)...)
			}
		}
	}
	g.ClearChanges()
	rpMerge(t, g, rpBatch(mem, rng, 3000, 0, 2000))
	rem, err := g.Remove(func(_ []arrow.Array, keep []bool) {
		for i := range keep {
			keep[i] = i%2 == 0
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	rem.Release()
	g.Reset()
	rpMerge(t, g, rpBatch(mem, rng, 3000, 5000, 2000))
	g.Release()
	var after []string
	for _, rs := range held {
		for _, r := range rs {
			if r != nil {
				after = append(after, recordRows(r)...)
			}
		}
	}
	rpRelease(held...)
	if !slices.Equal(before, after) {
		t.Fatalf("the pieces changed after the table went on: %d rows before, %d after", len(before), len(after))
	}
}
