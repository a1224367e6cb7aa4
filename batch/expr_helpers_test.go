package batch

import (
	"context"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var exprTSUS = &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}

// exprSchema is the input of the table tests.
var exprSchema = arrow.NewSchema([]arrow.Field{
	{Name: "a", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "b", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "u8", Type: arrow.PrimitiveTypes.Uint8, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	{Name: "ok", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "ts", Type: exprTSUS, Nullable: true},
	{Name: "tsms", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: true},
	{Name: "d", Type: &arrow.DurationType{Unit: arrow.Microsecond}, Nullable: true},
	{Name: "nul", Type: arrow.Null, Nullable: true},
}, nil)

// exprRows are the rows of the table tests; the first row is cut off by
// slicing (exprRecord), so every test also runs at offset 1.
const exprRows = `[
{"a": 999, "b": 999, "i32": 999, "u8": 99, "f": 9.9, "s": "skip", "ls": "skip", "ok": true, "ts": "2000-01-01T00:00:00Z", "tsms": "2000-01-01T00:00:00", "d": 1, "nul": null},
{"a": 10, "b": 3, "i32": 10, "u8": 200, "f": 1.5, "s": "Hello", "ls": "Hello", "ok": true, "ts": "2026-11-30T13:45:56.123456Z", "tsms": "2026-11-30T13:45:56.123", "d": 1000000, "nul": null},
{"a": -7, "b": 2, "i32": -7, "u8": 0, "f": -2.25, "s": "wörld", "ls": "wörld", "ok": false, "ts": "1969-12-31T23:59:59.999999Z", "tsms": "1969-12-31T23:59:59.999", "d": -5, "nul": null},
{"a": null, "b": 5, "i32": null, "u8": null, "f": null, "s": null, "ls": null, "ok": null, "ts": null, "tsms": null, "d": null, "nul": null},
{"a": 0, "b": null, "i32": 0, "u8": 1, "f": 0, "s": "", "ls": "", "ok": true, "ts": "2024-02-29T00:00:00Z", "tsms": "2024-02-29T00:00:00", "d": 0, "nul": null}
]`

// exprRecord builds exprRows and returns it sliced from row 1 (offset 1).
func exprRecord(t testing.TB, mem memory.Allocator) arrow.RecordBatch {
	t.Helper()
	rec, _, err := array.RecordFromJSON(mem, exprSchema, strings.NewReader(exprRows))
	if err != nil {
		t.Fatal(err)
	}
	defer rec.Release()
	return rec.NewSlice(1, rec.NumRows())
}

func exprMem(t testing.TB) *memory.CheckedAllocator {
	return memory.NewCheckedAllocator(memory.NewGoAllocator())
}

// projectOne projects one expression over rec and returns the column as JSON.
func projectOne(t testing.TB, mem memory.Allocator, rec arrow.RecordBatch, e Expr) (string, arrow.DataType, error) {
	t.Helper()
	p, err := NewProjection(mem, rec.Schema(), []Named{As(e, "out")})
	if err != nil {
		return "", nil, err
	}
	out, err := p.Apply(context.Background(), rec)
	if err != nil {
		return "", nil, err
	}
	defer out.Release()
	if !arrow.TypeEqual(out.Column(0).DataType(), p.Schema().Field(0).Type) {
		t.Fatalf("%s: column type %s, schema says %s", e, out.Column(0).DataType(), p.Schema().Field(0).Type)
	}
	js, err := out.Column(0).MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(js), out.Column(0).DataType(), nil
}
