package engine

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
)

// TestPaneWindowsDirectEqualsGroupBy combines the same panes into the
// windows closing in many (prev, watermark] ranges by the direct pass and
// by the kernel GroupBy, and wants the same rows in the same order: a
// string key and an int64 key with nulls, every aggregate that combines,
// event times that jump far ahead (the comparison-sort fallback), and
// sums near the int64 limits (an overflow falls back to the kernel).
func TestPaneWindowsDirectEqualsGroupBy(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	in := arrow.NewSchema([]arrow.Field{
		{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}},
		{Name: "k", Type: arrow.BinaryTypes.String, Nullable: true},
		{Name: "n", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
		{Name: "v", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	aggs := []batch.Agg{batch.CountRows().As("rows"), batch.Count(batch.Col("v")).As("vs"), batch.Sum(batch.Col("v")).As("total"),
		batch.Min(batch.Col("v")).As("lo"), batch.Max(batch.Col("v")).As("hi"), batch.Avg(batch.Col("v")).As("avg")}
	for _, keys := range [][]string{{"k", "n"}, {"n"}} {
		for seed := uint64(1); seed <= 6; seed++ {
			t.Run(fmt.Sprintf("%v/seed%d", keys, seed), func(t *testing.T) {
				cfg := defaultConfig()
				cfg.mem = mem
				win := SlidingWindow("ts", 12*time.Second, 4*time.Second)
				w, err := newWindowOp(&cfg, in, &aggregateStep{id: "w", keys: keys, aggs: aggs, window: &win}, eventTimeCol{col: 0})
				if err != nil {
					t.Fatal(err)
				}
				o, err := newPaneOp(&cfg, w)
				if err != nil || o == nil {
					t.Fatalf("pane op %v %v", o, err)
				}
				if !o.direct {
					t.Fatal("these aggregates combine directly")
				}
				part, err := o.newPartition(0)
				if err != nil {
					t.Fatal(err)
				}
				defer part.release()
				rec := randomPaneInput(mem, in, seed)
				prepared, _, err := o.prepare(context.Background(), 0, rec, 0)
				rec.Release()
				if err != nil {
					t.Fatal(err)
				}
				err = part.merge(context.Background(), 0, prepared)
				prepared.Release()
				if err != nil {
					t.Fatal(err)
				}
				panes := part.(*panePart).gb.Output(false)
				defer panes.Release()
				r := rand.New(rand.NewPCG(seed, 99))
				fallbacks := 0
				// Narrow ranges, then ones that reach over the jump (a
				// span of windows far wider than the pairs).
				bounds := [][2]int64{{-20_000, 20_000_000}, {100_000, 10_005_000}}
				for prev := int64(-20_000); prev < 200_000; {
					wm := prev + 1 + r.Int64N(30_000)
					bounds = append(bounds, [2]int64{prev, wm})
					prev = wm
				}
				for _, b := range bounds {
					prev, wm := b[0], b[1]
					direct, ok, err := o.windowsDirect(context.Background(), panes, prev, wm)
					if err != nil {
						t.Fatal(err)
					}
					want, werr := o.windowsByGroupBy(context.Background(), panes, prev, wm)
					if !ok {
						fallbacks++
						if werr == nil {
							want.Release()
							t.Fatalf("(%d, %d]: the direct pass overflowed, the kernel did not", prev, wm)
						}
						continue
					}
					if werr != nil {
						t.Fatal(werr)
					}
					if got, exp := renderRows(direct), renderRows(want); got != exp {
						t.Fatalf("(%d, %d]:\ndirect %s\nkernel %s", prev, wm, got, exp)
					}
					if direct != nil {
						direct.Release()
					}
					if want != nil {
						want.Release()
					}
				}
				if seed%3 == 0 && fallbacks == 0 {
					t.Errorf("no sum overflowed: the overflow fallback went untested")
				}
			})
		}
	}
}

// randomPaneInput is rows over 0..150 s with a jump to 10 000 s, keys
// from a small set with nulls, values with nulls; every third seed puts
// values near the int64 limit so that one window's sum overflows.
func randomPaneInput(mem memory.Allocator, in *arrow.Schema, seed uint64) arrow.RecordBatch {
	r := rand.New(rand.NewPCG(seed, seed*3+1))
	b := array.NewRecordBuilder(mem, in)
	defer b.Release()
	ts := b.Field(0).(*array.TimestampBuilder)
	ks := b.Field(1).(*array.StringBuilder)
	ns := b.Field(2).(*array.Int64Builder)
	vs := b.Field(3).(*array.Int64Builder)
	for i := 0; i < 400; i++ {
		t := r.Int64N(150_000)
		if i%50 == 49 {
			t = 10_000_000 + r.Int64N(20_000)
		}
		big := seed%3 == 0 && i < 3
		if big {
			// One in each pane of [0 s, 12 s): that window's sum
			// overflows, the next one's (two of them) does not.
			t = 1000 + 4000*int64(i)
		}
		ts.Append(arrow.Timestamp(t))
		switch {
		case big: // one key
			ks.Append("big")
			ns.Append(7)
		default:
			if r.IntN(10) == 0 {
				ks.AppendNull()
			} else {
				ks.Append(fmt.Sprintf("k%d", r.IntN(4)))
			}
			if r.IntN(10) == 0 {
				ns.AppendNull()
			} else {
				ns.Append(r.Int64N(5) - 2)
			}
		}
		switch {
		case big:
			vs.Append(math.MaxInt64/2 - 100_000)
		case r.IntN(8) == 0:
			vs.AppendNull()
		default:
			vs.Append(r.Int64N(1000) - 300)
		}
	}
	return b.NewRecordBatch()
}

func renderRows(rec arrow.RecordBatch) string {
	if rec == nil || rec.NumRows() == 0 {
		return "[]"
	}
	var out []string
	for i := 0; i < int(rec.NumRows()); i++ {
		var row []string
		for _, c := range rec.Columns() {
			row = append(row, c.ValueStr(i))
		}
		out = append(out, fmt.Sprint(row))
	}
	return fmt.Sprintf("%s %v", rec.Schema(), out)
}

// TestSortPaneWindows checks both ways of sortPaneWindows (counting sorts
// over a narrow span of aligned starts, a comparison sort over a wide one
// or unaligned starts) against the order they promise.
func TestSortPaneWindows(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, tc := range []struct {
		name          string
		span, modulus int64
	}{{"narrow", 20, 1}, {"wide", 1_000_000, 1}, {"unaligned", 20, 3}} {
		for n := 0; n < 300; n += 1 + n/3 {
			pairs := make([]paneWindow, n)
			for i := range pairs {
				start := (r.Int64N(tc.span) - tc.span/2) * 4000
				if tc.modulus > 1 {
					start += r.Int64N(tc.modulus)
				}
				pairs[i] = paneWindow{start: start, rank: int32(r.IntN(7)), row: int32(i)}
			}
			got := sortPaneWindows(append([]paneWindow(nil), pairs...), 4000)
			if len(got) != n {
				t.Fatalf("%s n=%d: %d pairs out", tc.name, n, len(got))
			}
			rows := map[int32]bool{}
			for i, p := range got {
				rows[p.row] = true
				if i > 0 && (got[i-1].start > p.start || got[i-1].start == p.start && got[i-1].rank > p.rank) {
					t.Fatalf("%s n=%d: %v before %v", tc.name, n, got[i-1], p)
				}
				if p != pairs[p.row] {
					t.Fatalf("%s n=%d: pair %v changed", tc.name, n, p)
				}
			}
			if len(rows) != n {
				t.Fatalf("%s n=%d: %d distinct pairs out", tc.name, n, len(rows))
			}
		}
	}
}
