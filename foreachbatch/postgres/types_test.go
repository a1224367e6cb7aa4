package postgres

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"

	"github.com/onceflow/onceflow/internal/testenv"
)

// TestTypeRoundTrip writes one column of each mapped type (three values and
// a NULL) into a table WithCreateTables made, and reads it back.
func TestTypeRoundTrip(t *testing.T) {
	ts := time.Date(2026, 11, 30, 4, 5, 6, 123456000, time.UTC)
	dec := func(s string) decimal128.Num {
		n, err := decimal128.FromString(s, 12, 3)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	for _, tc := range []struct {
		typ     arrow.DataType
		pgType  string // what WithCreateTables gives it (format_type)
		fill    func(b array.Builder)
		want    []string // values read back as text, "NULL" for null
		pgWrite string   // when set, an explicit table column type instead of WithCreateTables
	}{
		{arrow.PrimitiveTypes.Int8, "smallint", func(b array.Builder) { b.(*array.Int8Builder).AppendValues([]int8{-128, 0, 127}, nil) },
			[]string{"-128", "0", "127"}, ""},
		{arrow.PrimitiveTypes.Int16, "smallint", func(b array.Builder) {
			b.(*array.Int16Builder).AppendValues([]int16{math.MinInt16, 0, math.MaxInt16}, nil)
		},
			[]string{"-32768", "0", "32767"}, ""},
		{arrow.PrimitiveTypes.Int32, "integer", func(b array.Builder) {
			b.(*array.Int32Builder).AppendValues([]int32{math.MinInt32, 0, math.MaxInt32}, nil)
		},
			[]string{"-2147483648", "0", "2147483647"}, ""},
		{arrow.PrimitiveTypes.Int64, "bigint", func(b array.Builder) {
			b.(*array.Int64Builder).AppendValues([]int64{math.MinInt64, 0, math.MaxInt64}, nil)
		},
			[]string{"-9223372036854775808", "0", "9223372036854775807"}, ""},
		{arrow.PrimitiveTypes.Int32, "bigint", func(b array.Builder) { b.(*array.Int32Builder).AppendValues([]int32{-1, 0, 1}, nil) },
			[]string{"-1", "0", "1"}, "bigint"},
		{arrow.PrimitiveTypes.Uint64, "numeric(20,0)", func(b array.Builder) { b.(*array.Uint64Builder).AppendValues([]uint64{0, 1, math.MaxUint64}, nil) },
			[]string{"0", "1", "18446744073709551615"}, ""},
		{arrow.PrimitiveTypes.Float64, "double precision", func(b array.Builder) { b.(*array.Float64Builder).AppendValues([]float64{-1.5, 0, 1e300}, nil) },
			[]string{"-1.5", "0", "1e+300"}, ""},
		{arrow.PrimitiveTypes.Float32, "double precision", func(b array.Builder) { b.(*array.Float32Builder).AppendValues([]float32{-1.5, 0, 0.25}, nil) },
			[]string{"-1.5", "0", "0.25"}, ""},
		{&arrow.Decimal128Type{Precision: 12, Scale: 3}, "numeric(12,3)", func(b array.Builder) {
			b.(*array.Decimal128Builder).AppendValues([]decimal128.Num{dec("-123456789.123"), dec("0"), dec("0.001")}, nil)
		}, []string{"-123456789.123", "0.000", "0.001"}, ""},
		{arrow.BinaryTypes.String, "text", func(b array.Builder) {
			b.(*array.StringBuilder).AppendValues([]string{"", "héllo", "a\tb\n'\"\\"}, nil)
		},
			[]string{"", "héllo", "a\tb\n'\"\\"}, ""},
		{arrow.FixedWidthTypes.Boolean, "boolean", func(b array.Builder) { b.(*array.BooleanBuilder).AppendValues([]bool{true, false, true}, nil) },
			[]string{"true", "false", "true"}, ""},
		{&arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, "timestamp with time zone", func(b array.Builder) {
			b.(*array.TimestampBuilder).AppendValues([]arrow.Timestamp{0, arrow.Timestamp(ts.UnixMicro()), -1}, nil)
		}, []string{"1970-01-01 00:00:00.000000", "2026-11-30 04:05:06.123456", "1969-12-31 23:59:59.999999"}, ""},
		{arrow.FixedWidthTypes.Date32, "date", func(b array.Builder) {
			b.(*array.Date32Builder).AppendValues([]arrow.Date32{0, arrow.Date32FromTime(ts), -1}, nil)
		}, []string{"1970-01-01", "2026-11-30", "1969-12-31"}, ""},
	} {
		t.Run(fmt.Sprintf("%s->%s", tc.typ, tc.pgType), func(t *testing.T) {
			pool := testenv.PG(t)
			ctx := ctxT(t)
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			schema := arrow.NewSchema([]arrow.Field{
				{Name: "k", Type: arrow.PrimitiveTypes.Int64},
				{Name: "v", Type: tc.typ, Nullable: true},
			}, nil)
			var opts []Option
			if tc.pgWrite != "" {
				mustExec(t, pool, "CREATE TABLE t (k bigint PRIMARY KEY, v "+tc.pgWrite+", onceflow_batch_id bigint)")
			} else {
				opts = append(opts, WithCreateTables(true))
			}
			s, err := NewUpsert(pool, "t", append(opts, WithKeyColumns("k"))...)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.ValidateSchema(schema); err != nil {
				t.Fatal(err)
			}
			var display string
			if err := pool.QueryRow(ctx, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 't'::regclass AND attname = 'v'").Scan(&display); err != nil {
				t.Fatal(err)
			}
			if display != tc.pgType {
				t.Errorf("column type %s, want %s", display, tc.pgType)
			}
			b := array.NewRecordBuilder(mem, schema)
			defer b.Release()
			b.Field(0).(*array.Int64Builder).AppendValues([]int64{0, 1, 2, 3}, nil)
			tc.fill(b.Field(1))
			b.Field(1).AppendNull()
			rec := b.NewRecordBatch()
			defer rec.Release()
			if err := s.AddBatch(ctx, 0, schema, []arrow.RecordBatch{rec}); err != nil {
				t.Fatal(err)
			}
			sel := "v::text"
			if display == "timestamp with time zone" {
				sel = "to_char(v AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')"
			}
			rows, err := pool.Query(ctx, "SELECT coalesce("+sel+", 'NULL') FROM t ORDER BY k")
			if err != nil {
				t.Fatal(err)
			}
			got, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				t.Fatal(err)
			}
			want := append(append([]string(nil), tc.want...), "NULL")
			if fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("got %q, want %q", got, want)
			}
		})
	}
}
