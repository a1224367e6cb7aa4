package kernel

import (
	"fmt"
	"math"
	"math/bits"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/cespare/xxhash/v2"

	"github.com/onceflow/onceflow/batch"
)

// The row hash is part of the checkpoint format: Partition assigns a row to
// partition HashRows(keys) % n, and n is fixed at a query's first batch, so
// the function below must never change. TestHashRowsGolden pins it.
//
// Definition (all arithmetic mod 2^64):
//
//	h := hashSeed
//	for each key column c, in order: h = hashCombine(h, valueHash(c, row))
//
//	hashCombine(h, v) = hashFmix64(rotl64(h, 27)*hashMul ^ v)
//	hashFmix64(x): x ^= x>>33; x *= 0xff51afd7ed558ccd; x ^= x>>33; x *= 0xc4ceb9fe1a85ec53; x ^= x>>33
//
// valueHash of a null is hashNull whatever the type. Otherwise:
//
//	signed integers, date32/64, time32/64, timestamp, duration: the value sign-extended to 64 bits
//	unsigned integers: the value zero-extended to 64 bits
//	float32/float64: math.Float64bits(float64(v)), with -0 mapped to +0 and every NaN to 0x7ff8000000000001
//	bool: 0 or 1
//	string, large_string, binary, large_binary: xxhash64 (XXH64, seed 0) of the bytes
//	decimal128: hashFmix64(low 64 bits) ^ high 64 bits * hashMul
//
// So an int32 5 and an int64 5 hash alike, and so do a string and the binary
// of the same bytes.
const (
	hashSeed    uint64 = 0x6f6e6365666c6f77 // "onceflow"
	hashMul     uint64 = 0x9e3779b97f4a7c15
	hashNull    uint64 = 0x9ae16a3b2f90404f
	hashNaNBits uint64 = 0x7ff8000000000001
)

func hashFmix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

func hashCombine(h, v uint64) uint64 {
	return hashFmix64(bits.RotateLeft64(h, 27)*hashMul ^ v)
}

// hashFloat64Bits is the normalised bit pattern a float hashes and groups by.
func hashFloat64Bits(f float64) uint64 {
	if f == 0 {
		return 0
	}
	if f != f {
		return hashNaNBits
	}
	return math.Float64bits(f)
}

// HashRows writes one 64-bit hash per row of the key columns into out
// (len(out) must be at least the number of rows). The hash is deterministic
// across processes, machines and Go versions (see the definition above),
// null-aware, and defined for the integer, float, bool, string, binary,
// temporal and decimal128 types; any other type is an error naming the
// column index and type.
func HashRows(cols []arrow.Array, out []uint64) error {
	if len(cols) == 0 {
		return fmt.Errorf("%w: hash rows: no key columns", batch.ErrAggSchema)
	}
	n := cols[0].Len()
	if len(out) < n {
		return fmt.Errorf("%w: hash rows: out has %d slots for %d rows", batch.ErrAggSchema, len(out), n)
	}
	out = out[:n]
	for i := range out {
		out[i] = hashSeed
	}
	for ci, c := range cols {
		if c.Len() != n {
			return fmt.Errorf("%w: hash rows: key column %d has %d rows, want %d", batch.ErrAggSchema, ci, c.Len(), n)
		}
		if err := hashColumn(c, out); err != nil {
			return fmt.Errorf("hash rows: key column %d: %w", ci, err)
		}
	}
	return nil
}

// hashColumn folds one column into the running row hashes h.
func hashColumn(c arrow.Array, h []uint64) error {
	switch c.DataType().ID() {
	case arrow.INT8:
		hashSigned(c, gbValues[int8](c), h)
	case arrow.INT16:
		hashSigned(c, gbValues[int16](c), h)
	case arrow.INT32, arrow.DATE32, arrow.TIME32:
		hashSigned(c, gbValues[int32](c), h)
	case arrow.INT64, arrow.DATE64, arrow.TIME64, arrow.TIMESTAMP, arrow.DURATION:
		hashSigned(c, gbValues[int64](c), h)
	case arrow.UINT8:
		hashUnsigned(c, gbValues[uint8](c), h)
	case arrow.UINT16:
		hashUnsigned(c, gbValues[uint16](c), h)
	case arrow.UINT32:
		hashUnsigned(c, gbValues[uint32](c), h)
	case arrow.UINT64:
		hashUnsigned(c, gbValues[uint64](c), h)
	case arrow.FLOAT32:
		hashFloat(c, gbValues[float32](c), h)
	case arrow.FLOAT64:
		hashFloat(c, gbValues[float64](c), h)
	case arrow.BOOL:
		hashBool(c, h)
	case arrow.STRING, arrow.BINARY:
		hashVarBinary(c, gbOffsets[int32](c), gbVarData(c), h)
	case arrow.LARGE_STRING, arrow.LARGE_BINARY:
		hashVarBinary(c, gbOffsets[int64](c), gbVarData(c), h)
	case arrow.DECIMAL128:
		hashDecimal128(c, gbValues[uint64](c), h)
	default:
		return fmt.Errorf("%w: type %s", batch.ErrAggUnsupported, c.DataType())
	}
	return nil
}

