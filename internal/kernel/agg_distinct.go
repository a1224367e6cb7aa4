package kernel

import (
	"math"
	"strings"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cespare/xxhash/v2"
)

// Count distinct keeps one set of (group, value) pairs per aggregate: an
// open-addressing table over the pairs, the values in insertion order, and
// per group a linked list of its values (so the state of a few groups is
// read without a scan). Its state column is list<T>: the group's distinct
// values in first-seen order.

// bytesSlot is a slot of the count-distinct sets: the
// hash of an entry and its id + 1 (0: empty slot).
type bytesSlot struct {
	hash uint64
	gid  uint32
}

// aggDistinctSet is the part shared by every value type.
type aggDistinctSet struct {
	slots  []bytesSlot // pair hash, entry + 1
	shift  uint
	egid   []uint32 // group of entry e
	enext  []uint32 // next entry + 1 of the same group, 0 at the end
	head   []uint32 // first entry + 1 of group g
	tail   []uint32 // last entry + 1 of group g
	counts []int64
}

func (s *aggDistinctSet) grow(n int) {
	s.head = aggGrow(s.head, n)
	s.tail = aggGrow(s.tail, n)
	s.counts = aggGrow(s.counts, n)
	if s.slots == nil {
		s.slots = make([]bytesSlot, minTableSlots)
		s.shift = tableShift(minTableSlots)
	}
}

// add records a new entry of group g whose pair hash is h at slot p.
func (s *aggDistinctSet) add(g uint32, h uint64, p uint64) {
	e := uint32(len(s.egid))
	s.egid = append(s.egid, g)
	s.enext = append(s.enext, 0)
	if s.tail[g] == 0 {
		s.head[g] = e + 1
	} else {
		s.enext[s.tail[g]-1] = e + 1
	}
	s.tail[g] = e + 1
	s.counts[g]++
	s.slots[p] = bytesSlot{hash: h, gid: e + 1}
}

// full reports whether one more entry needs a bigger table.
func (s *aggDistinctSet) full() bool { return len(s.egid) >= len(s.slots)/4*3 }

// entries lists the entries of group g in order.
func (s *aggDistinctSet) entries(g uint32, out []uint32) []uint32 {
	for e := s.head[g]; e != 0; e = s.enext[e-1] {
		out = append(out, e-1)
	}
	return out
}

// listOffsets returns the list offsets of groups idx and their entries.
func (s *aggDistinctSet) listOffsets(idx []uint32) ([]int32, []uint32) {
	n := aggRows(idx, len(s.counts))
	offs := make([]int32, n+1)
	var ents []uint32
	for j := range n {
		ents = s.entries(uint32(aggRow(idx, j)), ents)
		offs[j+1] = int32(len(ents))
	}
	return offs, ents
}

func (s *aggDistinctSet) memoryBytes() int64 {
	return aggSize(s.slots) + aggSize(s.egid) + aggSize(s.enext) + aggSize(s.head) + aggSize(s.tail) + aggSize(s.counts)
}

// aggListArray wraps a child array into list<child type> with offs.
func aggListArray(mem memory.Allocator, dt arrow.DataType, offs []int32, child arrow.Array) arrow.Array {
	ob := memory.NewResizableBuffer(mem)
	ob.Resize(len(offs) * 4)
	copy(unsafe.Slice((*int32)(unsafe.Pointer(unsafe.SliceData(ob.Bytes()))), len(offs)), offs)
	data := array.NewData(arrow.ListOf(dt), len(offs)-1, []*memory.Buffer{nil, ob}, []arrow.ArrayData{child.Data()}, 0, 0)
	arr := array.MakeFromData(data)
	data.Release()
	ob.Release()
	child.Release()
	return arr
}

func aggDistinctFields(name string, dt arrow.DataType) []arrow.Field {
	return []arrow.Field{{Name: name, Type: arrow.ListOf(dt)}}
}

