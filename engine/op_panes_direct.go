package engine

import (
	"cmp"
	"context"
	"fmt"
	"math/bits"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/internal/kernel"
)

// directCombine reports whether windows can combine panes directly (see
// windowsDirect): every stored pane value is an int64 combined by sum, min
// or max (count, sum and avg of integers, min and max of int64), and every
// user key is of a type whose order (columnCompare) calls two values equal
// exactly when the kernel groups them together (not floats: 0 and -0 are
// two groups there). combineIn is window_start, window_end, keys (nk
// columns in all), then the stored values.
func directCombine(combineIn *arrow.Schema, nk int, aggs []kernel.Agg) bool {
	for i := 2; i < nk; i++ {
		if !exactKeyType(combineIn.Field(i).Type) {
			return false
		}
	}
	for i := nk; i < combineIn.NumFields(); i++ {
		if combineIn.Field(i).Type.ID() != arrow.INT64 {
			return false
		}
	}
	for _, a := range aggs {
		switch a.Func {
		case batch.AggSum, batch.AggMin, batch.AggMax:
		default:
			return false
		}
	}
	return true
}

// exactKeyType reports whether columnCompare calls two values of type t
// equal exactly when they are one group key: integers, timestamps, dates,
// strings, binary and booleans (floats are not: 0 and -0 compare equal).
func exactKeyType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.BOOL, arrow.DATE32, arrow.DATE64, arrow.TIMESTAMP,
		arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

// paneWindow is one pane's contribution to one window: the window's start,
// the rank of the pane's keys among the keys of the panes needed, and the
// pane's row.
type paneWindow struct {
	start int64
	rank  int32
	row   int32
}

// windowsDirect combines the panes into the windows that close in (prev,
// watermark] without a kernel GroupBy: every (window, pane) pair is listed
// with the rank of the pane's keys, the pairs are sorted by window start,
// then key rank (sortPaneWindows), and each run of one window and key is
// folded into one row. The rows come out in the order sortByKeys gives
// (window_start, window_end, keys, nulls last), so nothing is sorted after.
// ok is false, with no error, when an int64 sum overflows: the caller
// combines by the kernel, which reports it.
func (o *paneOp) windowsDirect(ctx context.Context, panes arrow.RecordBatch, prev, watermark int64) (out arrow.RecordBatch, ok bool, err error) {
	starts := panes.Column(0).(*array.Timestamp).TimestampValues()
	per := o.size / o.slide
	closes := func(s int64) bool {
		end := kernel.TimestampMillis(s+o.size, o.unit)
		return end > prev && end <= watermark
	}
	need := make([]int32, 0, len(starts))
	for i, ps := range starts {
		for j := int64(0); j < per; j++ {
			if closes(int64(ps) - j*o.slide) {
				need = append(need, int32(i))
				break
			}
		}
	}
	if len(need) == 0 {
		return nil, true, nil
	}
	nk := len(o.combineKeys)
	ranks, err := keyRanks(panes.Columns()[2:nk], need)
	if err != nil {
		return nil, false, err
	}
	pairs := make([]paneWindow, 0, len(need)*int(min(per, 8)))
	for k, i := range need {
		ps := int64(starts[i])
		for j := int64(0); j < per; j++ {
			if s := ps - j*o.slide; closes(s) {
				pairs = append(pairs, paneWindow{start: s, rank: ranks[k], row: i})
			}
		}
	}
	pairs = sortPaneWindows(pairs, o.slide)

	mem := o.h.mem
	nv := panes.NumCols() - int64(nk)
	in := make([]*array.Int64, nv)
	vals := make([][]int64, nv)
	valid := make([][]bool, nv)
	for c := range in {
		in[c] = panes.Column(nk + c).(*array.Int64)
	}
	for c := range vals {
		vals[c] = make([]int64, 0, len(need))
		valid[c] = make([]bool, 0, len(need))
	}
	wstart := make([]arrow.Timestamp, 0, len(need))
	rep := make([]int, 0, len(need))
	for lo := 0; lo < len(pairs); {
		hi := lo + 1
		for hi < len(pairs) && pairs[hi].start == pairs[lo].start && pairs[hi].rank == pairs[lo].rank {
			hi++
		}
		wstart = append(wstart, arrow.Timestamp(pairs[lo].start))
		rep = append(rep, int(pairs[lo].row))
		for c, col := range in {
			v, has, fine := combineInt64(o.combineAggs[c].Func, col, pairs[lo:hi])
			if !fine {
				return nil, false, nil
			}
			vals[c] = append(vals[c], v)
			valid[c] = append(valid[c], has)
		}
		lo = hi
	}

	n := len(wstart)
	cols := make([]arrow.Array, 0, o.combOut.NumFields())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	tsType := o.combineIn.Field(0).Type.(*arrow.TimestampType)
	for _, off := range []int64{0, o.size} {
		b := array.NewTimestampBuilder(mem, tsType)
		b.Reserve(n)
		for _, s := range wstart {
			b.UnsafeAppend(s + arrow.Timestamp(off))
		}
		cols = append(cols, b.NewArray())
		b.Release()
	}
	ind := array.NewInt64Builder(mem)
	ind.Reserve(n)
	for _, r := range rep {
		ind.UnsafeAppend(int64(r))
	}
	idx := ind.NewArray()
	ind.Release()
	defer idx.Release()
	cctx := compute.WithAllocator(ctx, mem)
	for c := 2; c < nk; c++ {
		t, err := compute.TakeArray(cctx, panes.Column(c), idx)
		if err != nil {
			return nil, false, fmt.Errorf("take window keys: %w", err)
		}
		cols = append(cols, t)
	}
	for c := range vals {
		b := array.NewInt64Builder(mem)
		b.AppendValues(vals[c], valid[c])
		cols = append(cols, b.NewArray())
		b.Release()
	}
	comb := array.NewRecordBatch(o.combOut, cols, int64(n))
	defer comb.Release()
	out, err = o.final(ctx, comb)
	return out, err == nil, err
}

