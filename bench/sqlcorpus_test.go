package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"math/big"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	oncesql "github.com/onceflow/onceflow/sql"
)

// corpusRow is one input row of the SQL corpus; nil fields are nulls.
type corpusRow struct {
	ID string   `json:"id"`
	K  *string  `json:"k"`
	V  *int64   `json:"v"`
	F  *float64 `json:"f"`
	TS string   `json:"ts"`
}

// corpusRows is a fixed, bounded input with nulls in every nullable
// column, several keys, and event times spread over a few minutes with
// gaps (for sessions).
func corpusRows() []corpusRow {
	keys := []string{"a", "b", "c", "dd"}
	base := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	var rows []corpusRow
	for i := range 60 {
		r := corpusRow{ID: fmt.Sprintf("r%02d", i)}
		if i%11 != 7 {
			k := keys[(i*7)%len(keys)]
			r.K = &k
		}
		if i%9 != 4 {
			v := int64((i*37)%23 - 5)
			r.V = &v
		}
		if i%5 != 2 {
			f := float64((i*13)%17) / 4
			r.F = &f
		}
		// 10 s apart, with a 3-minute gap after row 29
		ts := base.Add(time.Duration(i) * 10 * time.Second)
		if i >= 30 {
			ts = ts.Add(3 * time.Minute)
		}
		r.TS = ts.Format(time.RFC3339)
		rows = append(rows, r)
	}
	return rows
}

// corpusCase is one query: the engine runs sql with AvailableNow (complete
// output for aggregations, append otherwise); DuckDB runs the same text with
// TUMBLE and HOP rewritten to time_bucket, or duck when the adaptation is
// not mechanical (SESSION).
type corpusCase struct {
	name string
	sql  string
	mode string // "complete" or "append"
	duck string
}

