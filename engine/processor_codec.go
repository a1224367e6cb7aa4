package engine

import (
	"encoding/binary"
	"fmt"
	"math"
	"reflect"
	"strings"
	"time"
	"unicode"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// The processor's values travel in three forms: Go values of the user's
// types, "plain" values (nil, bool, int64, uint64, float64, string, []byte,
// time.Time) and Arrow columns. A codec maps a Go type to its plain fields
// and Arrow fields; state is stored as plain rows in the binary encoding of
// docs/format/processor.md.

// codec describes a Go type as a row of fields: a struct's exported fields
// in order (renamed by an `onceflow:"name"` tag, skipped with "-"), or one
// field named "value" for any other supported type.
type codec struct {
	typ    reflect.Type
	scalar bool
	fields []codecField
}

type codecField struct {
	name     string
	index    int // struct field index (scalar: unused)
	typ      reflect.Type
	arrow    arrow.DataType
	nullable bool
}

var timeType = reflect.TypeFor[time.Time]()

// newCodec derives the codec of t.
func newCodec(t reflect.Type) (*codec, error) {
	if t == nil {
		return nil, fmt.Errorf("no type")
	}
	if t.Kind() == reflect.Struct && t != timeType {
		c := &codec{typ: t}
		seen := map[string]bool{}
		for i := range t.NumField() {
			sf := t.Field(i)
			if !sf.IsExported() {
				continue
			}
			name := sf.Name
			if tag, ok := sf.Tag.Lookup("onceflow"); ok {
				if tag == "-" {
					continue
				}
				name = tag
			}
			dt, nullable, err := arrowTypeOf(sf.Type)
			if err != nil {
				return nil, fmt.Errorf("%s field %s: %w", t, sf.Name, err)
			}
			if seen[name] {
				return nil, fmt.Errorf("%s: two fields named %q", t, name)
			}
			seen[name] = true
			c.fields = append(c.fields, codecField{name: name, index: i, typ: sf.Type, arrow: dt, nullable: nullable})
		}
		if len(c.fields) == 0 {
			return nil, fmt.Errorf("%s has no exported field", t)
		}
		return c, nil
	}
	dt, nullable, err := arrowTypeOf(t)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	return &codec{typ: t, scalar: true, fields: []codecField{{name: "value", typ: t, arrow: dt, nullable: nullable}}}, nil
}

// arrowTypeOf maps a Go field type to its Arrow type; a pointer is a
// nullable field.
func arrowTypeOf(t reflect.Type) (arrow.DataType, bool, error) {
	nullable := false
	if t.Kind() == reflect.Pointer {
		nullable, t = true, t.Elem()
	}
	if t == timeType {
		return arrow.FixedWidthTypes.Timestamp_ms, nullable, nil
	}
	switch t.Kind() {
	case reflect.Bool:
		return arrow.FixedWidthTypes.Boolean, nullable, nil
	case reflect.Int8:
		return arrow.PrimitiveTypes.Int8, nullable, nil
	case reflect.Int16:
		return arrow.PrimitiveTypes.Int16, nullable, nil
	case reflect.Int32:
		return arrow.PrimitiveTypes.Int32, nullable, nil
	case reflect.Int, reflect.Int64:
		return arrow.PrimitiveTypes.Int64, nullable, nil
	case reflect.Uint8:
		return arrow.PrimitiveTypes.Uint8, nullable, nil
	case reflect.Uint16:
		return arrow.PrimitiveTypes.Uint16, nullable, nil
	case reflect.Uint32:
		return arrow.PrimitiveTypes.Uint32, nullable, nil
	case reflect.Uint, reflect.Uint64:
		return arrow.PrimitiveTypes.Uint64, nullable, nil
	case reflect.Float32:
		return arrow.PrimitiveTypes.Float32, nullable, nil
	case reflect.Float64:
		return arrow.PrimitiveTypes.Float64, nullable, nil
	case reflect.String:
		return arrow.BinaryTypes.String, nullable, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return arrow.BinaryTypes.Binary, true, nil
		}
	}
	return nil, false, fmt.Errorf("type %s is not supported (bool, integers, floats, string, []byte, time.Time, or a pointer to one)", t)
}

