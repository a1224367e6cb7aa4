package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/onceflow/onceflow/contract"
	"github.com/onceflow/onceflow/foreachbatch"
	"github.com/onceflow/onceflow/internal/testenv"
)

func TestOffsetsInSinkExactlyOnce(t *testing.T) {
	for _, tc := range []struct {
		name  string
		opts  []Option
		batch [][2][]int64 // per batch: keys, values
		want  map[int64]int64
	}{
		{
			name:  "add merge sums deltas",
			opts:  []Option{WithKeyColumns("k"), WithMerge(MergeAdd, "total")},
			batch: [][2][]int64{{{1, 2}, {10, 20}}, {{1, 3}, {5, 7}}, {{2}, {1}}},
			want:  map[int64]int64{1: 15, 2: 21, 3: 7},
		},
		{
			name:  "set merge keeps the last full value",
			opts:  []Option{WithKeyColumns("k")},
			batch: [][2][]int64{{{1, 2}, {10, 20}}, {{1, 3}, {15, 7}}, {{2}, {21}}},
			want:  map[int64]int64{1: 15, 2: 21, 3: 7},
		},
		{
			name:  "append without keys",
			opts:  nil,
			batch: [][2][]int64{{{1, 2}, {10, 20}}, {{3}, {7}}},
			want:  map[int64]int64{1: 10, 2: 20, 3: 7},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := testenv.PG(t)
			ctx := ctxT(t)
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			s, err := NewOffsetsInSink(pool, "job1", "totals", append(tc.opts, WithCreateTables(true))...)
			if err != nil {
				t.Fatal(err)
			}
			if err := s.Start(ctx, "q"); err != nil {
				t.Fatal(err)
			}
			if err := s.ValidateSchema(kvSchema); err != nil {
				t.Fatal(err)
			}
			for id, b := range tc.batch {
				vals := make([]*int64, len(b[1]))
				for i, v := range b[1] {
					vals[i] = i64(v)
				}
				rec := kvRecord(t, mem, kvSchema, b[0], vals)
				// Every batch is delivered three times, as after two crashes.
				for try := range 3 {
					res, err := s.Write(ctx, int64(id), kvSchema, []arrow.RecordBatch{rec})
					if err != nil {
						t.Fatalf("batch %d try %d: %v", id, try, err)
					}
					if res.Skipped != (try > 0) {
						t.Fatalf("batch %d try %d: skipped=%v", id, try, res.Skipped)
					}
					if !res.Skipped && res.Rows != int64(len(b[0])) {
						t.Fatalf("batch %d: rows %d, want %d", id, res.Rows, len(b[0]))
					}
				}
				// An older batch arriving late is skipped too.
				if id > 0 {
					res, err := s.Write(ctx, int64(id-1), kvSchema, []arrow.RecordBatch{rec})
					if err != nil || !res.Skipped {
						t.Fatalf("late batch %d: %+v %v", id-1, res, err)
					}
				}
				rec.Release()
			}
			got := totals(t, pool, "totals")
			if len(got) != len(tc.want) {
				t.Fatalf("got %d rows, want %d", len(got), len(tc.want))
			}
			for k, v := range tc.want {
				if got[k] == nil || *got[k] != v {
					t.Errorf("k=%d: got %v, want %d", k, got[k], v)
				}
			}
			n := int64(len(tc.batch))
			if st := s.Stats(); st.Applied != n || st.Skipped != 2*n+n-1 {
				t.Errorf("stats %+v, want %d applied, %d skipped", st, n, 3*n-1)
			}
			if p := progressOf(t, pool, "onceflow_progress", "job1"); p != n-1 {
				t.Errorf("progress %d, want %d", p, n-1)
			}
			if a, err := s.Guard().Applied(ctx); err != nil || a != n-1 {
				t.Errorf("Applied = %d, %v", a, err)
			}
		})
	}
}

