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

// TestEngineRefusesWhatPebbleDoesNotRunYet: complete output mode is refused
// at start with a message naming the operator and the way out.
func TestEngineRefusesWhatPebbleDoesNotRunYet(t *testing.T) {
	src := &seq{perTrigger: 10, keys: 5}
	src.avail.Store(10)
	cp, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := pebblestore.NewBackend(pebblestore.BackendOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	err = run(t, engine.ReadStream(src).GroupBy("k").ID("totals").Agg(batch.CountRows().As("n")),
		engine.WithCheckpoint(cp), engine.WithSink(memsink.New("x")), engine.WithTrigger(engine.AvailableNow()), engine.WithOutputMode(engine.Complete), engine.WithStateStore(b))
	if err == nil || !strings.Contains(err.Error(), "complete output") || !strings.Contains(err.Error(), "totals") {
		t.Fatalf("complete mode on pebble: %v", err)
	}
}
