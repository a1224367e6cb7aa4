package batch

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// takeRows copies rows idx (ascending or not) of a into a new array: typed
// loops for fixed-width, boolean and utf8/binary columns, arrow's take for
// the other types. idxArr is idx as an int32 array, for that fallback.
func takeRows(ctx context.Context, mem memory.Allocator, a arrow.Array, idx []int32, idxArr arrow.Array) (arrow.Array, error) {
	n := len(idx)
	if n == 0 {
		return array.NewSlice(a, 0, 0), nil
	}
	t := a.DataType()
	if isNull(t) {
		return array.NewNull(n), nil
	}
	valid := takeValidity(mem, a, idx)
	switch t.ID() {
	case arrow.BOOL:
		out := newBitmap(mem, n)
		if n > 0 {
			d := a.Data()
			src, off, ob := d.Buffers()[1].Bytes(), d.Offset(), out.Bytes()
			for k, i := range idx {
				if bitutil.BitIsSet(src, off+int(i)) {
					bitutil.SetBit(ob, k)
				}
			}
		}
		return makeArray(t, n, valid, out), nil
	case arrow.STRING, arrow.BINARY:
		return takeStrings(mem, a, idx, valid), nil
	}
	if fw, ok := t.(arrow.FixedWidthDataType); ok && t.ID() != arrow.DICTIONARY && t.ID() != arrow.EXTENSION {
		var out *memory.Buffer
		switch fw.BitWidth() {
		case 8:
			out = takeFixed[int8](mem, a, idx)
		case 16:
			out = takeFixed[int16](mem, a, idx)
		case 32:
			out = takeFixed[int32](mem, a, idx)
		case 64:
			out = takeFixed[int64](mem, a, idx)
		}
		if out != nil {
			return makeArray(t, n, valid, out), nil
		}
	}
	if valid != nil {
		valid.Release()
	}
	return compute.TakeArray(withMem(ctx, mem), a, idxArr)
}

func takeValidity(mem memory.Allocator, a arrow.Array, idx []int32) *memory.Buffer {
	if a.NullN() == 0 {
		return nil
	}
	ok := validity(a)
	out := newBitmap(mem, len(idx))
	ob := out.Bytes()
	for k, i := range idx {
		if ok.valid(int(i)) {
			bitutil.SetBit(ob, k)
		}
	}
	return out
}

func takeFixed[T int8 | int16 | int32 | int64](mem memory.Allocator, a arrow.Array, idx []int32) *memory.Buffer {
	src := fixedValues[T](a)
	buf, out := newFixedUninit[T](mem, len(idx))
	for k, i := range idx {
		out[k] = src[i]
	}
	return buf
}

func takeStrings(mem memory.Allocator, a arrow.Array, idx []int32, valid *memory.Buffer) arrow.Array {
	s := strsOf(a)
	offBuf, offs := newFixedUninit[int32](mem, len(idx)+1)
	var total int32
	offs[0] = 0
	for k, i := range idx {
		total += s.offs[i+1] - s.offs[i]
		offs[k+1] = total
	}
	dataBuf := memory.NewResizableBuffer(mem)
	dataBuf.Resize(int(total))
	data := dataBuf.Bytes()
	for k, i := range idx {
		copy(data[offs[k]:offs[k+1]], s.data[s.offs[i]:s.offs[i+1]])
	}
	return makeArray(a.DataType(), len(idx), valid, offBuf, dataBuf)
}
