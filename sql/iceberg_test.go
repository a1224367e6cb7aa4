package sql

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/onceflow/onceflow/engine"
)

// An iceberg sink writes a query's rows to a table of a local SQLite
// catalog, partitioned by day; an iceberg source streams them back. The
// S3 secret given through ${ENV} is never printed.
func TestRunIcebergSinkAndSource(t *testing.T) {
	in, dir := t.TempDir(), t.TempDir()
	writeLines(t, in, "a.json",
		`{"id":"1","k":"a","v":10,"ts":"2026-11-30T10:00:00Z"}`,
		`{"id":"2","k":"b","v":5,"ts":"2026-12-01T10:00:01Z"}`,
		`{"id":"3","k":"a","v":7,"ts":"2026-12-01T11:00:02Z"}`)
	cat := "sqlite:" + filepath.Join(dir, "catalog.db")
	env := map[string]string{"ICE_SECRET": "s3cr3t-value"}
	lookup := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	write := fmt.Sprintf(`
CREATE SOURCE p (id text, k text, v bigint, ts timestamp) WITH (connector = 'files', path = '%s');
CREATE SINK lake WITH (connector = 'iceberg', catalog_uri = '%s', table = 'db.events',
                       partition_by = 'day(ts), k', s3_secret_access_key = '${ICE_SECRET}') AS
SELECT id, k, v * 2 AS v2, ts FROM p;
`, in, cat)
	p, err := Compile(write, WithTrigger(engine.AvailableNow()), WithCheckpointRoot(filepath.Join(dir, "ck")), WithEnv(lookup))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := p.Explain(context.Background(), &buf, ""); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "s3cr3t-value") || !strings.Contains(buf.String(), "exactly-once: one Iceberg snapshot per batch") {
		t.Fatalf("EXPLAIN:\n%s", buf.String())
	}
	q, err := p.Open(context.Background(), "lake")
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := q.Close(); err != nil {
		t.Fatal(err)
	}
	read := fmt.Sprintf(`
CREATE SOURCE events (id text, k text, v2 bigint, ts timestamp) WITH (connector = 'iceberg', catalog_uri = '%s', table = 'db.events');
CREATE SINK back WITH (connector = 'console') AS SELECT id, k, v2 FROM events WHERE v2 > 10;
`, cat)
	p2, err := Compile(read, WithTrigger(engine.AvailableNow()), WithCheckpointRoot(filepath.Join(dir, "ck")))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(runAll(t, p2, "back"))
	if want := "[[1 a 20] [3 a 14]]"; got != want {
		t.Fatalf("got %s, want %s", got, want)
	}
}