// schema is the Arrow schema of the codec's rows.
func (c *codec) schema() *arrow.Schema {
	fs := make([]arrow.Field, len(c.fields))
	for i, f := range c.fields {
		fs[i] = arrow.Field{Name: f.name, Type: f.arrow, Nullable: f.nullable}
	}
	return arrow.NewSchema(fs, nil)
}

// plain turns v (of the codec's type) into its plain fields.
func (c *codec) plain(v reflect.Value) []any {
	out := make([]any, len(c.fields))
	if c.scalar {
		out[0] = plainOf(v)
		return out
	}
	for i, f := range c.fields {
		out[i] = plainOf(v.Field(f.index))
	}
	return out
}

// value builds a value of the codec's type from plain fields; missing
// trailing fields (a row written before a nullable field was added) stay
// zero.
func (c *codec) value(vals []any) (reflect.Value, error) {
	v := reflect.New(c.typ).Elem()
	if c.scalar {
		if len(vals) > 0 {
			if err := setPlain(v, vals[0]); err != nil {
				return v, err
			}
		}
		return v, nil
	}
	for i, f := range c.fields {
		if i >= len(vals) {
			break
		}
		if err := setPlain(v.Field(f.index), vals[i]); err != nil {
			return v, fmt.Errorf("field %s: %w", f.name, err)
		}
	}
	return v, nil
}

func plainOf(v reflect.Value) any {
	if v.Kind() == reflect.Pointer {
		if v.IsNil() {
			return nil
		}
		v = v.Elem()
	}
	if v.Type() == timeType {
		return v.Interface().(time.Time)
	}
	switch v.Kind() {
	case reflect.Bool:
		return v.Bool()
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return v.Int()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return v.Uint()
	case reflect.Float32, reflect.Float64:
		return v.Float()
	case reflect.String:
		return v.String()
	case reflect.Slice:
		if v.IsNil() {
			return nil
		}
		return append([]byte(nil), v.Bytes()...)
	}
	return nil
}

