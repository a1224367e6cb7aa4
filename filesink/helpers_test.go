package filesink

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/storage"
)

// allTypes is a schema with every type the sink writes.
var allTypes = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "i8", Type: arrow.PrimitiveTypes.Int8, Nullable: true},
	{Name: "i16", Type: arrow.PrimitiveTypes.Int16, Nullable: true},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "f64", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "d", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "ts_s", Type: &arrow.TimestampType{Unit: arrow.Second, TimeZone: "UTC"}, Nullable: true},
	{Name: "ts_ms", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: true},
	{Name: "ts_us", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, Nullable: true},
	{Name: "ts_ns", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "Europe/Paris"}, Nullable: true},
	{Name: "dec9", Type: &arrow.Decimal128Type{Precision: 9, Scale: 2}, Nullable: true},
	{Name: "dec18", Type: &arrow.Decimal128Type{Precision: 18, Scale: 4}, Nullable: true},
}, nil)

var epoch = time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)

// value returns row i's value of column name as ReadRows gives it; every
// 7th row of a nullable column is null.
func value(f arrow.Field, i int) any {
	if f.Nullable && i%7 == 3 {
		return nil
	}
	ts := epoch.Add(time.Duration(i)*time.Second*3601 - 5000*time.Hour)
	switch f.Name {
	case "id":
		return int64(i)
	case "i8":
		return int8(i%200 - 100)
	case "i16":
		return int16(i*7 - 10000)
	case "i32":
		return int32(i*1000 - 50000)
	case "f32":
		return float32(i) / 4
	case "f64":
		return float64(i)*1.5 - 7
	case "b":
		return i%2 == 0
	case "s":
		if i%11 == 0 {
			return ""
		}
		return fmt.Sprintf("s-%d-é/:%%", i)
	case "ls":
		return fmt.Sprintf("large-%d", i*i)
	case "bin":
		return []byte{byte(i), byte(i >> 8), 0, 255}
	case "d":
		return ts.Format("2006-01-02")
	case "ts_s":
		return ts.Truncate(time.Second)
	case "ts_ms":
		return ts.Add(time.Duration(i%1000) * time.Millisecond)
	case "ts_us":
		return ts.Add(time.Duration(i%1000) * time.Microsecond)
	case "ts_ns":
		// nanoseconds are floored to microseconds
		return ts.Add(-time.Duration(i%1000+1) * time.Microsecond)
	case "dec9":
		return decimal128.FromI64(int64(i*37 - 5000)).ToString(2)
	case "dec18":
		return decimal128.FromI64(int64(i)*1_000_003 - 7).ToString(4)
	case "day":
		return fmt.Sprintf("2026-11-%02d", 28+i%3)
	case "merchant":
		if i%5 == 4 {
			return nil
		}
		return []string{"m1", "a/b", "x:y=z", ""}[i%5%4]
	case "amount":
		return int64(i * 100)
	}
	panic("no generator for " + f.Name)
}

// appendValue appends row i's value of field f to b.
func appendValue(b array.Builder, f arrow.Field, i int) {
	v := value(f, i)
	if v == nil {
		b.AppendNull()
		return
	}
	switch bb := b.(type) {
	case *array.Int64Builder:
		bb.Append(v.(int64))
	case *array.Int8Builder:
		bb.Append(v.(int8))
	case *array.Int16Builder:
		bb.Append(v.(int16))
	case *array.Int32Builder:
		bb.Append(v.(int32))
	case *array.Float32Builder:
		bb.Append(v.(float32))
	case *array.Float64Builder:
		bb.Append(v.(float64))
	case *array.BooleanBuilder:
		bb.Append(v.(bool))
	case *array.StringBuilder:
		bb.Append(v.(string))
	case *array.LargeStringBuilder:
		bb.Append(v.(string))
	case *array.BinaryBuilder:
		bb.Append(v.([]byte))
	case *array.Date32Builder:
		t, _ := time.Parse("2006-01-02", v.(string))
		bb.Append(arrow.Date32FromTime(t))
	case *array.TimestampBuilder:
		t := v.(time.Time)
		ts := epoch.Add(time.Duration(i)*time.Second*3601 - 5000*time.Hour)
		switch f.Type.(*arrow.TimestampType).Unit {
		case arrow.Second:
			bb.Append(arrow.Timestamp(t.Unix()))
		case arrow.Millisecond:
			bb.Append(arrow.Timestamp(t.UnixMilli()))
		case arrow.Microsecond:
			bb.Append(arrow.Timestamp(t.UnixMicro()))
		case arrow.Nanosecond:
			// a value a little below the microsecond, to check flooring
			bb.Append(arrow.Timestamp(ts.Add(-time.Duration(i%1000+1)*time.Microsecond).UnixNano() + 1))
		}
	case *array.Decimal128Builder:
		dt := f.Type.(*arrow.Decimal128Type)
		n, err := decimal128.FromString(v.(string), dt.Precision, dt.Scale)
		if err != nil {
			panic(err)
		}
		bb.Append(n)
	default:
		panic(fmt.Sprintf("no builder case for %T", b))
	}
}

// makeRecord builds rows [from, to) of schema.
func makeRecord(t testing.TB, mem memory.Allocator, schema *arrow.Schema, from, to int) arrow.RecordBatch {
	t.Helper()
	return buildRecord(mem, schema, from, to)
}

func buildRecord(mem memory.Allocator, schema *arrow.Schema, from, to int) arrow.RecordBatch {
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i := from; i < to; i++ {
		for k, f := range schema.Fields() {
			appendValue(b.Field(k), f, i)
		}
	}
	return b.NewRecordBatch()
}

func newMem(t *testing.T) *memory.CheckedAllocator {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	t.Cleanup(func() { mem.AssertSize(t, 0) })
	return mem
}

func openTable(t testing.TB) (storage.Store, string) {
	t.Helper()
	dir := t.TempDir()
	st, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return st, dir
}

// fixedClock returns a clock reading *now.
func fixedClock(now *time.Time) func() time.Time { return func() time.Time { return *now } }

// addBatch writes rows [from, to) of schema as batch id in records of at
// most per rows.
func addBatch(t testing.TB, ctx context.Context, s *Sink, mem memory.Allocator, schema *arrow.Schema, id int64, from, to, per int) {
	t.Helper()
	var recs []arrow.RecordBatch
	for i := from; i < to; i += per {
		recs = append(recs, makeRecord(t, mem, schema, i, min(i+per, to)))
	}
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	if err := s.AddBatch(ctx, id, schema, recs); err != nil {
		t.Fatalf("AddBatch(%d): %v", id, err)
	}
}

// readAll returns the table's rows by the id column (column 0 must be
// "id" or the caller passes idCol).
func readAll(t testing.TB, table storage.Store) (map[int64][]any, []string) {
	t.Helper()
	rows := map[int64][]any{}
	var cols []string
	err := ReadRows(context.Background(), table, func(f File, columns []string, row []any) error {
		cols = columns
		var id int64 = -1
		for i, c := range columns {
			if c == "id" {
				id = row[i].(int64)
			}
		}
		if _, dup := rows[id]; dup {
			return fmt.Errorf("row id %d seen twice (file %s)", id, f.Path)
		}
		rows[id] = append([]any(nil), row...)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return rows, cols
}
