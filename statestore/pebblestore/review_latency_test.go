package pebblestore_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/statestore/pebblestore"
	"github.com/onceflow/onceflow/storage"
)

// Review of h/latency: the state sync overlapped with the sinks, on a
// query whose operators are on different backends (some on pebble, some
// in memory, by WithOperatorStateStore).

// reviewRenameFS fails the n-th rename onto a delta file of one version.
type reviewRenameFS struct {
	storage.FS
	version int64
	failAt  int

	mu     sync.Mutex
	n      int
	failed atomic.Bool
}

func (f *reviewRenameFS) Rename(oldname, newname string) error {
	if filepath.Base(newname) == statestore.FileName(f.version, false) {
		f.mu.Lock()
		f.n++
		n := f.n
		f.mu.Unlock()
		if n == f.failAt {
			f.failed.Store(true)
			return &os.LinkError{Op: "rename", Old: oldname, New: newname, Err: syscall.EROFS}
		}
	}
	return f.FS.Rename(oldname, newname)
}

// reviewSink records every delivery's rows and reports a re-delivered
// batch whose rows differ from the first delivery.
type reviewSink struct {
	*memsink.Sink
	mu       sync.Mutex
	first    map[int64]string
	mismatch []string
}

func (s *reviewSink) AddBatch(ctx context.Context, id int64, sc *arrow.Schema, recs []arrow.RecordBatch) error {
	rows, err := memsink.Rows(recs)
	if err != nil {
		return err
	}
	got := fmt.Sprint(rows)
	s.mu.Lock()
	if prev, ok := s.first[id]; ok && prev != got {
		s.mismatch = append(s.mismatch, fmt.Sprintf("batch %d re-run: %s, first run: %s", id, got, prev))
	} else if !ok {
		s.first[id] = got
	}
	s.mu.Unlock()
	return s.Sink.AddBatch(ctx, id, sc, recs)
}

