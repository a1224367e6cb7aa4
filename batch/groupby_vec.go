package batch

import (
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// vecBits sets the chunk of a vec: 1<<16 elements (1 MiB of 16-byte sums).
const (
	vecBits  = 16
	vecChunk = 1 << vecBits
	vecMask  = vecChunk - 1
)

// vec is a growable array of T indexed by group id, stored in chunks of
// vecChunk elements (the first one grows by doubling up to that size, so
// small states stay small). Growing allocates only the new chunks: it never
// copies the array and never leaves a large old copy to the collector,
// which is what makes a doubling slice peak near three times its size
// (old and new together, then the old one until a GC). Elements past len
// are zero.
type vec[T any] struct {
	chunks [][]T
	n      int
}

func (v *vec[T]) len() int { return v.n }

// at is element i (i < len).
func (v *vec[T]) at(i uint32) *T { return &v.chunks[i>>vecBits][i&vecMask] }

// grow extends v with zero elements to length n.
func (v *vec[T]) grow(n int) {
	if n <= v.n {
		return
	}
	if len(v.chunks) == 0 {
		v.chunks = append(v.chunks, nil)
	}
	if c0 := v.chunks[0]; len(c0) < min(n, vecChunk) {
		c := make([]T, min(max(n, 2*len(c0), 64), vecChunk))
		copy(c, c0)
		v.chunks[0] = c
	}
	for len(v.chunks)*vecChunk < n {
		v.chunks = append(v.chunks, make([]T, vecChunk))
	}
	v.n = n
}

// push appends x.
func (v *vec[T]) push(x T) {
	v.grow(v.n + 1)
	*v.at(uint32(v.n - 1)) = x
}

// gather returns the elements idx (nil: all) as one slice.
func (v *vec[T]) gather(idx []uint32) []T {
	n := aggRows(idx, v.n)
	out := make([]T, n)
	if idx != nil {
		for j, g := range idx {
			out[j] = *v.at(g)
		}
		return out
	}
	for c, w := 0, 0; w < n; c++ {
		w += copy(out[w:], v.chunks[c])
	}
	return out
}

// compact drops the elements i where keep[i] is false, in place, keeping
// order, and frees the chunks no longer used.
func (v *vec[T]) compact(keep []bool) {
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

// memoryBytes is the size of the chunks.
func (v *vec[T]) memoryBytes() int64 {
	var zero T
	n := int64(0)
	for _, c := range v.chunks {
		n += int64(len(c))
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
	out := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(vb.Bytes()))), n)
	if idx != nil {
		for j, g := range idx {
			out[j] = *v.at(g)
		}
	} else {
		for c, w := 0, 0; w < n; c++ {
			w += copy(out[w:], v.chunks[c])
		}
	}
	return aggFinish(dt, n, []*memory.Buffer{nil, vb}, 0)
}
