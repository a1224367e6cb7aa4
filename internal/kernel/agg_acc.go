package kernel

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
)

// aggAccumulator is the state of one aggregate over all groups of a GroupBy:
// typed Go slices indexed by group id, updated by one tight loop per batch.
type aggAccumulator interface {
	// grow makes room for groups [0, n).
	grow(n int)
	// merge folds col (nil for count(*)) into the groups m.gids of its rows.
	merge(m *aggMergeCtx, col arrow.Array) error
	// stateFields are the aggAccumulator's columns in the state store.
	stateFields(name string) []arrow.Field
	state(mem memory.Allocator, idx []uint32) []arrow.Array
	// load sets the state of groups gids from state columns.
	load(cols []arrow.Array, gids []uint32)
	resultType() arrow.DataType
	result(mem memory.Allocator, idx []uint32) arrow.Array
	// reset empties the groups idx (PerBatch aggregates, at ClearChanges).
	reset(idx []uint32)
	compact(keep []bool)
	memoryBytes() int64
}

// aggMergeCtx is what one Merge shares with its accumulators.
type aggMergeCtx struct {
	gids   []uint32 // group of each row
	groups []uint32 // distinct groups of the rows, in first-seen order
	cand   []int32  // scratch indexed by group id
	bools  []uint8  // scratch for boolean columns
	// describe names a group's key for error messages.
	describe func(g uint32) string
	column   string
}

// boolValues returns col's booleans as 0/1 bytes.
func (m *aggMergeCtx) boolValues(col arrow.Array) []uint8 {
	b := col.(*array.Boolean)
	m.bools = aggGrow(m.bools[:0], b.Len())
	for i := range m.bools {
		if b.Value(i) {
			m.bools[i] = 1
		}
	}
	return m.bools
}

// aggNumber is the value types of fixed-width accumulators.
type aggNumber interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

func aggGather[T any](vals []T, idx []uint32) []T {
	if idx == nil {
		return vals
	}
	out := make([]T, len(idx))
	for j, g := range idx {
		out[j] = vals[g]
	}
	return out
}

// ---- count ----

type countAcc struct {
	rows   bool // count(*)
	counts vec[int64]
}

func (a *countAcc) grow(n int) { a.counts.grow(n) }

func (a *countAcc) merge(m *aggMergeCtx, col arrow.Array) error {
	var bm []byte
	off := 0
	if !a.rows {
		bm, off = gbBitmap(col)
	}
	if !a.counts.chunked {
		countFlat(a.counts.flat, m.gids, bm, off)
		return nil
	}
	counts := a.counts.chunks
	if bm == nil {
		for _, g := range m.gids {
			counts[g>>vecBits][g&vecMask]++
		}
		return nil
	}
	for i, g := range m.gids {
		if bitutil.BitIsSet(bm, off+i) {
			counts[g>>vecBits][g&vecMask]++
		}
	}
	return nil
}

// countFlat is countAcc.merge over a flat vec.
func countFlat(counts []int64, gids []uint32, bm []byte, off int) {
	if bm == nil {
		for _, g := range gids {
			counts[g]++
		}
		return
	}
	for i, g := range gids {
		if bitutil.BitIsSet(bm, off+i) {
			counts[g]++
		}
	}
}

func (a *countAcc) stateFields(name string) []arrow.Field {
	return []arrow.Field{{Name: name, Type: arrow.PrimitiveTypes.Int64}}
}

func (a *countAcc) state(mem memory.Allocator, idx []uint32) []arrow.Array {
	return []arrow.Array{a.result(mem, idx)}
}

func (a *countAcc) load(cols []arrow.Array, gids []uint32) {
	v := cols[0].(*array.Int64)
	for i, g := range gids {
		*a.counts.at(g) = v.Value(i)
	}
}

func (a *countAcc) resultType() arrow.DataType { return arrow.PrimitiveTypes.Int64 }

func (a *countAcc) result(mem memory.Allocator, idx []uint32) arrow.Array {
	return vecFixedArray(mem, arrow.PrimitiveTypes.Int64, &a.counts, idx)
}

func (a *countAcc) reset(idx []uint32) {
	for _, g := range idx {
		*a.counts.at(g) = 0
	}
}

func (a *countAcc) compact(keep []bool) { a.counts.compact(keep) }
func (a *countAcc) memoryBytes() int64  { return a.counts.memoryBytes() }