// TestReviewMixedBackendsSyncFailure: dedup ("first") then group-by
// ("totals"), one operator on pebble and the other in memory, either way
// round. The delta files of version 2 fail to go into place after the sink
// took batch 2; a restart must give the in-memory query's output, each
// batch exactly once and a re-run batch identical to its first delivery.
func TestReviewMixedBackendsSyncFailure(t *testing.T) {
	query := func(src engine.Source) *engine.Stream {
		return engine.ReadStream(src).DropDuplicates("i").ID("first").
			GroupBy("k").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
	}
	for _, tc := range []struct {
		name string
		opts func(b statestore.Backend) []engine.Option
	}{
		{"default memory, totals on pebble", func(b statestore.Backend) []engine.Option {
			return []engine.Option{engine.WithOperatorStateStore("totals", b)}
		}},
		{"default pebble, first in memory", func(b statestore.Backend) []engine.Option {
			return []engine.Option{engine.WithStateStore(b), engine.WithOperatorStateStore("first", nil)}
		}},
		{"all pebble", func(b statestore.Backend) []engine.Option {
			return []engine.Option{engine.WithStateStore(b)}
		}},
	} {
		for _, failAt := range []int{1, 2, 4} {
			t.Run(fmt.Sprintf("%s/rename %d fails", tc.name, failAt), func(t *testing.T) {
				common := []engine.Option{engine.WithTrigger(engine.AvailableNow()), engine.WithStatePartitions(3), engine.WithOutputMode(engine.Update)}
				src := &seq{perTrigger: 40, keys: 13}
				src.avail.Store(200)
				mem := memsink.New("mem")
				memCP, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
				if err != nil {
					t.Fatal(err)
				}
				if err := run(t, query(src), append(common, engine.WithCheckpoint(memCP), engine.WithSink(mem))...); err != nil {
					t.Fatal(err)
				}

				dir, work := t.TempDir(), t.TempDir()
				ffs := &reviewRenameFS{FS: storage.OSFS{}, version: 2, failAt: failAt}
				cp, err := storage.OpenLocal(dir, storage.LocalOptions{FS: ffs})
				if err != nil {
					t.Fatal(err)
				}
				sink := &reviewSink{Sink: memsink.New("mixed"), first: map[int64]string{}}
				b, err := pebblestore.NewBackend(pebblestore.BackendOptions{Dir: work, CacheSize: 8 << 20, UploadEvery: 3, MemTableSize: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				err = run(t, query(src), append(append(common, engine.WithCheckpoint(cp), engine.WithSink(sink)), tc.opts(b)...)...)
				if cerr := b.Close(); cerr != nil {
					t.Fatal(cerr)
				}
				if !ffs.failed.Load() {
					t.Fatalf("the fault was never injected (run: %v)", err)
				}
				if err == nil || !strings.Contains(err.Error(), "rename") {
					t.Fatalf("run: %v, want the rename's error", err)
				}
				cp2, err := storage.OpenLocal(dir, storage.LocalOptions{})
				if err != nil {
					t.Fatal(err)
				}
				b2, err := pebblestore.NewBackend(pebblestore.BackendOptions{Dir: work, CacheSize: 8 << 20, UploadEvery: 3, MemTableSize: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				err = run(t, query(src), append(append(common, engine.WithCheckpoint(cp2), engine.WithSink(sink)), tc.opts(b2)...)...)
				if cerr := b2.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					t.Fatal(err)
				}
				sink.mu.Lock()
				for _, m := range sink.mismatch {
					t.Error(m)
				}
				sink.mu.Unlock()
				if got, want := batches(sink.Sink), batches(mem); got != want {
					t.Fatalf("output differs from the in-memory query's:\n--- mixed\n%s--- memory\n%s", got, want)
				}
			})
		}
	}
}

// stopAtSink stops the query once batch stopAt was added.
type stopAtSink struct {
	*memsink.Sink
	stopAt int64
	q      atomic.Pointer[engine.Query]
}

func (s *stopAtSink) AddBatch(ctx context.Context, id int64, sc *arrow.Schema, recs []arrow.RecordBatch) error {
	if err := s.Sink.AddBatch(ctx, id, sc, recs); err != nil {
		return err
	}
	if id == s.stopAt {
		s.q.Load().Stop()
	}
	return nil
}

// TestReviewPebbleBackgroundPurgeEveryZero: on pebble, under Every(0),
// with a retention of 3 batches and an upload every batch, the purge now
// runs beside the next batches' lookups and commits (race detector), and
// the output must match the in-memory query's, also after a restart on a
// fresh machine (the uploaded snapshots the purge kept).
func TestReviewPebbleBackgroundPurgeEveryZero(t *testing.T) {
	query := func(src engine.Source) *engine.Stream {
		return engine.ReadStream(src).GroupBy("k").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
	}
	common := []engine.Option{engine.WithStatePartitions(2), engine.WithOutputMode(engine.Update), engine.WithMinBatchesToRetain(3)}
	src := &seq{perTrigger: 10, keys: 13}
	src.avail.Store(400)
	mem := memsink.New("mem")
	memCP, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := run(t, query(src), append(common, engine.WithCheckpoint(memCP), engine.WithSink(mem), engine.WithTrigger(engine.AvailableNow()))...); err != nil {
		t.Fatal(err)
	}
	cp, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	disk := &stopAtSink{Sink: memsink.New("disk"), stopAt: 25}
	b, err := pebblestore.NewBackend(pebblestore.BackendOptions{Dir: filepath.Join(t.TempDir(), "a"), CacheSize: 8 << 20, UploadEvery: 1, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	q, err := engine.NewQuery(query(src), append(common, engine.WithCheckpoint(cp), engine.WithSink(disk), engine.WithStateStore(b), engine.WithTrigger(engine.Every(0)))...)
	if err != nil {
		t.Fatal(err)
	}
	disk.q.Store(q)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err = q.Run(ctx)
	if cerr := b.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	b2, err := pebblestore.NewBackend(pebblestore.BackendOptions{Dir: filepath.Join(t.TempDir(), "b"), CacheSize: 8 << 20, UploadEvery: 1, MemTableSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	err = run(t, query(src), append(common, engine.WithCheckpoint(cp), engine.WithSink(disk), engine.WithStateStore(b2), engine.WithTrigger(engine.AvailableNow()))...)
	if cerr := b2.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if got, want := batches(disk.Sink), batches(mem); got != want {
		t.Fatalf("pebble output differs from the in-memory one:\n--- pebble\n%s--- memory\n%s", got, want)
	}
}
