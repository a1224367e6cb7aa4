package filesink

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/compress"
	"github.com/parquet-go/parquet-go/format"
)

// fileWriter builds one Parquet file in memory, column by column straight
// from Arrow arrays: each column's values of a chunk of rows go to that
// column's writer in one call, with no row objects in between.
type fileWriter struct {
	l    *layout
	buf  bytes.Buffer
	w    *parquet.GenericWriter[any]
	cols []*parquet.ColumnWriter
	rows int64
	vals []parquet.Value
}

// newFileWriter starts a file compressed with codec, which must be shared
// by all files of a sink: parquet-go's codecs pool their encoders per codec
// value, and a fresh zstd encoder per file costs more than the file.
func newFileWriter(l *layout, codec compress.Codec) *fileWriter {
	fw := &fileWriter{l: l}
	fw.w = parquet.NewGenericWriter[any](&fw.buf, l.schema,
		parquet.Compression(codec),
		parquet.CreatedBy("onceflow filesink", "", ""),
	)
	fw.cols = fw.w.ColumnWriters()
	return fw
}

// size estimates the file's size so far.
func (fw *fileWriter) size() int64 { return fw.w.Size() }

// write appends rows idx of rec.
func (fw *fileWriter) write(rec arrow.RecordBatch, ri int, idx []int32) error {
	if cap(fw.vals) < len(idx) {
		fw.vals = make([]parquet.Value, len(idx))
	}
	vals := fw.vals[:len(idx)]
	for k, c := range fw.l.data {
		if err := fw.fill(vals, k, c, rec.Column(c.arrowIdx), idx); err != nil {
			return fmt.Errorf("column %q, record %d: %w", c.name, ri, err)
		}
		if c.nullable {
			// Definition level 1 marks a present value of an optional
			// column; a required column's values need no levels (the
			// plain column buffers read only the value).
			for j := range vals {
				if !vals[j].IsNull() {
					vals[j] = vals[j].Level(0, 1, k)
				}
			}
		}
		if _, err := fw.cols[k].WriteRowValues(vals); err != nil {
			return fmt.Errorf("encode column %q: %w", c.name, err)
		}
	}
	fw.rows += int64(len(idx))
	return nil
}

