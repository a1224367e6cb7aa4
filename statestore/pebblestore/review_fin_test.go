package pebblestore_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/statestore/pebblestore"
	"github.com/onceflow/onceflow/storage"
)

// finHoldSink retains every record it is handed and remembers its rows as
// they were then.
type finHoldSink struct {
	mu    sync.Mutex
	recs  []arrow.RecordBatch
	snaps []string
	ids   map[int64]bool
	out   strings.Builder
}

func finRender(rec arrow.RecordBatch) string {
	var b strings.Builder
	for r := range int(rec.NumRows()) {
		for c := range int(rec.NumCols()) {
			if c > 0 {
				b.WriteByte('|')
			}
			b.WriteString(rec.Column(c).ValueStr(r))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (s *finHoldSink) AddBatch(_ context.Context, id int64, _ *arrow.Schema, recs []arrow.RecordBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ids == nil {
		s.ids = map[int64]bool{}
	}
	if s.ids[id] {
		return nil
	}
	s.ids[id] = true
	fmt.Fprintf(&s.out, "batch %d\n", id)
	for _, r := range recs {
		r.Retain()
		x := finRender(r)
		s.recs = append(s.recs, r)
		s.snaps = append(s.snaps, x)
		s.out.WriteString(x)
	}
	return nil
}

func (s *finHoldSink) checkAndRelease(t *testing.T) {
	t.Helper()
	for i, r := range s.recs {
		if got := finRender(r); got != s.snaps[i] {
			t.Errorf("output record %d changed after it was handed to the sink:\nthen %s\nnow  %s", i, s.snaps[i], got)
		}
		r.Release()
	}
	s.recs = nil
}

// TestReviewFinPebbleUpdateHeldBySink: an update-mode group-by on the
// pebble backend (a disk partition: its output built with its changes,
// its keys looked up from Shared partitions of int64 keys, its groups
// forgotten after the commit, before the output reaches the sink) gives
// the in-memory backend's output row for row across restarts and a move
// to another machine; a sink holding every record sees none change, and
// the engine's checked allocator ends empty.
func TestReviewFinPebbleUpdateHeldBySink(t *testing.T) {
	query := func(src engine.Source) *engine.Stream {
		return engine.ReadStream(src).GroupBy("k").ID("totals").Agg(
			batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"), batch.Avg(batch.Col("amount")).As("avg"),
			batch.Min(batch.Col("i")).As("lo"), batch.Last(batch.Col("i")).As("last"), batch.First(batch.Col("amount")).As("first"))
	}
	src := &seq{perTrigger: 50, keys: 60}
	memOut, diskOut := &finHoldSink{}, &finHoldSink{}
	memCP, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	diskCP, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	alloc := memory.NewCheckedAllocator(memory.NewGoAllocator())
	work := t.TempDir()
	for i, avail := range []int64{120, 300, 470, 600} {
		src.avail.Store(avail)
		common := []engine.Option{engine.WithTrigger(engine.AvailableNow()), engine.WithStatePartitions(3), engine.WithMinBatchesToRetain(4), engine.WithOutputMode(engine.Update)}
		if err := run(t, query(src), append(common, engine.WithCheckpoint(memCP), engine.WithSink(memOut))...); err != nil {
			t.Fatal(err)
		}
		root := filepath.Join(work, "machine-a")
		if i == 3 {
			root = filepath.Join(work, "machine-b")
		}
		b, err := pebblestore.NewBackend(pebblestore.BackendOptions{Dir: root, CacheSize: 8 << 20, UploadEvery: 2, MemTableSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		err = run(t, query(src), append(common, engine.WithCheckpoint(diskCP), engine.WithSink(diskOut), engine.WithStateStore(b), engine.WithAllocator(alloc))...)
		if cerr := b.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if got, want := diskOut.out.String(), memOut.out.String(); got != want {
		t.Fatalf("pebble backend output differs from the in-memory one:\n--- pebble\n%s--- memory\n%s", got, want)
	}
	if len(diskOut.ids) < 10 {
		t.Fatalf("only %d batches", len(diskOut.ids))
	}
	memOut.checkAndRelease(t)
	diskOut.checkAndRelease(t)
	alloc.AssertSize(t, 0)
}
