package iceberg

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCompactAndExpireKeepRowsAndInFlightFiles(t *testing.T) {
	ctx := context.Background()
	cat := sqliteCatalog(t)
	s := newTestSink(t, cat, "lake.m", "q")
	for b := int64(0); b < 8; b++ {
		addBatch(t, s, b, b*10, b*10+10)
	}
	res, err := Compact(ctx, cat, "lake.m", 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	if res.FilesRemoved != 8 || res.FilesAdded != 1 {
		t.Fatalf("compact: %+v, want 8 files into 1", res)
	}
	if got := tableInts(t, cat, "lake.m", "i"); !slices.Equal(got, seq(0, 80)) {
		t.Fatalf("rows after compaction = %v", got)
	}
	// The writer goes on after the compaction: its ancestry check still
	// sees batch 7 through the replace snapshot.
	addBatch(t, s, 7, 70, 80)
	if s.Skipped() != 1 {
		t.Fatal("a replay after compaction was not recognized")
	}

	// A crashed attempt of batch 9 left its data file (not committed yet,
	// batch 8 in flight is the next); an unrelated orphan is there too.
	tbl, _ := cat.LoadTable(ctx, "lake.m")
	dataDir := filepath.Join(strings.TrimPrefix(tbl.Location(), "file://"), "data")
	inflight := filepath.Join(dataDir, "00000-0-"+WriteID("q", 8).String()+"-00001.parquet")
	stray := filepath.Join(dataDir, "stray.parquet")
	for _, p := range []string{inflight, stray} {
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		old := time.Now().Add(-2 * time.Hour)
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
	er, err := Expire(ctx, cat, "lake.m", ExpireOptions{RetainLast: 1})
	if err != nil {
		t.Fatal(err)
	}
	if er.SnapshotsAfter != 1 {
		t.Fatalf("expire: %+v", er)
	}
	if _, err := os.Stat(inflight); err != nil {
		t.Fatalf("the in-flight batch's file was deleted: %v", err)
	}
	if _, err := os.Stat(stray); !os.IsNotExist(err) {
		t.Fatalf("the stray orphan was kept: %v (deleted: %v)", err, er.OrphansDeleted)
	}
	if got := tableInts(t, cat, "lake.m", "i"); !slices.Equal(got, seq(0, 80)) {
		t.Fatalf("rows after expire = %v", got)
	}
	// The replayed and the next batch still behave.
	addBatch(t, s, 7, 70, 80)
	addBatch(t, s, 8, 80, 90)
	if got := tableInts(t, cat, "lake.m", "i"); !slices.Equal(got, seq(0, 90)) {
		t.Fatalf("rows after batch 8 = %v", got)
	}
}
