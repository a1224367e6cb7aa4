package kernel

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Review of the update output built with the state (StateOutput,
// ChangesOutput) and of the Shared partitioner: every record handed out
// is checked against the slow paths (State, Changes, Output) when it is
// made, kept across everything the GroupBy does later (merges past the
// chunked size, eviction, Reset, Load, Release) and checked again at the
// end; the allocator must end empty.

func finAggs() []Agg {
	// one of each state layout: count, int and float sums, averages,
	// picks of ints, strings, floats and bools
	return []Agg{
		countOf("*"), sumOf("v"), avgOf("w").as("aw"), sumOf("f").as("sf"),
		minOf("v"), lastOf("v"), minOf("s"), maxOf("s"), firstOf("s"), lastOf("s"),
		maxOf("f"), maxOf("b"),
	}
}

// finLines splits a recString into its rows.
func finLines(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(strings.TrimSuffix(s, "\n"), "\n")
}

type finHeld struct {
	what string
	rec  arrow.RecordBatch
	snap string
}

// finCheckBuilt compares StateOutput or ChangesOutput of g with the slow
// paths: out equals Output(true) row for row; changes equals Changes();
// a whole state lists Changes() first, then the untouched groups in
// State()'s order.
func finCheckBuilt(t *testing.T, g *GroupBy, whole bool, st, out arrow.RecordBatch, where string) {
	t.Helper()
	wo := g.Output(true)
	ws := recString(wo)
	wo.Release()
	if gs := recString(out); gs != ws {
		t.Fatalf("%s: output differs from Output(true)\n%s", where, firstLineDiff(gs, ws))
	}
	ch := g.Changes()
	chs := recString(ch)
	ch.Release()
	if !whole {
		if gs := recString(st); gs != chs {
			t.Fatalf("%s: changes differ from Changes()\n%s", where, firstLineDiff(gs, chs))
		}
		return
	}
	all := g.State()
	alls := finLines(recString(all))
	all.Release()
	touched := map[string]bool{}
	want := finLines(chs)
	for _, l := range want {
		touched[l] = true
	}
	for _, l := range alls {
		if !touched[l] {
			want = append(want, l)
		}
	}
	got := finLines(recString(st))
	if len(got) != len(want) || len(got) != g.Len() {
		t.Fatalf("%s: whole state has %d rows, want %d (%d groups)", where, len(got), len(want), g.Len())
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: whole state row %d is %q, want %q (touched first in touch order, then insertion order)", where, i, got[i], want[i])
		}
	}
}

