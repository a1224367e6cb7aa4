package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/storage"
)

// lakeTable writes ledger{n} (ledgerStep rows a batch) through the files
// sink into a new table and returns its directory.
func lakeTable(t *testing.T, n int64) string {
	t.Helper()
	root := t.TempDir()
	table, cpDir := filepath.Join(root, "table"), filepath.Join(root, "checkpoint")
	ts, err := storage.OpenLocal(table, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ts.Close()
	cs, err := storage.OpenLocal(cpDir, storage.LocalOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	sink, err := filesink.New(ts)
	if err != nil {
		t.Fatal(err)
	}
	q, err := engine.NewQuery(engine.ReadStream(ledger{n: n}), engine.WithCheckpoint(cs), engine.WithSink(sink), engine.WithTrigger(engine.AvailableNow()))
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	return table
}

// lakeFileJSON is the part of a `lake files -o jsonl` line the tests check.
type lakeFileJSON struct {
	Path    string `json:"path"`
	Size    int64  `json:"size"`
	Rows    int64  `json:"rows"`
	BatchID int64  `json:"batchId"`
	Time    int64  `json:"time"`
}

func TestLakeFilesAndQuery(t *testing.T) {
	ctx := context.Background()
	const n = 30
	table := lakeTable(t, n)

	code, out, errOut := runCLI(ctx, "lake", "files", "-o", "jsonl", table)
	if code != 0 {
		t.Fatalf("files -o jsonl: exit %d: %s", code, errOut)
	}
	files := mustJSONLines[lakeFileJSON](t, out)
	var batches []int64
	var rows int64
	for _, f := range files {
		batches = append(batches, f.BatchID)
		rows += f.Rows
		st, err := os.Stat(filepath.Join(table, filepath.FromSlash(f.Path)))
		if err != nil || st.Size() != f.Size || f.Rows != ledgerStep || f.Time <= 0 {
			t.Errorf("file %+v: stat %v", f, err)
		}
	}
	if !slices.Equal(batches, []int64{0, 1, 2}) || rows != n {
		t.Errorf("files of batches %v with %d rows, want [0 1 2] and %d", batches, rows, n)
	}

	code, out, errOut = runCLI(ctx, "lake", "files", table)
	if code != 0 {
		t.Fatalf("files: exit %d: %s", code, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if len(lines) != len(files)+2 || !strings.HasPrefix(lines[0], "path") {
		t.Fatalf("files table:\n%s", out)
	}
	for i, f := range files {
		if fl := strings.Fields(lines[i+1]); fl[0] != f.Path || fl[1] != strconv.Itoa(ledgerStep) || fl[3] != strconv.FormatInt(f.BatchID, 10) {
			t.Errorf("table row %q for %+v", lines[i+1], f)
		}
	}
	if want := "version 2: 3 files, 30 rows, "; !strings.HasPrefix(lines[len(lines)-1], want) {
		t.Errorf("summary %q, want prefix %q", lines[len(lines)-1], want)
	}

	t.Run("query", func(t *testing.T) {
		code, out, errOut := runCLI(ctx, "lake", "query", table)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		type row struct {
			Key    string `json:"key"`
			Amount int64  `json:"amount"`
		}
		got := map[string]int64{}
		var amounts []int64
		for _, r := range mustJSONLines[row](t, out) {
			got[r.Key] += r.Amount
			amounts = append(amounts, r.Amount)
		}
		slices.Sort(amounts)
		if len(amounts) != n || amounts[0] != 1 || amounts[n-1] != n || len(slices.Compact(amounts)) != n {
			t.Errorf("amounts %v, want 1 … %d once each", amounts, n)
		}
		if fmtTotals(got) != fmtTotals(ledgerTotals(n, n)) {
			t.Errorf("totals %s, want %s", fmtTotals(got), fmtTotals(ledgerTotals(n, n)))
		}
	})
	t.Run("query --limit", func(t *testing.T) {
		for _, limit := range []int{1, 7, n, n + 5} {
			code, out, errOut := runCLI(ctx, "lake", "query", table, "--limit", strconv.Itoa(limit))
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			if got := len(mustJSONLines[map[string]any](t, out)); got != min(limit, n) {
				t.Errorf("--limit %d printed %d rows, want %d", limit, got, min(limit, n))
			}
		}
	})
}

func TestLakeVacuum(t *testing.T) {
	ctx := context.Background()
	table := lakeTable(t, 30)
	old := time.Now().Add(-8 * 24 * time.Hour)

	// Age every committed file: vacuum must keep them anyway.
	code, out, errOut := runCLI(ctx, "lake", "files", "-o", "jsonl", table)
	if code != 0 {
		t.Fatalf("files: exit %d: %s", code, errOut)
	}
	var committed []string
	for _, f := range mustJSONLines[lakeFileJSON](t, out) {
		committed = append(committed, f.Path)
		if err := os.Chtimes(filepath.Join(table, f.Path), old, old); err != nil {
			t.Fatal(err)
		}
	}
	if len(committed) != 3 {
		t.Fatalf("committed files %v", committed)
	}
	// Files the log never listed, as a killed attempt leaves them: an old
	// one, an hour-old one and a fresh one; plus an old file that is not
	// the sink's.
	put := func(name string, age time.Duration) {
		t.Helper()
		p := filepath.Join(table, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("leftover"), 0o644); err != nil {
			t.Fatal(err)
		}
		at := time.Now().Add(-age)
		if err := os.Chtimes(p, at, at); err != nil {
			t.Fatal(err)
		}
	}
	oldStray := filesink.FileName(0, 0, 7, filesink.DefaultCompression)
	hourStray := filesink.FileName(1, 0, 7, filesink.DefaultCompression)
	freshStray := filesink.FileName(2, 0, 7, filesink.DefaultCompression)
	put(oldStray, 8*24*time.Hour)
	put(hourStray, 2*time.Hour)
	put(freshStray, 0)
	put("notes.txt", 8*24*time.Hour)

	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(table, filepath.FromSlash(name)))
		return err == nil
	}
	for _, tc := range []struct {
		name  string
		flags []string
		want  []string
		last  string
	}{
		{"dry run, default age", nil, []string{oldStray}, "would delete 1 files unlisted for more than 168h0m0s"},
		{"dry run, one hour", []string{"--older-than", "1h"}, []string{hourStray, oldStray}, "would delete 2 files unlisted for more than 1h0m0s"},
		{"delete, default age", []string{"--delete"}, []string{oldStray}, "deleted 1 files unlisted for more than 168h0m0s"},
		{"nothing left at the default age", []string{"--delete"}, nil, "deleted 0 files unlisted for more than 168h0m0s"},
		{"delete, one hour", []string{"--older-than=1h", "--delete"}, []string{hourStray}, "deleted 1 files unlisted for more than 1h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := map[string]bool{}
			for _, f := range []string{oldStray, hourStray, freshStray} {
				before[f] = exists(f)
			}
			code, out, errOut := runCLI(ctx, append(append([]string{"lake", "vacuum"}, tc.flags...), table)...)
			if code != 0 {
				t.Fatalf("exit %d: %s", code, errOut)
			}
			lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
			listed := lines[:len(lines)-1]
			slices.Sort(listed)
			want := slices.Clone(tc.want)
			slices.Sort(want)
			if !slices.Equal(listed, want) || lines[len(lines)-1] != tc.last {
				t.Errorf("printed\n%s\nwant %v then %q", out, want, tc.last)
			}
			deleting := slices.Contains(tc.flags, "--delete")
			for f, was := range before {
				gone := was && !exists(f)
				if gone != (deleting && slices.Contains(tc.want, f)) {
					t.Errorf("%s: existed %v, exists now %v", f, was, exists(f))
				}
			}
			for _, f := range append(committed, "notes.txt", freshStray) {
				if !exists(f) {
					t.Errorf("%s was deleted", f)
				}
			}
		})
	}
	code, _, errOut = runCLI(ctx, "lake", "vacuum", "--older-than", "-1h", table)
	if code == 0 || !strings.Contains(errOut, "negative") {
		t.Errorf("negative age: exit %d, %s", code, errOut)
	}
	// The table still reads whole.
	code, out, errOut = runCLI(ctx, "lake", "query", table)
	if n := len(mustJSONLines[map[string]any](t, out)); code != 0 || n != 30 {
		t.Errorf("query after vacuum: exit %d, %d rows, want 30: %s", code, n, errOut)
	}
}
