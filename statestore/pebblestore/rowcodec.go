package pebblestore

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// The row encoding of a pebble value: every column of the state row (key
// columns, then value columns), one after the other, each as
//
//	column := 0x00 body | 0x01 body     (null, valid; a null's body is zeros)
//	body   := 1 byte                    (boolean)
//	        | the stored bytes          (fixed width: little endian, as Arrow)
//	        | uvarint length, bytes     (string, binary, large forms)
//	        | column column …           (struct: each field)
//	        | uvarint count, column …   (list, large list: each element;
//	                                     nothing for a null list)
//
// It lives only in the working copy and in uploaded SSTs read by the same
// build's restore; docs/format/pebble.md describes it.

// errShortRow reports a value that ends inside a column.
var errShortRow = errors.New("row ends inside a column")

// checkValueType reports whether the row encoding carries dt.
func checkValueType(dt arrow.DataType) error {
	switch t := dt.(type) {
	case *arrow.BooleanType, *arrow.StringType, *arrow.LargeStringType, *arrow.BinaryType, *arrow.LargeBinaryType:
		return nil
	case *arrow.StructType:
		for _, f := range t.Fields() {
			if err := checkValueType(f.Type); err != nil {
				return fmt.Errorf("struct field %q: %w", f.Name, err)
			}
		}
		return nil
	case *arrow.ListType:
		return checkValueType(t.Elem())
	case *arrow.LargeListType:
		return checkValueType(t.Elem())
	case arrow.FixedWidthDataType:
		if t.BitWidth() >= 8 && t.BitWidth()%8 == 0 {
			return nil
		}
	}
	return fmt.Errorf("type %s is not kept by the pebble backend (it keeps booleans, fixed-width types, strings, binaries, and structs and lists of them); use the in-memory backend", dt)
}

// colEnc appends row i of one column.
type colEnc func(dst []byte, i int) []byte

func newColEnc(arr arrow.Array) colEnc {
	body := newBodyEnc(arr)
	return func(dst []byte, i int) []byte {
		if arr.IsNull(i) {
			return body(append(dst, 0), i)
		}
		return body(append(dst, 1), i)
	}
}

func newBodyEnc(arr arrow.Array) colEnc {
	switch a := arr.(type) {
	case *array.Boolean:
		return func(dst []byte, i int) []byte {
			if a.IsValid(i) && a.Value(i) {
				return append(dst, 1)
			}
			return append(dst, 0)
		}
	case *array.String:
		return func(dst []byte, i int) []byte {
			v := a.Value(i)
			return append(binary.AppendUvarint(dst, uint64(len(v))), v...)
		}
	case *array.LargeString:
		return func(dst []byte, i int) []byte {
			v := a.Value(i)
			return append(binary.AppendUvarint(dst, uint64(len(v))), v...)
		}
	case *array.Binary:
		return func(dst []byte, i int) []byte {
			v := a.Value(i)
			return append(binary.AppendUvarint(dst, uint64(len(v))), v...)
		}
	case *array.LargeBinary:
		return func(dst []byte, i int) []byte {
			v := a.Value(i)
			return append(binary.AppendUvarint(dst, uint64(len(v))), v...)
		}
	case *array.Struct:
		fields := make([]colEnc, a.NumField())
		for f := range fields {
			fields[f] = newColEnc(a.Field(f))
		}
		return func(dst []byte, i int) []byte {
			for _, f := range fields {
				dst = f(dst, i)
			}
			return dst
		}
	case array.ListLike:
		elem := newColEnc(a.ListValues())
		return func(dst []byte, i int) []byte {
			if a.IsNull(i) {
				return dst // the column's 0x00 says it all
			}
			start, end := a.ValueOffsets(i)
			dst = binary.AppendUvarint(dst, uint64(end-start))
			for j := start; j < end; j++ {
				dst = elem(dst, int(j))
			}
			return dst
		}
	}
	w := arr.DataType().(arrow.FixedWidthDataType).BitWidth() / 8
	data := arr.Data()
	var buf []byte
	if b := data.Buffers()[1]; b != nil {
		buf = b.Bytes()
	}
	off := data.Offset()
	return func(dst []byte, i int) []byte {
		p := (off + i) * w
		return append(dst, buf[p:p+w]...)
	}
}

