package statestore

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// The key encoding turns the key columns of one row into bytes, so rows can
// be matched in a Go map and ordered with bytes.Compare. It preserves
// order: comparing encodings compares the keys column by column, each in
// its natural order, nulls first. It is part of the on-disk format
// (snapshots are stored in ascending key order; docs/format/state.md):
//
//	column := 0x00                (null)
//	        | 0x01 value          (valid)
//	value  := 0x00 | 0x01         (boolean)
//	        | big-endian bytes, sign bit flipped
//	                              (signed integers, dates, times, timestamps,
//	                               durations, decimals)
//	        | big-endian bytes    (unsigned integers)
//	        | big-endian bits, all flipped if negative, else sign bit set
//	                              (floats: -Inf < … < -0 < +0 < … < +Inf)
//	        | the stored bytes    (fixed-size binary, intervals)
//	        | bytes with 00 written as 00 FF, then 00 01
//	                              (string, binary, large and view forms)
//	        | column column …     (struct: its fields in order)
//
// Every column encoding is self-delimiting, so equal keys, and only equal
// keys, encode to equal bytes (floats by bit pattern: -0 and +0 are
// different keys, as are NaNs with different payloads).

// colEncoder appends the encoding of row i of one column to dst.
type colEncoder func(dst []byte, i int) []byte

// keyEncoder encodes the key columns of a record.
type keyEncoder struct {
	cols []colEncoder
}

// byteOrder says how a fixed-width key type's stored (little-endian) bytes
// become order-preserving ones.
type byteOrder int

const (
	orderRaw      byteOrder = iota // copied as stored
	orderUnsigned                  // reversed
	orderSigned                    // reversed, sign bit flipped
	orderFloat                     // IEEE 754 total-order transform
)

// fixedOrder returns how a fixed-width key type is encoded; ok is false for
// a type that cannot be a key.
func fixedOrder(id arrow.Type) (byteOrder, bool) {
	switch id {
	case arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return orderUnsigned, true
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.DATE32, arrow.DATE64,
		arrow.TIME32, arrow.TIME64, arrow.TIMESTAMP, arrow.DURATION,
		arrow.DECIMAL32, arrow.DECIMAL64, arrow.DECIMAL128, arrow.DECIMAL256:
		return orderSigned, true
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64:
		return orderFloat, true
	case arrow.FIXED_SIZE_BINARY, arrow.INTERVAL_MONTHS, arrow.INTERVAL_DAY_TIME, arrow.INTERVAL_MONTH_DAY_NANO:
		return orderRaw, true
	}
	return 0, false
}

// checkKeyType reports whether dt can be a key column type.
func checkKeyType(dt arrow.DataType) error {
	switch t := dt.(type) {
	case *arrow.BooleanType, *arrow.StringType, *arrow.LargeStringType, *arrow.BinaryType,
		*arrow.LargeBinaryType, *arrow.StringViewType, *arrow.BinaryViewType:
		return nil
	case *arrow.StructType:
		for _, f := range t.Fields() {
			if err := checkKeyType(f.Type); err != nil {
				return fmt.Errorf("struct field %q: %w", f.Name, err)
			}
		}
		return nil
	case arrow.ExtensionType:
		return fmt.Errorf("extension type %s cannot be a key (use its storage type)", dt)
	case *arrow.DictionaryType:
		return fmt.Errorf("type %s cannot be a key (decode dictionaries first)", dt)
	}
	if _, ok := fixedOrder(dt.ID()); ok {
		return nil
	}
	return fmt.Errorf("type %s cannot be a key (keys are booleans, numbers, temporal types, decimals, strings, binaries and structs of them)", dt)
}

// newKeyEncoder returns an encoder of the first n columns of rec.
func newKeyEncoder(rec arrow.RecordBatch, n int) *keyEncoder {
	e := &keyEncoder{cols: make([]colEncoder, n)}
	for c := 0; c < n; c++ {
		e.cols[c] = newColEncoder(rec.Column(c))
	}
	return e
}

// encode appends the encoding of row i's key to dst.
func (e *keyEncoder) encode(dst []byte, i int) []byte {
	for _, c := range e.cols {
		dst = c(dst, i)
	}
	return dst
}

// newColEncoder returns the encoder of one column. The type was accepted by
// checkKeyType (schemas are checked before any record reaches here).
func newColEncoder(arr arrow.Array) colEncoder {
	value := newValueEncoder(arr)
	if arr.NullN() == 0 {
		return func(dst []byte, i int) []byte { return value(append(dst, 1), i) }
	}
	return func(dst []byte, i int) []byte {
		if arr.IsNull(i) {
			return append(dst, 0)
		}
		return value(append(dst, 1), i)
	}
}