// ---- sum and average ----

// aggSumCount is one group's sum and count of non-null values, side by side
// so that a row's update touches one cache line.
type aggSumCount[S int64 | float64] struct {
	sum S
	n   int64
}

// sumBase holds the state of sum and avg; as avg it outputs sum/count.
type sumBase[S int64 | float64] struct {
	avg bool
	sc  vec[aggSumCount[S]]
}

func (a *sumBase[S]) grow(n int) { a.sc.grow(n) }

func (a *sumBase[S]) sumType() arrow.DataType {
	var zero S
	if _, ok := any(zero).(float64); ok {
		return arrow.PrimitiveTypes.Float64
	}
	return arrow.PrimitiveTypes.Int64
}

func (a *sumBase[S]) stateFields(name string) []arrow.Field {
	if a.avg {
		return []arrow.Field{
			{Name: name + ".sum", Type: a.sumType()},
			{Name: name + ".count", Type: arrow.PrimitiveTypes.Int64},
		}
	}
	return []arrow.Field{{Name: name, Type: a.sumType(), Nullable: true}}
}

// split gathers the sums, counts and has-value flags of groups idx.
func (a *sumBase[S]) split(idx []uint32) ([]S, []int64, []bool) {
	n := aggRows(idx, a.sc.len())
	sums, counts, has := make([]S, n), make([]int64, n), make([]bool, n)
	for j := range n {
		v := *a.sc.at(uint32(aggRow(idx, j)))
		sums[j], counts[j], has[j] = v.sum, v.n, v.n > 0
	}
	return sums, counts, has
}

// sums builds the sum column of groups idx (nil: all) straight into its
// Arrow buffers: one pass, no Go slices in between.
func (a *sumBase[S]) sums(mem memory.Allocator, idx []uint32) arrow.Array {
	n := aggRows(idx, a.sc.len())
	vb := memory.NewResizableBuffer(mem)
	var zero S
	vb.Resize(n * int(unsafe.Sizeof(zero)))
	out := unsafe.Slice((*S)(unsafe.Pointer(unsafe.SliceData(vb.Bytes()))), n)
	nulls := 0
	for j := range out {
		v := a.sc.at(uint32(aggRow(idx, j)))
		out[j] = v.sum
		if v.n == 0 {
			nulls++
		}
	}
	var nb *memory.Buffer
	if nulls > 0 {
		nb, _ = aggValidity(mem, n, func(j int) bool { return a.sc.at(uint32(aggRow(idx, j))).n > 0 })
	}
	return aggFinish(a.sumType(), n, []*memory.Buffer{nb, vb}, nulls)
}

func (a *sumBase[S]) state(mem memory.Allocator, idx []uint32) []arrow.Array {
	if !a.avg {
		return []arrow.Array{a.sums(mem, idx)}
	}
	sums, counts, _ := a.split(idx)
	return []arrow.Array{
		aggFixedArray(mem, a.sumType(), sums, nil, nil),
		aggFixedArray(mem, arrow.PrimitiveTypes.Int64, counts, nil, nil),
	}
}

func (a *sumBase[S]) load(cols []arrow.Array, gids []uint32) {
	sums := gbValues[S](cols[0])
	for i, g := range gids {
		*a.sc.at(g) = aggSumCount[S]{}
		if cols[0].IsValid(i) {
			*a.sc.at(g) = aggSumCount[S]{sum: sums[i], n: 1}
		}
	}
	if a.avg {
		c := cols[1].(*array.Int64)
		for i, g := range gids {
			a.sc.at(g).n = c.Value(i)
		}
	}
}

func (a *sumBase[S]) resultType() arrow.DataType {
	if a.avg {
		return arrow.PrimitiveTypes.Float64
	}
	return a.sumType()
}

func (a *sumBase[S]) result(mem memory.Allocator, idx []uint32) arrow.Array {
	if !a.avg {
		return a.sums(mem, idx)
	}
	sums, counts, has := a.split(idx)
	avg := make([]float64, len(has))
	for j := range avg {
		if has[j] {
			avg[j] = float64(sums[j]) / float64(counts[j])
		}
	}
	return aggFixedArray(mem, arrow.PrimitiveTypes.Float64, avg, has, nil)
}

