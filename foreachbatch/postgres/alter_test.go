package postgres

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/decimal128"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onceflow/onceflow/internal/testenv"
)

// Regression: the sink described the target table once (at ValidateSchema
// or the first batch) and wrote every later batch with that description,
// and pgx kept the COPY's column types per connection. A table altered
// while the query ran was written with stale column information: a column
// retyped to numeric(10,2) silently rounded numeric(20,4) money, one
// retyped from integer to real received the integers' bytes as floats, and
// a compatible widening (bigint to numeric) broke the COPY. Now every batch
// re-reads the columns under a lock that holds the table still until the
// batch commits: a compatible change is followed, an incompatible one fails
// the batch naming the column, before anything is written.
func TestTableAlteredWhileRunning(t *testing.T) {
	dec := &arrow.Decimal128Type{Precision: 20, Scale: 4}
	for _, tc := range []struct {
		name    string
		column  string // the column's type at the start
		typ     arrow.DataType
		value   string // the value of batch 1, as numeric text
		alter   string // ALTER TABLE t …, between batch 0 and batch 1
		want    string // batch 1's value read back as text, or
		wantErr []string
	}{
		{name: "decimal column narrowed", column: "numeric(20,4)", typ: dec, value: "1.2345",
			alter: "ALTER COLUMN v TYPE numeric(10,2)", wantErr: []string{`"v"`, "numeric(10,2)", "rounded"}},
		{name: "integer column retyped to real", column: "integer", typ: arrow.PrimitiveTypes.Int32, value: "7",
			alter: "ALTER COLUMN v TYPE real", wantErr: []string{`"v"`, "real", "int32"}},
		{name: "bigint column widened to numeric", column: "bigint", typ: arrow.PrimitiveTypes.Int64, value: "7",
			alter: "ALTER COLUMN v TYPE numeric", want: "7"},
		{name: "column dropped", column: "bigint", typ: arrow.PrimitiveTypes.Int64, value: "7",
			alter: "DROP COLUMN v", wantErr: []string{`"v"`, "has no column"}},
		{name: "nullable column added", column: "bigint", typ: arrow.PrimitiveTypes.Int64, value: "7",
			alter: "ADD COLUMN note text", want: "7"},
		{name: "NOT NULL column without default added", column: "bigint", typ: arrow.PrimitiveTypes.Int64, value: "7",
			alter:   "ADD COLUMN note text NOT NULL DEFAULT 'x'; ALTER TABLE t ALTER COLUMN note DROP DEFAULT",
			wantErr: []string{`"note"`, "NOT NULL", "no default"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			admin := testenv.PG(t)
			ctx := ctxT(t)
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			// One connection, so every batch meets what pgx cached on it.
			cfg := admin.Config().Copy()
			cfg.MaxConns = 1
			pool, err := pgxpool.NewWithConfig(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			defer pool.Close()
			mustExec(t, admin, "CREATE TABLE t (k bigint PRIMARY KEY, v "+tc.column+")")
			schema := arrow.NewSchema([]arrow.Field{
				{Name: "k", Type: arrow.PrimitiveTypes.Int64},
				{Name: "v", Type: tc.typ, Nullable: true},
			}, nil)
			s, err := NewOffsetsInSink(pool, "j", "t", WithKeyColumns("k"), WithCreateTables(true))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(ctx, "q"); err != nil {
				t.Fatal(err)
			}
			if err := s.ValidateSchema(schema); err != nil {
				t.Fatal(err)
			}
			r0 := record(t, mem, schema, 0, "0") // warms the caches
			defer r0.Release()
			if err := s.AddBatch(ctx, 0, schema, []arrow.RecordBatch{r0}); err != nil {
				t.Fatal(err)
			}

			mustExec(t, admin, "ALTER TABLE t "+tc.alter)

			r1 := record(t, mem, schema, 1, tc.value)
			defer r1.Release()
			err = s.AddBatch(ctx, 1, schema, []arrow.RecordBatch{r1})
			read := func() string {
				var got *string
				if err := admin.QueryRow(ctx, "SELECT v::text FROM t WHERE k = 1").Scan(&got); err != nil {
					return "(" + err.Error() + ")"
				}
				if got == nil {
					return "NULL"
				}
				return *got
			}
			if tc.wantErr != nil {
				t.Log(err)
				if err == nil {
					t.Fatalf("batch 1 after %q wrote v = %s (of %s) without an error", tc.alter, read(), tc.value)
				}
				if !errors.Is(err, ErrSchemaMismatch) {
					t.Fatalf("batch 1 after %q: err = %v, want ErrSchemaMismatch", tc.alter, err)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				var n int
				if err := admin.QueryRow(ctx, "SELECT count(*) FROM t WHERE k = 1").Scan(&n); err != nil || n != 0 {
					t.Errorf("batch 1 left %d rows (%v), want none", n, err)
				}
				if p := progressOf(t, admin, "onceflow_progress", "j"); p != 0 {
					t.Errorf("progress %d, want 0", p)
				}
				return
			}
			if err != nil {
				t.Fatalf("batch 1 after %q: %v", tc.alter, err)
			}
			if got := read(); got != tc.want {
				t.Errorf("batch 1 wrote v = %s, want %s", got, tc.want)
			}
		})
	}
}

// record is the one-row record (k, v=value) of schema, value in numeric
// text.
func record(t *testing.T, mem memory.Allocator, schema *arrow.Schema, k int64, value string) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Field(0).(*array.Int64Builder).Append(k)
	switch vb := b.Field(1).(type) {
	case *array.Int64Builder:
		vb.Append(mustInt(t, value))
	case *array.Int32Builder:
		vb.Append(int32(mustInt(t, value)))
	case *array.Decimal128Builder:
		typ := schema.Field(1).Type.(*arrow.Decimal128Type)
		n, err := decimal128.FromString(value, typ.Precision, typ.Scale)
		if err != nil {
			t.Fatal(err)
		}
		vb.Append(n)
	default:
		t.Fatalf("no builder for %s", schema.Field(1).Type)
	}
	return b.NewRecordBatch()
}

func mustInt(t *testing.T, s string) int64 {
	t.Helper()
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
