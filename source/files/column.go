package files

import (
	"fmt"
	"math"
	"strconv"
	"time"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// kind is how a declared column is parsed and built.
type kind uint8

const (
	kindInt kind = iota + 1
	kindUint
	kindFloat
	kindString
	kindBool
	kindTimestamp
	kindDate
)

// column is one declared field and how to parse it.
type column struct {
	name     string
	nullable bool
	kind     kind
	bits     int            // int, uint, float: 8..64
	unit     arrow.TimeUnit // timestamp
	what     string         // "an int64", "a timestamp", … for messages
}

// columnsOf checks that every field of schema has a type the source can
// parse and returns the columns.
func columnsOf(schema *arrow.Schema) ([]column, error) {
	cols := make([]column, schema.NumFields())
	seen := make(map[string]bool, len(cols))
	for i, f := range schema.Fields() {
		c := column{name: f.Name, nullable: f.Nullable}
		switch t := f.Type.(type) {
		case *arrow.Int8Type, *arrow.Int16Type, *arrow.Int32Type, *arrow.Int64Type:
			c.kind, c.bits = kindInt, t.(arrow.FixedWidthDataType).BitWidth()
		case *arrow.Uint8Type, *arrow.Uint16Type, *arrow.Uint32Type, *arrow.Uint64Type:
			c.kind, c.bits = kindUint, t.(arrow.FixedWidthDataType).BitWidth()
		case *arrow.Float32Type, *arrow.Float64Type:
			c.kind, c.bits = kindFloat, t.(arrow.FixedWidthDataType).BitWidth()
		case *arrow.StringType:
			c.kind = kindString
		case *arrow.BooleanType:
			c.kind = kindBool
		case *arrow.TimestampType:
			if t.TimeZone != "" && t.TimeZone != "UTC" && t.TimeZone != "Z" {
				return nil, fmt.Errorf("%w: column %s: timestamp zone %q (only UTC or none)", ErrBadOption, f.Name, t.TimeZone)
			}
			c.kind, c.unit = kindTimestamp, t.Unit
		case *arrow.Date32Type:
			c.kind = kindDate
		default:
			return nil, fmt.Errorf("%w: column %s: type %s is not supported (int*, uint*, float32/64, string, bool, timestamp, date32)", ErrBadOption, f.Name, f.Type)
		}
		if seen[f.Name] {
			return nil, fmt.Errorf("%w: column %s declared twice", ErrBadOption, f.Name)
		}
		seen[f.Name] = true
		switch c.kind {
		case kindString:
			c.what = "a string"
		case kindTimestamp:
			c.what = "a timestamp"
		case kindDate:
			c.what = "a date"
		default:
			c.what = article(f.Type.String())
		}
		cols[i] = c
	}
	return cols, nil
}

func article(typ string) string {
	switch typ[0] {
	case 'a', 'e', 'i', 'o', 'u':
		return "an " + typ
	}
	return "a " + typ
}

// cell is one parsed value of a row being assembled; a row is appended to
// the builders only when all its cells parsed.
type cell struct {
	set  bool
	null bool
	i    int64   // int, timestamp, date, bool (0/1)
	u    uint64  // uint
	f    float64 // float
	s    []byte  // string: a view of the input or of buf
	buf  []byte  // scratch for unescaped strings
}

// bstr views b as a string without copying; the string must not outlive b's
// contents and must not be kept.
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// parseText parses the text form of a value (a CSV field, the contents of
// a JSON string) into c. display is how the value appears in a message.
func (col *column) parseText(c *cell, text []byte, layout string, display func() string) *badValue {
	c.set, c.null = true, false
	switch col.kind {
	case kindString:
		c.s = text
		return nil
	case kindInt:
		v, err := strconv.ParseInt(bstr(text), 10, col.bits)
		if err != nil {
			return col.notA(display())
		}
		c.i = v
	case kindUint:
		v, err := strconv.ParseUint(bstr(text), 10, col.bits)
		if err != nil {
			return col.notA(display())
		}
		c.u = v
	case kindFloat:
		v, err := strconv.ParseFloat(bstr(text), col.bits)
		if err != nil && !isRangeErr(err) {
			return col.notA(display())
		}
		c.f = v
	case kindBool:
		switch bstr(text) {
		case "true", "TRUE", "True", "1":
			c.i = 1
		case "false", "FALSE", "False", "0":
			c.i = 0
		default:
			return col.notA(display())
		}
	case kindTimestamp:
		t, err := time.Parse(layout, bstr(text))
		if err != nil {
			return &badValue{col.name, fmt.Sprintf("%s is not a timestamp in layout %q", display(), layout)}
		}
		v, ok := timeToUnit(t, col.unit)
		if !ok {
			return &badValue{col.name, fmt.Sprintf("%s is out of range for a %s timestamp", display(), col.unit)}
		}
		c.i = v
	case kindDate:
		t, err := time.Parse(time.DateOnly, bstr(text))
		if err != nil {
			return &badValue{col.name, fmt.Sprintf("%s is not a date (YYYY-MM-DD)", display())}
		}
		c.i = int64(arrow.Date32FromTime(t))
	}
	return nil
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func (col *column) notA(display string) *badValue {
	return &badValue{col.name, fmt.Sprintf("%s is not %s", display, col.what)}
}

// timeToUnit converts t to a count of unit since the Unix epoch.
func timeToUnit(t time.Time, unit arrow.TimeUnit) (int64, bool) {
	switch unit {
	case arrow.Second:
		return t.Unix(), true
	case arrow.Millisecond:
		return t.UnixMilli(), true
	case arrow.Microsecond:
		return t.UnixMicro(), true
	default:
		// UnixNano is undefined outside about 1678..2262.
		if t.Year() < 1678 || t.Year() > 2261 {
			return 0, false
		}
		return t.UnixNano(), true
	}
}

// convertUnit converts v from unit from to unit to; ok is false on
// overflow. Converting to a coarser unit truncates toward negative infinity.
func convertUnit(v int64, from, to arrow.TimeUnit) (int64, bool) {
	if from == to {
		return v, true
	}
	fn, tn := int64(from.Multiplier()), int64(to.Multiplier()) // nanoseconds per unit
	if fn > tn {
		m := fn / tn
		if v > math.MaxInt64/m || v < math.MinInt64/m {
			return 0, false
		}
		return v * m, true
	}
	d := tn / fn
	q := v / d
	if v%d != 0 && v < 0 {
		q--
	}
	return q, true
}

// builders appends rows of cells to one Arrow builder per column.
type builders struct {
	schema *arrow.Schema
	cols   []column
	bs     []array.Builder
	rows   int
}

func newBuilders(mem memory.Allocator, schema *arrow.Schema, cols []column) *builders {
	b := &builders{schema: schema, cols: cols, bs: make([]array.Builder, len(cols))}
	for i, f := range schema.Fields() {
		b.bs[i] = array.NewBuilder(mem, f.Type)
	}
	return b
}

func (b *builders) release() {
	for _, x := range b.bs {
		x.Release()
	}
}

// appendRow appends one row whose cells all parsed.
func (b *builders) appendRow(cells []cell) {
	for i := range cells {
		c := &cells[i]
		bl := b.bs[i]
		if c.null {
			bl.AppendNull()
			continue
		}
		switch x := bl.(type) {
		case *array.Int64Builder:
			x.Append(c.i)
		case *array.Int32Builder:
			x.Append(int32(c.i))
		case *array.Int16Builder:
			x.Append(int16(c.i))
		case *array.Int8Builder:
			x.Append(int8(c.i))
		case *array.Uint64Builder:
			x.Append(c.u)
		case *array.Uint32Builder:
			x.Append(uint32(c.u))
		case *array.Uint16Builder:
			x.Append(uint16(c.u))
		case *array.Uint8Builder:
			x.Append(uint8(c.u))
		case *array.Float64Builder:
			x.Append(c.f)
		case *array.Float32Builder:
			x.Append(float32(c.f))
		case *array.StringBuilder:
			x.BinaryBuilder.Append(c.s)
		case *array.BooleanBuilder:
			x.Append(c.i != 0)
		case *array.TimestampBuilder:
			x.Append(arrow.Timestamp(c.i))
		case *array.Date32Builder:
			x.Append(arrow.Date32(c.i))
		default:
			panic(fmt.Sprintf("files: no append for builder %T", bl))
		}
	}
	b.rows++
}

// flush emits the rows built so far as one record, if there are any.
func (b *builders) flush(emit func(arrow.RecordBatch) error) error {
	if b.rows == 0 {
		return nil
	}
	cols := make([]arrow.Array, len(b.bs))
	for i, x := range b.bs {
		cols[i] = x.NewArray()
	}
	rec := array.NewRecordBatch(b.schema, cols, int64(b.rows))
	for _, c := range cols {
		c.Release()
	}
	b.rows = 0
	defer rec.Release()
	return emit(rec)
}
