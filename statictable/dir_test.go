package statictable_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/source/files"
	"github.com/onceflow/onceflow/statictable"
)

// writeFile writes a landing file the way the landing contract asks:
// elsewhere, then renamed in.
func writeFile(t *testing.T, dir, name, data string) {
	t.Helper()
	tmp := filepath.Join(dir, name+".tmp")
	if err := os.WriteFile(tmp, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, name)); err != nil {
		t.Fatal(err)
	}
}

// TestDirJoinReplaysTheRecordedListing joins a stream with a directory of
// JSON-lines files that gains a file (key "a", val "a<n>") before every
// sink call: batch k joins the files listed when it was planned, and the
// re-run of the failed batch 2 joins its recorded listing, not the file
// added since.
func TestDirJoinReplaysTheRecordedListing(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "t-00.json", `{"key":"a","val":"a0"}`+"\n"+`{"key":"b","val":"b0"}`+"\n"+`{"key":null,"val":"null"}`+"\n")
	table, err := statictable.NewDir(dir, files.JSON, tableSchema)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	src := &keySource{batches: [][]string{{"a", "x"}, {"a", "a"}, {"a"}, {"x", "a"}, {"a"}}}
	sink := &changingSink{Sink: memsink.New("out"), failAt: 2, change: func(int64) {
		n++
		writeFile(t, dir, fmt.Sprintf("t-%02d.json", n), fmt.Sprintf(`{"key":"a","val":"a%d"}`+"\n", n))
	}}
	runWithReplay(t, src, table, sink)
	for k := range src.batches {
		v := k
		if k >= 3 {
			v++
		}
		vals := []string{"a0"}
		for i := 1; i <= v; i++ {
			vals = append(vals, fmt.Sprint("a", i))
		}
		if got, want := joined(sink.Sink, int64(k)), want(src, k, vals); !slices.Equal(got, want) {
			t.Errorf("batch %d (%d files): got %v, want %v", k, v+1, got, want)
		}
	}
}

// TestDirVersionChanged reads a recorded listing after one of its files
// was rewritten, and after one was deleted: both fail with
// ErrVersionChanged naming the directory and the file. A file added since
// is not read.
func TestDirVersionChanged(t *testing.T) {
	ctx := context.Background()
	for _, change := range []string{"rewritten", "deleted", "added"} {
		t.Run(change, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "a.csv", "a,1\n")
			writeFile(t, dir, "b.csv", "b,2\n")
			table, err := statictable.NewDir(dir, files.CSV, tableSchema, files.WithCSVHeader(false))
			if err != nil {
				t.Fatal(err)
			}
			v, err := table.LatestVersion(ctx)
			if err != nil {
				t.Fatal(err)
			}
			switch change {
			case "rewritten":
				writeFile(t, dir, "b.csv", "b,22\n")
				// A rewrite within the file system's time resolution and
				// of the same size would go unseen: the version records
				// size and modification time, as the files source does.
				if err := os.Chtimes(filepath.Join(dir, "b.csv"), time.Now(), time.Now().Add(time.Hour)); err != nil {
					t.Fatal(err)
				}
			case "deleted":
				if err := os.Remove(filepath.Join(dir, "b.csv")); err != nil {
					t.Fatal(err)
				}
			case "added":
				writeFile(t, dir, "c.csv", "c,3\n")
			}
			var rows []string
			err = table.ReadVersion(ctx, v, func(r arrow.RecordBatch) error {
				k, val := r.Column(0).(*array.String), r.Column(1).(*array.String)
				for i := range int(r.NumRows()) {
					rows = append(rows, k.Value(i)+"="+val.Value(i))
				}
				return nil
			})
			if change == "added" {
				if err != nil || strings.Join(rows, ",") != "a=1,b=2" {
					t.Fatalf("got %v, %v; want the recorded a=1,b=2", rows, err)
				}
				return
			}
			var ce *files.ChangedError
			if !errors.Is(err, statictable.ErrVersionChanged) || !errors.As(err, &ce) || !strings.Contains(err.Error(), "b.csv") || !strings.Contains(err.Error(), dir) {
				t.Fatalf("want ErrVersionChanged naming %s/b.csv, got %v", dir, err)
			}
			t.Log(err)
		})
	}
}

// TestDirParquet reads a directory of Parquet files (a lake's data file,
// copied) through the files source's Parquet reader.
func TestDirParquet(t *testing.T) {
	ctx := context.Background()
	lake := localStore(t)
	w := newLake(t, lake)
	w.add([2]string{"a", "a0"}, [2]string{"b", "b0"})
	fs, err := filesink.Committed(ctx, lake)
	if err != nil || len(fs) != 1 {
		t.Fatalf("committed %v, %v", fs, err)
	}
	data, err := lake.Get(ctx, fs[0].Path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	writeFile(t, dir, "t.parquet", string(data))
	table, err := statictable.NewDir(dir, files.Parquet, tableSchema)
	if err != nil {
		t.Fatal(err)
	}
	v, err := table.LatestVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	if err := table.ReadVersion(ctx, v, func(r arrow.RecordBatch) error {
		k, val := r.Column(0).(*array.String), r.Column(1).(*array.String)
		for i := range int(r.NumRows()) {
			rows = append(rows, k.Value(i)+"="+val.Value(i))
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(rows, ",") != "a=a0,b=b0" {
		t.Fatalf("rows %v", rows)
	}
}
