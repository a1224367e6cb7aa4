package kafkasink

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// jsonSupported reports whether WithValueJSON can encode type t.
func jsonSupported(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY,
		arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT32, arrow.FLOAT64, arrow.BOOL, arrow.TIMESTAMP, arrow.DATE32:
		return true
	}
	return false
}

func keySupported(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY,
		arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

func rawSupported(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.LARGE_STRING, arrow.BINARY, arrow.LARGE_BINARY:
		return true
	}
	return false
}

// plan is the column layout of the output, fixed by the schema.
type plan struct {
	key   int   // -1: no key
	ts    int   // -1: producer clock
	value int   // WithValueColumn index, -1 for JSON
	cols  []int // JSON columns
	names [][]byte
}

// ValidateSchema tells, before the first batch, whether the sink can
// write rows of schema.
func (s *Sink) ValidateSchema(schema *arrow.Schema) error {
	_, err := s.planFor(schema)
	return err
}

func (s *Sink) planFor(schema *arrow.Schema) (*plan, error) {
	p := &plan{key: -1, value: -1, ts: -1}
	find := func(name, what string, ok func(arrow.DataType) bool) (int, error) {
		idx := schema.FieldIndices(name)
		if len(idx) != 1 {
			return -1, fmt.Errorf("%w: %s column %q not in the output (%s)", ErrSchema, what, name, schema)
		}
		if t := schema.Field(idx[0]).Type; !ok(t) {
			return -1, fmt.Errorf("%w: %s column %q has type %s, which the sink cannot encode", ErrSchema, what, name, t)
		}
		return idx[0], nil
	}
	var err error
	if s.c.keyColumn != "" {
		if p.key, err = find(s.c.keyColumn, "key", keySupported); err != nil {
			return nil, err
		}
	}
	if s.c.tsColumn != "" {
		isTS := func(t arrow.DataType) bool { return t.ID() == arrow.TIMESTAMP }
		if p.ts, err = find(s.c.tsColumn, "timestamp", isTS); err != nil {
			return nil, err
		}
	}
	if s.c.value == valueColumn {
		if p.value, err = find(s.c.valueColumn, "value", rawSupported); err != nil {
			return nil, err
		}
		return p, nil
	}
	names := s.c.jsonColumns
	if len(names) == 0 {
		for _, f := range schema.Fields() {
			names = append(names, f.Name)
		}
	}
	for _, n := range names {
		i, err := find(n, "value", jsonSupported)
		if err != nil {
			return nil, err
		}
		q, _ := json.Marshal(n)
		p.cols = append(p.cols, i)
		p.names = append(p.names, q)
	}
	return p, nil
}

// keyOf returns row i's key.
func keyOf(a arrow.Array, i int) []byte {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.String:
		return []byte(a.Value(i))
	case *array.LargeString:
		return []byte(a.Value(i))
	case *array.Binary:
		return append([]byte(nil), a.Value(i)...)
	case *array.LargeBinary:
		return append([]byte(nil), a.Value(i)...)
	case *array.Int8:
		return strconv.AppendInt(nil, int64(a.Value(i)), 10)
	case *array.Int16:
		return strconv.AppendInt(nil, int64(a.Value(i)), 10)
	case *array.Int32:
		return strconv.AppendInt(nil, int64(a.Value(i)), 10)
	case *array.Int64:
		return strconv.AppendInt(nil, a.Value(i), 10)
	case *array.Uint8:
		return strconv.AppendUint(nil, uint64(a.Value(i)), 10)
	case *array.Uint16:
		return strconv.AppendUint(nil, uint64(a.Value(i)), 10)
	case *array.Uint32:
		return strconv.AppendUint(nil, uint64(a.Value(i)), 10)
	case *array.Uint64:
		return strconv.AppendUint(nil, a.Value(i), 10)
	}
	return nil
}

// appendJSONValue appends row i of a as a JSON value.
func appendJSONValue(b []byte, a arrow.Array, i int) ([]byte, error) {
	if a.IsNull(i) {
		return append(b, "null"...), nil
	}
	switch a := a.(type) {
	case *array.String:
		return appendJSONString(b, a.Value(i)), nil
	case *array.LargeString:
		return appendJSONString(b, a.Value(i)), nil
	case *array.Binary:
		return appendBase64(b, a.Value(i)), nil
	case *array.LargeBinary:
		return appendBase64(b, a.Value(i)), nil
	case *array.Int8:
		return strconv.AppendInt(b, int64(a.Value(i)), 10), nil
	case *array.Int16:
		return strconv.AppendInt(b, int64(a.Value(i)), 10), nil
	case *array.Int32:
		return strconv.AppendInt(b, int64(a.Value(i)), 10), nil
	case *array.Int64:
		return strconv.AppendInt(b, a.Value(i), 10), nil
	case *array.Uint8:
		return strconv.AppendUint(b, uint64(a.Value(i)), 10), nil
	case *array.Uint16:
		return strconv.AppendUint(b, uint64(a.Value(i)), 10), nil
	case *array.Uint32:
		return strconv.AppendUint(b, uint64(a.Value(i)), 10), nil
	case *array.Uint64:
		return strconv.AppendUint(b, a.Value(i), 10), nil
	case *array.Float32:
		return appendFloat(b, float64(a.Value(i)), 32)
	case *array.Float64:
		return appendFloat(b, a.Value(i), 64)
	case *array.Boolean:
		return strconv.AppendBool(b, a.Value(i)), nil
	case *array.Date32:
		return strconv.AppendQuote(b, a.Value(i).ToTime().Format(time.DateOnly)), nil
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		t := a.Value(i).ToTime(unit).UTC()
		layout := "2006-01-02T15:04:05.000000Z07:00"
		if unit == arrow.Nanosecond {
			layout = "2006-01-02T15:04:05.000000000Z07:00"
		}
		b = append(b, '"')
		b = t.AppendFormat(b, layout)
		return append(b, '"'), nil
	}
	return nil, fmt.Errorf("type %s not supported", a.DataType())
}

func appendFloat(b []byte, f float64, bits int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return nil, fmt.Errorf("%v has no JSON form", f)
	}
	return strconv.AppendFloat(b, f, 'g', -1, bits), nil
}

func appendJSONString(b []byte, s string) []byte {
	q, _ := json.Marshal(s) // a string always marshals
	return append(b, q...)
}

func appendBase64(b []byte, v []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// rowValue encodes row i of rec under p.
func rowValue(p *plan, rec arrow.RecordBatch, i int) ([]byte, error) {
	if p.value >= 0 {
		a := rec.Column(p.value)
		if a.IsNull(i) {
			return nil, nil
		}
		switch a := a.(type) {
		case *array.String:
			return []byte(a.Value(i)), nil
		case *array.LargeString:
			return []byte(a.Value(i)), nil
		case *array.Binary:
			return append([]byte(nil), a.Value(i)...), nil
		case *array.LargeBinary:
			return append([]byte(nil), a.Value(i)...), nil
		}
		return nil, fmt.Errorf("value column type %s not supported", a.DataType())
	}
	b := make([]byte, 0, 64*len(p.cols))
	b = append(b, '{')
	for k, c := range p.cols {
		if k > 0 {
			b = append(b, ',')
		}
		b = append(b, p.names[k]...)
		b = append(b, ':')
		var err error
		if b, err = appendJSONValue(b, rec.Column(c), i); err != nil {
			return nil, fmt.Errorf("column %s: %w", p.names[k], err)
		}
	}
	return append(b, '}'), nil
}
