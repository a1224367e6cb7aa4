package kafka

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
)

func TestDecodeJSONValue(t *testing.T) {
	fields := []arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "cents", Type: arrow.PrimitiveTypes.Int64},
		{Name: "at", Type: arrow.FixedWidthTypes.Timestamp_us, Nullable: true},
		{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
		{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "b", Type: arrow.BinaryTypes.Binary, Nullable: true},
	}
	index := map[string]int{}
	for i, f := range fields {
		index[f.Name] = i
	}
	for _, tc := range []struct {
		name, in   string
		field, why string // expected failure
		id         string
		cents      int64
		atNull     bool
	}{
		{name: "plain", in: `{"id":"a","cents":1250,"at":"2026-11-30T10:00:00.123456Z"}`, id: "a", cents: 1250},
		{name: "whitespace and order", in: " {\n \"cents\" : -7 ,\t\"id\" : \"b\" } ", id: "b", cents: -7, atNull: true},
		{name: "escapes", in: `{"id":"q\"u\u00e9\\","cents":1}`, id: "q\"ué\\", cents: 1, atNull: true},
		{name: "escaped key", in: `{"\u0069d":"k","cents":1}`, id: "k", cents: 1, atNull: true},
		{name: "nested skipped", in: `{"x":{"id":"no","y":[1,{"z":"}"}]},"id":"yes","cents":2,"arr":[],"s":"]"}`, id: "yes", cents: 2, atNull: true},
		{name: "duplicate key last wins", in: `{"id":"first","id":"last","cents":3}`, id: "last", cents: 3, atNull: true},
		{name: "null nullable", in: `{"id":"n","cents":0,"at":null,"ok":true,"f":1.5e3,"b":"aGk="}`, id: "n", atNull: true},
		{name: "not json", in: `{"id":`, why: "not valid JSON"},
		{name: "trailing garbage", in: `{"id":"a","cents":1} x`, why: "not valid JSON"},
		{name: "array", in: `[1,2]`, why: "not a JSON object"},
		{name: "missing required", in: `{"id":"a"}`, field: "cents", why: "missing"},
		{name: "fraction in cents", in: `{"id":"a","cents":12.5}`, field: "cents", why: "integer"},
		{name: "string cents", in: `{"id":"a","cents":"12"}`, field: "cents", why: "integer"},
		{name: "number id", in: `{"id":1,"cents":1}`, field: "id", why: "string"},
		{name: "bad time", in: `{"id":"a","cents":1,"at":"yesterday"}`, field: "at", why: "RFC 3339"},
		{name: "too fine", in: `{"id":"a","cents":1,"at":"2026-11-30T10:00:00.1234567Z"}`, field: "at", why: "finer"},
		{name: "bad bool", in: `{"id":"a","cents":1,"ok":1}`, field: "ok", why: "true or false"},
		{name: "bad base64", in: `{"id":"a","cents":1,"b":"!!"}`, field: "b", why: "base64"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := make([]jsonVal, len(fields))
			raws := make([][]byte, len(fields))
			field, why, ok := decodeJSONValue([]byte(tc.in), fields, index, out, raws)
			if tc.why != "" {
				if ok || field != tc.field || !strings.Contains(why, tc.why) {
					t.Fatalf("got ok=%v field=%q why=%q, want field %q reason containing %q", ok, field, why, tc.field, tc.why)
				}
				return
			}
			if !ok {
				t.Fatalf("field %q: %s", field, why)
			}
			if out[0].s != tc.id || out[1].i != tc.cents || out[2].null != tc.atNull {
				t.Fatalf("decoded %+v", out)
			}
		})
	}
}

// BenchmarkDecodeJSON compares the WithValueJSON fast path with decoding the
// same value into a map with encoding/json (the obvious alternative):
//
//	go test -run '^$' -bench DecodeJSON ./source/kafka/
func BenchmarkDecodeJSON(b *testing.B) {
	fields := []arrow.Field{
		{Name: "id", Type: arrow.BinaryTypes.String},
		{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
		{Name: "at", Type: arrow.FixedWidthTypes.Timestamp_us},
	}
	index := map[string]int{"id": 0, "amount_cents": 1, "at": 2}
	value := []byte(`{"id":"p-123456","amount_cents":1250,"at":"2026-11-30T10:00:00.123456Z","note":"unused field"}`)
	out := make([]jsonVal, 3)
	b.Run("scanner", func(b *testing.B) {
		raws := make([][]byte, 3)
		for range b.N {
			if _, why, ok := decodeJSONValue(value, fields, index, out, raws); !ok {
				b.Fatal(why)
			}
		}
	})
	b.Run("encoding-json-map", func(b *testing.B) {
		for range b.N {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(value, &m); err != nil {
				b.Fatal(err)
			}
			for i, f := range fields {
				if why := decodeJSONField(m[f.Name], f.Type, &out[i]); why != "" {
					b.Fatal(why)
				}
			}
		}
	})
}