// rowEncoder encodes the rows of records of one schema.
type rowEncoder struct{ cols []colEnc }

func newRowEncoder(rec arrow.RecordBatch) *rowEncoder {
	e := &rowEncoder{cols: make([]colEnc, rec.NumCols())}
	for c := range e.cols {
		e.cols[c] = newColEnc(rec.Column(c))
	}
	return e
}

func (e *rowEncoder) encode(dst []byte, i int) []byte {
	for _, c := range e.cols {
		dst = c(dst, i)
	}
	return dst
}

// colDec decodes one column's values, row after row, into Arrow buffers.
type colDec interface {
	decode(b []byte) ([]byte, error)
	finish() arrow.ArrayData
}

// validity collects a column's null bitmap.
type validity struct {
	bits  []byte
	n     int
	nulls int
}

func (v *validity) add(valid bool) {
	if v.n%8 == 0 {
		v.bits = append(v.bits, 0)
	}
	if valid {
		bitutil.SetBit(v.bits, v.n)
	} else {
		v.nulls++
	}
	v.n++
}

func (v *validity) buffer() *memory.Buffer {
	if v.nulls == 0 {
		return nil
	}
	return memory.NewBufferBytes(v.bits)
}

func newColDec(dt arrow.DataType) colDec {
	switch t := dt.(type) {
	case *arrow.BooleanType:
		return &boolDec{dt: dt}
	case *arrow.StringType, *arrow.BinaryType:
		return &binDec{dt: dt, offs32: []int32{0}}
	case *arrow.LargeStringType, *arrow.LargeBinaryType:
		return &binDec{dt: dt, large: true, offs64: []int64{0}}
	case *arrow.StructType:
		d := &structDec{dt: dt}
		for _, f := range t.Fields() {
			d.fields = append(d.fields, newColDec(f.Type))
		}
		return d
	case *arrow.ListType:
		return &listDec{dt: dt, elem: newColDec(t.Elem()), offs32: []int32{0}}
	case *arrow.LargeListType:
		return &listDec{dt: dt, large: true, elem: newColDec(t.Elem()), offs64: []int64{0}}
	}
	return &fixedDec{dt: dt, w: dt.(arrow.FixedWidthDataType).BitWidth() / 8}
}

type fixedDec struct {
	dt   arrow.DataType
	w    int
	v    validity
	data []byte
}

func (d *fixedDec) decode(b []byte) ([]byte, error) {
	if len(b) < 1+d.w {
		return nil, errShortRow
	}
	d.v.add(b[0] == 1)
	d.data = append(d.data, b[1:1+d.w]...)
	return b[1+d.w:], nil
}

func (d *fixedDec) finish() arrow.ArrayData {
	return array.NewData(d.dt, d.v.n, []*memory.Buffer{d.v.buffer(), memory.NewBufferBytes(d.data)}, nil, d.v.nulls, 0)
}

type boolDec struct {
	dt arrow.DataType
	v  validity
	d  validity // the values, as a bitmap
}

func (d *boolDec) decode(b []byte) ([]byte, error) {
	if len(b) < 2 {
		return nil, errShortRow
	}
	d.v.add(b[0] == 1)
	d.d.add(b[1] == 1)
	return b[2:], nil
}

func (d *boolDec) finish() arrow.ArrayData {
	return array.NewData(d.dt, d.v.n, []*memory.Buffer{d.v.buffer(), memory.NewBufferBytes(d.d.bits)}, nil, d.v.nulls, 0)
}

type binDec struct {
	dt     arrow.DataType
	large  bool
	v      validity
	offs32 []int32
	offs64 []int64
	data   []byte
}

func (d *binDec) decode(b []byte) ([]byte, error) {
	if len(b) < 2 {
		return nil, errShortRow
	}
	d.v.add(b[0] == 1)
	n, k := binary.Uvarint(b[1:])
	if k <= 0 || uint64(len(b)-1-k) < n {
		return nil, errShortRow
	}
	b = b[1+k:]
	d.data = append(d.data, b[:n]...)
	if d.large {
		d.offs64 = append(d.offs64, int64(len(d.data)))
	} else {
		if len(d.data) > 1<<31-1 {
			return nil, fmt.Errorf("%s column exceeds 2 GiB in one record", d.dt)
		}
		d.offs32 = append(d.offs32, int32(len(d.data)))
	}
	return b[n:], nil
}

