package kernel

import (
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// A vec is flat up to vecFlatMax elements, then chunks of vecChunk.
const (
	vecBits    = 16
	vecChunk   = 1 << vecBits
	vecMask    = vecChunk - 1
	vecFlatMax = 16 * vecChunk // 1M elements: 16 MiB of 16-byte sums
)

// vec is a growable array of T indexed by group id. Up to vecFlatMax
// elements (or flatMax, when set) it is one slice that doubles, so the
// merge loops of states that size index a flat slice. Past that it turns
// into chunks of vecChunk elements (the flat array becomes the first
// chunks, without a copy) and grows by adding chunks: it never copies the
// array again and never leaves a large old copy to the collector, which
// is what made a doubling slice peak near 1.5 times its size (old and new
// together, then the old one until a GC, whose goal is twice the live
// heap). Elements past len are zero.
type vec[T any] struct {
	flat    []T   // the elements while not chunked
	chunks  [][]T // the elements once chunked
	chunked bool
	n       int
	flatMax int // 0: vecFlatMax (tests set a smaller one)
}

func (v *vec[T]) len() int { return v.n }

// at is element i (i < len).
func (v *vec[T]) at(i uint32) *T {
	if !v.chunked {
		return &v.flat[i]
	}
	return &v.chunks[i>>vecBits][i&vecMask]
}

// grow extends v with zero elements to length n.
func (v *vec[T]) grow(n int) {
	if n <= v.n {
		return
	}
	limit := v.flatMax
	if limit == 0 {
		limit = vecFlatMax
	}
	if !v.chunked && n <= limit {
		v.flat = aggGrow(v.flat, n)
		v.n = n
		return
	}
	if !v.chunked {
		v.toChunks()
	}
	for len(v.chunks)*vecChunk < n {
		v.chunks = append(v.chunks, make([]T, vecChunk))
	}
	v.n = n
}

// toChunks turns the flat array into chunks: its whole chunks are slices
// of it; a partial last one is copied into a chunk of its own.
func (v *vec[T]) toChunks() {
	full := v.flat[:cap(v.flat)]
	clear(full[v.n:])
	whole := len(full) / vecChunk * vecChunk
	for i := 0; i < whole; i += vecChunk {
		v.chunks = append(v.chunks, full[i:i+vecChunk:i+vecChunk])
	}
	if whole < v.n {
		c := make([]T, vecChunk)
		copy(c, full[whole:v.n])
		v.chunks = append(v.chunks, c)
	}
	v.flat = nil
	v.chunked = true
}

// push appends x.
func (v *vec[T]) push(x T) {
	v.grow(v.n + 1)
	*v.at(uint32(v.n - 1)) = x
}

// gather returns the elements idx (nil: all) as one new slice.
func (v *vec[T]) gather(idx []uint32) []T {
	n := aggRows(idx, v.n)
	out := make([]T, n)
	v.copyTo(out, idx)
	return out
}

// copyTo writes the elements idx (nil: all) to out.
func (v *vec[T]) copyTo(out []T, idx []uint32) {
	switch {
	case idx != nil:
		for j, g := range idx {
			out[j] = *v.at(g)
		}
	case !v.chunked:
		copy(out, v.flat[:v.n])
	default:
		for c, w := 0, 0; w < v.n; c++ {
			w += copy(out[w:v.n], v.chunks[c])
		}
	}
}

// compact drops the elements i where keep[i] is false, in place, keeping
// order, and frees the chunks no longer used (a chunked vec stays chunked).
func (v *vec[T]) compact(keep []bool) {
	if !v.chunked {
		v.flat = aggCompact(v.flat, keep)
		v.n = len(v.flat)
		return
	}
	w := uint32(0)
	for i := range uint32(v.n) {
		if keep[i] {
			*v.at(w) = *v.at(i)
			w++
		}
	}
	var zero T
	for i := w; i < uint32(v.n); i++ {
		*v.at(i) = zero
	}
	v.n = int(w)
	used := max(1, (v.n+vecMask)>>vecBits)
	if len(v.chunks) > used {
		clear(v.chunks[used:])
		v.chunks = v.chunks[:used]
	}
}

// reset empties v, keeping its arrays (zeroed) for the elements to come.
func (v *vec[T]) reset() {
	if !v.chunked {
		clear(v.flat)
		v.flat = v.flat[:0]
	} else {
		for c := range v.chunks[:min(len(v.chunks), (v.n+vecMask)>>vecBits)] {
			clear(v.chunks[c])
		}
	}
	v.n = 0
}

// memoryBytes is the size of the arrays held.
func (v *vec[T]) memoryBytes() int64 {
	if !v.chunked {
		return aggSize(v.flat)
	}
	var zero T
	n := int64(0)
	for _, c := range v.chunks {
		n += int64(cap(c))
	}
	return n*int64(unsafe.Sizeof(zero)) + aggSize(v.chunks)
}

// vecFixedArray builds an array of the fixed-width type dt (not boolean),
// all valid, of the elements idx of v (nil: all), written straight into the
// Arrow buffer.
func vecFixedArray[T any](mem memory.Allocator, dt arrow.DataType, v *vec[T], idx []uint32) arrow.Array {
	n := aggRows(idx, v.n)
	var zero T
	vb := memory.NewResizableBuffer(mem)
	vb.Resize(n * int(unsafe.Sizeof(zero)))
	v.copyTo(unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(vb.Bytes()))), n), idx)
	return aggFinish(dt, n, []*memory.Buffer{nil, vb}, 0)
}