func hashSigned[T int8 | int16 | int32 | int64](c arrow.Array, vals []T, h []uint64) {
	h = h[:len(vals)]
	if c.NullN() == 0 {
		for i, v := range vals {
			h[i] = hashCombine(h[i], uint64(int64(v)))
		}
		return
	}
	bm, off := gbBitmap(c)
	for i, v := range vals {
		x := hashNull
		if bitutil.BitIsSet(bm, off+i) {
			x = uint64(int64(v))
		}
		h[i] = hashCombine(h[i], x)
	}
}

func hashUnsigned[T uint8 | uint16 | uint32 | uint64](c arrow.Array, vals []T, h []uint64) {
	h = h[:len(vals)]
	if c.NullN() == 0 {
		for i, v := range vals {
			h[i] = hashCombine(h[i], uint64(v))
		}
		return
	}
	bm, off := gbBitmap(c)
	for i, v := range vals {
		x := hashNull
		if bitutil.BitIsSet(bm, off+i) {
			x = uint64(v)
		}
		h[i] = hashCombine(h[i], x)
	}
}

func hashFloat[T float32 | float64](c arrow.Array, vals []T, h []uint64) {
	h = h[:len(vals)]
	hasNulls := c.NullN() != 0
	bm, off := gbBitmap(c)
	for i, v := range vals {
		x := hashNull
		if !hasNulls || bitutil.BitIsSet(bm, off+i) {
			x = hashFloat64Bits(float64(v))
		}
		h[i] = hashCombine(h[i], x)
	}
}

func hashBool(c arrow.Array, h []uint64) {
	b := c.(*array.Boolean)
	hasNulls := c.NullN() != 0
	for i := range h[:c.Len()] {
		x := hashNull
		if !hasNulls || b.IsValid(i) {
			x = 0
			if b.Value(i) {
				x = 1
			}
		}
		h[i] = hashCombine(h[i], x)
	}
}

func hashVarBinary[O int32 | int64](c arrow.Array, offs []O, data []byte, h []uint64) {
	n := c.Len()
	hasNulls := c.NullN() != 0
	bm, off := gbBitmap(c)
	for i := range h[:n] {
		x := hashNull
		if !hasNulls || bitutil.BitIsSet(bm, off+i) {
			x = xxhash.Sum64(data[offs[i]:offs[i+1]])
		}
		h[i] = hashCombine(h[i], x)
	}
}

func hashDecimal128(c arrow.Array, words []uint64, h []uint64) {
	n := c.Len()
	hasNulls := c.NullN() != 0
	bm, off := gbBitmap(c)
	for i := range h[:n] {
		x := hashNull
		if !hasNulls || bitutil.BitIsSet(bm, off+i) {
			x = hashFmix64(words[2*i]) ^ words[2*i+1]*hashMul
		}
		h[i] = hashCombine(h[i], x)
	}
}

// gbValues reinterprets the values buffer of a fixed-width array as []T,
// from the array's offset, len = number of elements of size T in the
// array's range (so a decimal128 array read as uint64 gives 2 words a row).
func gbValues[T any](c arrow.Array) []T {
	d := c.Data()
	bufs := d.Buffers()
	var zero T
	sz := int(unsafe.Sizeof(zero))
	w := c.DataType().(arrow.FixedWidthDataType).BitWidth() / 8
	per := w / sz
	if c.Len() == 0 {
		return nil
	}
	if len(bufs) < 2 || bufs[1] == nil || bufs[1].Len() == 0 {
		// An all-null array may come without a values buffer.
		return make([]T, c.Len()*per)
	}
	b := bufs[1].Bytes()
	all := unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), len(b)/sz)
	return all[d.Offset()*per : (d.Offset()+d.Len())*per]
}

// gbOffsets returns the len+1 offsets of a (large) string or binary array.
func gbOffsets[O int32 | int64](c arrow.Array) []O {
	d := c.Data()
	b := d.Buffers()[1]
	if b == nil || b.Len() == 0 {
		return make([]O, c.Len()+1)
	}
	var zero O
	sz := int(unsafe.Sizeof(zero))
	bs := b.Bytes()
	all := unsafe.Slice((*O)(unsafe.Pointer(unsafe.SliceData(bs))), len(bs)/sz)
	return all[d.Offset() : d.Offset()+d.Len()+1]
}

// gbVarData returns the data buffer of a (large) string or binary array.
func gbVarData(c arrow.Array) []byte {
	b := c.Data().Buffers()[2]
	if b == nil {
		return nil
	}
	return b.Bytes()
}

// gbBitmap returns the validity bitmap and the bit offset of the array's
// first row; the bitmap is nil when the array has no nulls.
func gbBitmap(c arrow.Array) ([]byte, int) {
	if c.NullN() == 0 {
		return nil, 0
	}
	return c.NullBitmapBytes(), c.Data().Offset()
}
