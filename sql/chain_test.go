package sql

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
)

// A subquery in FROM with its own GROUP BY chains two stateful operators:
// per-minute totals per key, then per minute the number of keys and the
// largest total. The engine runs the chain in append mode under the
// watermark.
func TestRunChainOfAggregations(t *testing.T) {
	in := t.TempDir()
	writeLines(t, in, "a.json",
		`{"k":"a","v":1,"ts":"2026-11-30T10:00:01Z"}`,
		`{"k":"a","v":2,"ts":"2026-11-30T10:00:02Z"}`,
		`{"k":"b","v":5,"ts":"2026-11-30T10:00:03Z"}`,
		`{"k":"a","v":7,"ts":"2026-11-30T10:01:03Z"}`,
		`{"k":"c","v":1,"ts":"2026-11-30T10:05:00Z"}`,
	)
	text := fmt.Sprintf(`
CREATE SOURCE p (k text, v bigint, ts timestamp, WATERMARK FOR ts AS ts - INTERVAL '10 seconds')
  WITH (connector = 'files', path = '%s');
CREATE SINK per_minute WITH (connector = 'console', output_mode = 'append') AS
SELECT /*+ id('keys-per-minute') */ window_start, window_end, count(*) AS keys, max(total) AS top
FROM (SELECT /*+ id('totals') */ window_start, window_end, k, sum(v) AS total
      FROM TUMBLE(p, ts, INTERVAL '1 minute') GROUP BY window_start, window_end, k) AS t
GROUP BY window_start, window_end;
`, in)
	p, err := Compile(text, WithTrigger(engine.AvailableNow()), WithCheckpointRoot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if ops := p.Sink("per_minute").Operators; len(ops) != 2 || ops[0].ID != "totals" || ops[1].ID != "keys-per-minute" {
		t.Fatalf("operators %+v", ops)
	}
	out := memsink.New("out")
	q, err := p.Open(context.Background(), "per_minute", WithSink(out))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	// 10:05 is still open under the watermark (10:04:50) when the input ends
	want := "[[2026-11-30 10:00:00 +0000 UTC 2026-11-30 10:01:00 +0000 UTC 2 5] [2026-11-30 10:01:00 +0000 UTC 2026-11-30 10:02:00 +0000 UTC 1 7]]"
	if got := fmt.Sprint(sortRows(out.All())); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}

// A chain the engine refuses fails at planning with the place of the
// refused step and the engine's reason.
func TestChainTheEngineRefuses(t *testing.T) {
	text := `CREATE SOURCE p (k text, v bigint, ts timestamp) WITH (connector = 'files', path = '/x');
CREATE SINK s WITH (connector = 'console', output_mode = 'update') AS
SELECT n, count(*) AS keys
FROM (SELECT k, count(*) AS n FROM p GROUP BY k) AS t
GROUP BY n;`
	_, err := Compile(text)
	want := `sql: line 3:8: aggregation "s-aggregate-1" feeds the stateful step "s-aggregate-2", so it must emit each group once`
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("err = %v, want %s…", err, want)
	}
}

// RANK() OVER … with WHERE rank <= N compiles to the engine's Top: the
// top rows of each window, ties kept, emitted when the watermark closes
// the window.
func TestRunTopN(t *testing.T) {
	in := t.TempDir()
	writeLines(t, in, "a.json",
		`{"k":"a","v":1,"ts":"2026-11-30T10:00:01Z"}`,
		`{"k":"a","v":2,"ts":"2026-11-30T10:00:02Z"}`,
		`{"k":"b","v":5,"ts":"2026-11-30T10:00:03Z"}`,
		`{"k":"c","v":1,"ts":"2026-11-30T10:00:04Z"}`,
		`{"k":"c","v":1,"ts":"2026-11-30T10:00:05Z"}`,
		`{"k":"a","v":7,"ts":"2026-11-30T10:01:03Z"}`,
		`{"k":"c","v":1,"ts":"2026-11-30T10:05:00Z"}`,
	)
	text := fmt.Sprintf(`
CREATE SOURCE p (k text, v bigint, ts timestamp, WATERMARK FOR ts AS ts - INTERVAL '10 seconds')
  WITH (connector = 'files', path = '%s');
CREATE SINK hot WITH (connector = 'console', output_mode = 'append') AS
SELECT window_start, k, n FROM (
  SELECT *, RANK() OVER (PARTITION BY window_start, window_end ORDER BY n DESC) AS rk
  FROM (SELECT window_start, window_end, k, count(*) AS n
        FROM TUMBLE(p, ts, INTERVAL '1 minute') GROUP BY window_start, window_end, k) AS c
) AS r WHERE rk <= 1;
`, in)
	p, err := Compile(text, WithTrigger(engine.AvailableNow()), WithCheckpointRoot(t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	if ops := p.Sink("hot").Operators; len(ops) != 2 || ops[1].Kind != "top" || ops[1].ID != "hot-top-2" {
		t.Fatalf("operators %+v", ops)
	}
	out := memsink.New("out")
	q, err := p.Open(context.Background(), "hot", WithSink(out))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	if err := q.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	want := "[[2026-11-30 10:00:00 +0000 UTC a 2] [2026-11-30 10:00:00 +0000 UTC c 2] [2026-11-30 10:01:00 +0000 UTC a 1]]"
	if got := fmt.Sprint(sortRows(out.All())); got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
