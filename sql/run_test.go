package sql

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
)

func writeLines(t *testing.T, dir, name string, lines ...string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// A sink's query runs on the engine with a files source and the program's
// own sink, AvailableNow.
func TestRunAggregateWithHaving(t *testing.T) {
	in := t.TempDir()
	writeLines(t, in, "a.json",
		`{"id":"1","k":"a","v":10,"ts":"2026-11-30T10:00:00Z"}`,
		`{"id":"2","k":"a","v":5,"ts":"2026-11-30T10:00:01Z"}`,
		`{"id":"3","k":"b","v":7,"ts":"2026-11-30T10:00:02Z"}`,
		`{"id":"4","k":"c","v":null,"ts":"2026-11-30T10:00:03Z"}`,
		`{"id":"5","k":"c","v":1,"ts":"2026-11-30T10:00:04Z"}`,
	)
	text := fmt.Sprintf(`
CREATE SOURCE p (id text, k text, v bigint, ts timestamp) WITH (connector = 'files', path = '%s');
CREATE SINK totals WITH (connector = 'console', output_mode = 'complete') AS
SELECT k, sum(v) AS total, count(*) AS n, count(v) AS nv, upper(k) || '!' AS shout
FROM p WHERE id <> '2' OR v > 1 GROUP BY k HAVING count(*) >= 1;
`, in)
	p, err := Compile(text, WithTrigger(engine.AvailableNow()), WithCheckpointRoot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	out := memsink.New("out")
	q, err := p.Open(context.Background(), "totals", WithSink(out))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	ids := out.BatchIDs()
	got := fmt.Sprint(sortRows(out.Batch(ids[len(ids)-1])))
	want := "[[a 15 2 2 A!] [b 7 1 1 B!] [c 1 2 1 C!]]"
	if got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

func sortRows(rows [][]any) [][]any {
	slices.SortFunc(rows, func(a, b []any) int { return strings.Compare(fmt.Sprint(a), fmt.Sprint(b)) })
	return rows
}

// DISTINCT keeps the first row of each key across batches; batch_id() is
// the batch's id.
func TestRunDistinctAndBatchID(t *testing.T) {
	in := t.TempDir()
	writeLines(t, in, "a.json", `{"k":"a","v":1}`, `{"k":"a","v":1}`, `{"k":"b","v":2}`)
	text := fmt.Sprintf(`
CREATE SOURCE p (k text, v bigint) WITH (connector = 'files', path = '%s');
CREATE SINK d WITH (connector = 'console') AS
SELECT k, v, batch_id() AS b FROM (SELECT DISTINCT k, v FROM p) AS x;
`, in)
	p, err := Compile(text, WithTrigger(engine.AvailableNow()), WithCheckpointRoot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	out := memsink.New("out")
	q, err := p.Open(context.Background(), "d", WithSink(out))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, want := fmt.Sprint(sortRows(out.All())), "[[a 1 0] [b 2 0]]"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// Editing the stateless parts of a query keeps the operator ids (so its
// state); a hint pins an id whatever the edit.
func TestOperatorIDsSurviveStatelessEdits(t *testing.T) {
	base := `CREATE SOURCE p (k text, v bigint, ts timestamp, WATERMARK FOR ts AS ts - INTERVAL '1 second') WITH (connector = 'files', path = '/x');
CREATE SINK s WITH (connector = 'console', output_mode = 'append') AS `
	ids := func(q string) []string {
		t.Helper()
		p, err := Compile(base + q)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, o := range p.Sink("s").Operators {
			out = append(out, o.ID)
		}
		return out
	}
	a := ids(`SELECT window_start, window_end, k, count(*) AS n FROM TUMBLE(p, ts, INTERVAL '1 minute') GROUP BY window_start, window_end, k`)
	b := ids(`SELECT window_end, k, count(*) AS n, count(*) * 2 AS n2 FROM TUMBLE(p, ts, INTERVAL '1 minute') WHERE v > 0 AND k <> 'x' GROUP BY window_start, window_end, k`)
	if !slices.Equal(a, b) || !slices.Equal(a, []string{"s-window-1"}) {
		t.Fatalf("ids %v then %v, want [s-window-1] both", a, b)
	}
	h := ids(`SELECT /*+ id('per-minute') */ window_start, window_end, k, count(*) AS n FROM TUMBLE(p, ts, INTERVAL '1 minute') GROUP BY window_start, window_end, k`)
	if !slices.Equal(h, []string{"per-minute"}) {
		t.Fatalf("hinted ids %v", h)
	}
}

// Secrets, from their option names or from the environment, never appear
// in EXPLAIN or in errors.
func TestSecretsNeverPrinted(t *testing.T) {
	env := map[string]string{"PG_DSN": "postgres://u:hunter2@127.0.0.1/db", "TOPIC": "t-hunter3"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	text := `CREATE SOURCE p (k text, v bigint) WITH (connector = 'kafka', brokers = '127.0.0.1:1', topics = '${TOPIC}',
  sasl_mechanism = 'plain', sasl_user = 'me', sasl_password = 'hunter4');
CREATE SINK s WITH (connector = 'postgres', dsn = '${PG_DSN}', table = 'totals', output_mode = 'update') AS
SELECT k, sum(v) AS total FROM p GROUP BY k;`
	p, err := Compile(text, WithEnv(lookup))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := p.Explain(context.Background(), &b, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"hunter2", "hunter3", "hunter4"} {
		if strings.Contains(b.String(), s) {
			t.Fatalf("EXPLAIN prints the secret %s:\n%s", s, b.String())
		}
	}
	_, err = Compile(strings.Replace(text, "table = 'totals'", "table = 'totals', write = '${PG_DSN}'", 1), WithEnv(lookup))
	if err == nil || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("err = %v: want an error without the secret", err)
	}
}

// EXPLAIN carries the engine's own view: when each operator emits, and
// its warnings when it has any.
func TestExplainShowsEngineEmitsAndWarnings(t *testing.T) {
	text := `CREATE SOURCE p (k text, v bigint, ts timestamp, WATERMARK FOR ts AS ts - INTERVAL '5 seconds') WITH (connector = 'files', path = '/x');
CREATE SINK w WITH (connector = 'console', output_mode = 'append') AS
SELECT window_start, window_end, k, count(*) AS n FROM TUMBLE(p, ts, INTERVAL '1 minute') GROUP BY window_start, window_end, k;
CREATE SINK g WITH (connector = 'console', output_mode = 'update') AS
SELECT k, count(*) AS n FROM p GROUP BY k;`
	p, err := Compile(text)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := p.Explain(context.Background(), &b, t.TempDir()); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"w-window-1: window keyed by", "emits append", "g-aggregate-1: aggregate keyed by (k)", "emits update"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("EXPLAIN lacks %q:\n%s", want, b.String())
		}
	}
}
