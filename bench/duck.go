package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
	_ "github.com/duckdb/duckdb-go/v2" // the "duckdb" database/sql driver
)

// duck is an in-memory DuckDB database on one connection.
type duck struct {
	db   *sql.DB
	conn *sql.Conn
}

func openDuck(ctx context.Context) (*duck, error) {
	db, err := sql.Open("duckdb", "")
	if err != nil {
		return nil, fmt.Errorf("open duckdb: %w", err)
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("duckdb connection: %w", err)
	}
	return &duck{db: db, conn: conn}, nil
}

func (d *duck) close() {
	d.conn.Close()
	d.db.Close()
}

func (d *duck) exec(ctx context.Context, q string) error {
	if _, err := d.conn.ExecContext(ctx, q); err != nil {
		return fmt.Errorf("duckdb %q: %w", firstLine(q), err)
	}
	return nil
}

func firstLine(q string) string {
	q = strings.TrimSpace(q)
	if i := strings.IndexByte(q, '\n'); i >= 0 {
		return q[:i] + " …"
	}
	return q
}

// load creates table from the records that next yields (nil at the end),
// keeping only the columns cols of each: they are written to a Parquet file
// in dir (Arrow's own writer, uncompressed) and read back with
// read_parquet, which is far faster than appending row by row.
// Timestamps arrive as TIMESTAMP WITH TIME ZONE (epoch_ms reads them
// without a time zone).
func (d *duck) load(ctx context.Context, dir, table string, next func() arrow.RecordBatch, cols []int) error {
	f, err := os.CreateTemp(dir, "bench-"+table+"-*.parquet")
	if err != nil {
		return err
	}
	path := f.Name()
	defer os.Remove(path)
	var w *pqarrow.FileWriter
	for rec := next(); rec != nil; rec = next() {
		sub := project(rec, cols)
		rec.Release()
		if w == nil {
			props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Uncompressed), parquet.WithDictionaryDefault(false))
			w, err = pqarrow.NewFileWriter(sub.Schema(), f, props, pqarrow.DefaultWriterProps())
			if err != nil {
				sub.Release()
				f.Close()
				return fmt.Errorf("parquet writer for %s: %w", table, err)
			}
		}
		err = w.WriteBuffered(sub)
		sub.Release()
		if err != nil {
			w.Close()
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if w == nil {
		f.Close()
		return fmt.Errorf("load %s: no records", table)
	}
	if err := w.Close(); err != nil { // closes f
		return fmt.Errorf("close %s: %w", path, err)
	}
	return d.exec(ctx, fmt.Sprintf("CREATE OR REPLACE TABLE %s AS SELECT * FROM read_parquet('%s')", table, path))
}

// project returns a record with the columns cols of rec.
func project(rec arrow.RecordBatch, cols []int) arrow.RecordBatch {
	fields := make([]arrow.Field, len(cols))
	arrs := make([]arrow.Array, len(cols))
	for i, c := range cols {
		fields[i] = rec.Schema().Field(c)
		arrs[i] = rec.Column(c)
	}
	return array.NewRecordBatch(arrow.NewSchema(fields, nil), arrs, rec.NumRows())
}

// timedQuery runs q with threads DuckDB threads, materialised into the
// table result (so only the query is timed, not fetching it), and returns
// the wall and CPU time it took.
func (d *duck) timedQuery(ctx context.Context, threads int, q string) (wall, cpu time.Duration, err error) {
	if err := d.exec(ctx, fmt.Sprintf("SET threads = %d", threads)); err != nil {
		return 0, 0, err
	}
	if err := d.exec(ctx, "DROP TABLE IF EXISTS result"); err != nil {
		return 0, 0, err
	}
	sp := start()
	err = d.exec(ctx, "CREATE TABLE result AS "+q)
	wall, cpu = sp.stop()
	return wall, cpu, err
}

// rows reads the result table.
func (d *duck) rows(ctx context.Context, scan func(*sql.Rows) error) error {
	rs, err := d.conn.QueryContext(ctx, "SELECT * FROM result")
	if err != nil {
		return fmt.Errorf("read duckdb result: %w", err)
	}
	defer rs.Close()
	for rs.Next() {
		if err := scan(rs); err != nil {
			return fmt.Errorf("scan duckdb result: %w", err)
		}
	}
	return rs.Err()
}

// checksumSQL wraps a query so that it returns the checksum of its rows
// (sums of no rows are 0, as the checksum sink's).
func checksumSQL(inner string, cols []colSum, baseMs int64) string {
	exprs := []string{"count(*)::BIGINT"}
	for _, c := range cols {
		switch c.kind {
		case kInt:
			exprs = append(exprs, fmt.Sprintf("coalesce(sum(%s), 0)::BIGINT", c.name))
		case kFloat:
			exprs = append(exprs, fmt.Sprintf("coalesce(sum(%s), 0)::DOUBLE", c.name))
		case kTime:
			exprs = append(exprs, fmt.Sprintf("coalesce(sum(epoch_ms(%s) - %d), 0)::BIGINT", c.name, baseMs))
		case kStr:
			exprs = append(exprs, fmt.Sprintf("coalesce(sum(strlen(%s)), 0)::BIGINT", c.name))
		}
	}
	return fmt.Sprintf("SELECT %s FROM (%s) q", strings.Join(exprs, ", "), inner)
}

// scanChecksum reads the one row of a checksumSQL result.
func scanChecksum(cols []colSum) (func(*sql.Rows) error, func() answer) {
	c := newChecksum(cols)
	scan := func(rs *sql.Rows) error {
		ptrs := []any{&c.rows}
		for i, col := range cols {
			if col.kind == kFloat {
				ptrs = append(ptrs, &c.floats[i])
			} else {
				ptrs = append(ptrs, &c.ints[i])
			}
		}
		return rs.Scan(ptrs...)
	}
	return scan, func() answer { return c }
}

func newRec(schema *arrow.Schema, cols []arrow.Array, rows int64) arrow.RecordBatch {
	return array.NewRecordBatch(schema, cols, rows)
}
