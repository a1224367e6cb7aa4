package postgres

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/onceflow/onceflow/internal/testenv"
)

var tsNanoSchema = arrow.NewSchema([]arrow.Field{
	{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
	{Name: "total", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

func tsRecord(t *testing.T, mem memory.Allocator, schema *arrow.Schema, ats []arrow.Timestamp, totals []int64) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	b.Field(0).(*array.TimestampBuilder).AppendValues(ats, nil)
	b.Field(1).(*array.Int64Builder).AppendValues(totals, nil)
	return b.NewRecordBatch()
}

// Regression: timestamp[ns] went into timestamptz (which keeps
// microseconds) truncated without a word, so keys 100 ns apart collided and
// the INSERT failed with SQLSTATE 21000 on every re-run: the query could
// never go on. Now ValidateSchema refuses a column that would lose digits,
// naming it, unless WithTruncateTimestamps allows it.
func TestTimestampDigitsLostRefused(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ddl    string // "" for WithCreateTables
		schema *arrow.Schema
		want   []string
	}{
		{"nanoseconds into timestamptz", "CREATE TABLE t (at timestamptz PRIMARY KEY, total bigint, onceflow_batch_id bigint)",
			tsNanoSchema, []string{`"at"`, "timestamp[ns", "timestamp with time zone", "6 fractional digits", "WithTruncateTimestamps"}},
		{"nanoseconds into timestamp", "CREATE TABLE t (at timestamp PRIMARY KEY, total bigint, onceflow_batch_id bigint)",
			arrow.NewSchema([]arrow.Field{{Name: "at", Type: &arrow.TimestampType{Unit: arrow.Nanosecond}}, {Name: "total", Type: arrow.PrimitiveTypes.Int64}}, nil),
			[]string{`"at"`, "timestamp without time zone", "WithTruncateTimestamps"}},
		{"microseconds into timestamptz(3)", "CREATE TABLE t (at timestamptz(3) PRIMARY KEY, total bigint, onceflow_batch_id bigint)",
			arrow.NewSchema([]arrow.Field{{Name: "at", Type: arrow.FixedWidthTypes.Timestamp_us}, {Name: "total", Type: arrow.PrimitiveTypes.Int64}}, nil),
			[]string{`"at"`, "timestamp(3) with time zone", "3 fractional digits", "WithTruncateTimestamps"}},
		{"nanoseconds, table to create", "", tsNanoSchema, []string{`"at"`, "timestamp[ns", "WithTruncateTimestamps"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := testenv.PG(t)
			opts := []Option{WithKeyColumns("at")}
			if tc.ddl != "" {
				mustExec(t, pool, tc.ddl)
			} else {
				opts = append(opts, WithCreateTables(true))
			}
			s, err := NewUpsert(pool, "t", opts...)
			if err != nil {
				t.Fatal(err)
			}
			err = s.ValidateSchema(tc.schema)
			t.Log(err)
			if !errors.Is(err, ErrSchemaMismatch) {
				t.Fatalf("err = %v, want ErrSchemaMismatch", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if tc.ddl == "" {
				var exists bool
				if err := pool.QueryRow(ctxT(t), "SELECT to_regclass('t') IS NOT NULL").Scan(&exists); err != nil || exists {
					t.Errorf("table created (%v) for a schema that was refused", err)
				}
			}
		})
	}
}

// TestTruncateTimestampsOptIn: with WithTruncateTimestamps nanoseconds are
// truncated toward the past to microseconds, and two keys that become equal
// fail the batch as duplicates, naming them, before anything is written.
func TestTruncateTimestampsOptIn(t *testing.T) {
	pool := testenv.PG(t)
	ctx := ctxT(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, err := NewUpsert(pool, "t", WithKeyColumns("at"), WithCreateTables(true), WithTruncateTimestamps())
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ValidateSchema(tsNanoSchema); err != nil {
		t.Fatal(err)
	}
	base := arrow.Timestamp(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).UnixNano())

	dup := tsRecord(t, mem, tsNanoSchema, []arrow.Timestamp{base + 100, base + 200}, []int64{1, 2})
	defer dup.Release()
	err = s.AddBatch(ctx, 0, tsNanoSchema, []arrow.RecordBatch{dup})
	t.Log(err)
	if !errors.Is(err, ErrDuplicateKey) || !strings.Contains(err.Error(), "rows 0 and 1") || !strings.Contains(err.Error(), "microseconds") {
		t.Fatalf("err = %v, want ErrDuplicateKey for rows 0 and 1, equal in microseconds", err)
	}

	ok := tsRecord(t, mem, tsNanoSchema, []arrow.Timestamp{base + 999, base - 1}, []int64{1, 2})
	defer ok.Release()
	if err := s.AddBatch(ctx, 1, tsNanoSchema, []arrow.RecordBatch{ok}); err != nil {
		t.Fatal(err)
	}
	rows, err := pool.Query(ctx, "SELECT (extract(epoch FROM at) * 1000000)::bigint, total FROM t ORDER BY total")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var got [][2]int64
	for rows.Next() {
		var us, total int64
		if err := rows.Scan(&us, &total); err != nil {
			t.Fatal(err)
		}
		got = append(got, [2]int64{us, total})
	}
	want := [][2]int64{{int64(base) / 1000, 1}, {int64(base)/1000 - 1, 2}}
	if len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("got %v, want %v (truncated toward the past)", got, want)
	}
}

// Regression: a batch the database refuses for good (a constraint, a value
// the column cannot hold, a field a trigger does not know, a key PostgreSQL
// sees twice) failed with the driver's message only, indistinguishable
// from a passing fault. Now it fails at the first attempt with
// ErrRejected, naming the batch, the table and the SQLSTATE's meaning.
func TestDeterministicErrorsStopAtOnce(t *testing.T) {
	strSchema := arrow.NewSchema([]arrow.Field{
		{Name: "k", Type: arrow.BinaryTypes.String},
		{Name: "total", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	for _, tc := range []struct {
		name   string
		setup  []string
		schema *arrow.Schema
		keys   []string
		totals []*int64
		code   string
		want   []string
	}{
		{name: "check constraint", setup: []string{"CREATE TABLE t (k bigint PRIMARY KEY, total bigint CHECK (total >= 0))"},
			totals: []*int64{i64(1), i64(-5)}, code: "23514", want: []string{"integrity constraint violation", `"t_total_check"`}},
		{name: "not null", setup: []string{"CREATE TABLE t (k bigint PRIMARY KEY, total bigint NOT NULL)"},
			totals: []*int64{i64(1), nil}, code: "23502", want: []string{"integrity constraint violation", `column "total"`}},
		{name: "unique non-key column", setup: []string{"CREATE TABLE t (k bigint PRIMARY KEY, total bigint UNIQUE)"},
			totals: []*int64{i64(5), i64(5)}, code: "23505", want: []string{"integrity constraint violation", "Key (total)=(5)"}},
		{name: "out of range in a trigger", setup: []string{
			"CREATE TABLE t (k bigint PRIMARY KEY, total bigint)",
			`CREATE FUNCTION scale() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.total := NEW.total * 10000000000; RETURN NEW; END $$`,
			"CREATE TRIGGER scale BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION scale()",
		}, totals: []*int64{i64(1), i64(10000000000)}, code: "22003", want: []string{"data exception"}},
		{name: "undefined field in a trigger", setup: []string{
			"CREATE TABLE t (k bigint PRIMARY KEY, total bigint)",
			`CREATE FUNCTION audit() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.total := NEW.amount; RETURN NEW; END $$`,
			"CREATE TRIGGER audit BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION audit()",
		}, totals: []*int64{i64(1), i64(2)}, code: "42703", want: []string{"syntax error or access rule violation", "amount"}},
		{name: "two keys equal under the table's collation", setup: []string{
			"CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false)",
			"CREATE TABLE t (k text COLLATE ci PRIMARY KEY, total bigint)",
		}, schema: strSchema, totals: []*int64{i64(1), i64(2)}, code: "21000", want: []string{"cardinality violation"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := testenv.PG(t)
			ctx := ctxT(t)
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			for _, q := range tc.setup {
				mustExec(t, pool, q)
			}
			schema := tc.schema
			if schema == nil {
				schema = kvSchema
			}
			b := array.NewRecordBuilder(mem, schema)
			if schema == strSchema {
				b.Field(0).(*array.StringBuilder).AppendValues([]string{"a", "A"}, nil)
			} else {
				b.Field(0).(*array.Int64Builder).AppendValues([]int64{1, 2}, nil)
			}
			for _, v := range tc.totals {
				if v == nil {
					b.Field(1).AppendNull()
				} else {
					b.Field(1).(*array.Int64Builder).Append(*v)
				}
			}
			rec := b.NewRecordBatch()
			b.Release()
			defer rec.Release()

			s, err := NewOffsetsInSink(pool, "j", "t", WithKeyColumns("k"), WithCreateTables(true), WithRetry(5, 0, 0))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(ctx, "q"); err != nil {
				t.Fatal(err)
			}
			if err := s.ValidateSchema(schema); err != nil {
				t.Fatal(err)
			}
			res, err := s.Write(ctx, 3, schema, []arrow.RecordBatch{rec})
			t.Log(err)
			if !errors.Is(err, ErrRejected) {
				t.Fatalf("err = %v, want ErrRejected", err)
			}
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != tc.code {
				t.Errorf("err = %v, want SQLSTATE %s underneath", err, tc.code)
			}
			for _, w := range append([]string{"batch 3", `"t"`, tc.code, "not retried"}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if res.Attempts != 1 || s.Stats().Retries != 0 {
				t.Errorf("%d attempts, %d retries; want 1 and none", res.Attempts, s.Stats().Retries)
			}
			if p := progressOf(t, pool, "onceflow_progress", "j"); p != -1 {
				t.Errorf("progress %d after a rejected batch, want -1", p)
			}
		})
	}
}

// TestTransientErrorsRetried: PostgreSQL errors that a later attempt can
// escape (a lost serialization or deadlock race, an administrator
// shutdown, a lost connection, a lock timeout, a full connection table) are
// retried, and the batch lands once. A trigger raises each code on the
// first two attempts; the sequence it counts with is not transactional, so
// it keeps counting across the rolled-back attempts.
func TestTransientErrorsRetried(t *testing.T) {
	for _, code := range []string{"40001", "40P01", "57P01", "08006", "55P03", "53300"} {
		t.Run(code, func(t *testing.T) {
			pool := testenv.PG(t)
			ctx := ctxT(t)
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			mustExec(t, pool, "CREATE TABLE t (k bigint PRIMARY KEY, total bigint, onceflow_batch_id bigint)")
			mustExec(t, pool, "CREATE SEQUENCE attempts")
			mustExec(t, pool, `CREATE FUNCTION flaky() RETURNS trigger LANGUAGE plpgsql AS $$
				BEGIN
					IF nextval('attempts') <= 2 THEN
						RAISE EXCEPTION 'injected transient failure' USING ERRCODE = '`+code+`';
					END IF;
					RETURN NULL;
				END $$`)
			mustExec(t, pool, "CREATE TRIGGER flaky BEFORE INSERT ON t FOR EACH STATEMENT EXECUTE FUNCTION flaky()")
			s, err := NewUpsert(pool, "t", WithKeyColumns("k"), WithRetry(5, 0, 0))
			if err != nil {
				t.Fatal(err)
			}
			if err := s.ValidateSchema(kvSchema); err != nil {
				t.Fatal(err)
			}
			rec := kvRecord(t, mem, kvSchema, []int64{1, 2}, []*int64{i64(10), i64(20)})
			defer rec.Release()
			res, err := s.Write(ctx, 0, kvSchema, []arrow.RecordBatch{rec})
			if err != nil {
				t.Fatal(err)
			}
			if res.Attempts != 3 || s.Stats().Retries != 2 {
				t.Errorf("%d attempts, %d retries; want 3 and 2", res.Attempts, s.Stats().Retries)
			}
			if got := totals(t, pool, "t"); len(got) != 2 || *got[1] != 10 || *got[2] != 20 {
				t.Errorf("got %v", got)
			}
		})
	}
}
