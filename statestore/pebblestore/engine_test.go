package pebblestore_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/statestore/pebblestore"
	"github.com/onceflow/onceflow/storage"
)

// seq emits rows i = 0, 1, … with int64 key k = (i*7)%keys and amount
// i%10; avail says how many exist, perTrigger caps a batch.
type seq struct {
	avail      atomic.Int64
	perTrigger int64
	keys       int64
}

var seqSchema = arrow.NewSchema([]arrow.Field{
	{Name: "i", Type: arrow.PrimitiveTypes.Int64},
	{Name: "k", Type: arrow.PrimitiveTypes.Int64},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func (s *seq) Schema() *arrow.Schema { return seqSchema }
func (s *seq) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`0`), nil
}
func (s *seq) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	n, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return nil, err
	}
	end := max(min(s.avail.Load(), n+s.perTrigger), n)
	return json.RawMessage(strconv.FormatInt(end, 10)), nil
}
func (s *seq) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.ParseInt(string(start), 10, 64)
	b, _ := strconv.ParseInt(string(end), 10, 64)
	mem := memory.DefaultAllocator
	ib, kb, ab := array.NewInt64Builder(mem), array.NewInt64Builder(mem), array.NewInt64Builder(mem)
	defer ib.Release()
	defer kb.Release()
	defer ab.Release()
	for i := a; i < b; i++ {
		ib.Append(i)
		kb.Append((i * 7) % s.keys)
		ab.Append(i % 10)
	}
	cols := []arrow.Array{ib.NewArray(), kb.NewArray(), ab.NewArray()}
	rec := array.NewRecordBatch(seqSchema, cols, b-a)
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	return emit(rec)
}

func run(t *testing.T, stream *engine.Stream, opts ...engine.Option) error {
	t.Helper()
	q, err := engine.NewQuery(stream, opts...)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return q.Run(ctx)
}

func batches(s *memsink.Sink) string {
	var b strings.Builder
	for _, id := range s.BatchIDs() {
		fmt.Fprintf(&b, "%d: %v\n", id, s.Batch(id))
	}
	return b.String()
}

