package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/cron"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/storage"
)

// stuckClock never lets a wait end: only Stop or the context can.
type stuckClock struct{ now time.Time }

func (c stuckClock) Now() time.Time                     { return c.now }
func (stuckClock) After(time.Duration) <-chan time.Time { return nil }

// runAsync runs q on its own goroutine and returns a channel with Run's
// result.
func runAsync(t *testing.T, ctx context.Context, q *Query) <-chan error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	return done
}

func waitRun(t *testing.T, done <-chan error, what string) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(20 * time.Second):
		t.Fatalf("Run did not return %s", what)
		return nil
	}
}

// Regression: Run cleared an earlier Stop, so a Stop that came before Run
// (a signal while the process was starting) was lost and the query ran on.
// Now Stop is final: a Run that begins after it returns nil at once, and
// so does every later Run of that Query.
func TestStopBeforeRunEndsRun(t *testing.T) {
	cp := localStore(t)
	sink := memsink.New("out")
	q, err := NewQuery(ReadStream(newSeq(1<<40, 10, 3)), WithCheckpoint(cp), WithSink(sink), WithTrigger(Every(0)))
	if err != nil {
		t.Fatal(err)
	}
	q.Stop()
	q.Stop() // twice is fine
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for i := 0; i < 2; i++ {
		if err := waitRun(t, runAsync(t, ctx, q), "after Stop"); err != nil {
			t.Fatalf("Run %d after Stop: %v", i, err)
		}
	}
	if ids := sink.BatchIDs(); len(ids) != 0 {
		t.Fatalf("a stopped query ran batches %v", ids)
	}
}

// Regression: a waiting driver looked for Stop only between 100 ms
// clock ticks, so it noticed Stop only when its clock ticked. Now the wait
// ends on Stop itself, whatever the clock does.
func TestStopEndsAWaitAtOnce(t *testing.T) {
	for _, trig := range []Trigger{Every(0), Every(time.Hour), Scheduled(cron.Every(time.Hour))} {
		t.Run(trig.String(), func(t *testing.T) {
			cp := localStore(t)
			sink := memsink.New("out")
			src := newSeq(10, 0, 3)
			committed := make(chan struct{}, 8)
			q, err := NewQuery(ReadStream(src), WithCheckpoint(cp), WithSink(sink), WithTrigger(trig),
				WithProgressListener(func(Progress) { committed <- struct{}{} }))
			if err != nil {
				t.Fatal(err)
			}
			q.cfg.clock = stuckClock{now: time.Date(2026, 1, 1, 0, 30, 0, 0, time.UTC)}
			done := runAsync(t, context.Background(), q)
			if trig.kind != triggerSchedule {
				select {
				case <-committed: // batch 0; now the driver waits
				case err := <-done:
					t.Fatalf("Run returned before its first batch: %v", err)
				case <-time.After(20 * time.Second):
					t.Fatal("no first batch")
				}
			}
			q.Stop()
			if err := waitRun(t, done, "after Stop while waiting"); err != nil {
				t.Fatalf("Run after Stop: %v", err)
			}
		})
	}
}

// snapshotStore fails, or holds until its context ends, every write of a
// state snapshot.
type snapshotStore struct {
	storage.Store
	hold    bool
	entered chan struct{}
	once    sync.Once
}

func (s *snapshotStore) Put(ctx context.Context, name string, data []byte) error {
	if !strings.HasSuffix(name, ".snapshot") {
		return s.Store.Put(ctx, name, data)
	}
	if !s.hold {
		return errors.New("disk full")
	}
	s.once.Do(func() { close(s.entered) })
	<-ctx.Done()
	return ctx.Err()
}

func snapshotQuery(t *testing.T, st storage.Store, trig Trigger) *Query {
	t.Helper()
	// Deduplication commits what a batch added, never the whole state
	// (as an aggregation on one table does, which needs no snapshot), so
	// a snapshot is due after batch 0.
	stream := ReadStream(newSeq(10, 10, 3)).DropDuplicates("key").Stream
	q, err := NewQuery(stream, WithCheckpoint(st), WithSink(memsink.New("out")), WithTrigger(trig), WithSnapshotEvery(1))
	if err != nil {
		t.Fatal(err)
	}
	return q
}

// Regression: the snapshot written in the background after the last batch
// of a Once or AvailableNow run could fail unseen: Run waited for it and
// returned nil. Now its error is joined into Run's result.
func TestBackgroundSnapshotErrorIsReturned(t *testing.T) {
	for _, trig := range []Trigger{Once(), AvailableNow()} {
		t.Run(trig.String(), func(t *testing.T) {
			st := &snapshotStore{Store: localStore(t)}
			err := snapshotQuery(t, st, trig).Run(context.Background())
			if err == nil || !strings.Contains(err.Error(), "state maintenance") || !strings.Contains(err.Error(), "disk full") {
				t.Fatalf("Run = %v, want the snapshot's error", err)
			}
			// The batch itself committed: the snapshot is an optimisation.
			ids, _ := offsetlog.New[CommitEntry](st, checkpoint.CommitsDir).List(context.Background())
			if fmt.Sprint(ids) != "[0]" {
				t.Fatalf("commits %v", ids)
			}
		})
	}
}

// Regression: background snapshots ran on context.Background(), so
// cancelling Run's context did not stop a slow one and Run hung waiting
// for it. Now they run on Run's context.
func TestCancelStopsABackgroundSnapshot(t *testing.T) {
	st := &snapshotStore{Store: localStore(t), hold: true, entered: make(chan struct{})}
	q := snapshotQuery(t, st, Every(0))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := runAsync(t, ctx, q)
	select {
	case <-st.entered:
	case err := <-done:
		t.Fatalf("Run returned before the snapshot began: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("no snapshot began")
	}
	cancel()
	if err := waitRun(t, done, "after its context was cancelled during a snapshot"); !errors.Is(err, context.Canceled) {
		t.Fatalf("Run = %v, want context.Canceled", err)
	}
}
