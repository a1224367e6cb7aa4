package iceberg

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
)

// TestSinkSourceAndMaintenanceOnS3 runs the sink, the source, Compact and
// Expire against a table whose metadata and data live in an S3 bucket.
func TestSinkSourceAndMaintenanceOnS3(t *testing.T) {
	ctx := context.Background()
	e := s3Env(t)
	cat := e.open(t, filepath.Join(t.TempDir(), "catalog.db"))
	s := newTestSink(t, cat, "lake.s3", "q", WithPartitionSpec(Day("ts")))
	for b := int64(0); b < 4; b++ {
		addBatch(t, s, b, b*30, b*30+30)
	}
	addBatch(t, s, 3, 90, 120)
	if got := tableInts(t, cat, "lake.s3", "i"); !slices.Equal(got, seq(0, 120)) {
		t.Fatalf("rows = %v", got)
	}
	src, err := NewSource(ctx, cat, "lake.s3")
	if err != nil {
		t.Fatal(err)
	}
	o0, _ := src.InitialOffset(ctx)
	o1, err := src.LatestOffset(ctx, o0)
	if err != nil {
		t.Fatal(err)
	}
	if got := slices.Sorted(slices.Values(readRange(t, src, o0, o1))); !slices.Equal(got, seq(0, 120)) {
		t.Fatalf("source read %v", got)
	}
	if _, err := Compact(ctx, cat, "lake.s3", 1<<20, 2); err != nil {
		t.Fatal(err)
	}
	if _, err := Expire(ctx, cat, "lake.s3", ExpireOptions{RetainLast: 1}); err != nil {
		t.Fatal(err)
	}
	if got := tableInts(t, cat, "lake.s3", "i"); !slices.Equal(got, seq(0, 120)) {
		t.Fatalf("rows after maintenance = %v", got)
	}
}