// TestEngineOnPebbleMatchesMemory: a group-by (sum, count; update output)
// and a deduplication on the pebble backend give the in-memory backend's
// output batch for batch, across a restart on the same machine (the
// working copy) and one on another machine (a fresh directory: the
// uploaded snapshot and the deltas after it).
func TestEngineOnPebbleMatchesMemory(t *testing.T) {
	queries := map[string]func(src engine.Source) *engine.Stream{
		"groupBy": func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).GroupBy("k").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
		},
		"dedup": func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).DropDuplicates("k").ID("first")
		},
	}
	for name, query := range queries {
		t.Run(name, func(t *testing.T) {
			src := &seq{perTrigger: 40, keys: 97}
			mem, disk := memsink.New("mem"), memsink.New("disk")
			memCP, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			diskDir := t.TempDir()
			diskCP, err := storage.OpenLocal(diskDir, storage.LocalOptions{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			work := t.TempDir()
			for i, avail := range []int64{200, 400, 640} {
				src.avail.Store(avail)
				common := []engine.Option{engine.WithTrigger(engine.AvailableNow()), engine.WithStatePartitions(3), engine.WithMinBatchesToRetain(4), engine.WithOutputMode(engine.Update)}
				if err := run(t, query(src), append(common, engine.WithCheckpoint(memCP), engine.WithSink(mem))...); err != nil {
					t.Fatal(err)
				}
				root := filepath.Join(work, "machine-a")
				if i == 2 {
					root = filepath.Join(work, "machine-b") // another machine: no working copy
				}
				b, err := pebblestore.NewBackend(pebblestore.BackendOptions{Dir: root, CacheSize: 8 << 20, UploadEvery: 3, MemTableSize: 1 << 20})
				if err != nil {
					t.Fatal(err)
				}
				err = run(t, query(src), append(common, engine.WithCheckpoint(diskCP), engine.WithSink(disk), engine.WithStateStore(b))...)
				if cerr := b.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			if got, want := batches(disk), batches(mem); got != want {
				t.Fatalf("pebble backend output differs from the in-memory one:\n--- pebble\n%s--- memory\n%s", got, want)
			}
			if n := len(mem.BatchIDs()); n < 10 {
				t.Fatalf("only %d batches", n)
			}
			objs, err := diskCP.List(context.Background(), "state/")
			if err != nil {
				t.Fatal(err)
			}
			var manifests int
			for _, o := range objs {
				if strings.HasSuffix(o.Name, ".pebble") {
					manifests++
				}
			}
			if manifests == 0 {
				t.Fatal("no snapshot uploaded to the checkpoint")
			}
			// The in-memory backend now refuses the checkpoint, naming both.
			err = run(t, query(src), engine.WithCheckpoint(diskCP), engine.WithSink(memsink.New("x")), engine.WithTrigger(engine.AvailableNow()), engine.WithStatePartitions(3), engine.WithOutputMode(engine.Update))
			if !errors.Is(err, statestore.ErrBackendMismatch) {
				t.Fatalf("in-memory backend on a pebble checkpoint: %v", err)
			}
		})
	}
}

// TestEngineRefusesWhatPebbleDoesNotRunYet: a session window on the
// pebble backend is refused by NewQuery, naming the operator and the way
// out, which runs: WithOperatorStateStore(id, nil) keeps that operator in
// memory while the query's others stay on pebble. An id that names no
// operator is refused, naming it and the query's operators; the plan
// names each operator's backend and warns of complete mode on disk.
func TestEngineRefusesWhatPebbleDoesNotRunYet(t *testing.T) {
	src := &evSeq{perTrigger: 10, keys: 5, tail: 1 << 40}
	src.avail.Store(40)
	cp, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := pebblestore.NewBackend(pebblestore.BackendOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	sessions := func() *engine.Stream {
		return engine.ReadStream(src).WithWatermark("ts", time.Second).
			DropDuplicates("k", "amount").ID("firsts").
			GroupByWindow(engine.SessionWindow("ts", 2*time.Second), "k").ID("sessions").Agg(batch.CountRows().As("n"))
	}
	opts := []engine.Option{engine.WithCheckpoint(cp), engine.WithSink(memsink.New("x")), engine.WithTrigger(engine.AvailableNow()), engine.WithOutputMode(engine.Append), engine.WithStateStore(b)}
	_, err = engine.NewQuery(sessions(), opts...)
	if err == nil || !strings.Contains(err.Error(), "sessions") || !strings.Contains(err.Error(), `WithOperatorStateStore("sessions", nil)`) {
		t.Fatalf("a session window on pebble: %v", err)
	}
	_, err = engine.NewQuery(sessions(), append(opts, engine.WithOperatorStateStore("nope", nil))...)
	if err == nil || !strings.Contains(err.Error(), "nope") || !strings.Contains(err.Error(), "firsts, sessions") {
		t.Fatalf("an unknown operator id: %v", err)
	}
	q, err := engine.NewQuery(sessions(), append(opts, engine.WithOperatorStateStore("sessions", nil))...)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := q.Describe()
	if err != nil {
		t.Fatal(err)
	}
	if got := plan.Operators[0].Backend + " " + plan.Operators[1].Backend; got != "pebble memory" {
		t.Fatalf("plan backends: %s\n%s", got, plan)
	}
	if !strings.Contains(plan.String(), "state on pebble") {
		t.Fatalf("the plan does not name the pebble backend:\n%s", plan)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := q.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if be, err := statestore.ReadBackend(ctx, storage.Sub(cp, "state/firsts/0")); err != nil || be != pebblestore.BackendName {
		t.Fatalf("firsts' folder is kept by %q (%v), want pebble", be, err)
	}
	if be, err := statestore.ReadBackend(ctx, storage.Sub(cp, "state/sessions/0")); err != nil || be != statestore.BackendMemory {
		t.Fatalf("sessions' folder is kept by %q (%v), want memory", be, err)
	}
	q, err = engine.NewQuery(engine.ReadStream(src).GroupBy("k").ID("totals").Agg(batch.CountRows().As("n")), engine.WithCheckpoint(cp), engine.WithSink(memsink.New("x")), engine.WithOutputMode(engine.Complete), engine.WithStateStore(b))
	if err != nil {
		t.Fatal(err)
	}
	if plan, err = q.Describe(); err != nil || len(plan.Warnings) == 0 || !strings.Contains(plan.Warnings[0], "complete mode") {
		t.Fatalf("complete mode on pebble: no warning in the plan (%v):\n%s", err, plan)
	}
}