func (a *sumBase[S]) reset(idx []uint32) {
	for _, g := range idx {
		*a.sc.at(g) = aggSumCount[S]{}
	}
}

func (a *sumBase[S]) compact(keep []bool) { a.sc.compact(keep) }
func (a *sumBase[S]) memoryBytes() int64  { return a.sc.memoryBytes() }

// sumIntAcc sums an integer column as int64; an overflow fails the merge.
type sumIntAcc[T int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64] struct {
	sumBase[int64]
	unsigned bool // T is uint64: values above MaxInt64 overflow
}

func (a *sumIntAcc[T]) merge(m *aggMergeCtx, col arrow.Array) error {
	vals := gbValues[T](col)
	gids := m.gids[:len(vals)]
	bm, off := gbBitmap(col)
	if a.unsigned {
		for i, v := range vals {
			if int64(v) < 0 && (bm == nil || bitutil.BitIsSet(bm, off+i)) {
				return fmt.Errorf("%w: column %q, group %s: value %d exceeds int64", batch.ErrSumOverflow, m.column, m.describe(gids[i]), uint64(v))
			}
		}
	}
	if !a.sc.chunked {
		if i := sumIntFlat(a.sc.flat, vals, gids, bm, off); i >= 0 {
			p := a.sc.flat[gids[i]]
			return a.overflow(m, gids[i], p.sum, int64(vals[i]))
		}
		return nil
	}
	sc := a.sc.chunks
	if bm == nil {
		for i, v := range vals {
			g := gids[i]
			p := &sc[g>>vecBits][g&vecMask]
			s, x := p.sum, int64(v)
			r := s + x
			if (s^r)&(x^r) < 0 {
				return a.overflow(m, g, s, x)
			}
			p.sum = r
			p.n++
		}
		return nil
	}
	for i, v := range vals {
		if !bitutil.BitIsSet(bm, off+i) {
			continue
		}
		g := gids[i]
		p := &sc[g>>vecBits][g&vecMask]
		s, x := p.sum, int64(v)
		r := s + x
		if (s^r)&(x^r) < 0 {
			return a.overflow(m, g, s, x)
		}
		p.sum = r
		p.n++
	}
	return nil
}

// sumIntFlat is sumIntAcc.merge over a flat vec: it returns the row whose
// value overflows its group's sum (that group left as it was), or -1.
func sumIntFlat[T int8 | int16 | int32 | int64 | uint8 | uint16 | uint32 | uint64](sc []aggSumCount[int64], vals []T, gids []uint32, bm []byte, off int) int {
	if bm == nil {
		for i, v := range vals {
			p := &sc[gids[i]]
			s, x := p.sum, int64(v)
			r := s + x
			if (s^r)&(x^r) < 0 {
				return i
			}
			p.sum = r
			p.n++
		}
		return -1
	}
	for i, v := range vals {
		if !bitutil.BitIsSet(bm, off+i) {
			continue
		}
		p := &sc[gids[i]]
		s, x := p.sum, int64(v)
		r := s + x
		if (s^r)&(x^r) < 0 {
			return i
		}
		p.sum = r
		p.n++
	}
	return -1
}

func (a *sumIntAcc[T]) overflow(m *aggMergeCtx, g uint32, s, x int64) error {
	return fmt.Errorf("%w: column %q, group %s: %d + %d", batch.ErrSumOverflow, m.column, m.describe(g), s, x)
}

// sumFloatAcc sums a float column as float64, in row order.
type sumFloatAcc[T float32 | float64] struct {
	sumBase[float64]
}

func (a *sumFloatAcc[T]) merge(m *aggMergeCtx, col arrow.Array) error {
	vals := gbValues[T](col)
	gids := m.gids[:len(vals)]
	bm, off := gbBitmap(col)
	if !a.sc.chunked {
		sc := a.sc.flat
		for i, v := range vals {
			if bm != nil && !bitutil.BitIsSet(bm, off+i) {
				continue
			}
			p := &sc[gids[i]]
			p.sum += float64(v)
			p.n++
		}
		return nil
	}
	sc := a.sc.chunks
	for i, v := range vals {
		if bm != nil && !bitutil.BitIsSet(bm, off+i) {
			continue
		}
		g := gids[i]
		p := &sc[g>>vecBits][g&vecMask]
		p.sum += float64(v)
		p.n++
	}
	return nil
}