// setPlain stores plain value p into v, converting between the plain kinds
// and v's kind.
func setPlain(v reflect.Value, p any) error {
	if p == nil {
		v.SetZero()
		return nil
	}
	if v.Kind() == reflect.Pointer {
		n := reflect.New(v.Type().Elem())
		if err := setPlain(n.Elem(), p); err != nil {
			return err
		}
		v.Set(n)
		return nil
	}
	if v.Type() == timeType {
		switch x := p.(type) {
		case time.Time:
			v.Set(reflect.ValueOf(x))
			return nil
		case int64:
			v.Set(reflect.ValueOf(time.UnixMilli(x).UTC()))
			return nil
		}
		return fmt.Errorf("cannot store %T in time.Time", p)
	}
	switch v.Kind() {
	case reflect.Bool:
		if b, ok := p.(bool); ok {
			v.SetBool(b)
			return nil
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		switch x := p.(type) {
		case int64:
			v.SetInt(x)
			return nil
		case uint64:
			v.SetInt(int64(x))
			return nil
		case time.Time:
			v.SetInt(x.UnixMilli())
			return nil
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		switch x := p.(type) {
		case uint64:
			v.SetUint(x)
			return nil
		case int64:
			v.SetUint(uint64(x))
			return nil
		}
	case reflect.Float32, reflect.Float64:
		switch x := p.(type) {
		case float64:
			v.SetFloat(x)
			return nil
		case int64:
			v.SetFloat(float64(x))
			return nil
		}
	case reflect.String:
		switch x := p.(type) {
		case string:
			v.SetString(x)
			return nil
		case []byte:
			v.SetString(string(x))
			return nil
		}
	case reflect.Slice:
		switch x := p.(type) {
		case []byte:
			v.SetBytes(append([]byte(nil), x...))
			return nil
		case string:
			v.SetBytes([]byte(x))
			return nil
		}
	}
	return fmt.Errorf("cannot store %T in %s", p, v.Type())
}

// plainAt reads row i of arr as a plain value (nil for null).
func plainAt(arr arrow.Array, i int) (any, error) {
	if arr.IsNull(i) {
		return nil, nil
	}
	switch a := arr.(type) {
	case *array.Boolean:
		return a.Value(i), nil
	case *array.Int8:
		return int64(a.Value(i)), nil
	case *array.Int16:
		return int64(a.Value(i)), nil
	case *array.Int32:
		return int64(a.Value(i)), nil
	case *array.Int64:
		return a.Value(i), nil
	case *array.Uint8:
		return uint64(a.Value(i)), nil
	case *array.Uint16:
		return uint64(a.Value(i)), nil
	case *array.Uint32:
		return uint64(a.Value(i)), nil
	case *array.Uint64:
		return a.Value(i), nil
	case *array.Float32:
		return float64(a.Value(i)), nil
	case *array.Float64:
		return a.Value(i), nil
	case *array.String:
		return a.Value(i), nil
	case *array.LargeString:
		return a.Value(i), nil
	case *array.Binary:
		return append([]byte(nil), a.Value(i)...), nil
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC(), nil
	case *array.Date32:
		return int64(a.Value(i)), nil
	}
	return nil, fmt.Errorf("column type %s is not supported by processors", arr.DataType())
}

// appendPlain appends plain value p to b.
func appendPlain(b array.Builder, p any) error {
	if p == nil {
		b.AppendNull()
		return nil
	}
	switch bb := b.(type) {
	case *array.BooleanBuilder:
		if x, ok := p.(bool); ok {
			bb.Append(x)
			return nil
		}
	case *array.Int8Builder:
		if x, ok := p.(int64); ok {
			bb.Append(int8(x))
			return nil
		}
	case *array.Int16Builder:
		if x, ok := p.(int64); ok {
			bb.Append(int16(x))
			return nil
		}
	case *array.Int32Builder:
		if x, ok := p.(int64); ok {
			bb.Append(int32(x))
			return nil
		}
	case *array.Int64Builder:
		if x, ok := p.(int64); ok {
			bb.Append(x)
			return nil
		}
	case *array.Uint8Builder:
		if x, ok := p.(uint64); ok {
			bb.Append(uint8(x))
			return nil
		}
	case *array.Uint16Builder:
		if x, ok := p.(uint64); ok {
			bb.Append(uint16(x))
			return nil
		}
	case *array.Uint32Builder:
		if x, ok := p.(uint64); ok {
			bb.Append(uint32(x))
			return nil
		}
	case *array.Uint64Builder:
		if x, ok := p.(uint64); ok {
			bb.Append(x)
			return nil
		}
	case *array.Float32Builder:
		if x, ok := p.(float64); ok {
			bb.Append(float32(x))
			return nil
		}
	case *array.Float64Builder:
		if x, ok := p.(float64); ok {
			bb.Append(x)
			return nil
		}
	case *array.StringBuilder:
		if x, ok := p.(string); ok {
			bb.Append(x)
			return nil
		}
	case *array.LargeStringBuilder:
		if x, ok := p.(string); ok {
			bb.Append(x)
			return nil
		}
	case *array.BinaryBuilder:
		if x, ok := p.([]byte); ok {
			bb.Append(x)
			return nil
		}
	case *array.TimestampBuilder:
		if x, ok := p.(time.Time); ok {
			ts, err := arrow.TimestampFromTime(x, bb.Type().(*arrow.TimestampType).Unit)
			if err != nil {
				return err
			}
			bb.Append(ts)
			return nil
		}
	case *array.Date32Builder:
		if x, ok := p.(int64); ok {
			bb.Append(arrow.Date32(x))
			return nil
		}
	}
	return fmt.Errorf("cannot append %T to a %s column", p, b.Type())
}

// Plain rows are stored in this binary form: uvarint field count, then per
// field a tag byte and its payload (docs/format/processor.md).
const (
	tagNull byte = iota
	tagFalse
	tagTrue
	tagInt
	tagUint
	tagFloat
	tagString
	tagBytes
	tagTime
)

func appendRow(dst []byte, vals []any) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(vals)))
	for _, v := range vals {
		switch x := v.(type) {
		case nil:
			dst = append(dst, tagNull)
		case bool:
			if x {
				dst = append(dst, tagTrue)
			} else {
				dst = append(dst, tagFalse)
			}
		case int64:
			dst = binary.AppendVarint(append(dst, tagInt), x)
		case uint64:
			dst = binary.AppendUvarint(append(dst, tagUint), x)
		case float64:
			dst = binary.LittleEndian.AppendUint64(append(dst, tagFloat), math.Float64bits(x))
		case string:
			dst = binary.AppendUvarint(append(dst, tagString), uint64(len(x)))
			dst = append(dst, x...)
		case []byte:
			dst = binary.AppendUvarint(append(dst, tagBytes), uint64(len(x)))
			dst = append(dst, x...)
		case time.Time:
			dst = binary.AppendVarint(append(dst, tagTime), x.UnixNano())
		default:
			panic(fmt.Sprintf("engine: plain value of type %T", v)) // plainOf/plainAt never make one
		}
	}
	return dst
}

