package filesink

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/parquet-go/parquet-go"
)

func TestRoundTripAllTypes(t *testing.T) {
	for _, codec := range []Compression{Zstd, Snappy, Uncompressed} {
		t.Run(string(codec), func(t *testing.T) {
			ctx := context.Background()
			mem := newMem(t)
			table, _ := openTable(t)
			s, err := New(table, WithCompression(codec))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.ValidateSchema(allTypes); err != nil {
				t.Fatal(err)
			}
			const n = 3000
			addBatch(t, ctx, s, mem, allTypes, 0, 0, n, 1100)
			files, err := Committed(ctx, table)
			if err != nil {
				t.Fatal(err)
			}
			if len(files) != 1 || files[0].Rows != n || !strings.HasSuffix(files[0].Path, codec.extension()) {
				t.Fatalf("files = %+v", files)
			}
			rows, cols := readAll(t, table)
			if len(rows) != n {
				t.Fatalf("read %d rows, want %d", len(rows), n)
			}
			for i := 0; i < n; i++ {
				got := rows[int64(i)]
				for k, f := range allTypes.Fields() {
					if cols[k] != f.Name {
						t.Fatalf("column %d is %q, want %q", k, cols[k], f.Name)
					}
					want := value(f, i)
					if wt, ok := want.(time.Time); ok {
						if gt, ok := got[k].(time.Time); !ok || !gt.Equal(wt) {
							t.Fatalf("row %d column %s = %v, want %v", i, f.Name, got[k], want)
						}
						continue
					}
					if !reflect.DeepEqual(got[k], want) {
						t.Fatalf("row %d column %s = %#v, want %#v", i, f.Name, got[k], want)
					}
				}
			}
			checkParquetTypes(t, ctx, files[0].Path, table)
			// Stats in the log come from the footer.
			st := statsOf(files[0], "id")
			if string(st.Min) != "0" || string(st.Max) != "2999" || st.NullCount != 0 {
				t.Fatalf("id stats = %+v", st)
			}
			if st := statsOf(files[0], "i32"); st.NullCount != int64(countNulls(n)) {
				t.Fatalf("i32 null count = %d, want %d", st.NullCount, countNulls(n))
			}
			if st := statsOf(files[0], "dec9"); string(st.Min) != `"-50.00"` || string(st.Max) != `"1059.26"` {
				t.Fatalf("dec9 stats = %s..%s", st.Min, st.Max)
			}
			if st := statsOf(files[0], "ts_us"); !strings.HasPrefix(string(st.Min), `"2026-05`) {
				t.Fatalf("ts_us stats = %s..%s", st.Min, st.Max)
			}
		})
	}
}

func countNulls(n int) int {
	c := 0
	for i := 0; i < n; i++ {
		if i%7 == 3 {
			c++
		}
	}
	return c
}

func statsOf(f File, col string) ColumnStats {
	for _, s := range f.Stats {
		if s.Column == col {
			return s
		}
	}
	return ColumnStats{}
}

// checkParquetTypes reads the file's schema with parquet-go and checks the
// physical and logical types.
func checkParquetTypes(t *testing.T, ctx context.Context, name string, table interface {
	Get(context.Context, string) ([]byte, error)
}) {
	t.Helper()
	data, err := table.Get(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	pf, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{
		"id": "INT(64,true)/INT64/required", "i32": "INT(32,true)/INT32/optional", "s": "STRING/BYTE_ARRAY/optional",
		"d": "DATE/INT32/optional", "ts_s": "TIMESTAMP(isAdjustedToUTC=true,unit=MICROS)/INT64/optional",
		"ts_ns": "TIMESTAMP(isAdjustedToUTC=true,unit=MICROS)/INT64/optional", "dec9": "DECIMAL(9,2)/INT32/optional",
		"dec18": "DECIMAL(18,4)/INT64/optional",
		"bin":   "BYTE_ARRAY/BYTE_ARRAY/optional",
	}
	var order []string
	for _, fl := range pf.Schema().Fields() {
		order = append(order, fl.Name())
		w, ok := want[fl.Name()]
		if !ok {
			continue
		}
		got := fl.Type().String() + "/" + fl.Type().Kind().String()
		if fl.Optional() {
			got += "/optional"
		} else {
			got += "/required"
		}
		if got != w {
			t.Errorf("parquet column %s is %s, want %s", fl.Name(), got, w)
		}
	}
	var names []string
	for _, f := range allTypes.Fields() {
		names = append(names, f.Name)
	}
	if !reflect.DeepEqual(order, names) {
		t.Errorf("parquet column order %v, want %v", order, names)
	}
	// Read a timestamp back through parquet-go's own reader: micros.
	rows := pf.RowGroups()[0].Rows()
	defer rows.Close()
	buf := make([]parquet.Row, 1)
	if _, err := rows.ReadRows(buf); err != nil {
		t.Fatal(err)
	}
	if got, want := buf[0][13].Int64(), value(allTypes.Field(13), 0).(time.Time).UnixMicro(); got != want {
		t.Errorf("ts_us raw = %d, want %d micros", got, want)
	}
}

func TestValidateSchema(t *testing.T) {
	s, err := New(nil, WithPartitionBy("day", "nope"))
	if err != nil {
		t.Fatal(err)
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "day", Type: arrow.FixedWidthTypes.Date32},
		{Name: "tags", Type: arrow.ListOf(arrow.BinaryTypes.String)},
		{Name: "u", Type: arrow.PrimitiveTypes.Uint32},
		{Name: "big", Type: &arrow.Decimal128Type{Precision: 38, Scale: 10}},
	}, nil)
	err = s.ValidateSchema(schema)
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`column "tags" has type list<item: utf8, nullable>`, `column "u" has type uint32`, `column "big" has type decimal(38, 10)`, `partition column "nope" is not in the schema`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if !errors.Is(err, ErrUnsupportedType) || !errors.Is(err, ErrBadSchema) {
		t.Errorf("error %v does not wrap the sentinels", err)
	}
	s2, _ := New(nil, WithPartitionBy("bin"))
	err = s2.ValidateSchema(arrow.NewSchema([]arrow.Field{{Name: "bin", Type: arrow.BinaryTypes.Binary}, {Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil))
	if err == nil || !strings.Contains(err.Error(), `partition column "bin" has type binary`) {
		t.Errorf("binary partition column: %v", err)
	}
	s3, _ := New(nil, WithPartitionBy("x"))
	err = s3.ValidateSchema(arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}}, nil))
	if err == nil || !strings.Contains(err.Error(), "every column is a partition column") {
		t.Errorf("only partition columns: %v", err)
	}
	if err := s3.ValidateSchema(arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int64}, {Name: "y", Type: arrow.BinaryTypes.String}}, nil)); err != nil {
		t.Errorf("valid schema: %v", err)
	}
}

func TestBadOptions(t *testing.T) {
	for name, opts := range map[string][]Option{
		"codec":      {WithCompression("lz4")},
		"target":     {WithTargetFileSize(0)},
		"minAbove":   {WithTargetFileSize(10), WithMinFileSize(20)},
		"openFiles":  {WithMaxOpenFiles(0)},
		"compact":    {WithCompactEvery(0)},
		"dupPartCol": {WithPartitionBy("a", "a")},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := New(nil, opts...); !errors.Is(err, ErrBadOption) {
				t.Fatalf("New = %v, want ErrBadOption", err)
			}
		})
	}
}