// ---- min, max, first, last of fixed-width values ----

// pickAcc keeps one value of the column's own type per group: the minimum,
// maximum, first or last non-null one. Booleans are held as 0/1 bytes.
type pickAcc[T aggNumber] struct {
	fn      batch.AggFunc
	dt      arrow.DataType
	boolean bool
	vals    []T
	has     []bool
}

func (a *pickAcc[T]) grow(n int) {
	a.vals = aggGrow(a.vals, n)
	a.has = aggGrow(a.has, n)
}

func (a *pickAcc[T]) merge(m *aggMergeCtx, col arrow.Array) error {
	var vals []T
	if a.boolean {
		vals = any(m.boolValues(col)).([]T)
	} else {
		vals = gbValues[T](col)
	}
	gids := m.gids[:len(vals)]
	bm, off := gbBitmap(col)
	switch a.fn {
	case batch.AggMin:
		pickMin(a.vals, a.has, vals, gids, bm, off)
	case batch.AggMax:
		pickMax(a.vals, a.has, vals, gids, bm, off)
	case batch.AggFirst:
		pickFirst(a.vals, a.has, vals, gids, bm, off)
	default:
		pickLast(a.vals, a.has, vals, gids, bm, off)
	}
	return nil
}

// In pickMin and pickMax NaN sorts above every number.

func pickMin[T aggNumber](acc []T, has []bool, vals []T, gids []uint32, bm []byte, off int) {
	for i, v := range vals {
		if bm != nil && !bitutil.BitIsSet(bm, off+i) {
			continue
		}
		g := gids[i]
		c := acc[g]
		if !has[g] || v < c || (c != c && v == v) {
			acc[g] = v
			has[g] = true
		}
	}
}

func pickMax[T aggNumber](acc []T, has []bool, vals []T, gids []uint32, bm []byte, off int) {
	for i, v := range vals {
		if bm != nil && !bitutil.BitIsSet(bm, off+i) {
			continue
		}
		g := gids[i]
		c := acc[g]
		if !has[g] || v > c || (v != v && c == c) {
			acc[g] = v
			has[g] = true
		}
	}
}

func pickFirst[T aggNumber](acc []T, has []bool, vals []T, gids []uint32, bm []byte, off int) {
	for i, v := range vals {
		if bm != nil && !bitutil.BitIsSet(bm, off+i) {
			continue
		}
		g := gids[i]
		if !has[g] {
			acc[g] = v
			has[g] = true
		}
	}
}

func pickLast[T aggNumber](acc []T, has []bool, vals []T, gids []uint32, bm []byte, off int) {
	for i, v := range vals {
		if bm != nil && !bitutil.BitIsSet(bm, off+i) {
			continue
		}
		g := gids[i]
		acc[g] = v
		has[g] = true
	}
}

func (a *pickAcc[T]) stateFields(name string) []arrow.Field {
	return []arrow.Field{{Name: name, Type: a.dt, Nullable: true}}
}

func (a *pickAcc[T]) state(mem memory.Allocator, idx []uint32) []arrow.Array {
	return []arrow.Array{a.result(mem, idx)}
}

func (a *pickAcc[T]) load(cols []arrow.Array, gids []uint32) {
	c := cols[0]
	if a.boolean {
		b := c.(*array.Boolean)
		for i, g := range gids {
			a.has[g] = b.IsValid(i)
			a.vals[g] = 0
			if b.Value(i) {
				a.vals[g] = 1
			}
		}
		return
	}
	vals := gbValues[T](c)
	for i, g := range gids {
		a.vals[g], a.has[g] = vals[i], c.IsValid(i)
	}
}

func (a *pickAcc[T]) resultType() arrow.DataType { return a.dt }

func (a *pickAcc[T]) result(mem memory.Allocator, idx []uint32) arrow.Array {
	if a.boolean {
		return aggBoolArray(mem, any(aggGather(a.vals, idx)).([]uint8), aggGather(a.has, idx), nil)
	}
	return aggFixedArray(mem, a.dt, a.vals, a.has, idx)
}

func (a *pickAcc[T]) reset(idx []uint32) {
	for _, g := range idx {
		a.vals[g], a.has[g] = 0, false
	}
}

