package engine

import (
	"context"
	"fmt"
	"sort"
	"testing"

	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/storage"
)

// objectStore hides the local store behind the plain Store interface, so
// the engine takes no lock on it, as with S3.
type objectStore struct{ storage.Store }

// Regression: on a checkpoint without a lock, a zombie driver woke after
// its batch ids were purged, committed its stale batch and overwrote a
// committed data file, double counting rows; now the lake holds every row
// exactly once after the zombie.
//
// Before the fix: a zombie driver on a checkpoint without a lock (S3, or a local
// one reached through storage.Sub) relies on put-if-absent of offsets/N and
// commits/N to lose. Purge deletes those objects, so once the live driver
// is minBatchesToRetain batches ahead the zombie's writes succeed: it
// "commits" its stale batch, plans the next batch id again over another
// range, and its files sink (whose log entries for those ids were purged
// by compaction) overwrites the live driver's committed data file of that
// batch, which keeps its deterministic name. The table then double counts
// every row the zombie re-read. Nothing in the protocol makes a write for
// an already purged batch id fail.
//
// Here: the zombie Z stalls in its first sink at batch 0; the live driver
// A recovers batch 0 and runs batches 1 to 3 while data arrives ten rows
// at a time (retention 1, log compaction every 2 batches); then Z wakes.
func TestZombieAfterPurgeCannotOverwriteCommittedFiles(t *testing.T) {
	ctx := context.Background()
	root := localStore(t)
	cp := func() storage.Store { return objectStore{storage.Sub(root, "cp")} }
	table := func() *filesink.Sink {
		s, err := filesink.New(storage.Sub(root, "lake"), filesink.WithCompactEvery(2))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	// Zombie: plans batch 0 over [0, 10), then stalls in its first sink.
	zsrc := newSeq(10, 0, 3)
	stall := &blockingSink{entered: make(chan struct{}, 1), release: make(chan struct{})}
	z, err := NewQuery(ReadStream(zsrc), WithCheckpoint(cp()), WithSink(stall), WithSink(table()), WithTrigger(AvailableNow()), WithMinBatchesToRetain(1))
	if err != nil {
		t.Fatal(err)
	}
	zdone := make(chan error, 1)
	go func() { zdone <- z.Run(ctx) }()
	<-stall.entered

	// Live driver: recovers batch 0, then one batch per arrival of 10 rows.
	asrc := newSeq(10, 0, 3)
	for _, avail := range []int64{20, 30, 40} {
		asrc.avail.Store(avail)
		if _, err := runQuery(t, ReadStream(asrc), WithCheckpoint(cp()), WithSink(table()), WithTrigger(Once()), WithMinBatchesToRetain(1)); err != nil {
			t.Fatal(err)
		}
	}

	// The zombie wakes up with all 40 rows available.
	zsrc.avail.Store(40)
	close(stall.release)
	zerr := <-zdone

	count := map[int64]int{}
	err = filesink.ReadRows(ctx, storage.Sub(root, "lake"), func(_ filesink.File, cols []string, row []any) error {
		for i, c := range cols {
			if c == "i" {
				count[row[i].(int64)]++
			}
		}
		return nil
	})
	var dups []int64
	for i, n := range count {
		if n != 1 {
			dups = append(dups, i)
		}
	}
	sort.Slice(dups, func(a, b int) bool { return dups[a] < dups[b] })
	if err != nil || len(count) != 40 || len(dups) > 0 {
		t.Fatalf("after the zombie (which returned %v): the lake holds %d distinct rows of 40, rows seen more than once: %v (read error %v)", zerr, len(count), fmt.Sprint(dups), err)
	}
}
