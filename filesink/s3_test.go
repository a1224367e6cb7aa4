package filesink

import (
	"context"
	"testing"
	"time"

	"github.com/onceflow/onceflow/internal/testenv"
	"github.com/onceflow/onceflow/storage"
)

// TestS3 runs the table protocol on a real S3 server (skipped without
// ONCEFLOW_TEST_S3_ENDPOINT; see scripts/s3-server.sh): partitioned
// batches, a repeat, a stray file, small-file merges, compaction, reads and
// vacuum, all under a prefix of the bucket.
func TestS3(t *testing.T) {
	ctx := context.Background()
	mem := newMem(t)
	table := storage.Sub(testenv.S3(t), "lake/payments")
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	s, err := New(table, WithPartitionBy("day"), WithCompactEvery(3), WithMinFileSize(16<<10), WithClock(fixedClock(&now)))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	for b := 0; b < 7; b++ {
		addBatch(t, ctx, s, mem, paySchema, int64(b), b*50, (b+1)*50, 50)
		now = now.Add(time.Minute)
	}
	addBatch(t, ctx, s, mem, paySchema, 6, 9000, 9050, 50) // repeat: no-op
	if err := table.Put(ctx, "day=2026-11-28/"+FileName(2, 0, 9, Zstd), []byte("stray")); err != nil {
		t.Fatal(err)
	}
	rows, _ := readAll(t, table)
	if len(rows) != 350 {
		t.Fatalf("%d rows, want 350", len(rows))
	}
	files, err := Committed(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 3 {
		t.Fatalf("%d files, want one per day after merges", len(files))
	}
	ll, err := listLog(ctx, table)
	if err != nil {
		t.Fatal(err)
	}
	if len(ll.compacts) != 2 || ll.compacts[1] != 5 {
		t.Fatalf("compacts %v", ll.compacts)
	}
	got, err := Vacuum(ctx, table, time.Hour, time.Now().Add(2*time.Hour), true)
	if err != nil {
		t.Fatal(err)
	}
	// The stray and the 6 batches' worth of merged-away files (3 days × 6).
	if len(got) != 1+3*6 {
		t.Fatalf("vacuum would delete %d: %v", len(got), got)
	}
}
