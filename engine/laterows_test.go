package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/memsink"
)

// startRecorder is a late-rows sink that needs Start (like kafkasink,
// which returns ErrNotStarted without it) and reports a guarantee.
type startRecorder struct {
	guarantee Guarantee
	mu        sync.Mutex
	started   bool
	added     []int64
}

func (s *startRecorder) Start(context.Context, string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.started = true
	return nil
}

func (s *startRecorder) AddBatch(_ context.Context, id int64, _ *arrow.Schema, _ []arrow.RecordBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.started {
		return errors.New("late-rows sink: AddBatch before Start")
	}
	s.added = append(s.added, id)
	return nil
}

func (s *startRecorder) Guarantee() Guarantee { return s.guarantee }

// atLeastOnceSink needs no Start and says it is at-least-once.
type atLeastOnceSink struct {
	mu    sync.Mutex
	calls int
}

func (s *atLeastOnceSink) AddBatch(context.Context, int64, *arrow.Schema, []arrow.RecordBatch) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls++
	return nil
}

func (s *atLeastOnceSink) Guarantee() Guarantee { return AtLeastOnce }

// Regression: the WithLateRows sink skipped what every other sink gets at
// start (Start, the guarantee check, schema validation); now it is started,
// gets every batch, and an at-least-once one is refused without
// WithAtLeastOnce.
//
// Before the fix: the sink given to WithLateRows bypasses everything main() does
// for the other sinks: it is never Started (a kafkasink there fails every
// batch with late rows, with ErrNotStarted), its guarantee is never
// checked (an at-least-once late-rows sink is accepted without
// WithAtLeastOnce, and re-runs duplicate its rows), and its schema is
// never validated.
func TestLateRowsSinkIsStartedAndChecked(t *testing.T) {
	stream := func() *Stream {
		return ReadStream(&scriptSource{batches: outOfOrder}).
			WithWatermark("ts", 5*time.Second).
			GroupByWindow(TumblingWindow("ts", 10*time.Second), "key").ID("win").
			Agg(batch.Sum(batch.Col("amount")).As("total"))
	}
	t.Run("started", func(t *testing.T) {
		late := &startRecorder{guarantee: ExactlyOnce}
		_, err := runQuery(t, stream(), WithCheckpoint(localStore(t)), WithSink(memsink.New("out")), WithTrigger(AvailableNow()), WithLateRows(late))
		if err != nil {
			t.Fatalf("a query whose late-rows sink needs Start failed at its first late row: %v", err)
		}
		// Every batch reaches the late-rows sink, late rows or not (its
		// position must be the newest commit, like every sink's).
		if fmt.Sprint(late.added) != "[0 1 2 3]" {
			t.Fatalf("late-rows sink got batches %v, want [0 1 2 3]", late.added)
		}
	})
	t.Run("guarantee", func(t *testing.T) {
		late := &atLeastOnceSink{}
		_, err := runQuery(t, stream(), WithCheckpoint(localStore(t)), WithSink(memsink.New("out")), WithTrigger(AvailableNow()), WithLateRows(late))
		if err == nil || !errors.Is(err, ErrInvalidQuery) || !strings.Contains(err.Error(), "WithAtLeastOnce") {
			t.Fatalf("an at-least-once late-rows sink was accepted without WithAtLeastOnce (err %v, %d late batches written)", err, late.calls)
		}
	})
}