var corpus = []corpusCase{
	{name: "projection", mode: "append", sql: `SELECT id, k, v, f, ts FROM p`},
	{name: "arithmetic", mode: "append", sql: `SELECT id, v + 1 AS a, v - 2 AS b, v * 3 AS c, v % 4 AS d, -v AS e, f / 2.0 AS g, f * 2.5 + v AS h FROM p`},
	{name: "comparisons and logic", mode: "append", sql: `SELECT id, v > 0 AS pos, v = 3 OR f < 1 AS x, NOT (v <= 2) AS y, k <> 'a' AND v >= 0 AS z FROM p`},
	{name: "filter", mode: "append", sql: `SELECT id, k FROM p WHERE v > 2 AND k IS NOT NULL`},
	{name: "filter nulls", mode: "append", sql: `SELECT id FROM p WHERE k IS NULL OR v IS NULL`},
	{name: "in and between", mode: "append", sql: `SELECT id FROM p WHERE k IN ('a', 'c') AND v BETWEEN -2 AND 10`},
	{name: "like", mode: "append", sql: `SELECT id FROM p WHERE k LIKE 'd%' OR id LIKE '%5%'`},
	{name: "case", mode: "append", sql: `SELECT id, CASE WHEN v > 5 THEN 'big' WHEN v > 0 THEN 'small' ELSE 'other' END AS size, CASE k WHEN 'a' THEN 1 ELSE 0 END AS isa FROM p`},
	{name: "cast and coalesce", mode: "append", sql: `SELECT id, CAST(v AS double precision) AS dv, CAST(v AS text) AS sv, COALESCE(k, 'none') AS k2, COALESCE(v, 0) AS v0 FROM p`},
	{name: "string functions", mode: "append", sql: `SELECT id, upper(k) AS u, lower(upper(k)) AS l, length(k) AS n, k || '-' || id AS c, substring(id, 2, 1) AS s, starts_with(id, 'r1') AS st FROM p`},
	{name: "time functions", mode: "append", sql: `SELECT id, date_trunc('minute', ts) AS m, EXTRACT(hour FROM ts) AS h, EXTRACT(day FROM ts) AS d, ts + INTERVAL '1 minute' AS later FROM p WHERE ts >= TIMESTAMP '2026-11-30 10:05:00'`},
	{name: "distinct", mode: "append", sql: `SELECT DISTINCT k FROM p`},
	{name: "distinct pairs", mode: "append", sql: `SELECT DISTINCT k, v > 0 AS pos FROM p`},
	{name: "count", mode: "complete", sql: `SELECT k, count(*) AS n, count(v) AS nv FROM p GROUP BY k`},
	{name: "sum", mode: "complete", sql: `SELECT k, sum(v) AS s, sum(f) AS sf FROM p GROUP BY k`},
	{name: "min max", mode: "complete", sql: `SELECT k, min(v) AS lo, max(v) AS hi, min(id) AS first_id, max(ts) AS last_ts FROM p GROUP BY k`},
	{name: "avg", mode: "complete", sql: `SELECT k, avg(v) AS a, avg(f) AS af FROM p GROUP BY k`},
	{name: "count distinct", mode: "complete", sql: `SELECT k, count(DISTINCT v) AS dv FROM p GROUP BY k`},
	{name: "global aggregate", mode: "complete", sql: `SELECT count(*) AS n, sum(v) AS s, min(f) AS lo, max(f) AS hi FROM p`},
	{name: "aggregate of expressions", mode: "complete", sql: `SELECT k, sum(v * 2 + 1) AS s, max(CASE WHEN v > 0 THEN v ELSE 0 END) AS m, sum(v) * 10 AS s10 FROM p WHERE f IS NOT NULL GROUP BY k`},
	{name: "having", mode: "complete", sql: `SELECT k, count(*) AS n FROM p GROUP BY k HAVING count(*) > 12 AND sum(v) > 0`},
	{name: "subquery", mode: "complete", sql: `SELECT kk, count(*) AS n FROM (SELECT upper(k) AS kk, v FROM p WHERE v > 0) AS x GROUP BY kk`},
	{name: "tumble", mode: "complete", sql: `SELECT window_start, window_end, k, count(*) AS n, sum(v) AS s FROM TUMBLE(p, ts, INTERVAL '1 minute') GROUP BY window_start, window_end, k`},
	{name: "tumble global", mode: "complete", sql: `SELECT window_start, window_end, count(*) AS n FROM TUMBLE(p, ts, INTERVAL '2 minutes') GROUP BY window_start, window_end`},
	{name: "hop", mode: "complete", sql: `SELECT window_start, window_end, k, count(*) AS n, max(v) AS m FROM HOP(p, ts, INTERVAL '1 minute', INTERVAL '3 minutes') GROUP BY window_start, window_end, k`},
	{name: "session", mode: "complete",
		sql: `SELECT window_start, window_end, count(*) AS n, sum(v) AS s FROM SESSION(p, ts, INTERVAL '1 minute') GROUP BY window_start, window_end`,
		duck: `SELECT min(ts) AS window_start, max(ts) + INTERVAL '1 minute' AS window_end, count(*) AS n, sum(v) AS s
FROM (SELECT *, sum(nw) OVER (ORDER BY ts) AS sid FROM (SELECT *, CASE WHEN ts - lag(ts) OVER (ORDER BY ts) < INTERVAL '1 minute' THEN 0 ELSE 1 END AS nw FROM p))
GROUP BY sid`},
	// Joins: q is a second source over the same files (a source is not
	// joined with itself), inner joins, so every match is out by the end
	// of the input.
	{name: "join with a time range", mode: "append", sql: `SELECT p.id, q.id AS qid, p.v, q.v AS qv FROM p JOIN q ON p.k = q.k AND q.ts BETWEEN p.ts AND p.ts + INTERVAL '30 seconds'`},
	{name: "join on two keys with a filter", mode: "append", sql: `SELECT p.id, q.id AS qid, p.v + q.f AS s FROM p INNER JOIN q ON p.k = q.k AND q.v = p.v WHERE p.f IS NOT NULL AND q.id >= p.id`},
	{name: "exists as a semi join", mode: "append", sql: `SELECT id, k FROM p WHERE v > 0 AND EXISTS (SELECT 1 FROM q WHERE q.k = p.k AND q.ts BETWEEN p.ts + INTERVAL '10 seconds' AND p.ts + INTERVAL '40 seconds')`},
	{name: "join then aggregate", mode: "complete", sql: `SELECT k, count(*) AS n, sum(qv) AS s FROM (SELECT p.k, q.v AS qv FROM p JOIN q ON p.k = q.k AND p.ts BETWEEN q.ts - INTERVAL '1 minute' AND q.ts) AS j GROUP BY k`},
}

var (
	tumbleRE = regexp.MustCompile(`TUMBLE\(p, ts, INTERVAL '([^']+)'\)`)
	hopRE    = regexp.MustCompile(`HOP\(p, ts, INTERVAL '([^']+)', INTERVAL '([^']+)'\)`)
)

// duckText adapts the window table functions to DuckDB: windows aligned to
// the Unix epoch (time_bucket's default origin is aligned for windows that
// divide a day).
func duckText(c corpusCase) string {
	if c.duck != "" {
		return c.duck
	}
	s := tumbleRE.ReplaceAllString(c.sql, `(SELECT *, time_bucket(INTERVAL '$1', ts) AS window_start, time_bucket(INTERVAL '$1', ts) + INTERVAL '$1' AS window_end FROM p)`)
	s = hopRE.ReplaceAllString(s, `(SELECT *, ws AS window_start, ws + INTERVAL '$2' AS window_end FROM p, unnest(generate_series(time_bucket(INTERVAL '$1', ts) - INTERVAL '$2' + INTERVAL '$1', time_bucket(INTERVAL '$1', ts), INTERVAL '$1')) AS g(ws))`)
	return s
}