// TestReviewFinHeldOutputsStayPut: StateOutput and ChangesOutput records
// held across later merges (growing past the chunked size of 65536
// groups), an eviction, Reset, a Load of a held whole state and Release of
// the GroupBy keep their values, and every one matched the slow paths
// when it was made.
func TestReviewFinHeldOutputsStayPut(t *testing.T) {
	for _, kt := range []arrow.DataType{arrow.PrimitiveTypes.Int64, arrow.BinaryTypes.String} {
		t.Run(kt.String(), func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			sch := reviewSchema(kt)
			g, err := NewGroupBy(mem, sch, []string{"k0"}, finAggs())
			if err != nil {
				t.Fatal(err)
			}
			var held []finHeld
			defer func() {
				for _, h := range held {
					h.rec.Release()
				}
			}()
			hold := func(what string, r arrow.RecordBatch) {
				held = append(held, finHeld{what, r, recString(r)})
			}
			step := func(bi int, whole bool) {
				var st, out arrow.RecordBatch
				if whole {
					st, out = g.StateOutput()
				} else {
					st, out = g.ChangesOutput()
				}
				finCheckBuilt(t, g, whole, st, out, fmt.Sprintf("batch %d (whole %v)", bi, whole))
				hold(fmt.Sprintf("batch %d state", bi), st)
				hold(fmt.Sprintf("batch %d output", bi), out)
				g.ClearChanges()
			}
			// first key, keys, rows a key
			// (the third passes the chunked size: 70000 groups)
			batches := [][3]int{{0, 40, 2}, {20, 40, 1}, {0, 70000, 1}, {5, 10, 3}, {7, 3, 2}, {69990, 30, 1}}
			for bi, bt := range batches {
				rec := reviewRecord(mem, sch, bt[0], bt[1], bt[2], bi)
				if err := g.Merge(rec); err != nil {
					t.Fatal(err)
				}
				rec.Release()
				step(bi, bi == 0 || bi == 2 || bi == 5)
				step(bi, false) // nothing touched: empty output
			}
			// Evict every third group, touch some, build again.
			rem, err := g.Remove(func(keys []arrow.Array, out []bool) {
				for i := range out {
					out[i] = i%3 != 0
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			rem.Release()
			rec := reviewRecord(mem, sch, 1, 50, 1, 99)
			if err := g.Merge(rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			step(100, true)
			// Load a held whole state into a fresh GroupBy: it must equal
			// g's state (as sets) and its own StateOutput.
			last, lastOut := g.StateOutput()
			lastOut.Release()
			hold("final state", last)
			g.ClearChanges()
			g2, err := NewGroupBy(mem, sch, []string{"k0"}, finAggs())
			if err != nil {
				t.Fatal(err)
			}
			if err := g2.Load(last); err != nil {
				t.Fatal(err)
			}
			a, b := g.State(), g2.State()
			as, bs := finLines(recString(a)), finLines(recString(b))
			a.Release()
			b.Release()
			if fmt.Sprint(sortedCopy(as)) != fmt.Sprint(sortedCopy(bs)) {
				t.Fatalf("a loaded whole state differs from the GroupBy it came from (%d and %d groups)", len(as), len(bs))
			}
			g.Reset()
			rec = reviewRecord(mem, sch, 3, 66000, 1, 7)
			if err := g.Merge(rec); err != nil {
				t.Fatal(err)
			}
			rec.Release()
			step(200, true)
			g.Release()
			g2.Release()
			for _, h := range held {
				if s := recString(h.rec); s != h.snap {
					t.Fatalf("%s changed after it was handed out\n%s", h.what, firstLineDiff(s, h.snap))
				}
			}
		})
	}
}

func sortedCopy(s []string) []string {
	c := append([]string(nil), s...)
	sort.Strings(c)
	return c
}

// TestReviewFinStringAndNullEdges: groups whose values are all null
// (sum, avg, min/max/first/last of strings, ints, floats and bools), empty
// strings, a sum whose rows are partly null, each through StateOutput and
// ChangesOutput against an independent reference.
func TestReviewFinStringAndNullEdges(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "k0", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	}, nil)
	g, err := NewGroupBy(mem, sch, []string{"k0"}, []Agg{
		countOf("*"), countOf("v"), sumOf("v"), avgOf("v"), minOf("s"), maxOf("s"), firstOf("s"), lastOf("s"), minOf("v"), lastOf("v"),
	})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Release()
	type row struct {
		k *string
		v *int64
		s *string
	}
	str := func(s string) *string { return &s }
	num := func(v int64) *int64 { return &v }
	type ref struct {
		n, nv, sum          int64
		has                 bool
		mn, mx, first, last *string
		mnv, lastv          *int64
	}
	refs := map[string]*ref{}
	keyOf := func(k *string) string {
		if k == nil {
			return "(null)"
		}
		return *k
	}
	batches := [][]row{
		{{str("allnull"), nil, nil}, {str("a"), num(5), str("")}, {nil, nil, str("x")}, {str(""), num(-3), nil}},
		{{str("allnull"), nil, nil}, {str("a"), nil, str("zz")}, {str("b"), nil, nil}, {nil, num(7), nil}},
		{{str("b"), num(0), str("m")}, {str("a"), num(-5), str("a")}, {str("allnull"), nil, nil}},
	}
	var held []finHeld
	defer func() {
		for _, h := range held {
			h.rec.Release()
		}
	}()
	for bi, rows := range batches {
		bld := array.NewRecordBuilder(mem, sch)
		var order []string
		seen := map[string]bool{}
		for _, r := range rows {
			for ci, p := range []*string{r.k, nil, r.s} {
				if ci == 1 {
					if r.v == nil {
						bld.Field(1).AppendNull()
					} else {
						bld.Field(1).(*array.Int64Builder).Append(*r.v)
					}
					continue
				}
				if p == nil {
					bld.Field(ci).AppendNull()
				} else {
					bld.Field(ci).(*array.StringBuilder).Append(*p)
				}
			}
			k := keyOf(r.k)
			if !seen[k] {
				seen[k] = true
				order = append(order, k)
			}
			x := refs[k]
			if x == nil {
				x = &ref{}
				refs[k] = x
			}
			x.n++
			if r.v != nil {
				x.nv++
				x.sum += *r.v
				x.has = true
				if x.mnv == nil || *r.v < *x.mnv {
					x.mnv = r.v
				}
				x.lastv = r.v
			}
			if r.s != nil {
				if x.mn == nil || *r.s < *x.mn {
					x.mn = r.s
				}
				if x.mx == nil || *r.s > *x.mx {
					x.mx = r.s
				}
				if x.first == nil {
					x.first = r.s
				}
				x.last = r.s
			}
		}
		rec := bld.NewRecordBatch()
		bld.Release()
		if err := g.Merge(rec); err != nil {
			t.Fatal(err)
		}
		rec.Release()
		var st, out arrow.RecordBatch
		if bi%2 == 0 {
			st, out = g.StateOutput()
		} else {
			st, out = g.ChangesOutput()
		}
		g.ClearChanges()
		ps := func(p *string) string {
			if p == nil {
				return "(null)"
			}
			return *p
		}
		pn := func(p *int64) string {
			if p == nil {
				return "(null)"
			}
			return fmt.Sprint(*p)
		}
		var want strings.Builder
		for _, k := range order {
			x := refs[k]
			sum, avg := "(null)", "(null)"
			if x.has {
				sum = fmt.Sprint(x.sum)
				avg = fmt.Sprint(float64(x.sum) / float64(x.nv))
			}
			fmt.Fprintf(&want, "%s|%d|%d|%s|%s|%s|%s|%s|%s|%s|%s\n", k, x.n, x.nv, sum, avg, ps(x.mn), ps(x.mx), ps(x.first), ps(x.last), pn(x.mnv), pn(x.lastv))
		}
		if got := recString(out); got != want.String() {
			t.Fatalf("batch %d: output\n%s\nwant\n%s", bi, got, want.String())
		}
		held = append(held, finHeld{"state", st, recString(st)}, finHeld{"output", out, recString(out)})
	}
	for _, h := range held {
		if s := recString(h.rec); s != h.snap {
			t.Fatalf("%s changed after it was handed out", h.what)
		}
	}
}

// TestReviewFinSharedPartitionsHeld: a Shared partitioner gives the same
// partitions as Partition (row for row) for sliced inputs and every fixed
// width, with nulls in some columns; its records, held while it
// partitions later records with the same scratch, and released in any
// order, keep their values, and the allocator ends empty.
func TestReviewFinSharedPartitionsHeld(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "k0", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "w", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
		{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	}, nil)
	var pt Partitioner
	pt.Shared = true
	var held []finHeld
	for i, n := range []int{1, 7, 5000, 3, 20000, 64} {
		full := reviewRecord(mem, sch, i*13, n, 2, i)
		rec := full.NewSlice(int64(min(3, n)), full.NumRows()-int64(min(2, n)))
		full.Release()
		for _, parts := range []int{1, 2, 3, 8} {
			got, err := pt.Partition(mem, rec, []int{0}, parts)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Partition(mem, rec, []int{0}, parts)
			if err != nil {
				t.Fatal(err)
			}
			for p := range parts {
				gs, ws := "", ""
				if got[p] != nil {
					gs = recString(got[p])
					held = append(held, finHeld{fmt.Sprintf("record %d, %d partitions, partition %d", i, parts, p), got[p], gs})
				}
				if want[p] != nil {
					ws = recString(want[p])
					want[p].Release()
				}
				if gs != ws {
					t.Fatalf("record %d, %d partitions, partition %d: shared and plain differ\n%s", i, parts, p, firstLineDiff(gs, ws))
				}
			}
		}
		rec.Release()
		// release every other held record now, the rest at the end
		kept := held[:0]
		for j, h := range held {
			if j%2 == 0 {
				if s := recString(h.rec); s != h.snap {
					t.Fatalf("%s changed while others were partitioned", h.what)
				}
				h.rec.Release()
			} else {
				kept = append(kept, h)
			}
		}
		held = kept
	}
	for _, h := range held {
		if s := recString(h.rec); s != h.snap {
			t.Fatalf("%s changed while others were partitioned", h.what)
		}
		h.rec.Release()
	}
}