// fill converts rows idx of column a into vals for parquet column k.
func (fw *fileWriter) fill(vals []parquet.Value, k int, c dataCol, a arrow.Array, idx []int32) error {
	nulls := a.NullN() > 0
	if nulls && !c.nullable {
		for _, i := range idx {
			if a.IsNull(int(i)) {
				return fmt.Errorf("%w: null at row %d in a non-nullable column", ErrBadData, i)
			}
		}
	}
	null := parquet.NullValue().Level(0, 0, k)
	var set func(j int, i int) error
	switch col := a.(type) {
	case *array.Boolean:
		set = func(j, i int) error { vals[j] = parquet.BooleanValue(col.Value(i)); return nil }
	case *array.Int8:
		v := col.Int8Values()
		set = func(j, i int) error { vals[j] = parquet.Int32Value(int32(v[i])); return nil }
	case *array.Int16:
		v := col.Int16Values()
		set = func(j, i int) error { vals[j] = parquet.Int32Value(int32(v[i])); return nil }
	case *array.Int32:
		v := col.Int32Values()
		if !nulls {
			for j, i := range idx {
				vals[j] = parquet.Int32Value(v[i])
			}
			return nil
		}
		set = func(j, i int) error { vals[j] = parquet.Int32Value(v[i]); return nil }
	case *array.Int64:
		v := col.Int64Values()
		if !nulls {
			for j, i := range idx {
				vals[j] = parquet.Int64Value(v[i])
			}
			return nil
		}
		set = func(j, i int) error { vals[j] = parquet.Int64Value(v[i]); return nil }
	case *array.Float32:
		v := col.Float32Values()
		set = func(j, i int) error { vals[j] = parquet.FloatValue(v[i]); return nil }
	case *array.Float64:
		v := col.Float64Values()
		if !nulls {
			for j, i := range idx {
				vals[j] = parquet.DoubleValue(v[i])
			}
			return nil
		}
		set = func(j, i int) error { vals[j] = parquet.DoubleValue(v[i]); return nil }
	case *array.String:
		if !nulls {
			for j, i := range idx {
				vals[j] = parquet.ByteArrayValue(strBytes(col.Value(int(i))))
			}
			return nil
		}
		set = func(j, i int) error {
			vals[j] = parquet.ByteArrayValue(strBytes(col.Value(i)))
			return nil
		}
	case *array.LargeString:
		set = func(j, i int) error {
			vals[j] = parquet.ByteArrayValue(strBytes(col.Value(i)))
			return nil
		}
	case *array.Binary:
		set = func(j, i int) error { vals[j] = parquet.ByteArrayValue(col.Value(i)); return nil }
	case *array.LargeBinary:
		set = func(j, i int) error { vals[j] = parquet.ByteArrayValue(col.Value(i)); return nil }
	case *array.Date32:
		v := col.Date32Values()
		set = func(j, i int) error { vals[j] = parquet.Int32Value(int32(v[i])); return nil }
	case *array.Timestamp:
		v := col.TimestampValues()
		unit := col.DataType().(*arrow.TimestampType).Unit
		if unit == arrow.Microsecond && !nulls {
			for j, i := range idx {
				vals[j] = parquet.Int64Value(int64(v[i]))
			}
			return nil
		}
		set = func(j, i int) error {
			us, err := toMicros(int64(v[i]), unit)
			if err != nil {
				return fmt.Errorf("row %d: %w", i, err)
			}
			vals[j] = parquet.Int64Value(us)
			return nil
		}
	case *array.Decimal128:
		v := col.Values()
		if col.DataType().(*arrow.Decimal128Type).Precision <= 9 {
			set = func(j, i int) error {
				vals[j] = parquet.Int32Value(int32(int64(v[i].LowBits())))
				return nil
			}
		} else {
			set = func(j, i int) error {
				vals[j] = parquet.Int64Value(int64(v[i].LowBits()))
				return nil
			}
		}
	default:
		return fmt.Errorf("%w: %s", ErrUnsupportedType, a.DataType())
	}
	for j, i := range idx {
		if nulls && a.IsNull(int(i)) {
			vals[j] = null
			continue
		}
		if err := set(j, int(i)); err != nil {
			return err
		}
	}
	return nil
}

// strBytes views s as bytes without copying; parquet-go copies the bytes
// into its column buffer before the call returns.
func strBytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// copyFrom appends every row group of a committed file (same schema),
// copying column chunks verbatim where parquet-go can.
func (fw *fileWriter) copyFrom(f *parquet.File) error {
	for _, rg := range f.RowGroups() {
		n, err := fw.w.WriteRowGroup(rg)
		if err != nil {
			return err
		}
		fw.rows += n
	}
	return nil
}

// finish writes the footer and returns the file's bytes and the statistics
// of its data columns from the footer.
func (fw *fileWriter) finish() ([]byte, []ColumnStats, error) {
	if err := fw.w.Close(); err != nil {
		return nil, nil, fmt.Errorf("close parquet writer: %w", err)
	}
	md := fw.w.File().Metadata()
	stats := footerStats(fw.l, md)
	return fw.buf.Bytes(), stats, nil
}

// footerStats merges the row groups' column statistics of a file into one
// ColumnStats per data column.
func footerStats(l *layout, md *format.FileMetaData) []ColumnStats {
	out := make([]ColumnStats, len(l.data))
	for k, c := range l.data {
		out[k].Column = c.name
		var minV, maxV []byte
		known := true
		for _, rg := range md.RowGroups {
			if k >= len(rg.Columns) {
				known = false
				break
			}
			st := rg.Columns[k].MetaData.Statistics
			out[k].NullCount += st.NullCount
			if rg.Columns[k].MetaData.NumValues == st.NullCount {
				continue // all null: no bounds
			}
			if st.MinValue == nil || st.MaxValue == nil {
				known = false
				continue
			}
			if minV == nil || compareStat(c.typ, st.MinValue, minV) < 0 {
				minV = st.MinValue
			}
			if maxV == nil || compareStat(c.typ, st.MaxValue, maxV) > 0 {
				maxV = st.MaxValue
			}
		}
		if known && minV != nil {
			out[k].Min = statJSON(c.typ, minV)
			out[k].Max = statJSON(c.typ, maxV)
			if out[k].Min == nil || out[k].Max == nil {
				out[k].Min, out[k].Max = nil, nil
			}
		}
	}
	return out
}

