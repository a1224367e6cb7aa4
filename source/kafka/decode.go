package kafka

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Metadata column names. The value columns sit between key and topic.
const (
	ColKey       = "key"
	ColValue     = "value"
	ColTopic     = "topic"
	ColPartition = "partition"
	ColOffset    = "offset"
	ColTimestamp = "timestamp"
	ColHeaders   = "headers"
)

func isMetaColumn(name string) bool {
	switch name {
	case ColKey, ColTopic, ColPartition, ColOffset, ColTimestamp, ColHeaders:
		return true
	}
	return false
}

// headerType is list<struct<key utf8, value binary>>.
var headerType = arrow.ListOf(arrow.StructOf(
	arrow.Field{Name: "key", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "value", Type: arrow.BinaryTypes.Binary, Nullable: true},
))

func buildSchema(c *config) *arrow.Schema {
	fields := []arrow.Field{{Name: ColKey, Type: arrow.BinaryTypes.Binary, Nullable: true}}
	switch c.decoder {
	case decodeRaw:
		fields = append(fields, arrow.Field{Name: ColValue, Type: arrow.BinaryTypes.Binary, Nullable: true})
	case decodeString:
		fields = append(fields, arrow.Field{Name: ColValue, Type: arrow.BinaryTypes.String, Nullable: true})
	case decodeJSON:
		fields = append(fields, c.jsonSchema.Fields()...)
	}
	fields = append(fields,
		arrow.Field{Name: ColTopic, Type: arrow.BinaryTypes.String},
		arrow.Field{Name: ColPartition, Type: arrow.PrimitiveTypes.Int32},
		arrow.Field{Name: ColOffset, Type: arrow.PrimitiveTypes.Int64},
		arrow.Field{Name: ColTimestamp, Type: arrow.FixedWidthTypes.Timestamp_ms},
		arrow.Field{Name: ColHeaders, Type: headerType},
	)
	return arrow.NewSchema(fields, nil)
}

func jsonTypeSupported(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.STRING, arrow.INT64, arrow.INT32, arrow.FLOAT64, arrow.BOOL, arrow.BINARY, arrow.TIMESTAMP:
		return true
	}
	return false
}

// jsonVal is one decoded JSON field, held until the whole value decoded so
// a bad value never leaves a half-appended row.
type jsonVal struct {
	null bool
	s    string
	i    int64
	f    float64
	b    bool
	raw  []byte
}

// decodeJSONValue decodes value into out (one per field of the schema,
// whose positions index gives by name). On failure it returns the field at
// fault ("" for the whole value) and the reason. When a key repeats, the
// last one counts, as with encoding/json.
func decodeJSONValue(value []byte, fields []arrow.Field, index map[string]int, out []jsonVal, raws [][]byte) (string, string, bool) {
	if value == nil {
		return "", "value is null", false
	}
	if !json.Valid(value) {
		var v any
		err := json.Unmarshal(value, &v) // only for its message
		return "", "not valid JSON: " + err.Error(), false
	}
	for i := range raws {
		raws[i] = nil
	}
	ok := jsonObject(value, func(key, raw []byte) {
		if i, found := index[string(key)]; found {
			raws[i] = raw
		} else if bytes.IndexByte(key, '\\') >= 0 {
			var k string
			if json.Unmarshal(append(append([]byte{'"'}, key...), '"'), &k) == nil {
				if i, found := index[k]; found {
					raws[i] = raw
				}
			}
		}
	})
	if !ok {
		return "", "not a JSON object", false
	}
	for i, f := range fields {
		raw := raws[i]
		out[i] = jsonVal{}
		if raw == nil || string(raw) == "null" {
			if !f.Nullable {
				return f.Name, "missing or null, and the field is not nullable", false
			}
			out[i].null = true
			continue
		}
		if reason := decodeJSONField(raw, f.Type, &out[i]); reason != "" {
			return f.Name, reason, false
		}
	}
	return "", "", true
}

func decodeJSONField(raw []byte, t arrow.DataType, v *jsonVal) string {
	isString := len(raw) > 0 && raw[0] == '"'
	isNumber := len(raw) > 0 && (raw[0] == '-' || (raw[0] >= '0' && raw[0] <= '9'))
	switch t.ID() {
	case arrow.STRING:
		if !isString {
			return "want a string, got " + truncate(raw)
		}
		str, ok := unquote(raw)
		if !ok {
			return "want a string, got " + truncate(raw)
		}
		v.s = str
	case arrow.INT64, arrow.INT32:
		if !isNumber {
			return "want an integer, got " + truncate(raw)
		}
		bits := 64
		if t.ID() == arrow.INT32 {
			bits = 32
		}
		n, err := strconv.ParseInt(string(raw), 10, bits)
		if err != nil {
			return fmt.Sprintf("want an integer of %d bits, got %s", bits, truncate(raw))
		}
		v.i = n
	case arrow.FLOAT64:
		if !isNumber {
			return "want a number, got " + truncate(raw)
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return "want a number, got " + truncate(raw)
		}
		v.f = f
	case arrow.BOOL:
		switch string(raw) {
		case "true":
			v.b = true
		case "false":
		default:
			return "want true or false, got " + truncate(raw)
		}
	case arrow.BINARY:
		s, ok := "", isString
		if ok {
			s, ok = unquote(raw)
		}
		if !ok {
			return "want a base64 string, got " + truncate(raw)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return "want a base64 string: " + err.Error()
		}
		v.raw = b
	case arrow.TIMESTAMP:
		s, ok := "", isString
		if ok {
			s, ok = unquote(raw)
		}
		if !ok {
			return "want an RFC 3339 timestamp string, got " + truncate(raw)
		}
		ts, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			return "want an RFC 3339 timestamp: " + err.Error()
		}
		n, ok := toUnit(ts, t.(*arrow.TimestampType).Unit)
		if !ok {
			return fmt.Sprintf("timestamp %q is finer than the column unit %s", s, t.(*arrow.TimestampType).Unit)
		}
		v.i = n
	default:
		return "unsupported type " + t.String()
	}
	return ""
}