// TestReviewFinSharedEveryWidth: a Shared partitioner over columns of
// every scattered width (1, 2, 4, 8 and 16 bytes: int8, int16, float32,
// timestamp, decimal128) and a dictionary-free boolean, with and without
// nulls (gathered then), sliced, gives Partition's records row for row.
func TestReviewFinSharedEveryWidth(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dec := &arrow.Decimal128Type{Precision: 30, Scale: 2}
	sch := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
		{Name: "a", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
		{Name: "b", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
		{Name: "c", Type: &arrow.TimestampType{Unit: arrow.Microsecond}, Nullable: true},
		{Name: "d", Type: dec, Nullable: true},
		{Name: "e", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Uint64, Nullable: true},
	}, nil)
	var pt Partitioner
	pt.Shared = true
	for i, n := range []int{2, 9, 1000, 40000} {
		withNulls := i%2 == 1
		bld := array.NewRecordBuilder(mem, sch)
		for r := range n {
			x := r*2654435761 + i
			null := withNulls && x%7 == 0
			app := func(f int, do func()) {
				if null && f%2 == x%2 {
					bld.Field(f).AppendNull()
				} else {
					do()
				}
			}
			app(0, func() { bld.Field(0).(*array.Int16Builder).Append(int16(x % 5000)) })
			app(1, func() { bld.Field(1).(*array.Int8Builder).Append(int8(x)) })
			app(2, func() { bld.Field(2).(*array.Float32Builder).Append(float32(x%1000) / 8) })
			app(3, func() { bld.Field(3).(*array.TimestampBuilder).Append(arrow.Timestamp(int64(x) * 1000003)) })
			app(4, func() {
				bld.Field(4).(*array.Decimal128Builder).Append(decimal128.New(int64(x%97-48), uint64(x)*0x9e3779b97f4a7c15))
			})
			app(5, func() { bld.Field(5).(*array.BooleanBuilder).Append(x%3 == 0) })
			app(6, func() { bld.Field(6).(*array.Uint64Builder).Append(uint64(x) << 20) })
		}
		full := bld.NewRecordBatch()
		bld.Release()
		rec := full.NewSlice(1, full.NumRows())
		full.Release()
		for _, parts := range []int{1, 3, 4} {
			got, err := pt.Partition(mem, rec, []int{0}, parts)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Partition(mem, rec, []int{0}, parts)
			if err != nil {
				t.Fatal(err)
			}
			for p := range parts {
				gs, ws := "", ""
				if got[p] != nil {
					gs = recString(got[p])
					got[p].Release()
				}
				if want[p] != nil {
					ws = recString(want[p])
					want[p].Release()
				}
				if gs != ws {
					t.Fatalf("%d rows (nulls %v), %d partitions, partition %d: shared and plain differ\n%s", n, withNulls, parts, p, firstLineDiff(gs, ws))
				}
			}
		}
		rec.Release()
	}
}