// maxStringStat is the longest string bound the log records; longer bounds
// are left out rather than truncated.
const maxStringStat = 64

// statJSON renders a plain-encoded Parquet bound as the log's JSON value,
// or nil when the log does not record bounds of that type.
func statJSON(t arrow.DataType, b []byte) json.RawMessage {
	var s string
	switch tt := t.(type) {
	case *arrow.BooleanType:
		if len(b) < 1 {
			return nil
		}
		s = strconv.FormatBool(b[0] != 0)
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type:
		if len(b) != 4 {
			return nil
		}
		s = strconv.FormatInt(int64(int32(binary.LittleEndian.Uint32(b))), 10)
	case *arrow.Int64Type:
		if len(b) != 8 {
			return nil
		}
		v := int64(binary.LittleEndian.Uint64(b))
		s = strconv.FormatInt(v, 10)
		if v > 1<<53 || v < -(1<<53) {
			s = strconv.Quote(s)
		}
	case *arrow.Float32Type:
		if len(b) != 4 {
			return nil
		}
		f := float64(math.Float32frombits(binary.LittleEndian.Uint32(b)))
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		s = strconv.FormatFloat(f, 'g', -1, 32)
	case *arrow.Float64Type:
		if len(b) != 8 {
			return nil
		}
		f := math.Float64frombits(binary.LittleEndian.Uint64(b))
		if math.IsNaN(f) || math.IsInf(f, 0) {
			return nil
		}
		s = strconv.FormatFloat(f, 'g', -1, 64)
	case *arrow.StringType, *arrow.LargeStringType:
		if len(b) > maxStringStat {
			return nil
		}
		q, err := json.Marshal(string(b))
		if err != nil {
			return nil
		}
		return q
	case *arrow.Date32Type:
		if len(b) != 4 {
			return nil
		}
		s = strconv.Quote(formatDate(int32(binary.LittleEndian.Uint32(b))))
	case *arrow.TimestampType:
		if len(b) != 8 {
			return nil
		}
		us := int64(binary.LittleEndian.Uint64(b))
		s = strconv.Quote(time.UnixMicro(us).UTC().Format(time.RFC3339Nano))
	case *arrow.Decimal128Type:
		n, ok := decimalFromStat(tt, b)
		if !ok {
			return nil
		}
		s = strconv.Quote(n.ToString(tt.Scale))
	default:
		return nil
	}
	return json.RawMessage(s)
}

func decimalFromStat(t *arrow.Decimal128Type, b []byte) (decimal128.Num, bool) {
	switch {
	case t.Precision <= 9 && len(b) == 4:
		return decimal128.FromI64(int64(int32(binary.LittleEndian.Uint32(b)))), true
	case t.Precision <= 18 && len(b) == 8:
		return decimal128.FromI64(int64(binary.LittleEndian.Uint64(b))), true
	case len(b) == 16:
		return decimal128.New(int64(binary.BigEndian.Uint64(b[:8])), binary.BigEndian.Uint64(b[8:])), true
	}
	return decimal128.Num{}, false
}

// compareStat orders two plain-encoded bounds of type t.
func compareStat(t arrow.DataType, a, b []byte) int {
	switch tt := t.(type) {
	case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Date32Type:
		return cmpOrd(int32(binary.LittleEndian.Uint32(a)), int32(binary.LittleEndian.Uint32(b)))
	case *arrow.Int64Type, *arrow.TimestampType:
		return cmpOrd(int64(binary.LittleEndian.Uint64(a)), int64(binary.LittleEndian.Uint64(b)))
	case *arrow.Float32Type:
		return cmpOrd(math.Float32frombits(binary.LittleEndian.Uint32(a)), math.Float32frombits(binary.LittleEndian.Uint32(b)))
	case *arrow.Float64Type:
		return cmpOrd(math.Float64frombits(binary.LittleEndian.Uint64(a)), math.Float64frombits(binary.LittleEndian.Uint64(b)))
	case *arrow.Decimal128Type:
		x, _ := decimalFromStat(tt, a)
		y, _ := decimalFromStat(tt, b)
		return x.Cmp(y)
	}
	return bytes.Compare(a, b)
}

func cmpOrd[T int32 | int64 | float32 | float64](a, b T) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