// TestSQLAgreesWithDuckDB runs each corpus query through the SQL front end
// and the engine (AvailableNow, a files source, two batches) and through
// DuckDB over the same rows; the results must be equal as multisets.
func TestSQLAgreesWithDuckDB(t *testing.T) {
	ctx := context.Background()
	rows := corpusRows()
	in := t.TempDir()
	// two files, so the engine sees two batches (one file per trigger)
	for f, part := range [][]corpusRow{rows[:35], rows[35:]} {
		var b strings.Builder
		for _, r := range part {
			line, _ := json.Marshal(r)
			b.Write(line)
			b.WriteByte('\n')
		}
		if err := os.WriteFile(filepath.Join(in, fmt.Sprintf("part-%d.json", f)), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	d, err := openDuck(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer d.close()
	if err := d.exec(ctx, `CREATE TABLE p (id VARCHAR, k VARCHAR, v BIGINT, f DOUBLE, ts TIMESTAMP)`); err != nil {
		t.Fatal(err)
	}
	if err := d.exec(ctx, `CREATE VIEW q AS SELECT * FROM p`); err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		q := fmt.Sprintf(`INSERT INTO p VALUES ('%s', %s, %s, %s, TIMESTAMP '%s')`, r.ID, sqlStr(r.K), sqlInt(r.V), sqlFloat(r.F), strings.TrimSuffix(strings.Replace(r.TS, "T", " ", 1), "Z"))
		if err := d.exec(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range corpus {
		t.Run(c.name, func(t *testing.T) {
			text := fmt.Sprintf("CREATE SOURCE p (id text, k text, v bigint, f double precision, ts timestamp)\n  WITH (connector = 'files', path = '%[1]s', max_files_per_trigger = '1');\nCREATE SOURCE q (id text, k text, v bigint, f double precision, ts timestamp)\n  WITH (connector = 'files', path = '%[1]s', max_files_per_trigger = '1');\nCREATE SINK out WITH (connector = 'console', output_mode = '%[2]s') AS\n%[3]s;\n", in, c.mode, c.sql)
			p, err := oncesql.Compile(text, oncesql.WithTrigger(engine.AvailableNow()), oncesql.WithCheckpointRoot(t.TempDir()))
			if err != nil {
				t.Fatal(err)
			}
			out := memsink.New("out")
			q, err := p.Open(ctx, "out", oncesql.WithSink(out))
			if err != nil {
				t.Fatal(err)
			}
			defer q.Close()
			if err := q.Run(ctx); err != nil {
				t.Fatal(err)
			}
			var got [][]any
			if c.mode == "complete" {
				ids := out.BatchIDs()
				got = out.Batch(ids[len(ids)-1])
			} else {
				got = out.All()
			}
			want, err := duckRows(ctx, d, duckText(c))
			if err != nil {
				t.Fatal(err)
			}
			g, w := canon(got), canon(want)
			if !slices.Equal(g, w) {
				t.Fatalf("engine and DuckDB differ\nengine (%d rows):\n  %s\nduckdb (%d rows):\n  %s", len(g), strings.Join(g, "\n  "), len(w), strings.Join(w, "\n  "))
			}
			if len(g) == 0 {
				t.Fatal("no rows: the case checks nothing")
			}
		})
	}
}

func sqlStr(s *string) string {
	if s == nil {
		return "NULL"
	}
	return "'" + *s + "'"
}

func sqlInt(v *int64) string {
	if v == nil {
		return "NULL"
	}
	return fmt.Sprint(*v)
}

func sqlFloat(v *float64) string {
	if v == nil {
		return "NULL"
	}
	return fmt.Sprint(*v)
}

func duckRows(ctx context.Context, d *duck, q string) ([][]any, error) {
	rs, err := d.conn.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("duckdb %s: %w", q, err)
	}
	defer rs.Close()
	cols, err := rs.Columns()
	if err != nil {
		return nil, err
	}
	var out [][]any
	for rs.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rs.Scan(ptrs...); err != nil {
			return nil, err
		}
		out = append(out, vals)
	}
	return out, rs.Err()
}

// canon renders rows as sorted strings with one spelling per value: whole
// numbers as integers, floats to 9 significant digits, times in UTC.
func canon(rows [][]any) []string {
	var out []string
	for _, r := range rows {
		parts := make([]string, len(r))
		for i, v := range r {
			parts[i] = canonValue(v)
		}
		out = append(out, strings.Join(parts, " | "))
	}
	slices.Sort(out)
	return out
}

func canonValue(v any) string {
	switch x := v.(type) {
	case nil:
		return "NULL"
	case time.Time:
		return x.UTC().Format("2006-01-02 15:04:05.999999")
	case *big.Int:
		return x.String()
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return fmt.Sprintf("%.1f", x)
		}
		return fmt.Sprintf("%.9g", x)
	case float32:
		return canonValue(float64(x))
	case int32:
		return fmt.Sprint(int64(x))
	case int8, int16, int64, int, uint8, uint16, uint32, uint64:
		return fmt.Sprint(x)
	case bool:
		return fmt.Sprint(x)
	case string:
		return "'" + x + "'"
	}
	return fmt.Sprintf("%v", v)
}