// toUnit converts t to the unit, reporting false when that loses a fraction.
func toUnit(t time.Time, u arrow.TimeUnit) (int64, bool) {
	ns := t.UnixNano()
	switch u {
	case arrow.Second:
		return t.Unix(), t.Nanosecond() == 0
	case arrow.Millisecond:
		return t.UnixMilli(), t.Nanosecond()%1e6 == 0
	case arrow.Microsecond:
		return t.UnixMicro(), t.Nanosecond()%1e3 == 0
	default:
		return ns, true
	}
}

// rowWriter appends Kafka records to an Arrow record builder.
type rowWriter struct {
	c      *config
	b      *array.RecordBuilder
	fields []arrow.Field // JSON fields
	index  map[string]int
	vals   []jsonVal
	raws   [][]byte
	nval   int // number of value columns
	rows   int
}

func newRowWriter(mem memory.Allocator, c *config, schema *arrow.Schema) *rowWriter {
	w := &rowWriter{c: c, b: array.NewRecordBuilder(mem, schema), nval: 1}
	if c.decoder == decodeJSON {
		w.fields = c.jsonSchema.Fields()
		w.vals = make([]jsonVal, len(w.fields))
		w.raws = make([][]byte, len(w.fields))
		w.index = make(map[string]int, len(w.fields))
		for i, f := range w.fields {
			w.index[f.Name] = i
		}
		w.nval = len(w.fields)
	}
	return w
}

func (w *rowWriter) release() { w.b.Release() }

// decode checks that r's value decodes, keeping the decoded JSON fields for
// the append that follows. It returns the field and reason on failure.
func (w *rowWriter) decode(r *kgo.Record) (string, string, bool) {
	switch w.c.decoder {
	case decodeString:
		if r.Value != nil && !utf8.Valid(r.Value) {
			return "", "value is not valid UTF-8", false
		}
	case decodeJSON:
		if r.Value == nil && w.c.tombstones {
			for i := range w.vals {
				w.vals[i] = jsonVal{null: true}
			}
			return "", "", true
		}
		return decodeJSONValue(r.Value, w.fields, w.index, w.vals, w.raws)
	}
	return "", "", true
}

// append adds r as one row; decode must have succeeded just before.
func (w *rowWriter) append(r *kgo.Record) {
	col := 0
	kb := w.b.Field(col).(*array.BinaryBuilder)
	if r.Key == nil {
		kb.AppendNull()
	} else {
		kb.Append(r.Key)
	}
	col++
	switch w.c.decoder {
	case decodeRaw:
		vb := w.b.Field(col).(*array.BinaryBuilder)
		if r.Value == nil {
			vb.AppendNull()
		} else {
			vb.Append(r.Value)
		}
	case decodeString:
		vb := w.b.Field(col).(*array.StringBuilder)
		if r.Value == nil {
			vb.AppendNull()
		} else {
			vb.BinaryBuilder.Append(r.Value)
		}
	case decodeJSON:
		for i, f := range w.fields {
			appendJSON(w.b.Field(col+i), f.Type, &w.vals[i])
		}
	}
	col += w.nval
	w.b.Field(col).(*array.StringBuilder).Append(r.Topic)
	w.b.Field(col + 1).(*array.Int32Builder).Append(r.Partition)
	w.b.Field(col + 2).(*array.Int64Builder).Append(r.Offset)
	w.b.Field(col + 3).(*array.TimestampBuilder).Append(arrow.Timestamp(r.Timestamp.UnixMilli()))
	lb := w.b.Field(col + 4).(*array.ListBuilder)
	lb.Append(true)
	sb := lb.ValueBuilder().(*array.StructBuilder)
	hk := sb.FieldBuilder(0).(*array.StringBuilder)
	hv := sb.FieldBuilder(1).(*array.BinaryBuilder)
	for _, h := range r.Headers {
		sb.Append(true)
		hk.Append(h.Key)
		if h.Value == nil {
			hv.AppendNull()
		} else {
			hv.Append(h.Value)
		}
	}
	w.rows++
}

func appendJSON(b array.Builder, t arrow.DataType, v *jsonVal) {
	if v.null {
		b.AppendNull()
		return
	}
	switch t.ID() {
	case arrow.STRING:
		b.(*array.StringBuilder).Append(v.s)
	case arrow.INT64:
		b.(*array.Int64Builder).Append(v.i)
	case arrow.INT32:
		b.(*array.Int32Builder).Append(int32(v.i))
	case arrow.FLOAT64:
		b.(*array.Float64Builder).Append(v.f)
	case arrow.BOOL:
		b.(*array.BooleanBuilder).Append(v.b)
	case arrow.BINARY:
		b.(*array.BinaryBuilder).Append(v.raw)
	case arrow.TIMESTAMP:
		b.(*array.TimestampBuilder).Append(arrow.Timestamp(v.i))
	}
}

// flush emits the rows built so far, if any. The record is released after
// emit returns; an emit that keeps it retains it.
func (w *rowWriter) flush(emit func(arrow.RecordBatch) error) error {
	if w.rows == 0 {
		return nil
	}
	rec := w.b.NewRecordBatch()
	w.rows = 0
	defer rec.Release()
	return emit(rec)
}
