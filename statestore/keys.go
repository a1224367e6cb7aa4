package statestore

import (
	"encoding/binary"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// The key encoding turns the key columns of one row into bytes, so rows can
// be matched in a Go map and ordered by bytes.Compare. It is part of the
// on-disk format (snapshots are stored in ascending encoded-key order; see
// docs/format/state.md):
//
//	column := 0x00                    (null)
//	        | 0x01 value              (valid)
//	value  := 1 byte 0/1              (boolean)
//	        | the value's bytes       (fixed width, as in the Arrow buffer: little endian)
//	        | uvarint(len) bytes      (string, binary, large and view forms)
//	        | column column …         (struct: its fields in order)
//
// The encoding is injective for one key schema: equal keys, and only equal
// keys, encode to equal bytes (floats compare by bit pattern, so -0 and +0
// are different keys, as are NaNs with different payloads).

// colEncoder appends the encoding of row i of one column to dst.
type colEncoder func(dst []byte, i int) []byte

// keyEncoder encodes the key columns of a record.
type keyEncoder struct {
	cols []colEncoder
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
	case *arrow.DictionaryType:
		return fmt.Errorf("type %s cannot be a key (decode dictionaries first)", dt)
	case arrow.ExtensionType:
		return fmt.Errorf("extension type %s cannot be a key (use its storage type)", dt)
	case arrow.FixedWidthDataType:
		if t.BitWidth()%8 != 0 || t.BitWidth() == 0 {
			return fmt.Errorf("type %s cannot be a key", dt)
		}
		return nil
	}
	return fmt.Errorf("type %s cannot be a key (keys are booleans, fixed-width types, strings, binaries and structs of them)", dt)
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
		return func(dst []byte, i int) []byte { return appendBytes(dst, a.Value(i)) }
	case *array.LargeString:
		return func(dst []byte, i int) []byte { return appendBytes(dst, a.Value(i)) }
	case *array.StringView:
		return func(dst []byte, i int) []byte { return appendBytes(dst, a.Value(i)) }
	case *array.Binary:
		return func(dst []byte, i int) []byte { return appendBytes(dst, a.Value(i)) }
	case *array.LargeBinary:
		return func(dst []byte, i int) []byte { return appendBytes(dst, a.Value(i)) }
	case *array.BinaryView:
		return func(dst []byte, i int) []byte { return appendBytes(dst, a.Value(i)) }
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
	fw, ok := arr.DataType().(arrow.FixedWidthDataType)
	if !ok {
		panic(fmt.Sprintf("statestore: key column type %s passed schema checks but has no encoder", arr.DataType()))
	}
	width := fw.BitWidth() / 8
	data := arr.Data()
	var buf []byte
	if b := data.Buffers()[1]; b != nil {
		buf = b.Bytes()
	}
	off := data.Offset()
	return func(dst []byte, i int) []byte {
		p := (off + i) * width
		return append(dst, buf[p:p+width]...)
	}
}

func appendBytes[T string | []byte](dst []byte, v T) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
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
