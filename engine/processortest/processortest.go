// Package processortest checks that an engine.Processor keeps the
// determinism rule (see engine.Processor): it runs the processor twice on
// the same input, once as one query and once restarting the query after
// every batch (so every batch starts from state read back from the
// checkpoint, and nothing the processor kept in its own fields survives),
// and reports the first batch whose output differs. A processor that reads
// time.Now, a random source of its own or Go map iteration order, or keeps
// state outside its declared states, fails it (with high probability for
// randomness and map order: run it on enough keys and batches).
//
// Both runs use a private local checkpoint, an in-memory source serving one
// record per batch and batch timestamps Start, Start+Step, … (batch i at
// Start+i×Step), so processing-time timers fire identically.
package processortest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/storage"
)

// Case is the input of a check.
type Case struct {
	// Schema of the input records; Batches holds one record per batch.
	Schema  *arrow.Schema
	Batches []arrow.RecordBatch
	// Keys are the GroupBy columns.
	Keys []string
	// WatermarkCol and Delay set a watermark before the grouping (none
	// when WatermarkCol is empty).
	WatermarkCol string
	Delay        time.Duration
	// Start is the first batch's timestamp (default 2026-01-01T00:00:00Z)
	// and Step how far the clock moves per batch of input (default 1 min).
	Start time.Time
	Step  time.Duration
	// Partitions is the number of state partitions (default 4).
	Partitions int
	// Options are passed to the processor's Process call.
	Options []engine.ProcessOption
}

// DiffError says which batch differed between the two runs.
type DiffError struct {
	BatchID              int64
	OneRun, WithRestarts [][]any
}

func (e *DiffError) Error() string {
	return fmt.Sprintf("processortest: batch %d differs between one run and a run restarted after every batch: the processor depends on something besides its key, rows, state, timers and the batch (the wall clock, randomness, Go map order, its own fields)\n  one run:        %v\n  with restarts:  %v", e.BatchID, e.OneRun, e.WithRestarts)
}

// Check runs Compare and fails t on a difference or an error.
func Check(t testing.TB, c Case, newProcessor func() engine.Processor) {
	t.Helper()
	if err := Compare(context.Background(), c, newProcessor); err != nil {
		t.Fatal(err)
	}
}

// Compare runs the processor (a fresh one from newProcessor per query)
// over c twice and returns a *DiffError for the first batch whose output
// differs, nil when both runs agree.
func Compare(ctx context.Context, c Case, newProcessor func() engine.Processor) error {
	if c.Start.IsZero() {
		c.Start = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	}
	if c.Step == 0 {
		c.Step = time.Minute
	}
	if c.Partitions == 0 {
		c.Partitions = 4
	}
	one, err := run(ctx, c, newProcessor, false)
	if err != nil {
		return fmt.Errorf("processortest: one run: %w", err)
	}
	two, err := run(ctx, c, newProcessor, true)
	if err != nil {
		return fmt.Errorf("processortest: run with restarts: %w", err)
	}
	ids := one.BatchIDs()
	if got := two.BatchIDs(); len(got) > len(ids) {
		ids = got
	}
	for _, id := range ids {
		a, b := one.Batch(id), two.Batch(id)
		if fmt.Sprint(a) != fmt.Sprint(b) {
			return &DiffError{BatchID: id, OneRun: a, WithRestarts: b}
		}
	}
	return nil
}

func run(ctx context.Context, c Case, newProcessor func() engine.Processor, restart bool) (*memsink.Sink, error) {
	dir, err := os.MkdirTemp("", "processortest-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	cp, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		return nil, err
	}
	src := &source{schema: c.Schema, recs: c.Batches}
	sink := memsink.New("processortest")
	// Batch i is planned at Start + i×Step in both runs: the clock moves
	// only when there is input to plan, so a restarted run never plans a
	// batch of timers alone where the single run has input too.
	clock := engine.WithClock(func() time.Time {
		n := max(0, min(src.consumed.Load(), src.avail.Load()-1))
		return c.Start.Add(time.Duration(n) * c.Step)
	})
	once := func(trigger engine.Trigger) error {
		s := engine.ReadStream(src)
		if c.WatermarkCol != "" {
			s = s.WithWatermark(c.WatermarkCol, c.Delay)
		}
		q, err := engine.NewQuery(s.GroupBy(c.Keys...).ID("processortest").Process(newProcessor(), c.Options...),
			engine.WithCheckpoint(cp), engine.WithSink(sink), engine.WithTrigger(trigger),
			engine.WithStatePartitions(c.Partitions), clock)
		if err != nil {
			return err
		}
		return q.Run(ctx)
	}
	if !restart {
		src.avail.Store(int64(len(c.Batches)))
		return sink, once(engine.AvailableNow())
	}
	// One batch per start (the batch of record i, as in the single run),
	// then a last pass for the batches without input that the single run
	// ends with (timers and a watermark that moved).
	for i := range c.Batches {
		src.avail.Store(int64(i + 1))
		if err := once(engine.Once()); err != nil {
			return nil, err
		}
	}
	return sink, once(engine.AvailableNow())
}

// source serves recs, one per batch, up to avail.
type source struct {
	schema   *arrow.Schema
	recs     []arrow.RecordBatch
	avail    atomic.Int64
	consumed atomic.Int64 // the end offset of the last read
}

func (s *source) Schema() *arrow.Schema { return s.schema }
func (s *source) Description() string   { return "processortest" }
func (s *source) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`0`), nil
}

func (s *source) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	n, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(strconv.FormatInt(max(n, min(n+1, s.avail.Load())), 10)), nil
}

func (s *source) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return err
	}
	b, err := strconv.ParseInt(string(end), 10, 64)
	if err != nil {
		return err
	}
	for i := a; i < b; i++ {
		if err := emit(s.recs[i]); err != nil {
			return err
		}
	}
	s.consumed.Store(b)
	return nil
}
