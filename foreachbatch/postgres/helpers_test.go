package postgres

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/jackc/pgx/v5/pgxpool"
)

// kvSchema is the schema most tests use: a key and an amount.
var kvSchema = arrow.NewSchema([]arrow.Field{
	{Name: "k", Type: arrow.PrimitiveTypes.Int64},
	{Name: "total", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
}, nil)

// kvRecord builds a record of (k, total) pairs; a nil total is NULL.
func kvRecord(t testing.TB, mem memory.Allocator, schema *arrow.Schema, keys []int64, totals []*int64) arrow.RecordBatch {
	t.Helper()
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	kb := b.Field(0).(*array.Int64Builder)
	tb := b.Field(1).(*array.Int64Builder)
	for i, k := range keys {
		kb.Append(k)
		if totals[i] == nil {
			tb.AppendNull()
		} else {
			tb.Append(*totals[i])
		}
	}
	return b.NewRecordBatch()
}

func i64(v int64) *int64 { return &v }

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func mustExec(t testing.TB, pool *pgxpool.Pool, sql string) {
	t.Helper()
	if _, err := pool.Exec(ctxT(t), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

// totals reads k → total from a table.
func totals(t testing.TB, pool *pgxpool.Pool, table string) map[int64]*int64 {
	t.Helper()
	rows, err := pool.Query(ctxT(t), "SELECT k, total FROM "+table)
	if err != nil {
		t.Fatalf("read %s: %v", table, err)
	}
	defer rows.Close()
	out := map[int64]*int64{}
	for rows.Next() {
		var k int64
		var v *int64
		if err := rows.Scan(&k, &v); err != nil {
			t.Fatal(err)
		}
		out[k] = v
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func progressOf(t testing.TB, pool *pgxpool.Pool, progress, job string) int64 {
	t.Helper()
	var id int64
	if err := pool.QueryRow(ctxT(t), "SELECT batch_id FROM "+progress+" WHERE job = $1", job).Scan(&id); err != nil {
		t.Fatalf("read progress of %s: %v", job, err)
	}
	return id
}

func newTextLogger(w io.Writer) *slog.Logger { return slog.New(slog.NewTextHandler(w, nil)) }