func newValueEncoder(arr arrow.Array) colEncoder {
	switch a := arr.(type) {
	case *array.Boolean:
		return func(dst []byte, i int) []byte {
			if a.Value(i) {
				return append(dst, 1)
			}
			return append(dst, 0)
		}
	case *array.String:
		return func(dst []byte, i int) []byte { return appendEscaped(dst, a.Value(i)) }
	case *array.LargeString:
		return func(dst []byte, i int) []byte { return appendEscaped(dst, a.Value(i)) }
	case *array.StringView:
		return func(dst []byte, i int) []byte { return appendEscaped(dst, a.Value(i)) }
	case *array.Binary:
		return func(dst []byte, i int) []byte { return appendEscapedBytes(dst, a.Value(i)) }
	case *array.LargeBinary:
		return func(dst []byte, i int) []byte { return appendEscapedBytes(dst, a.Value(i)) }
	case *array.BinaryView:
		return func(dst []byte, i int) []byte { return appendEscapedBytes(dst, a.Value(i)) }
	case *array.Struct:
		fields := make([]colEncoder, a.NumField())
		for f := range fields {
			fields[f] = newColEncoder(a.Field(f))
		}
		return func(dst []byte, i int) []byte {
			for _, f := range fields {
				dst = f(dst, i)
			}
			return dst
		}
	}
	order, ok := fixedOrder(arr.DataType().ID())
	fw, isFixed := arr.DataType().(arrow.FixedWidthDataType)
	if !ok || !isFixed {
		panic(fmt.Sprintf("statestore: key column type %s passed schema checks but has no encoder", arr.DataType()))
	}
	width := fw.BitWidth() / 8
	data := arr.Data()
	var buf []byte
	if b := data.Buffers()[1]; b != nil {
		buf = b.Bytes()
	}
	off := data.Offset()
	switch {
	case order == orderRaw:
		return func(dst []byte, i int) []byte {
			p := (off + i) * width
			return append(dst, buf[p:p+width]...)
		}
	case width == 8:
		var flip uint64
		if order == orderSigned {
			flip = 1 << 63
		}
		return func(dst []byte, i int) []byte {
			v := binary.LittleEndian.Uint64(buf[(off+i)*8:])
			if order == orderFloat {
				v = floatBits64(v)
			}
			return binary.BigEndian.AppendUint64(dst, v^flip)
		}
	case width == 4:
		var flip uint32
		if order == orderSigned {
			flip = 1 << 31
		}
		return func(dst []byte, i int) []byte {
			v := binary.LittleEndian.Uint32(buf[(off+i)*4:])
			if order == orderFloat {
				v = uint32(floatBits64(uint64(v)<<32) >> 32)
			}
			return binary.BigEndian.AppendUint32(dst, v^flip)
		}
	}
	// Other widths (1, 2, 16, 32 bytes): reverse byte by byte.
	return func(dst []byte, i int) []byte {
		p := (off + i) * width
		n := len(dst)
		for k := width - 1; k >= 0; k-- {
			dst = append(dst, buf[p+k])
		}
		switch order {
		case orderSigned:
			dst[n] ^= 0x80
		case orderFloat: // width 2 (float16)
			if dst[n]&0x80 != 0 {
				for k := n; k < len(dst); k++ {
					dst[k] = ^dst[k]
				}
			} else {
				dst[n] |= 0x80
			}
		}
		return dst
	}
}

// floatBits64 maps IEEE 754 bits (a float in the high bits of v) to bits
// whose unsigned order is the floats' order: negatives are flipped
// entirely, positives get the sign bit set.
func floatBits64(v uint64) uint64 {
	if v&(1<<63) != 0 {
		return ^v
	}
	return v | 1<<63
}

// appendEscaped appends v with each 0x00 written as 00 FF, then the
// terminator 00 01: self-delimiting, and byte order is v's order.
func appendEscaped(dst []byte, v string) []byte {
	for {
		i := strings.IndexByte(v, 0)
		if i < 0 {
			dst = append(dst, v...)
			return append(dst, 0, 1)
		}
		dst = append(dst, v[:i]...)
		dst = append(dst, 0, 0xFF)
		v = v[i+1:]
	}
}

// appendEscapedBytes is appendEscaped for a byte slice.
func appendEscapedBytes(dst, v []byte) []byte {
	for {
		i := bytes.IndexByte(v, 0)
		if i < 0 {
			dst = append(dst, v...)
			return append(dst, 0, 1)
		}
		dst = append(dst, v[:i]...)
		dst = append(dst, 0, 0xFF)
		v = v[i+1:]
	}
}

// formatKey renders row i's key for an error message: (col=value, …).
func formatKey(rec arrow.RecordBatch, n, i int) string {
	var b strings.Builder
	b.WriteByte('(')
	for c := 0; c < n; c++ {
		if c > 0 {
			b.WriteString(", ")
		}
		b.WriteString(rec.Schema().Field(c).Name)
		b.WriteByte('=')
		b.WriteString(rec.Column(c).ValueStr(i))
	}
	b.WriteByte(')')
	return b.String()
}