func TestSkippedIsLogged(t *testing.T) {
	pool := testenv.PG(t)
	ctx := ctxT(t)
	var buf strings.Builder
	s, err := NewOffsetsInSink(pool, "j", "totals", WithKeyColumns("k"), WithCreateTables(true), WithLogger(newTextLogger(&buf)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	rec := kvRecord(t, mem, kvSchema, []int64{1}, []*int64{i64(1)})
	defer rec.Release()
	for range 2 {
		if err := s.AddBatch(ctx, 5, kvSchema, []arrow.RecordBatch{rec}); err != nil {
			t.Fatal(err)
		}
	}
	if !strings.Contains(buf.String(), "already applied") || !strings.Contains(buf.String(), "batch=5") {
		t.Errorf("log does not report the skip: %q", buf.String())
	}
	if st := s.Stats(); st.Skipped != 1 || st.Applied != 1 {
		t.Errorf("stats %+v", st)
	}
}

func TestEmptyBatchAdvancesProgress(t *testing.T) {
	pool := testenv.PG(t)
	ctx := ctxT(t)
	s, err := NewOffsetsInSink(pool, "j", "totals", WithKeyColumns("k"), WithCreateTables(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if err := s.ValidateSchema(kvSchema); err != nil {
		t.Fatal(err)
	}
	if p := progressOf(t, pool, "onceflow_progress", "j"); p != -1 {
		t.Fatalf("fresh progress %d, want -1", p)
	}
	if err := s.AddBatch(ctx, 0, kvSchema, nil); err != nil {
		t.Fatal(err)
	}
	if p := progressOf(t, pool, "onceflow_progress", "j"); p != 0 {
		t.Fatalf("progress %d, want 0", p)
	}
}

func TestTwoJobsShareProgressTable(t *testing.T) {
	pool := testenv.PG(t)
	ctx := ctxT(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	a, err := NewOffsetsInSink(pool, "a", "ta", WithKeyColumns("k"), WithMerge(MergeAdd, "total"), WithCreateTables(true), WithProgressTable("shared"))
	if err != nil {
		t.Fatal(err)
	}
	b, err := NewOffsetsInSink(pool, "b", "tb", WithKeyColumns("k"), WithMerge(MergeAdd, "total"), WithCreateTables(true), WithProgressTable("shared"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Sink{a, b} {
		if err := s.Start(ctx, "q"); err != nil {
			t.Fatal(err)
		}
	}
	rec := kvRecord(t, mem, kvSchema, []int64{1}, []*int64{i64(1)})
	defer rec.Release()
	// a runs batches 0..4; b only 0..1: each job's progress is its own.
	for id := range int64(5) {
		if err := a.AddBatch(ctx, id, kvSchema, []arrow.RecordBatch{rec}); err != nil {
			t.Fatal(err)
		}
	}
	for id := range int64(2) {
		res, err := b.Write(ctx, id, kvSchema, []arrow.RecordBatch{rec})
		if err != nil || res.Skipped {
			t.Fatalf("b batch %d: %+v %v", id, res, err)
		}
	}
	if got := totals(t, pool, "ta")[1]; got == nil || *got != 5 {
		t.Errorf("ta total %v, want 5", got)
	}
	if got := totals(t, pool, "tb")[1]; got == nil || *got != 2 {
		t.Errorf("tb total %v, want 2", got)
	}
	if pa, pb := progressOf(t, pool, "shared", "a"), progressOf(t, pool, "shared", "b"); pa != 4 || pb != 1 {
		t.Errorf("progress a=%d b=%d, want 4 and 1", pa, pb)
	}
}

func TestAddMergeNulls(t *testing.T) {
	pool := testenv.PG(t)
	ctx := ctxT(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, err := NewOffsetsInSink(pool, "j", "totals", WithKeyColumns("k"), WithMerge(MergeAdd, "total"), WithCreateTables(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	batches := []arrow.RecordBatch{
		kvRecord(t, mem, kvSchema, []int64{1, 2, 3}, []*int64{nil, i64(4), nil}),
		kvRecord(t, mem, kvSchema, []int64{1, 2, 3}, []*int64{i64(3), nil, nil}),
	}
	for id, r := range batches {
		if err := s.AddBatch(ctx, int64(id), kvSchema, []arrow.RecordBatch{r}); err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	got := totals(t, pool, "totals")
	if got[1] == nil || *got[1] != 3 || got[2] == nil || *got[2] != 4 || got[3] != nil {
		t.Errorf("got 1=%v 2=%v 3=%v, want 3, 4, NULL", got[1], got[2], got[3])
	}
}

func TestDuplicateKeysInBatch(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	t.Run("set merge fails naming the key", func(t *testing.T) {
		pool := testenv.PG(t)
		ctx := ctxT(t)
		s, err := NewOffsetsInSink(pool, "j", "totals", WithKeyColumns("k"), WithCreateTables(true))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx, "q"); err != nil {
			t.Fatal(err)
		}
		rec := kvRecord(t, mem, kvSchema, []int64{1, 7, 7}, []*int64{i64(1), i64(2), i64(3)})
		defer rec.Release()
		err = s.AddBatch(ctx, 0, kvSchema, []arrow.RecordBatch{rec})
		t.Log(err)
		if !errors.Is(err, ErrDuplicateKey) || !strings.Contains(err.Error(), "k=7") || !strings.Contains(err.Error(), "rows 1 and 2") {
			t.Fatalf("err = %v, want ErrDuplicateKey naming k=7, rows 1 and 2", err)
		}
		if p := progressOf(t, pool, "onceflow_progress", "j"); p != -1 {
			t.Errorf("progress moved to %d on a failed batch", p)
		}
	})
	t.Run("add merge sums within the batch", func(t *testing.T) {
		pool := testenv.PG(t)
		ctx := ctxT(t)
		s, err := NewOffsetsInSink(pool, "j", "totals", WithKeyColumns("k"), WithMerge(MergeAdd, "total"), WithCreateTables(true))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Start(ctx, "q"); err != nil {
			t.Fatal(err)
		}
		r1 := kvRecord(t, mem, kvSchema, []int64{7, 1}, []*int64{i64(2), i64(1)})
		r2 := kvRecord(t, mem, kvSchema, []int64{7}, []*int64{i64(3)})
		defer r1.Release()
		defer r2.Release()
		if err := s.AddBatch(ctx, 0, kvSchema, []arrow.RecordBatch{r1, r2}); err != nil {
			t.Fatal(err)
		}
		if got := totals(t, pool, "totals")[7]; got == nil || *got != 5 {
			t.Errorf("k=7 total %v, want 5", got)
		}
	})
}

func TestUpsert(t *testing.T) {
	pool := testenv.PG(t)
	ctx := ctxT(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	mustExec(t, pool, "CREATE TABLE totals (k bigint PRIMARY KEY, total bigint, onceflow_batch_id bigint NOT NULL DEFAULT -1)")
	s, err := NewUpsert(pool, "totals", WithKeyColumns("k"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ValidateSchema(kvSchema); err != nil {
		t.Fatal(err)
	}
	r0 := kvRecord(t, mem, kvSchema, []int64{1, 2}, []*int64{i64(10), i64(20)})
	r1 := kvRecord(t, mem, kvSchema, []int64{1}, []*int64{i64(11)})
	defer r0.Release()
	defer r1.Release()
	for _, step := range []struct {
		id  int64
		rec arrow.RecordBatch
	}{{0, r0}, {0, r0}, {1, r1}, {1, r1}} {
		if err := s.AddBatch(ctx, step.id, kvSchema, []arrow.RecordBatch{step.rec}); err != nil {
			t.Fatal(err)
		}
	}
	got := totals(t, pool, "totals")
	if len(got) != 2 || *got[1] != 11 || *got[2] != 20 {
		t.Errorf("got %v", got)
	}
	if s.Guarantee() != contract.ExactlyOnce || s.Guard() != nil {
		t.Error("upsert sink: wrong guarantee or guard")
	}
	// Each row records the batch that last wrote it; the newest is the
	// sink's high-water mark (a lower bound: an empty batch leaves no row,
	// so the upsert sink has no exact position).
	var b1, b2 int64
	if err := pool.QueryRow(ctx, "SELECT (SELECT onceflow_batch_id FROM totals WHERE k = 1), (SELECT onceflow_batch_id FROM totals WHERE k = 2)").Scan(&b1, &b2); err != nil {
		t.Fatal(err)
	}
	if b1 != 1 || b2 != 0 {
		t.Errorf("batch ids k=1 %d, k=2 %d; want 1 and 0", b1, b2)
	}
	if id, ok, err := s.HighestBatchID(ctx); err != nil || !ok || id != 1 {
		t.Errorf("HighestBatchID = %d, %v, %v; want 1, true", id, ok, err)
	}
	if _, _, err := s.LastBatchID(ctx); !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("LastBatchID of an upsert sink: %v, want errors.ErrUnsupported", err)
	}
}

// TestUpsertBatchIDColumnChecked: an upsert table without its batch id
// column (or with one of another type) is refused at ValidateSchema with
// the statement that fixes it; an empty table reports no position.
func TestUpsertBatchIDColumnChecked(t *testing.T) {
	for _, tc := range []struct {
		name string
		ddl  string
		opts []Option
		want []string
	}{
		{"missing", "CREATE TABLE t (k bigint PRIMARY KEY, total bigint)", nil,
			[]string{`"t"`, `no column "onceflow_batch_id"`, `ALTER TABLE "t" ADD COLUMN "onceflow_batch_id" bigint NOT NULL DEFAULT -1`}},
		{"named and missing", "CREATE TABLE t (k bigint PRIMARY KEY, total bigint, onceflow_batch_id bigint)", []Option{WithBatchIDColumn("written_by")},
			[]string{`"t"`, `no column "written_by"`, `ADD COLUMN "written_by" bigint`}},
		{"not bigint", "CREATE TABLE t (k bigint PRIMARY KEY, total bigint, onceflow_batch_id integer)", nil,
			[]string{`"onceflow_batch_id"`, "integer", `ALTER TABLE "t" ALTER COLUMN "onceflow_batch_id" TYPE bigint`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := testenv.PG(t)
			mustExec(t, pool, tc.ddl)
			s, err := NewUpsert(pool, "t", append(tc.opts, WithKeyColumns("k"))...)
			if err != nil {
				t.Fatal(err)
			}
			err = s.ValidateSchema(kvSchema)
			t.Log(err)
			if !errors.Is(err, ErrSchemaMismatch) {
				t.Fatalf("err = %v, want ErrSchemaMismatch", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	t.Run("created, and empty", func(t *testing.T) {
		pool := testenv.PG(t)
		ctx := ctxT(t)
		s, err := NewUpsert(pool, "t", WithKeyColumns("k"), WithCreateTables(true), WithBatchIDColumn("written_by"))
		if err != nil {
			t.Fatal(err)
		}
		if err := s.ValidateSchema(kvSchema); err != nil {
			t.Fatal(err)
		}
		if id, ok, err := s.HighestBatchID(ctx); err != nil || ok {
			t.Errorf("HighestBatchID of an empty table = %d, %v, %v; want none", id, ok, err)
		}
		var typ string
		if err := pool.QueryRow(ctx, "SELECT format_type(atttypid, atttypmod) FROM pg_attribute WHERE attrelid = 't'::regclass AND attname = 'written_by'").Scan(&typ); err != nil || typ != "bigint" {
			t.Errorf("created batch id column: %q, %v", typ, err)
		}
	})
	t.Run("output column with its name", func(t *testing.T) {
		pool := testenv.PG(t)
		s, err := NewUpsert(pool, "t", WithKeyColumns("k"), WithCreateTables(true), WithBatchIDColumn("total"))
		if err != nil {
			t.Fatal(err)
		}
		err = s.ValidateSchema(kvSchema)
		if !errors.Is(err, ErrSchemaMismatch) || !strings.Contains(err.Error(), `"total" has the name of the batch id column`) {
			t.Fatalf("err = %v", err)
		}
	})
}

func TestConfigErrors(t *testing.T) {
	pool := testenv.PG(t)
	for _, tc := range []struct {
		name string
		mk   func() (*Sink, error)
		want string
	}{
		{"upsert refuses add", func() (*Sink, error) {
			return NewUpsert(pool, "t", WithKeyColumns("k"), WithMerge(MergeAdd, "total"))
		}, `column "total" has an add merge`},
		{"upsert needs keys", func() (*Sink, error) { return NewUpsert(pool, "t") }, "needs WithKeyColumns"},
		{"batch id column is a key", func() (*Sink, error) {
			return NewUpsert(pool, "t", WithKeyColumns("k"), WithBatchIDColumn("k"))
		}, `batch id column "k" is also a key`},
		{"batch id column for offsets-in-sink", func() (*Sink, error) {
			return NewOffsetsInSink(pool, "j", "t", WithBatchIDColumn("b"))
		}, "WithBatchIDColumn applies to NewUpsert"},
		{"upsert has no progress", func() (*Sink, error) {
			return NewUpsert(pool, "t", WithKeyColumns("k"), WithProgressTable("p"))
		}, "keeps no progress table"},
		{"add needs keys", func() (*Sink, error) {
			return NewOffsetsInSink(pool, "j", "t", WithMerge(MergeAdd, "total"))
		}, "needs WithKeyColumns"},
		{"merge on key", func() (*Sink, error) {
			return NewOffsetsInSink(pool, "j", "t", WithKeyColumns("k"), WithMerge(MergeAdd, "k"))
		}, "is a key column"},
		{"empty job", func() (*Sink, error) { return NewOffsetsInSink(pool, "", "t") }, "empty job"},
		{"bad retry", func() (*Sink, error) { return NewOffsetsInSink(pool, "j", "t", WithRetry(0, 0, 0)) }, "maxAttempts 0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.mk()
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrConfig containing %q", err, tc.want)
			}
		})
	}
}

func TestSchemaMismatch(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ddl    string
		schema *arrow.Schema
		keys   []string
		want   []string // substrings of the error
	}{
		{"missing column", "CREATE TABLE t (k bigint PRIMARY KEY)", kvSchema, []string{"k"},
			[]string{`"total"`, "int64", "has no column"}},
		{"narrower integer", "CREATE TABLE t (k bigint PRIMARY KEY, total integer)", kvSchema, []string{"k"},
			[]string{`"total"`, "int64", "integer", "narrower"}},
		{"text into bigint", "CREATE TABLE t (k bigint PRIMARY KEY, total bigint)",
			arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "total", Type: arrow.BinaryTypes.String}}, nil),
			[]string{"k"}, []string{`"total"`, "utf8", "bigint"}},
		{"decimal scale rounded", "CREATE TABLE t (k bigint PRIMARY KEY, total numeric(10,2))",
			arrow.NewSchema([]arrow.Field{{Name: "k", Type: arrow.PrimitiveTypes.Int64}, {Name: "total", Type: &arrow.Decimal128Type{Precision: 10, Scale: 4}}}, nil),
			[]string{"k"}, []string{`"total"`, "decimal", "numeric(10,2)", "rounded"}},
		{"no unique index", "CREATE TABLE t (k bigint, total bigint)", kvSchema, []string{"k"},
			[]string{"no unique index", `"k"`}},
		{"missing table", "", kvSchema, []string{"k"}, []string{`"t"`, "does not exist"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := testenv.PG(t)
			if tc.ddl != "" {
				mustExec(t, pool, tc.ddl)
			}
			s, err := NewOffsetsInSink(pool, "j", "t", WithKeyColumns(tc.keys...))
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
		})
	}
}

func TestProgressTableMissing(t *testing.T) {
	pool := testenv.PG(t)
	s, err := NewOffsetsInSink(pool, "j", "t")
	if err != nil {
		t.Fatal(err)
	}
	err = s.Start(ctxT(t), "q")
	if !errors.Is(err, ErrSchemaMismatch) || !strings.Contains(err.Error(), "CREATE TABLE IF NOT EXISTS") {
		t.Fatalf("err = %v", err)
	}
}

func TestWeirdIdentifiers(t *testing.T) {
	pool := testenv.PG(t)
	ctx := ctxT(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	const (
		schemaName = `Sch "ema"; DROP TABLE x; --`
		tableName  = `Weird "name".t; --`
		progress   = `Pro'gress "tbl"`
		key        = `key "col"`
		val        = `Total'; DELETE FROM t; --`
	)
	mustExec(t, pool, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schemaName}.Sanitize()+" CASCADE")
	mustExec(t, pool, "CREATE SCHEMA "+pgx.Identifier{schemaName}.Sanitize())
	t.Cleanup(func() { mustExec(t, pool, "DROP SCHEMA "+pgx.Identifier{schemaName}.Sanitize()+" CASCADE") })
	schema := arrow.NewSchema([]arrow.Field{
		{Name: key, Type: arrow.PrimitiveTypes.Int64},
		{Name: val, Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	}, nil)
	s, err := NewOffsetsInSink(pool, `job "x"'`, tableName, WithTableSchema(schemaName), WithProgressTable(progress),
		WithKeyColumns(key), WithMerge(MergeAdd, val), WithCreateTables(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if err := s.ValidateSchema(schema); err != nil {
		t.Fatal(err)
	}
	rec := kvRecord(t, mem, schema, []int64{1, 2}, []*int64{i64(5), i64(6)})
	defer rec.Release()
	for id := range int64(2) {
		if err := s.AddBatch(ctx, id, schema, []arrow.RecordBatch{rec}); err != nil {
			t.Fatal(err)
		}
		if err := s.AddBatch(ctx, id, schema, []arrow.RecordBatch{rec}); err != nil {
			t.Fatal(err)
		}
	}
	q := fmt.Sprintf("SELECT sum(%s) FROM %s", pgx.Identifier{val}.Sanitize(), pgx.Identifier{schemaName, tableName}.Sanitize())
	var sum int64
	if err := pool.QueryRow(ctx, q).Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum != 22 {
		t.Errorf("sum %d, want 22", sum)
	}
	if p := progressOf(t, pool, pgx.Identifier{schemaName, progress}.Sanitize(), `job "x"'`); p != 1 {
		t.Errorf("progress %d", p)
	}
}

// TestConnectionCutMidBatch terminates the sink's own backend between the
// progress update and the rows: the transaction is lost, retried, and the
// batch ends applied exactly once.
func TestConnectionCutMidBatch(t *testing.T) {
	pool := testenv.PG(t)
	ctx := ctxT(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, err := NewOffsetsInSink(pool, "j", "totals", WithKeyColumns("k"), WithMerge(MergeAdd, "total"), WithCreateTables(true),
		WithRetry(4, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	if err := s.ValidateSchema(kvSchema); err != nil {
		t.Fatal(err)
	}
	cuts := 0
	s.guard.afterProgress = func(ctx context.Context, tx pgx.Tx) {
		if cuts == 2 {
			return
		}
		cuts++
		pid := tx.Conn().PgConn().PID()
		var ok bool
		if err := pool.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
			t.Errorf("terminate backend %d: %v %v", pid, ok, err)
		}
	}
	rec := kvRecord(t, mem, kvSchema, []int64{1, 2}, []*int64{i64(5), i64(6)})
	defer rec.Release()
	res, err := s.Write(ctx, 0, kvSchema, []arrow.RecordBatch{rec})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 3 || res.Skipped || cuts != 2 {
		t.Fatalf("result %+v after %d cuts, want 3 attempts", res, cuts)
	}
	if err := s.AddBatch(ctx, 0, kvSchema, []arrow.RecordBatch{rec}); err != nil {
		t.Fatal(err)
	}
	got := totals(t, pool, "totals")
	if *got[1] != 5 || *got[2] != 6 {
		t.Errorf("got %v", got)
	}
	if st := s.Stats(); st.Retries != 2 || st.Applied != 1 || st.Skipped != 1 {
		t.Errorf("stats %+v", st)
	}

	// Out of attempts: the error says so, and nothing was applied.
	s.guard.afterProgress = func(ctx context.Context, tx pgx.Tx) {
		_, _ = pool.Exec(ctx, "SELECT pg_terminate_backend($1)", tx.Conn().PgConn().PID())
	}
	_, err = s.Write(ctx, 1, kvSchema, []arrow.RecordBatch{rec})
	t.Log(err)
	if !errors.Is(err, ErrRetriesExhausted) {
		t.Fatalf("err = %v, want ErrRetriesExhausted", err)
	}
	if p := progressOf(t, pool, "onceflow_progress", "j"); p != 0 {
		t.Errorf("progress %d after failed batch 1, want 0", p)
	}
}

func TestRetryable(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{context.Canceled, false},
		{errors.New("syntax"), false},
		{fmt.Errorf("x: %w", &pgconn.PgError{Code: "40001"}), true},
		{&pgconn.PgError{Code: "40P01"}, true},
		{&pgconn.PgError{Code: "57P01"}, true},
		{&pgconn.PgError{Code: "08006"}, true},
		{&pgconn.PgError{Code: "55P03"}, true},
		{&pgconn.PgError{Code: "53100"}, true},
		{&pgconn.PgError{Code: "23505"}, false},
		{&pgconn.PgError{Code: "21000"}, false},
		{&pgconn.PgError{Code: "XX000"}, false},
	} {
		if got := retryable(tc.err); got != tc.want {
			t.Errorf("retryable(%v) = %v, want %v", tc.err, got, tc.want)
		}
	}
}

func TestRejectedClasses(t *testing.T) {
	for code, want := range map[string]bool{
		"23505": true, "23514": true, "22003": true, "22001": true, "21000": true, "42703": true, "42P10": true,
		"0A000": true, "P0001": true, "40002": true,
		"40001": false, "40P01": false, "08006": false, "57P01": false, "53300": false, "XX000": false, "25006": false, "": false,
	} {
		_, _, got := rejected(fmt.Errorf("x: %w", &pgconn.PgError{Code: code}))
		if got != want {
			t.Errorf("rejected(SQLSTATE %q) = %v, want %v", code, got, want)
		}
		if got && retryable(&pgconn.PgError{Code: code}) {
			t.Errorf("SQLSTATE %q is both rejected and retryable", code)
		}
	}
	if _, _, got := rejected(errors.New("not a PostgreSQL error")); got {
		t.Error("a plain error is rejected")
	}
}

// TestForeachBatchGuard runs the ExampleGuard_Run pattern for real: user
// code writes a table through Apply plus an audit row, under one Guard.Run,
// and every batch is delivered twice.
func TestForeachBatchGuard(t *testing.T) {
	pool := testenv.PG(t)
	ctx := ctxT(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	mustExec(t, pool, "CREATE TABLE balances (k bigint PRIMARY KEY, total bigint)")
	mustExec(t, pool, "CREATE TABLE audit (batch_id bigint)")
	g, err := NewGuard(pool, "ledger", WithCreateTables(true))
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Start(ctx); err != nil {
		t.Fatal(err)
	}
	bal, err := NewOffsetsInSink(pool, "unused", "balances", WithKeyColumns("k"), WithMerge(MergeAdd, "total"))
	if err != nil {
		t.Fatal(err)
	}
	sink := foreachbatch.New(func(ctx context.Context, batchID int64, schema *arrow.Schema, recs []arrow.RecordBatch) error {
		_, err := g.Run(ctx, batchID, func(ctx context.Context, tx pgx.Tx) error {
			if _, err := bal.Apply(ctx, tx, batchID, schema, recs); err != nil {
				return err
			}
			_, err := tx.Exec(ctx, "INSERT INTO audit (batch_id) VALUES ($1)", batchID)
			return err
		})
		return err
	}, foreachbatch.WithIdempotent())
	rec := kvRecord(t, mem, kvSchema, []int64{1, 2}, []*int64{i64(10), i64(1)})
	defer rec.Release()
	for _, id := range []int64{0, 0, 1, 1, 2, 2} {
		if err := sink.AddBatch(ctx, id, kvSchema, []arrow.RecordBatch{rec}); err != nil {
			t.Fatal(err)
		}
	}
	got := totals(t, pool, "balances")
	if *got[1] != 30 || *got[2] != 3 {
		t.Errorf("balances %d, %d; want 30, 3", *got[1], *got[2])
	}
	var audits int
	if err := pool.QueryRow(ctx, "SELECT count(*) FROM audit").Scan(&audits); err != nil || audits != 3 {
		t.Errorf("%d audit rows (%v), want 3", audits, err)
	}
	if st := g.Stats(); st.Applied != 3 || st.Skipped != 3 {
		t.Errorf("stats %+v", st)
	}
}

// TestDeadlockRetried makes two guarded transactions lock two rows in
// opposite orders: PostgreSQL aborts one with 40P01, the guard runs it again,
// and both batches end applied once.
func TestDeadlockRetried(t *testing.T) {
	pool := testenv.PG(t)
	ctx := ctxT(t)
	mustExec(t, pool, "CREATE TABLE locks (id int PRIMARY KEY, v int NOT NULL)")
	mustExec(t, pool, "INSERT INTO locks VALUES (1, 0), (2, 0)")
	var guards [2]*Guard
	for i, job := range []string{"a", "b"} {
		// The backoff lets the survivor commit before the victim retries; with
		// none, the victim can take the first lock again and deadlock anew.
		g, err := NewGuard(pool, job, WithCreateTables(true), WithRetry(5, 50*time.Millisecond, 200*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		if err := g.Start(ctx); err != nil {
			t.Fatal(err)
		}
		guards[i] = g
	}
	var barrier sync.WaitGroup
	barrier.Add(2)
	var first [2]sync.Once
	results := make(chan error, 2)
	for i := range 2 {
		go func() {
			order := []int{1, 2}
			if i == 1 {
				order = []int{2, 1}
			}
			_, err := guards[i].Run(ctx, 0, func(ctx context.Context, tx pgx.Tx) error {
				if _, err := tx.Exec(ctx, "UPDATE locks SET v = v + 1 WHERE id = $1", order[0]); err != nil {
					return err
				}
				first[i].Do(func() { barrier.Done(); barrier.Wait() }) // both hold their first lock
				_, err := tx.Exec(ctx, "UPDATE locks SET v = v + 1 WHERE id = $1", order[1])
				return err
			})
			results <- err
		}()
	}
	for range 2 {
		if err := <-results; err != nil {
			t.Fatal(err)
		}
	}
	var v1, v2 int
	if err := pool.QueryRow(ctx, "SELECT (SELECT v FROM locks WHERE id = 1), (SELECT v FROM locks WHERE id = 2)").Scan(&v1, &v2); err != nil {
		t.Fatal(err)
	}
	if v1 != 2 || v2 != 2 {
		t.Errorf("v = %d, %d; want 2, 2 (each batch once)", v1, v2)
	}
	if r := guards[0].Stats().Retries + guards[1].Stats().Retries; r < 1 {
		t.Errorf("%d retries, want at least 1 (a deadlock victim)", r)
	}
}

// TestCreateTableInLostTransaction: with WithCreateTables and no ValidateSchema,
// the first batch creates the table inside its own transaction; when that
// transaction is lost the retry must create it again, not trust a plan made
// for a table that was rolled back.
func TestCreateTableInLostTransaction(t *testing.T) {
	pool := testenv.PG(t)
	ctx := ctxT(t)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	s, err := NewOffsetsInSink(pool, "j", "totals", WithKeyColumns("k"), WithCreateTables(true), WithRetry(3, 0, 0))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	rec := kvRecord(t, mem, kvSchema, []int64{1}, []*int64{i64(5)})
	defer rec.Release()
	// Fail the first attempt after the rows are written (and the table was
	// created), before COMMIT, by cutting the connection in the rows step.
	cut := false
	res, err := s.guard.Run(ctx, 0, func(ctx context.Context, tx pgx.Tx) error {
		if _, err := s.Apply(ctx, tx, 0, kvSchema, []arrow.RecordBatch{rec}); err != nil {
			return err
		}
		if !cut {
			cut = true
			_, _ = pool.Exec(ctx, "SELECT pg_terminate_backend($1)", tx.Conn().PgConn().PID())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if res.Attempts != 2 {
		t.Errorf("%d attempts, want 2", res.Attempts)
	}
	if got := totals(t, pool, "totals")[1]; got == nil || *got != 5 {
		t.Errorf("total %v, want 5", got)
	}
}

// TestValidateSchemaRetriesLostConnection kills the pool's idle backend
// before ValidateSchema, for both kinds of sink: the first statement meets
// a dead connection and the check is retried, not failed (and not a panic:
// the offsets-in-sink sink once had no retrier for it).
func TestValidateSchemaRetriesLostConnection(t *testing.T) {
	for _, kind := range []string{"offsets-in-sink", "upsert"} {
		t.Run(kind, func(t *testing.T) {
			pool, admin := testenv.PG(t), testenv.PG(t)
			ctx := ctxT(t)
			var s *Sink
			var err error
			if kind == "upsert" {
				s, err = NewUpsert(pool, "totals", WithKeyColumns("k"), WithCreateTables(true), WithRetry(4, 0, 0))
			} else {
				s, err = NewOffsetsInSink(pool, "j", "totals", WithKeyColumns("k"), WithMerge(MergeAdd, "total"), WithCreateTables(true), WithRetry(4, 0, 0))
			}
			if err != nil {
				t.Fatal(err)
			}
			conn, err := pool.Acquire(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pid := conn.Conn().PgConn().PID()
			conn.Release()
			var ok bool
			if err := admin.QueryRow(ctx, "SELECT pg_terminate_backend($1)", pid).Scan(&ok); err != nil || !ok {
				t.Fatalf("terminate backend %d: %v %v", pid, ok, err)
			}
			if err := s.ValidateSchema(kvSchema); err != nil {
				t.Fatal(err)
			}
			if st := s.Stats(); st.Retries < 1 {
				t.Errorf("stats %+v: want the validation retried", st)
			}
		})
	}
}