func (a *pickAcc[T]) compact(keep []bool) {
	a.vals = aggCompact(a.vals, keep)
	a.has = aggCompact(a.has, keep)
}

func (a *pickAcc[T]) memoryBytes() int64 { return aggSize(a.vals) + aggSize(a.has) }

// ---- min, max, first, last of strings and binaries ----

// pickStrAcc keeps one string per group. A merge first finds each group's
// candidate row in the batch (no copy), then copies only the winners.
type pickStrAcc struct {
	fn   batch.AggFunc
	dt   arrow.DataType
	vals []string
	has  []bool
	size int64 // bytes of the strings held
}

func (a *pickStrAcc) grow(n int) {
	a.vals = aggGrow(a.vals, n)
	a.has = aggGrow(a.has, n)
}

func (a *pickStrAcc) merge(m *aggMergeCtx, col arrow.Array) error {
	switch col.DataType().ID() {
	case arrow.STRING, arrow.BINARY:
		pickStr(a, m, col, gbOffsets[int32](col), gbVarData(col))
	default:
		pickStr(a, m, col, gbOffsets[int64](col), gbVarData(col))
	}
	return nil
}

func pickStr[O int32 | int64](a *pickStrAcc, m *aggMergeCtx, col arrow.Array, offs []O, data []byte) {
	cand := m.cand
	for _, g := range m.groups {
		cand[g] = -1
	}
	str := func(i int32) string { return aggString(data[offs[i]:offs[i+1]]) }
	bm, off := gbBitmap(col)
	for i, g := range m.gids {
		if bm != nil && !bitutil.BitIsSet(bm, off+i) {
			continue
		}
		c := cand[g]
		switch a.fn {
		case batch.AggFirst:
			if c < 0 {
				cand[g] = int32(i)
			}
		case batch.AggLast:
			cand[g] = int32(i)
		case batch.AggMin:
			if c < 0 || str(int32(i)) < str(c) {
				cand[g] = int32(i)
			}
		default:
			if c < 0 || str(int32(i)) > str(c) {
				cand[g] = int32(i)
			}
		}
	}
	for _, g := range m.groups {
		c := cand[g]
		if c < 0 {
			continue
		}
		s := str(c)
		take := !a.has[g]
		switch a.fn {
		case batch.AggLast:
			take = true
		case batch.AggMin:
			take = take || s < a.vals[g]
		case batch.AggMax:
			take = take || s > a.vals[g]
		}
		if take {
			a.set(g, s)
		}
	}
}

func (a *pickStrAcc) set(g uint32, s string) {
	a.size += int64(len(s)) - int64(len(a.vals[g]))
	a.vals[g] = strings.Clone(s)
	a.has[g] = true
}

func (a *pickStrAcc) stateFields(name string) []arrow.Field {
	return []arrow.Field{{Name: name, Type: a.dt, Nullable: true}}
}

func (a *pickStrAcc) state(mem memory.Allocator, idx []uint32) []arrow.Array {
	return []arrow.Array{a.result(mem, idx)}
}

func (a *pickStrAcc) load(cols []arrow.Array, gids []uint32) {
	c := cols[0]
	for i, g := range gids {
		a.set(g, "")
		a.has[g] = false
		if c.IsValid(i) {
			a.set(g, aggVarValue(c, i))
		}
	}
}

// aggVarValue is row i of a string or binary array, viewed without a copy.
func aggVarValue(c arrow.Array, i int) string {
	switch v := c.(type) {
	case *array.String:
		return v.Value(i)
	case *array.LargeString:
		return v.Value(i)
	case *array.Binary:
		return aggString(v.Value(i))
	case *array.LargeBinary:
		return aggString(v.Value(i))
	}
	panic(fmt.Sprintf("batch: %s is not a string or binary type", c.DataType()))
}

func (a *pickStrAcc) resultType() arrow.DataType { return a.dt }

func (a *pickStrAcc) result(mem memory.Allocator, idx []uint32) arrow.Array {
	return aggVarArray(mem, a.dt, aggRows(idx, len(a.vals)), func(j int) ([]byte, bool) {
		g := aggRow(idx, j)
		return aggBytes(a.vals[g]), a.has[g]
	})
}

func (a *pickStrAcc) reset(idx []uint32) {
	for _, g := range idx {
		a.set(g, "")
		a.has[g] = false
	}
}