// readRow decodes one row from b and returns the rest of b.
func readRow(b []byte) ([]any, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, nil, fmt.Errorf("bad field count")
	}
	b = b[k:]
	vals := make([]any, n)
	for i := range vals {
		if len(b) == 0 {
			return nil, nil, fmt.Errorf("field %d: truncated", i)
		}
		tag := b[0]
		b = b[1:]
		switch tag {
		case tagNull:
		case tagFalse:
			vals[i] = false
		case tagTrue:
			vals[i] = true
		case tagInt, tagTime:
			x, k := binary.Varint(b)
			if k <= 0 {
				return nil, nil, fmt.Errorf("field %d: bad varint", i)
			}
			b = b[k:]
			if tag == tagTime {
				vals[i] = time.Unix(0, x).UTC()
			} else {
				vals[i] = x
			}
		case tagUint:
			x, k := binary.Uvarint(b)
			if k <= 0 {
				return nil, nil, fmt.Errorf("field %d: bad uvarint", i)
			}
			b = b[k:]
			vals[i] = x
		case tagFloat:
			if len(b) < 8 {
				return nil, nil, fmt.Errorf("field %d: truncated float", i)
			}
			vals[i] = math.Float64frombits(binary.LittleEndian.Uint64(b))
			b = b[8:]
		case tagString, tagBytes:
			l, k := binary.Uvarint(b)
			if k <= 0 || l > uint64(len(b)-k) {
				return nil, nil, fmt.Errorf("field %d: bad length", i)
			}
			s := b[k : k+int(l)]
			b = b[k+int(l):]
			if tag == tagString {
				vals[i] = string(s)
			} else {
				vals[i] = append([]byte(nil), s...)
			}
		default:
			return nil, nil, fmt.Errorf("field %d: unknown tag %d", i, tag)
		}
	}
	return vals, b, nil
}

// columnFor finds the column of rows in schema that field name reads: the
// same name, else the only one equal ignoring case.
func columnFor(schema *arrow.Schema, name string) int {
	if idx := schema.FieldIndices(name); len(idx) == 1 {
		return idx[0]
	}
	found := -1
	for i, f := range schema.Fields() {
		if strings.EqualFold(f.Name, name) || strings.EqualFold(f.Name, snake(name)) {
			if found >= 0 {
				return -1
			}
			found = i
		}
	}
	return found
}

// snake turns CardID into card_id.
func snake(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		if unicode.IsUpper(r) {
			if i > 0 && (unicode.IsLower(rs[i-1]) || (i+1 < len(rs) && unicode.IsLower(rs[i+1]))) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