// sortPaneWindows orders pairs by window start, then key rank, by two
// stable counting sorts (rank, then start) when the starts are multiples
// of slide apart over a span not much wider than the pairs, which is how
// panes fall (an event-time jump aside); otherwise by a comparison sort.
// Pairs of one window and key keep no particular order: their values
// combine the same way in any order (see combineInt64).
func sortPaneWindows(pairs []paneWindow, slide int64) []paneWindow {
	if len(pairs) < 2 {
		return pairs
	}
	lo, hi := pairs[0].start, pairs[0].start
	ranks := int32(0)
	for _, p := range pairs {
		lo, hi = min(lo, p.start), max(hi, p.start)
		ranks = max(ranks, p.rank+1)
	}
	span := (hi-lo)/slide + 1
	aligned := span <= int64(4*len(pairs)+64)
	for i := 0; aligned && i < len(pairs); i++ {
		aligned = (pairs[i].start-lo)%slide == 0
	}
	if !aligned {
		slices.SortFunc(pairs, func(a, b paneWindow) int {
			if c := cmp.Compare(a.start, b.start); c != 0 {
				return c
			}
			return cmp.Compare(a.rank, b.rank)
		})
		return pairs
	}
	tmp := make([]paneWindow, len(pairs))
	count := make([]int, max(int(ranks), int(span))+1)
	for _, p := range pairs {
		count[p.rank+1]++
	}
	for i := 1; i <= int(ranks); i++ {
		count[i] += count[i-1]
	}
	for _, p := range pairs {
		tmp[count[p.rank]] = p
		count[p.rank]++
	}
	clear(count)
	for _, p := range tmp {
		count[(p.start-lo)/slide+1]++
	}
	for i := 1; i <= int(span); i++ {
		count[i] += count[i-1]
	}
	for _, p := range tmp {
		w := (p.start - lo) / slide
		pairs[count[w]] = p
		count[w]++
	}
	return pairs
}

// combineInt64 folds the values of col at the pairs' rows by f (sum, min
// or max; nulls skipped). has is false when every value is null; fine is
// false when a sum does not fit an int64. Sums add in 128 bits, so the
// result does not depend on the order of the pairs.
func combineInt64(f batch.AggFunc, col *array.Int64, pairs []paneWindow) (v int64, has, fine bool) {
	raw := col.Int64Values()
	nulls := col.NullN() > 0
	var hi int64 // sums: the high word of a 128-bit total whose low word is v
	for _, p := range pairs {
		if nulls && col.IsNull(int(p.row)) {
			continue
		}
		x := raw[p.row]
		if !has {
			v, has = x, true
			hi = x >> 63
			continue
		}
		switch f {
		case batch.AggSum:
			lo, carry := bits.Add64(uint64(v), uint64(x), 0)
			hi += x>>63 + int64(carry)
			v = int64(lo)
		case batch.AggMin:
			v = min(v, x)
		case batch.AggMax:
			v = max(v, x)
		}
	}
	if f == batch.AggSum && hi != v>>63 {
		return 0, false, false
	}
	return v, has, true
}

// keyRanks ranks the rows at need of the key columns: equal keys share a
// rank, and ranks follow columnCompare's order (nulls last). One int64 key
// without nulls (the usual case) is ranked without comparators.
func keyRanks(keys []arrow.Array, need []int32) ([]int32, error) {
	ranks := make([]int32, len(need))
	if len(keys) == 1 && keys[0].NullN() == 0 {
		if a, ok := keys[0].(*array.Int64); ok {
			type keyAt struct {
				v   int64
				pos int32
			}
			v := a.Int64Values()
			byKey := make([]keyAt, len(need))
			for i, row := range need {
				byKey[i] = keyAt{v[row], int32(i)}
			}
			slices.SortFunc(byKey, func(x, y keyAt) int { return cmp.Compare(x.v, y.v) })
			r := int32(0)
			for i, k := range byKey {
				if i > 0 && k.v != byKey[i-1].v {
					r++
				}
				ranks[k.pos] = r
			}
			return ranks, nil
		}
	}
	pos := make([]int32, len(need))
	for i := range pos {
		pos[i] = int32(i)
	}
	cmps := make([]func(a, b int) int, len(keys))
	for c, k := range keys {
		f, err := columnCompare(k)
		if err != nil {
			return nil, fmt.Errorf("rank window keys: %w", err)
		}
		cmps[c] = f
	}
	compare := func(x, y int32) int {
		for _, f := range cmps {
			if c := f(int(need[x]), int(need[y])); c != 0 {
				return c
			}
		}
		return 0
	}
	slices.SortFunc(pos, compare)
	r := int32(0)
	for i, p := range pos {
		if i > 0 && compare(pos[i-1], p) != 0 {
			r++
		}
		ranks[p] = r
	}
	return ranks, nil
}