func (a *pickStrAcc) compact(keep []bool) {
	for g, k := range keep {
		if !k {
			a.size -= int64(len(a.vals[g]))
		}
	}
	a.vals = aggCompact(a.vals, keep)
	a.has = aggCompact(a.has, keep)
}

func (a *pickStrAcc) memoryBytes() int64 { return aggSize(a.vals) + aggSize(a.has) + a.size }

// newAggAccumulator builds the aggAccumulator of a over a column of type dt (nil
// for count(*)), or fails naming the column and type.
func newAggAccumulator(a Agg, dt arrow.DataType) (aggAccumulator, error) {
	if a.countsRows() {
		return &countAcc{rows: true}, nil
	}
	unsupported := fmt.Errorf("%w: %s over column %q of type %s", batch.ErrAggUnsupported, a.Func, a.Column, dt)
	switch a.Func {
	case batch.AggCount:
		return &countAcc{}, nil
	case batch.AggSum, batch.AggAvg:
		avg := a.Func == batch.AggAvg
		switch dt.ID() {
		case arrow.INT8:
			return &sumIntAcc[int8]{sumBase: sumBase[int64]{avg: avg}}, nil
		case arrow.INT16:
			return &sumIntAcc[int16]{sumBase: sumBase[int64]{avg: avg}}, nil
		case arrow.INT32:
			return &sumIntAcc[int32]{sumBase: sumBase[int64]{avg: avg}}, nil
		case arrow.INT64:
			return &sumIntAcc[int64]{sumBase: sumBase[int64]{avg: avg}}, nil
		case arrow.UINT8:
			return &sumIntAcc[uint8]{sumBase: sumBase[int64]{avg: avg}}, nil
		case arrow.UINT16:
			return &sumIntAcc[uint16]{sumBase: sumBase[int64]{avg: avg}}, nil
		case arrow.UINT32:
			return &sumIntAcc[uint32]{sumBase: sumBase[int64]{avg: avg}}, nil
		case arrow.UINT64:
			return &sumIntAcc[uint64]{sumBase: sumBase[int64]{avg: avg}, unsigned: true}, nil
		case arrow.FLOAT32:
			return &sumFloatAcc[float32]{sumBase[float64]{avg: avg}}, nil
		case arrow.FLOAT64:
			return &sumFloatAcc[float64]{sumBase[float64]{avg: avg}}, nil
		}
		return nil, unsupported
	case batch.AggMin, batch.AggMax, batch.AggFirst, batch.AggLast:
		switch dt.ID() {
		case arrow.INT8:
			return &pickAcc[int8]{fn: a.Func, dt: dt}, nil
		case arrow.INT16:
			return &pickAcc[int16]{fn: a.Func, dt: dt}, nil
		case arrow.INT32, arrow.DATE32, arrow.TIME32:
			return &pickAcc[int32]{fn: a.Func, dt: dt}, nil
		case arrow.INT64, arrow.DATE64, arrow.TIME64, arrow.TIMESTAMP, arrow.DURATION:
			return &pickAcc[int64]{fn: a.Func, dt: dt}, nil
		case arrow.UINT8:
			return &pickAcc[uint8]{fn: a.Func, dt: dt}, nil
		case arrow.UINT16:
			return &pickAcc[uint16]{fn: a.Func, dt: dt}, nil
		case arrow.UINT32:
			return &pickAcc[uint32]{fn: a.Func, dt: dt}, nil
		case arrow.UINT64:
			return &pickAcc[uint64]{fn: a.Func, dt: dt}, nil
		case arrow.FLOAT32:
			return &pickAcc[float32]{fn: a.Func, dt: dt}, nil
		case arrow.FLOAT64:
			return &pickAcc[float64]{fn: a.Func, dt: dt}, nil
		case arrow.BOOL:
			return &pickAcc[uint8]{fn: a.Func, dt: dt, boolean: true}, nil
		case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
			return &pickStrAcc{fn: a.Func, dt: dt}, nil
		}
		return nil, unsupported
	case batch.AggCountDistinct:
		if acc := newAggDistinctAcc(dt); acc != nil {
			return acc, nil
		}
		return nil, unsupported
	}
	return nil, fmt.Errorf("%w: unknown aggregate function %d over column %q", batch.ErrAggUnsupported, int(a.Func), a.Column)
}