func aggDistinctResult(mem memory.Allocator, counts []int64, idx []uint32) arrow.Array {
	return aggFixedArray(mem, arrow.PrimitiveTypes.Int64, counts, nil, idx)
}

// newAggDistinctAcc is the count-distinct aggAccumulator of a column of type dt,
// nil if the type is not supported.
func newAggDistinctAcc(dt arrow.DataType) aggAccumulator {
	switch dt.ID() {
	case arrow.INT8:
		return &distinctNumAcc[int8]{dt: dt}
	case arrow.INT16:
		return &distinctNumAcc[int16]{dt: dt}
	case arrow.INT32, arrow.DATE32, arrow.TIME32:
		return &distinctNumAcc[int32]{dt: dt}
	case arrow.INT64, arrow.DATE64, arrow.TIME64, arrow.TIMESTAMP, arrow.DURATION:
		return &distinctNumAcc[int64]{dt: dt}
	case arrow.UINT8:
		return &distinctNumAcc[uint8]{dt: dt}
	case arrow.UINT16:
		return &distinctNumAcc[uint16]{dt: dt}
	case arrow.UINT32:
		return &distinctNumAcc[uint32]{dt: dt}
	case arrow.UINT64:
		return &distinctNumAcc[uint64]{dt: dt}
	case arrow.FLOAT32:
		return &distinctNumAcc[float32]{dt: dt}
	case arrow.FLOAT64:
		return &distinctNumAcc[float64]{dt: dt}
	case arrow.BOOL:
		return &distinctNumAcc[uint8]{dt: dt, boolean: true}
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return &distinctStrAcc{dt: dt}
	}
	return nil
}

// ---- fixed-width values ----

type distinctNumAcc[T aggNumber] struct {
	aggDistinctSet
	dt      arrow.DataType
	boolean bool
	vals    []T // value of entry e
}

// aggDistinctBits is v's bit pattern, floats normalised (-0 = +0, one NaN).
func aggDistinctBits[T aggNumber](v T) (T, uint64) {
	if v == 0 {
		v = 0
	} else if v != v {
		v = T(math.NaN())
	}
	switch unsafe.Sizeof(v) {
	case 1:
		return v, uint64(*(*uint8)(unsafe.Pointer(&v)))
	case 2:
		return v, uint64(*(*uint16)(unsafe.Pointer(&v)))
	case 4:
		return v, uint64(*(*uint32)(unsafe.Pointer(&v)))
	}
	return v, *(*uint64)(unsafe.Pointer(&v))
}

func (a *distinctNumAcc[T]) merge(m *aggMergeCtx, col arrow.Array) error {
	var vals []T
	if a.boolean {
		vals = any(m.boolValues(col)).([]T)
	} else {
		vals = gbValues[T](col)
	}
	bm, off := gbBitmap(col)
	for i, v := range vals {
		if bm != nil && !bitutil.BitIsSet(bm, off+i) {
			continue
		}
		a.insert(m.gids[i], v)
	}
	return nil
}

func (a *distinctNumAcc[T]) insert(g uint32, v T) {
	v, b := aggDistinctBits(v)
	h := hashFmix64(b ^ uint64(g)*hashMul)
	for {
		mask := uint64(len(a.slots) - 1)
		p := h >> a.shift
		for {
			s := a.slots[p]
			if s.gid == 0 {
				break
			}
			if s.hash == h && a.egid[s.gid-1] == g {
				if w := a.vals[s.gid-1]; w == v || (w != w && v != v) {
					return
				}
			}
			p = (p + 1) & mask
		}
		if !a.full() {
			a.add(g, h, p)
			a.vals = append(a.vals, v)
			return
		}
		a.rehash(2 * len(a.slots))
	}
}

func (a *distinctNumAcc[T]) hashOf(e int) uint64 {
	_, b := aggDistinctBits(a.vals[e])
	return hashFmix64(b ^ uint64(a.egid[e])*hashMul)
}

