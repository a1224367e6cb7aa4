package kernel

import (
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Builders of output arrays from the typed Go slices that hold group state.
// Row j of the result is element idx[j] of the slices (element j when idx is
// nil, over n rows).

// aggValidity builds a validity bitmap buffer for the rows, or nil when every
// row is valid; it returns the null count.
func aggValidity(mem memory.Allocator, n int, valid func(j int) bool) (*memory.Buffer, int) {
	nulls := 0
	for j := range n {
		if !valid(j) {
			nulls++
		}
	}
	if nulls == 0 {
		return nil, 0
	}
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(int(bitutil.BytesForBits(int64(n))))
	bm := buf.Bytes()
	clear(bm)
	for j := range n {
		if valid(j) {
			bitutil.SetBit(bm, j)
		}
	}
	return buf, nulls
}

func aggRow(idx []uint32, j int) int {
	if idx == nil {
		return j
	}
	return int(idx[j])
}

func aggRows(idx []uint32, n int) int {
	if idx == nil {
		return n
	}
	return len(idx)
}

// aggFixedArray builds an array of the fixed-width type dt (not boolean) from
// vals, valid where has is true (has nil: all valid).
func aggFixedArray[T any](mem memory.Allocator, dt arrow.DataType, vals []T, has []bool, idx []uint32) arrow.Array {
	n := aggRows(idx, len(vals))
	var zero T
	sz := int(unsafe.Sizeof(zero))
	vb := memory.NewResizableBuffer(mem)
	vb.Resize(n * sz)
	out := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(vb.Bytes()))), n)
	if idx == nil {
		copy(out, vals[:n])
	} else {
		for j, g := range idx {
			out[j] = vals[g]
		}
	}
	var nb *memory.Buffer
	nulls := 0
	if has != nil {
		nb, nulls = aggValidity(mem, n, func(j int) bool { return has[aggRow(idx, j)] })
	}
	return aggFinish(dt, n, []*memory.Buffer{nb, vb}, nulls)
}

// aggBoolArray builds a boolean array from 0/1 bytes.
func aggBoolArray(mem memory.Allocator, vals []uint8, has []bool, idx []uint32) arrow.Array {
	n := aggRows(idx, len(vals))
	vb := memory.NewResizableBuffer(mem)
	vb.Resize(int(bitutil.BytesForBits(int64(n))))
	bm := vb.Bytes()
	clear(bm)
	for j := range n {
		if vals[aggRow(idx, j)] != 0 {
			bitutil.SetBit(bm, j)
		}
	}
	var nb *memory.Buffer
	nulls := 0
	if has != nil {
		nb, nulls = aggValidity(mem, n, func(j int) bool { return has[aggRow(idx, j)] })
	}
	return aggFinish(arrow.FixedWidthTypes.Boolean, n, []*memory.Buffer{nb, vb}, nulls)
}

func aggFinish(dt arrow.DataType, n int, bufs []*memory.Buffer, nulls int) arrow.Array {
	data := array.NewData(dt, n, bufs, nil, nulls, 0)
	arr := array.MakeFromData(data)
	data.Release()
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	return arr
}

// aggVarArray builds a string, large_string, binary or large_binary array of
// n rows whose row j is get(j) (ok false: null).
func aggVarArray(mem memory.Allocator, dt arrow.DataType, n int, get func(j int) ([]byte, bool)) arrow.Array {
	switch dt.ID() {
	case arrow.STRING, arrow.BINARY:
		return aggVarArrayOffsets[int32](mem, dt, n, get)
	default:
		return aggVarArrayOffsets[int64](mem, dt, n, get)
	}
}

func aggVarArrayOffsets[O int32 | int64](mem memory.Allocator, dt arrow.DataType, n int, get func(j int) ([]byte, bool)) arrow.Array {
	var zero O
	sz := int(unsafe.Sizeof(zero))
	ob := memory.NewResizableBuffer(mem)
	ob.Resize((n + 1) * sz)
	offs := unsafe.Slice((*O)(unsafe.Pointer(unsafe.SliceData(ob.Bytes()))), n+1)
	total := 0
	for j := range n {
		b, _ := get(j)
		offs[j] = O(total)
		total += len(b)
	}
	offs[n] = O(total)
	db := memory.NewResizableBuffer(mem)
	db.Resize(total)
	data := db.Bytes()
	for j := range n {
		b, _ := get(j)
		copy(data[offs[j]:], b)
	}
	nb, nulls := aggValidity(mem, n, func(j int) bool { _, ok := get(j); return ok })
	return aggFinish(dt, n, []*memory.Buffer{nb, ob, db}, nulls)
}

// aggBytes views a string's bytes without copying.
func aggBytes(s string) []byte {
	return unsafe.Slice(unsafe.StringData(s), len(s))
}

// aggString views bytes as a string without copying; the caller must not
// keep it beyond the life of b.
func aggString(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// aggCompact drops the elements i of s where keep[i] is false, in place,
// keeping order.
func aggCompact[T any](s []T, keep []bool) []T {
	w := 0
	for i, v := range s {
		if keep[i] {
			s[w] = v
			w++
		}
	}
	clear(s[w:])
	return s[:w]
}

// aggGrow extends s with zero values to length n.
func aggGrow[T any](s []T, n int) []T {
	if n <= len(s) {
		return s
	}
	if n <= cap(s) {
		old := len(s)
		s = s[:n]
		clear(s[old:])
		return s
	}
	c := max(n, 2*cap(s), 64)
	ns := make([]T, n, c)
	copy(ns, s)
	return ns
}

// aggSize is the byte size of s's backing array.
func aggSize[T any](s []T) int64 {
	var zero T
	return int64(cap(s)) * int64(unsafe.Sizeof(zero))
}
