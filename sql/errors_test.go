package sql

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

const srcDecl = `CREATE SOURCE p (id text, k text, v bigint, ts timestamp,
  WATERMARK FOR ts AS ts - INTERVAL '5 seconds')
  WITH (connector = 'files', path = '/nonexistent', format = 'json');
`

const qDecl = "CREATE SOURCE q (k text, w bigint, ts timestamp, WATERMARK FOR ts AS ts - INTERVAL '5 seconds') WITH (connector = 'files', path = '/nonexistent');\n"

const tDecl = "CREATE TABLE t (k text, name text, PRIMARY KEY (k)) WITH (connector = 'files', path = '/nonexistent');\n"

// Every planning error names the line and column of the construct and
// says what is supported instead.
func TestErrorsNameLineAndColumn(t *testing.T) {
	cases := map[string]struct {
		sql         string
		pos         string // "line:col"
		contains    string
		unsupported bool
	}{
		"syntax":                     {srcDecl + "CREATE SINK o WITH (connector='console') AS SELEC k FROM p;", "4:45", "syntax", false},
		"unknown column":             {srcDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT k, nope FROM p;", "5:11", `column "nope" does not exist`, false},
		"unknown source":             {srcDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT k FROM q;", "5:15", `unknown source "q"`, false},
		"order by":                   {srcDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT k FROM p ORDER BY k;", "5:26", "ORDER BY is not supported", true},
		"self join":                  {srcDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT 1 AS x FROM p JOIN p AS p2 ON p.k = p2.k;", "5:27", "a self-join is not supported", true},
		"join non-equi":              {srcDecl + qDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT p.k FROM p JOIN q ON p.k < q.k;", "6:29", "< in a join condition is not supported", true},
		"join or":                    {srcDecl + qDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT p.k FROM p JOIN q ON p.k = q.k OR p.v = q.w;", "6:29", "OR and NOT in a join condition are not supported", true},
		"join two ranges":            {srcDecl + qDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT p.k FROM p JOIN q ON p.k = q.k AND q.ts BETWEEN p.ts AND p.ts + INTERVAL '1 minute'\n  AND p.ts BETWEEN q.ts AND q.ts + INTERVAL '1 minute';", "7:7", "a second time range", true},
		"join no key":                {srcDecl + qDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT p.k FROM p JOIN q ON q.ts BETWEEN p.ts AND p.ts + INTERVAL '1 minute';", "6:29", "at least one equality", true},
		"join ambiguous":             {srcDecl + qDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT k FROM p JOIN q ON p.k = q.k;", "6:8", `column "k" is on both sides of the join: write p.k`, false},
		"exists shape":               {srcDecl + qDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT p.k FROM p WHERE EXISTS (SELECT 1 FROM q);", "6:25", "EXISTS compiles to a semi join when", true},
		"tombstones key type":        {"CREATE TABLE r (id bigint, x text, PRIMARY KEY (id)) WITH (connector = 'kafka', brokers = 'b:1', topics = 't', tombstones = 'true');", "1:112", "declare id text", false},
		"right join table":           {srcDecl + tDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT p.k FROM p RIGHT JOIN t ON p.k = t.k;", "6:30", "a stream–table join is INNER or LEFT", true},
		"table join not its key":     {srcDecl + tDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT p.k FROM p JOIN t ON p.k = t.name;", "6:29", "must equal its primary key (k)", false},
		"table read as a stream":     {srcDecl + tDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT k FROM t;", "6:15", "read by a stream–table join only", true},
		"window function":            {srcDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT k, row_number() OVER (PARTITION BY k) AS r FROM p;", "5:11", "use SELECT DISTINCT", true},
		"not grouped":                {srcDecl + "CREATE SINK o WITH (connector='console', output_mode='update') AS\nSELECT k, v, count(*) AS n FROM p GROUP BY k;", "5:11", `column "v" must appear in GROUP BY`, false},
		"unknown function":           {srcDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT md5(k) AS h FROM p;", "5:8", "function md5 is not supported; the functions are", true},
		"type error":                 {srcDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT k,\n  upper(v) AS u FROM p;", "6:3", "", false},
		"type error in where":        {srcDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT k FROM p\nWHERE k + 1 > 2;", "6:7", "", false},
		"bad interval":               {srcDecl + "CREATE SINK o WITH (connector='console', output_mode='append') AS\nSELECT window_start, window_end, count(*) AS n\nFROM TUMBLE(p, ts, INTERVAL '1 fortnight') GROUP BY window_start, window_end;", "6:29", `unknown unit "fortnight"`, false},
		"tumble without window keys": {srcDecl + "CREATE SINK o WITH (connector='console', output_mode='append') AS\nSELECT k, count(*) AS n\nFROM TUMBLE(p, ts, INTERVAL '1 minute') GROUP BY k;", "6:6", "needs GROUP BY window_start, window_end", true},
		"output mode refused":        {srcDecl + "CREATE SINK o WITH (connector='console', output_mode='append') AS\nSELECT k, count(*) AS n FROM p GROUP BY k;", "5:8", "append output mode with an aggregation needs an event-time window", false},
		"unknown option":             {srcDecl + "CREATE SINK o WITH (connector='console', outputmode='update') AS\nSELECT k FROM p;", "4:42", "unknown option outputmode", false},
		"iceberg partition":          {srcDecl + "CREATE SINK o WITH (connector='iceberg', catalog_uri='sqlite:/x.db', table='db.t',\n  partition_by='month(ts)') AS\nSELECT k, ts FROM p;", "5:3", "a partition is a column, day(col), hour(col) or bucket(n, col)", false},
		"iceberg update needs keys":  {srcDecl + "CREATE SINK o WITH (connector='iceberg', catalog_uri='sqlite:/x.db', table='db.t', output_mode='update') AS\nSELECT k, count(*) AS n FROM p GROUP BY k;", "4:84", "option key_columns is required", false},
		"table without key":          {"CREATE TABLE rates (cur text, rate double precision) WITH (connector='kafka');", "1:14", "without PRIMARY KEY", true},
		"unset env":                  {srcDecl + "CREATE SINK o WITH (connector='postgres', dsn='${ONCEFLOW_SQL_TEST_UNSET}', table='t') AS\nSELECT k FROM p;", "4:43", "ONCEFLOW_SQL_TEST_UNSET is not set", false},
		"bad type":                   {"CREATE SOURCE s (a numeric(10,2)) WITH (connector='files', path='/x');", "1:20", "type numeric is not supported", true},
		"duplicate operator id":      {srcDecl + "CREATE SINK o WITH (connector='console', output_mode='update') AS\nSELECT /*+ id('x') */ k, count(*) AS n FROM (SELECT /*+ id('x') */ DISTINCT k, v FROM p) AS d GROUP BY k;", "5:23", `operator id "x" is used at line 5:77 too`, false},
		"bad hint":                   {srcDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT /*+ uid('x') */ k FROM p;", "5:8", "the supported hint is /*+ id('operator-id') */", true},
		"current_timestamp":          {srcDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT k, now() AS t FROM p;", "5:11", "function now is not supported", true},
		"watermark interval":         {"CREATE SOURCE s (k text, ts timestamp,\n  WATERMARK FOR ts AS ts - INTERVAL '3 fortnights')\n  WITH (connector='files', path='/x');", "2:37", `unknown unit "fortnights"`, false},
		"watermark expression":       {"CREATE SOURCE s (k text, ts timestamp,\n  WATERMARK FOR ts AS ts + INTERVAL '3 seconds')\n  WITH (connector='files', path='/x');", "2:23", "the watermark expression must be ts - INTERVAL", true},
		"watermark column":           {"CREATE SOURCE s (k text, ts timestamp,\n  WATERMARK FOR k AS k)\n  WITH (connector='files', path='/x');", "2:17", "the column is utf8, not a timestamp", false},
		"syntax after unicode":       {"-- prix en €, données\nCREATE SOURCE s (k text) WITH (connector='files', path='/x');\nCREATE SINK o WITH (connector='console') AS SELECT k FROM s WHERE;", "3:66", "syntax error", false},
		"column after unicode":       {"CREATE SOURCE s (k text) WITH (connector='files', path='/x');\nCREATE SINK o WITH (connector='console') AS SELECT 'é' AS e, nope FROM s;", "2:62", `column "nope" does not exist`, false},
		"rank without its filter":    {srcDecl + "CREATE SINK o WITH (connector='console', output_mode='append') AS\nSELECT k, v, RANK() OVER (PARTITION BY k ORDER BY v) AS rk FROM p;", "5:14", "RANK() OVER needs an enclosing SELECT", true},
		"rank filter":                {srcDecl + "CREATE SINK o WITH (connector='console', output_mode='append') AS\nSELECT k FROM (SELECT k, v, RANK() OVER (PARTITION BY k ORDER BY v) AS rk FROM p) AS r\nWHERE rk > 2;", "6:7", "the rank rk is used only as WHERE rk <= N", true},
		"like pattern":               {srcDecl + "CREATE SINK o WITH (connector='console') AS\nSELECT k FROM p WHERE k LIKE 'a_c';", "5:30", "the supported patterns", true},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := Compile(tc.sql, WithEnv(func(string) (string, bool) { return "", false }))
			var e *Error
			if !errors.As(err, &e) {
				t.Fatalf("err = %v, want an *Error", err)
			}
			if got := strings.Join([]string{itoa(e.Line), itoa(e.Col)}, ":"); got != tc.pos {
				t.Errorf("at %s, want %s: %v", got, tc.pos, err)
			}
			if !strings.Contains(e.Msg, tc.contains) {
				t.Errorf("message %q does not contain %q", e.Msg, tc.contains)
			}
			if errors.Is(err, ErrUnsupported) != tc.unsupported {
				t.Errorf("errors.Is(err, ErrUnsupported) = %v, want %v", !tc.unsupported, tc.unsupported)
			}
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