func (a *distinctNumAcc[T]) rehash(n int) {
	a.slots = make([]bytesSlot, n)
	a.shift = tableShift(n)
	mask := uint64(n - 1)
	for e := range a.egid {
		h := a.hashOf(e)
		p := h >> a.shift
		for a.slots[p].gid != 0 {
			p = (p + 1) & mask
		}
		a.slots[p] = bytesSlot{hash: h, gid: uint32(e) + 1}
	}
}

func (a *distinctNumAcc[T]) stateFields(name string) []arrow.Field {
	return aggDistinctFields(name, a.dt)
}

func (a *distinctNumAcc[T]) state(mem memory.Allocator, idx []uint32) []arrow.Array {
	offs, ents := a.listOffsets(idx)
	vals := make([]T, len(ents))
	for j, e := range ents {
		vals[j] = a.vals[e]
	}
	var child arrow.Array
	if a.boolean {
		child = aggBoolArray(mem, any(vals).([]uint8), nil, nil)
	} else {
		child = aggFixedArray(mem, a.dt, vals, nil, nil)
	}
	return []arrow.Array{aggListArray(mem, a.dt, offs, child)}
}

func (a *distinctNumAcc[T]) load(cols []arrow.Array, gids []uint32) {
	l := cols[0].(*array.List)
	child := l.ListValues()
	var vals []T
	if a.boolean {
		b := child.(*array.Boolean)
		bs := make([]uint8, b.Len())
		for i := range bs {
			if b.Value(i) {
				bs[i] = 1
			}
		}
		vals = any(bs).([]T)
	} else {
		vals = gbValues[T](child)
	}
	for i, g := range gids {
		start, end := l.ValueOffsets(i)
		for k := start; k < end; k++ {
			a.insert(g, vals[k])
		}
	}
}

func (a *distinctNumAcc[T]) resultType() arrow.DataType { return arrow.PrimitiveTypes.Int64 }

func (a *distinctNumAcc[T]) result(mem memory.Allocator, idx []uint32) arrow.Array {
	return aggDistinctResult(mem, a.counts, idx)
}

// reset and compact rebuild the set without the dropped groups' entries.
func (a *distinctNumAcc[T]) reset(idx []uint32) {
	drop := make([]bool, len(a.counts))
	for _, g := range idx {
		drop[g] = true
	}
	a.rebuild(func(g uint32) (uint32, bool) { return g, !drop[g] }, len(a.counts))
}

func (a *distinctNumAcc[T]) compact(keep []bool) {
	a.rebuild(aggRenumber(keep))
}

func (a *distinctNumAcc[T]) rebuild(remap func(g uint32) (uint32, bool), groups int) {
	oldG, oldV := a.egid, a.vals
	a.aggDistinctSet = aggDistinctSet{}
	a.vals = nil
	a.grow(groups)
	for e, g := range oldG {
		if ng, ok := remap(g); ok {
			a.insert(ng, oldV[e])
		}
	}
}

func (a *distinctNumAcc[T]) memoryBytes() int64 {
	return a.aggDistinctSet.memoryBytes() + aggSize(a.vals)
}

// aggRenumber maps the kept groups to their dense new ids; it also returns
// the number of groups kept.
func aggRenumber(keep []bool) (func(g uint32) (uint32, bool), int) {
	ids := make([]uint32, len(keep))
	n := uint32(0)
	for g, k := range keep {
		ids[g] = n
		if k {
			n++
		}
	}
	return func(g uint32) (uint32, bool) { return ids[g], keep[g] }, int(n)
}

// ---- strings and binaries ----

type distinctStrAcc struct {
	aggDistinctSet
	dt   arrow.DataType
	vals []string
	size int64
}

func (a *distinctStrAcc) merge(m *aggMergeCtx, col arrow.Array) error {
	switch col.DataType().ID() {
	case arrow.STRING, arrow.BINARY:
		distinctStrMerge(a, m, col, gbOffsets[int32](col), gbVarData(col))
	default:
		distinctStrMerge(a, m, col, gbOffsets[int64](col), gbVarData(col))
	}
	return nil
}

