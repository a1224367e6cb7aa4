package kernel

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The row encoding that bytesKeys uses as the key of several key columns
// (layout: see bytesKeys). It lives in memory only: the state store keeps
// the key columns themselves.

// encode writes the row encoding of cols into t.buf, row i at
// t.buf[t.rowOffs[i]:t.rowOffs[i+1]].
func (t *bytesKeys) encode(cols []arrow.Array) {
	n := cols[0].Len()
	t.rowOffs = aggGrow(t.rowOffs[:0], n+1)
	lens := t.rowOffs[1:]
	for _, c := range cols {
		w := keyTypeWidth(c.DataType())
		bm, off := gbBitmap(c)
		var o32 []int32
		var o64 []int64
		switch c.DataType().ID() {
		case arrow.STRING, arrow.BINARY:
			o32 = gbOffsets[int32](c)
		case arrow.LARGE_STRING, arrow.LARGE_BINARY:
			o64 = gbOffsets[int64](c)
		}
		for i := range n {
			if bm != nil && !bitutil.BitIsSet(bm, off+i) {
				lens[i]++
				continue
			}
			switch {
			case w > 0:
				lens[i] += 1 + int64(w)
			case o32 != nil:
				lens[i] += 5 + int64(o32[i+1]-o32[i])
			default:
				lens[i] += 5 + o64[i+1] - o64[i]
			}
		}
	}
	// lens[i] becomes the end of row i: rowOffs is then the start offsets.
	for i := 1; i < n; i++ {
		lens[i] += lens[i-1]
	}
	total := int64(0)
	if n > 0 {
		total = lens[n-1]
	}
	if int64(cap(t.buf)) < total {
		t.buf = make([]byte, total)
	}
	t.buf = t.buf[:total]
	// pos[i] walks row i from its start.
	t.pos = append(t.pos[:0], t.rowOffs[:n]...)
	for _, c := range cols {
		keyEncodeColumn(c, t.buf, t.pos)
	}
}

func keyEncodeColumn(c arrow.Array, buf []byte, pos []int64) {
	bm, off := gbBitmap(c)
	switch c.DataType().ID() {
	case arrow.BOOL:
		b := c.(*array.Boolean)
		for i, p := range pos {
			if bm != nil && !bitutil.BitIsSet(bm, off+i) {
				buf[p] = 0
				pos[i] = p + 1
				continue
			}
			buf[p] = 1
			buf[p+1] = 0
			if b.Value(i) {
				buf[p+1] = 1
			}
			pos[i] = p + 2
		}
	case arrow.FLOAT32:
		vals := gbValues[float32](c)
		keyEncodeFixed(vals, bm, off, buf, pos, func(v float32) uint32 {
			switch {
			case v == 0:
				return 0
			case v != v:
				return 0x7fc00001
			}
			return math.Float32bits(v)
		})
	case arrow.FLOAT64:
		keyEncodeFixed(gbValues[float64](c), bm, off, buf, pos, hashFloat64Bits)
	case arrow.STRING, arrow.BINARY:
		keyEncodeVar(gbOffsets[int32](c), gbVarData(c), bm, off, buf, pos)
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		keyEncodeVar(gbOffsets[int64](c), gbVarData(c), bm, off, buf, pos)
	case arrow.DECIMAL128:
		words := gbValues[uint64](c)
		for i, p := range pos {
			if bm != nil && !bitutil.BitIsSet(bm, off+i) {
				buf[p] = 0
				pos[i] = p + 1
				continue
			}
			buf[p] = 1
			aggStore(buf, p+1, words[2*i])
			aggStore(buf, p+9, words[2*i+1])
			pos[i] = p + 17
		}
	default:
		switch keyTypeWidth(c.DataType()) {
		case 1:
			keyEncodeFixed(gbValues[uint8](c), bm, off, buf, pos, func(v uint8) uint8 { return v })
		case 2:
			keyEncodeFixed(gbValues[uint16](c), bm, off, buf, pos, func(v uint16) uint16 { return v })
		case 4:
			keyEncodeFixed(gbValues[uint32](c), bm, off, buf, pos, func(v uint32) uint32 { return v })
		default:
			keyEncodeFixed(gbValues[uint64](c), bm, off, buf, pos, func(v uint64) uint64 { return v })
		}
	}
}

func keyEncodeFixed[T any, U uint8 | uint16 | uint32 | uint64](vals []T, bm []byte, off int, buf []byte, pos []int64, conv func(T) U) {
	var zero U
	w := int64(unsafe.Sizeof(zero))
	for i, p := range pos {
		if bm != nil && !bitutil.BitIsSet(bm, off+i) {
			buf[p] = 0
			pos[i] = p + 1
			continue
		}
		buf[p] = 1
		aggStore(buf, p+1, conv(vals[i]))
		pos[i] = p + 1 + w
	}
}

