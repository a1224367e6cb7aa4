package main

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/iceberg"
)

// icebergFixture writes batches 0..n-1 (10 rows each) of query "cli" into
// lake.t of a fresh SQLite catalog and returns the table's location.
func icebergFixture(t *testing.T, n int64) string {
	t.Helper()
	ctx := context.Background()
	db := filepath.Join(t.TempDir(), "catalog.db")
	cat, err := iceberg.OpenCatalog(ctx, "sqlite:"+db)
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	sink, err := iceberg.NewSink(cat, "lake.t")
	if err != nil {
		t.Fatal(err)
	}
	if err := sink.Start(ctx, "cli"); err != nil {
		t.Fatal(err)
	}
	sc := arrow.NewSchema([]arrow.Field{{Name: "i", Type: arrow.PrimitiveTypes.Int64}}, nil)
	for b := int64(0); b < n; b++ {
		ib := array.NewInt64Builder(memory.DefaultAllocator)
		for i := b * 10; i < b*10+10; i++ {
			ib.Append(i)
		}
		col := ib.NewArray()
		rec := array.NewRecordBatch(sc, []arrow.Array{col}, 10)
		col.Release()
		err := sink.AddBatch(ctx, b, sc, []arrow.RecordBatch{rec})
		rec.Release()
		if err != nil {
			t.Fatal(err)
		}
	}
	return "iceberg:sqlite:" + db + "#lake.t"
}

func TestLakeCommandsOnIceberg(t *testing.T) {
	ctx := context.Background()
	loc := icebergFixture(t, 6)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"lake", "files", loc}, []string{"6 files, 60 rows", "data"}},
		{[]string{"lake", "snapshots", loc}, []string{"append", "cli", "query"}},
		{[]string{"lake", "query", "--limit", "3", loc}, []string{`{"i":`}},
		{[]string{"lake", "compact", "--min-files", "2", loc}, []string{"rewrote 6 files", "into 1"}},
		{[]string{"lake", "files", loc}, []string{"1 files, 60 rows"}},
		{[]string{"lake", "expire", "--older-than", "0s", loc}, []string{"snapshots 7 → 1"}},
		{[]string{"lake", "query", loc}, []string{`{"i":59}`}},
	} {
		code, out, errOut := runCLI(ctx, tc.args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", tc.args, code, errOut)
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("%v: output lacks %q:\n%s", tc.args, w, out)
			}
		}
	}
	if code, _, errOut := runCLI(ctx, "lake", "query", "--limit", "3", loc); code != 0 || errOut != "" {
		t.Fatalf("query: %d %s", code, errOut)
	}
	for _, bad := range [][]string{
		{"lake", "snapshots", t.TempDir()},
		{"lake", "compact", t.TempDir()},
		{"lake", "files", "iceberg:sqlite:/nowhere.db"},
	} {
		if code, _, errOut := runCLI(ctx, bad...); code == 0 || !strings.Contains(errOut, "iceberg:CATALOG#") {
			t.Errorf("%v: exit %d, stderr %q", bad, code, errOut)
		}
	}
}