func distinctStrMerge[O int32 | int64](a *distinctStrAcc, m *aggMergeCtx, col arrow.Array, offs []O, data []byte) {
	bm, off := gbBitmap(col)
	for i, g := range m.gids {
		if bm != nil && !bitutil.BitIsSet(bm, off+i) {
			continue
		}
		a.insert(g, aggString(data[offs[i]:offs[i+1]]))
	}
}

// insert adds (g, v), copying v if it is new.
func (a *distinctStrAcc) insert(g uint32, v string) {
	h := hashCombine(xxhash.Sum64String(v), uint64(g))
	for {
		mask := uint64(len(a.slots) - 1)
		p := h >> a.shift
		for {
			s := a.slots[p]
			if s.gid == 0 {
				break
			}
			if s.hash == h && a.egid[s.gid-1] == g && a.vals[s.gid-1] == v {
				return
			}
			p = (p + 1) & mask
		}
		if !a.full() {
			a.add(g, h, p)
			a.vals = append(a.vals, strings.Clone(v))
			a.size += int64(len(v))
			return
		}
		a.rehash(2 * len(a.slots))
	}
}

func (a *distinctStrAcc) rehash(n int) {
	a.slots = make([]bytesSlot, n)
	a.shift = tableShift(n)
	mask := uint64(n - 1)
	for e, v := range a.vals {
		h := hashCombine(xxhash.Sum64String(v), uint64(a.egid[e]))
		p := h >> a.shift
		for a.slots[p].gid != 0 {
			p = (p + 1) & mask
		}
		a.slots[p] = bytesSlot{hash: h, gid: uint32(e) + 1}
	}
}

func (a *distinctStrAcc) stateFields(name string) []arrow.Field { return aggDistinctFields(name, a.dt) }

func (a *distinctStrAcc) state(mem memory.Allocator, idx []uint32) []arrow.Array {
	offs, ents := a.listOffsets(idx)
	child := aggVarArray(mem, a.dt, len(ents), func(j int) ([]byte, bool) { return aggBytes(a.vals[ents[j]]), true })
	return []arrow.Array{aggListArray(mem, a.dt, offs, child)}
}

func (a *distinctStrAcc) load(cols []arrow.Array, gids []uint32) {
	l := cols[0].(*array.List)
	child := l.ListValues()
	for i, g := range gids {
		start, end := l.ValueOffsets(i)
		for k := start; k < end; k++ {
			a.insert(g, aggVarValue(child, int(k)))
		}
	}
}

func (a *distinctStrAcc) resultType() arrow.DataType { return arrow.PrimitiveTypes.Int64 }

func (a *distinctStrAcc) result(mem memory.Allocator, idx []uint32) arrow.Array {
	return aggDistinctResult(mem, a.counts, idx)
}

func (a *distinctStrAcc) reset(idx []uint32) {
	drop := make([]bool, len(a.counts))
	for _, g := range idx {
		drop[g] = true
	}
	a.rebuild(func(g uint32) (uint32, bool) { return g, !drop[g] }, len(a.counts))
}

func (a *distinctStrAcc) compact(keep []bool) { a.rebuild(aggRenumber(keep)) }

func (a *distinctStrAcc) rebuild(remap func(g uint32) (uint32, bool), groups int) {
	oldG, oldV := a.egid, a.vals
	a.aggDistinctSet = aggDistinctSet{}
	a.vals, a.size = nil, 0
	a.grow(groups)
	for e, g := range oldG {
		if ng, ok := remap(g); ok {
			a.insert(ng, oldV[e])
		}
	}
}

func (a *distinctStrAcc) memoryBytes() int64 {
	return a.aggDistinctSet.memoryBytes() + aggSize(a.vals) + a.size
}