func (d *binDec) finish() arrow.ArrayData {
	var offs *memory.Buffer
	if d.large {
		offs = memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(d.offs64))
	} else {
		offs = memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(d.offs32))
	}
	return array.NewData(d.dt, d.v.n, []*memory.Buffer{d.v.buffer(), offs, memory.NewBufferBytes(d.data)}, nil, d.v.nulls, 0)
}

type structDec struct {
	dt     arrow.DataType
	v      validity
	fields []colDec
}

func (d *structDec) decode(b []byte) ([]byte, error) {
	if len(b) < 1 {
		return nil, errShortRow
	}
	d.v.add(b[0] == 1)
	b = b[1:]
	var err error
	for _, f := range d.fields {
		if b, err = f.decode(b); err != nil {
			return nil, err
		}
	}
	return b, nil
}

func (d *structDec) finish() arrow.ArrayData {
	children := make([]arrow.ArrayData, len(d.fields))
	for i, f := range d.fields {
		children[i] = f.finish()
	}
	out := array.NewData(d.dt, d.v.n, []*memory.Buffer{d.v.buffer()}, children, d.v.nulls, 0)
	for _, c := range children {
		c.Release()
	}
	return out
}

type listDec struct {
	dt     arrow.DataType
	large  bool
	v      validity
	elem   colDec
	offs32 []int32
	offs64 []int64
	n      int64
}

func (d *listDec) decode(b []byte) ([]byte, error) {
	if len(b) < 1 {
		return nil, errShortRow
	}
	valid := b[0] == 1
	d.v.add(valid)
	b = b[1:]
	if valid {
		cnt, k := binary.Uvarint(b)
		if k <= 0 {
			return nil, errShortRow
		}
		b = b[k:]
		var err error
		for range cnt {
			if b, err = d.elem.decode(b); err != nil {
				return nil, err
			}
		}
		d.n += int64(cnt)
	}
	if d.large {
		d.offs64 = append(d.offs64, d.n)
	} else {
		d.offs32 = append(d.offs32, int32(d.n))
	}
	return b, nil
}

func (d *listDec) finish() arrow.ArrayData {
	var offs *memory.Buffer
	if d.large {
		offs = memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(d.offs64))
	} else {
		offs = memory.NewBufferBytes(arrow.Int32Traits.CastToBytes(d.offs32))
	}
	child := d.elem.finish()
	defer child.Release()
	return array.NewData(d.dt, d.v.n, []*memory.Buffer{d.v.buffer(), offs}, []arrow.ArrayData{child}, d.v.nulls, 0)
}

// rowDecoder builds records of a schema from encoded rows.
type rowDecoder struct {
	schema *arrow.Schema
	cols   []colDec
	n      int
}

func newRowDecoder(schema *arrow.Schema) *rowDecoder {
	d := &rowDecoder{schema: schema}
	d.reset()
	return d
}

func (d *rowDecoder) reset() {
	d.cols = d.cols[:0]
	for _, f := range d.schema.Fields() {
		d.cols = append(d.cols, newColDec(f.Type))
	}
	d.n = 0
}

// add decodes one row.
func (d *rowDecoder) add(b []byte) error {
	var err error
	for c, col := range d.cols {
		if b, err = col.decode(b); err != nil {
			return fmt.Errorf("column %q: %w", d.schema.Field(c).Name, err)
		}
	}
	if len(b) != 0 {
		return fmt.Errorf("%d bytes after the last column", len(b))
	}
	d.n++
	return nil
}

// record returns the rows added since the last reset, and resets.
func (d *rowDecoder) record() arrow.RecordBatch {
	cols := make([]arrow.Array, len(d.cols))
	for c, col := range d.cols {
		data := col.finish()
		cols[c] = array.MakeFromData(data)
		data.Release()
	}
	rec := array.NewRecordBatch(d.schema, cols, int64(d.n))
	for _, c := range cols {
		c.Release()
	}
	d.reset()
	return rec
}
