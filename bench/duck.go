package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/duckdb/duckdb-go/v2"
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

// load creates table and appends the rows that next yields, record by
// record, through DuckDB's appender; row converts row i of a record to the
// table's column values. next returns nil at the end.
func (d *duck) load(ctx context.Context, table, ddl string, next func() arrow.RecordBatch, row func(rec arrow.RecordBatch, i int, vals []driver.Value)) error {
	if err := d.exec(ctx, "CREATE OR REPLACE TABLE "+table+" ("+ddl+")"); err != nil {
		return err
	}
	return d.conn.Raw(func(dc any) error {
		app, err := duckdb.NewAppenderFromConn(dc.(driver.Conn), "", table)
		if err != nil {
			return fmt.Errorf("appender on %s: %w", table, err)
		}
		var vals []driver.Value
		for rec := next(); rec != nil; rec = next() {
			if vals == nil {
				vals = make([]driver.Value, strings.Count(ddl, ",")+1)
			}
			for i := 0; i < int(rec.NumRows()); i++ {
				row(rec, i, vals)
				if err := app.AppendRow(vals...); err != nil {
					rec.Release()
					app.Close()
					return fmt.Errorf("append to %s: %w", table, err)
				}
			}
			rec.Release()
		}
		if err := app.Close(); err != nil {
			return fmt.Errorf("close appender on %s: %w", table, err)
		}
		return nil
	})
}

// bidRow converts a row of nexmark.BidSchema for the bids table.
func bidRow(rec arrow.RecordBatch, i int, v []driver.Value) {
	v[0] = rec.Column(0).(*array.Int64).Value(i)
	v[1] = rec.Column(1).(*array.Int64).Value(i)
	v[2] = rec.Column(2).(*array.Int64).Value(i)
	v[3] = rec.Column(3).(*array.String).Value(i)
	v[4] = rec.Column(4).(*array.String).Value(i)
	v[5] = time.UnixMicro(int64(rec.Column(5).(*array.Timestamp).Value(i))).UTC()
	v[6] = rec.Column(6).(*array.String).Value(i)
}

const bidsDDL = "auction BIGINT, bidder BIGINT, price BIGINT, channel VARCHAR, url VARCHAR, date_time TIMESTAMP, extra VARCHAR"

// paymentRow converts a row of the rate source (key, amount_cents) for the
// payments table.
func paymentRow(keyIdx, amountIdx int) func(arrow.RecordBatch, int, []driver.Value) {
	return func(rec arrow.RecordBatch, i int, v []driver.Value) {
		v[0] = rec.Column(keyIdx).(*array.String).Value(i)
		v[1] = rec.Column(amountIdx).(*array.Int64).Value(i)
	}
}

const paymentsDDL = "key VARCHAR, amount_cents BIGINT"

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

// checksumSQL wraps a query so that it returns the checksum of its rows.
func checksumSQL(inner string, cols []colSum, baseMs int64) string {
	exprs := []string{"count(*)::BIGINT"}
	for _, c := range cols {
		switch c.kind {
		case kInt:
			exprs = append(exprs, fmt.Sprintf("sum(%s)::BIGINT", c.name))
		case kFloat:
			exprs = append(exprs, fmt.Sprintf("sum(%s)::DOUBLE", c.name))
		case kTime:
			exprs = append(exprs, fmt.Sprintf("sum(epoch_ms(%s) - %d)::BIGINT", c.name, baseMs))
		case kStr:
			exprs = append(exprs, fmt.Sprintf("sum(strlen(%s))::BIGINT", c.name))
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
