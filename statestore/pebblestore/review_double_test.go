package pebblestore_test

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/statestore/pebblestore"
	"github.com/onceflow/onceflow/storage"
)

// rvStopAfterDelta cancels stop once a state delta of version 1 is
// written, while armed: the query is stopped (its context ends) during
// the commit of batch 1, after the delta and before the working copy's
// apply ends.
type rvStopAfterDelta struct {
	storage.Store
	armed atomic.Bool
	stop  atomic.Pointer[context.CancelFunc]
}

func (s *rvStopAfterDelta) hit(name string) {
	if s.armed.Load() && strings.HasSuffix(name, "00000000000000000001.delta") {
		if f := s.stop.Load(); f != nil {
			(*f)()
		}
	}
}

func (s *rvStopAfterDelta) Put(ctx context.Context, name string, data []byte) error {
	err := s.Store.Put(ctx, name, data)
	if err == nil {
		s.hit(name)
	}
	return err
}

func (s *rvStopAfterDelta) PutIfAbsent(ctx context.Context, name string, data []byte) error {
	err := s.Store.PutIfAbsent(ctx, name, data)
	if err == nil {
		s.hit(name)
	}
	return err
}

// TestReviewStopDuringCommitDoesNotDoubleCount: a group-by (sum, count;
// update mode) on pebble whose batch 1 changes more groups than one pebble
// batch holds (applyRows) in one partition; the query is stopped during
// batch 1's commit, after the state delta is written. The restart on the
// same machine re-runs batch 1 and must give the in-memory backend's
// output: every key's total 2 and count 2, not 3 (batch 1's rows merged a
// second time into the part of batch 1 the first attempt applied).
func TestReviewStopDuringCommitDoesNotDoubleCount(t *testing.T) {
	const n = 70_000
	B := rvBase
	b0, b1 := make([]rvRow, 0, n), make([]rvRow, 0, n)
	for k := range int64(n) {
		b0 = append(b0, rvR(k, B))
		b1 = append(b1, rvR(k, B))
	}
	build := func(src engine.Source) *engine.Stream {
		return engine.ReadStream(src).GroupBy("k").ID("w").Agg(rvSum()...)
	}
	sc := newRVScript(arrow.Millisecond, [][]rvRow{b0, b1})
	sc.avail.Store(2)
	common := []engine.Option{engine.WithTrigger(engine.AvailableNow()), engine.WithStatePartitions(1), engine.WithOutputMode(engine.Update)}
	mem := memsink.New("mem")
	memCP, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := run(t, build(sc), append(common, engine.WithCheckpoint(memCP), engine.WithSink(mem))...); err != nil {
		t.Fatal(err)
	}
	local, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	cp := &rvStopAfterDelta{Store: local}
	work := t.TempDir()
	disk := memsink.New("disk")
	attempt := func(arm bool) error {
		b, err := pebblestore.NewBackend(pebblestore.BackendOptions{Dir: work, CacheSize: 8 << 20, MemTableSize: 1 << 20})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		q, err := engine.NewQuery(build(sc), append(common, engine.WithCheckpoint(cp), engine.WithSink(disk), engine.WithStateStore(b))...)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		cp.stop.Store(&cancel)
		cp.armed.Store(arm)
		defer cp.armed.Store(false)
		return q.Run(ctx)
	}
	err = attempt(true)
	t.Logf("first attempt (stopped during batch 1's commit): %v", err)
	if err == nil {
		t.Fatal("the first attempt was not stopped")
	}
	if err := attempt(false); err != nil {
		t.Fatal(err)
	}
	if got, want := len(disk.Batch(1)), len(mem.Batch(1)); got != want {
		t.Fatalf("batch 1: %d rows on pebble, %d in memory", got, want)
	}
	bad := 0
	var first []any
	for _, r := range disk.Batch(1) {
		if r[1] != int64(2) || r[2] != int64(2) {
			if bad == 0 {
				first = r
			}
			bad++
		}
	}
	if bad > 0 {
		t.Fatalf("batch 1 on pebble: %d of %d keys have a wrong total or count (first: %v; want total 2, count 2): the re-run merged batch 1 again into the part of it the stopped attempt applied", bad, n, first)
	}
	rvSame(t, disk, mem)
}
