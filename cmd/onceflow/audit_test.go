package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/audit"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/source/files"
	"github.com/onceflow/onceflow/storage"
)

// runAudit runs `onceflow audit args…`.
func runAudit(ctx context.Context, args ...string) (int, string, string) {
	return runCLI(ctx, append([]string{"audit"}, args...)...)
}

// auditFixture lands three JSON-lines files of payments, runs a query that
// copies them (with a batch id column) into a files-sink table, one file a
// batch, and returns the landing, checkpoint and table directories and the
// per-key sums of the input.
func auditFixture(t *testing.T) (landing, cp, table string, sums map[string]int64) {
	t.Helper()
	root := t.TempDir()
	landing, cp, table = filepath.Join(root, "landing"), filepath.Join(root, "cp"), filepath.Join(root, "table")
	if err := os.MkdirAll(landing, 0o755); err != nil {
		t.Fatal(err)
	}
	sums = map[string]int64{}
	base := time.Now().Add(-time.Hour)
	for f := range 3 {
		var b strings.Builder
		for i := range 7 {
			k, amt := fmt.Sprintf("m-%d", (f+i)%4), int64(100*f+i+1)
			sums[k] += amt
			fmt.Fprintf(&b, "{\"key\":%q,\"amount\":%d}\n", k, amt)
		}
		p := filepath.Join(landing, fmt.Sprintf("payments-%d.json", f))
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		at := base.Add(time.Duration(f) * time.Minute)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	src, err := files.New(landing, files.JSON, ledgerSchema, files.WithMaxFilesPerTrigger(1))
	if err != nil {
		t.Fatal(err)
	}
	cs, err := storage.OpenLocal(cp, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	ts, err := storage.OpenLocal(table, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	sink, err := filesink.New(ts)
	if err != nil {
		t.Fatal(err)
	}
	q, err := engine.NewQuery(engine.ReadStream(src).WithBatchIDColumn("batch_id"),
		engine.WithCheckpoint(cs), engine.WithSink(sink), engine.WithTrigger(engine.AvailableNow()))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return landing, cp, table, sums
}

// auditJSON is the part of `audit -o json` the test checks.
type auditJSON struct {
	LastCommitted int64 `json:"lastCommitted"`
	MatchedBatch  int64 `json:"matchedBatch"`
	InputRows     int64 `json:"inputRows"`
	OutputRows    int64 `json:"outputRows"`
	Matching      int   `json:"matching"`
	Missing       []struct {
		Key string `json:"key"`
	} `json:"missing"`
	Differing []struct {
		Key     string `json:"key"`
		Want    int64  `json:"want"`
		Got     int64  `json:"got"`
		Suspect string `json:"suspect"`
		Batch   int64  `json:"batch"`
	} `json:"differing"`
	DuplicateBatches []int64 `json:"duplicateBatches"`
}

func TestAudit(t *testing.T) {
	ctx := context.Background()
	landing, cp, table, sums := auditFixture(t)
	common := []string{"--checkpoint", cp, "--input", "files:" + landing, "--key", "key", "--value", "amount"}

	t.Run("lake matches", func(t *testing.T) {
		code, out, errOut := runAudit(ctx, append(common, "--output", "lake:"+table, "-o", "json")...)
		if code != 0 {
			t.Fatalf("exit %d\n%s%s", code, out, errOut)
		}
		var rep auditJSON
		if err := json.Unmarshal([]byte(out), &rep); err != nil {
			t.Fatal(err)
		}
		if rep.LastCommitted != 2 || rep.MatchedBatch != 2 || rep.InputRows != 21 || rep.OutputRows != 21 || rep.Matching != len(sums) {
			t.Errorf("report %+v, want batches 0…2, 21 rows, %d keys matching", rep, len(sums))
		}
		code, out, errOut = runAudit(ctx, append(common, "--output", "lake:"+table)...)
		if code != 0 || !strings.Contains(out, fmt.Sprintf("%d matching, 0 missing, 0 extra, 0 differing", len(sums))) {
			t.Errorf("text: exit %d\n%s%s", code, out, errOut)
		}
	})

	// A JSON-lines output written here from the sums, then damaged.
	writeOut := func(t *testing.T, lines []string) string {
		t.Helper()
		p := filepath.Join(t.TempDir(), "out.jsonl")
		if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	var good []string
	for _, k := range []string{"m-0", "m-1", "m-2", "m-3"} {
		good = append(good, fmt.Sprintf(`{"key":%q,"amount":%d,"batch_id":2}`, k, sums[k]))
	}
	for _, tc := range []struct {
		name    string
		lines   []string
		code    int
		suspect string
	}{
		{"jsonl matches", good, 0, ""},
		{"jsonl lacks a key", good[1:], 1, "1 keys differ (" + audit.SuspectSourceGap + ")"},
		{"jsonl holds a key twice", append(append([]string{}, good...), good[0]), 1, "1 keys differ (" + audit.SuspectDoubleApplied + " 2)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := writeOut(t, tc.lines)
			code, out, errOut := runAudit(ctx, append(common, "--output", "jsonl:"+p)...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\n%s%s", code, tc.code, out, errOut)
			}
			if tc.code == 0 {
				return
			}
			if !strings.Contains(errOut, tc.suspect) || !regexp.MustCompile(`(?m)^m-0 `).MatchString(out) {
				t.Errorf("report does not name m-0 and %q:\n%s%s", tc.suspect, out, errOut)
			}
		})
	}

	t.Run("usage", func(t *testing.T) {
		for _, args := range [][]string{
			nil,
			{"--checkpoint", cp},
			append(common[:6:6], "--output", "lake:"+table),                           // no --value
			append(append([]string{}, common...), "--output", "ftp://x/y"),            // unknown output
			append(append([]string{}, common...), "--output", "postgres://u:pw@h/db"), // no table
			{"--checkpoint", cp, "--input", "s3://b/p", "--output", "lake:" + table, "--key", "key", "--value", "amount"},
			append(append([]string{}, common...), "--output", "lake:"+table, "--input-format", "xml"),
		} {
			code, out, errOut := runAudit(ctx, args...)
			if code != 2 || !strings.Contains(errOut, "usage") {
				t.Errorf("%v: exit %d, stdout %q, stderr %q; want a usage error", args, code, out, errOut)
			}
			if strings.Contains(errOut, ":pw@") {
				t.Errorf("%v: the password is printed: %s", args, errOut)
			}
		}
	})
}