func keyEncodeVar[O int32 | int64](offs []O, data []byte, bm []byte, off int, buf []byte, pos []int64) {
	for i, p := range pos {
		if bm != nil && !bitutil.BitIsSet(bm, off+i) {
			buf[p] = 0
			pos[i] = p + 1
			continue
		}
		v := data[offs[i]:offs[i+1]]
		buf[p] = 1
		aggStore(buf, p+1, uint32(len(v)))
		copy(buf[p+5:], v)
		pos[i] = p + 5 + int64(len(v))
	}
}

// aggStore writes v's bytes at buf[p:] (machine byte order: the encoding
// never leaves the process).
func aggStore[U uint8 | uint16 | uint32 | uint64](buf []byte, p int64, v U) {
	var zero U
	_ = buf[p+int64(unsafe.Sizeof(zero))-1]
	*(*U)(unsafe.Pointer(&buf[p])) = v
}

func aggLoad[U uint8 | uint16 | uint32 | uint64](buf []byte, p int64) U {
	var zero U
	_ = buf[p+int64(unsafe.Sizeof(zero))-1]
	return *(*U)(unsafe.Pointer(&buf[p]))
}

// keyDecodeColumn reads one column of the row encoding at pos (advanced past it).
func keyDecodeColumn(mem memory.Allocator, dt arrow.DataType, arena []byte, pos []int64) arrow.Array {
	n := len(pos)
	valid := make([]bool, n)
	anyNull := false
	for j, p := range pos {
		valid[j] = arena[p] == 1
		anyNull = anyNull || !valid[j]
	}
	has := valid
	if !anyNull {
		has = nil
	}
	w := keyTypeWidth(dt)
	switch {
	case dt.ID() == arrow.BOOL:
		v := make([]uint8, n)
		for j, p := range pos {
			if valid[j] {
				v[j] = arena[p+1]
				pos[j] = p + 2
			} else {
				pos[j] = p + 1
			}
		}
		return aggBoolArray(mem, v, has, nil)
	case w == 0:
		starts := make([]int64, n)
		ends := make([]int64, n)
		for j, p := range pos {
			if valid[j] {
				l := int64(aggLoad[uint32](arena, p+1))
				starts[j], ends[j] = p+5, p+5+l
				pos[j] = p + 5 + l
			} else {
				starts[j], ends[j] = p+1, p+1
				pos[j] = p + 1
			}
		}
		return aggVarArray(mem, dt, n, func(j int) ([]byte, bool) { return arena[starts[j]:ends[j]], valid[j] })
	case w == 1:
		return aggFixedArray(mem, dt, keyDecodeFixed[uint8](arena, pos, valid), has, nil)
	case w == 2:
		return aggFixedArray(mem, dt, keyDecodeFixed[uint16](arena, pos, valid), has, nil)
	case w == 4:
		return aggFixedArray(mem, dt, keyDecodeFixed[uint32](arena, pos, valid), has, nil)
	case w == 8:
		return aggFixedArray(mem, dt, keyDecodeFixed[uint64](arena, pos, valid), has, nil)
	case w == 16:
		v := make([]uint64, 2*n)
		for j, p := range pos {
			if valid[j] {
				v[2*j] = aggLoad[uint64](arena, p+1)
				v[2*j+1] = aggLoad[uint64](arena, p+9)
				pos[j] = p + 17
			} else {
				pos[j] = p + 1
			}
		}
		return aggFixedArray(mem, dt, aggPairs(v), has, nil)
	}
	panic(fmt.Sprintf("batch: decode key of type %s", dt))
}

// aggPair is the in-memory layout of one decimal128 value.
type aggPair struct{ lo, hi uint64 }

func aggPairs(v []uint64) []aggPair {
	return unsafe.Slice((*aggPair)(unsafe.Pointer(unsafe.SliceData(v))), len(v)/2)
}

func keyDecodeFixed[U uint8 | uint16 | uint32 | uint64](arena []byte, pos []int64, valid []bool) []U {
	var zero U
	w := int64(unsafe.Sizeof(zero))
	out := make([]U, len(pos))
	for j, p := range pos {
		if valid[j] {
			out[j] = aggLoad[U](arena, p+1)
			pos[j] = p + 1 + w
		} else {
			pos[j] = p + 1
		}
	}
	return out
}
