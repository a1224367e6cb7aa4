package pebblestore_test

import (
	"context"
	"encoding/json"
	"math"
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

// evSeq emits rows i = 0, 1, … with k = (i*7)%keys, amount = i%10 and an
// event time ts = (i/8)·500 ms, but 4 s earlier for every 13th row (late
// rows, some dropped by the watermark) and 1 h later from row tail on (the
// watermark then passes every earlier group).
type evSeq struct {
	avail      atomic.Int64
	perTrigger int64
	keys, tail int64
}

var evSchema = arrow.NewSchema([]arrow.Field{
	{Name: "k", Type: arrow.PrimitiveTypes.Int64},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}},
}, nil)

func (s *evSeq) Schema() *arrow.Schema { return evSchema }
func (s *evSeq) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage(`0`), nil
}
func (s *evSeq) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	n, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return nil, err
	}
	end := max(min(s.avail.Load(), n+s.perTrigger), n)
	return json.RawMessage(strconv.FormatInt(end, 10)), nil
}
func (s *evSeq) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.ParseInt(string(start), 10, 64)
	b, _ := strconv.ParseInt(string(end), 10, 64)
	mem := memory.DefaultAllocator
	kb, ab := array.NewInt64Builder(mem), array.NewInt64Builder(mem)
	tb := array.NewTimestampBuilder(mem, evSchema.Field(2).Type.(*arrow.TimestampType))
	defer kb.Release()
	defer ab.Release()
	defer tb.Release()
	base := int64(1_700_000_000_000)
	for i := a; i < b; i++ {
		kb.Append((i * 7) % s.keys)
		ab.Append(i % 10)
		ts := base + (i/8)*500
		if i%13 == 5 {
			ts -= 4000
		}
		if i >= s.tail {
			ts += 3_600_000
		}
		tb.Append(arrow.Timestamp(ts))
	}
	cols := []arrow.Array{kb.NewArray(), ab.NewArray(), tb.NewArray()}
	rec := array.NewRecordBatch(evSchema, cols, b-a)
	for _, c := range cols {
		c.Release()
	}
	defer rec.Release()
	return emit(rec)
}

// stateRows counts the rows of the newest state version of every
// partition of operator id: from the in-memory backend's files, or from
// the pebble backend both by a full load and by its time index (a scan
// before the end of time reads every indexed row, and fails on an index
// entry whose row is gone).
func stateRows(t *testing.T, cp storage.Store, id string, parts int, pebble bool, timeCol string) int64 {
	t.Helper()
	ctx := context.Background()
	var total int64
	for p := range parts {
		folder := engine.StateFolder(cp, id, p, "")
		ks, vs, err := statestore.ReadSchemas(ctx, folder)
		if err != nil {
			t.Fatal(err)
		}
		o := statestore.Options{KeySchema: ks, ValueSchema: vs}
		commits, err := cp.List(ctx, "commits/")
		if err != nil {
			t.Fatal(err)
		}
		last := int64(-1)
		for _, c := range commits {
			if v, err := strconv.ParseInt(strings.TrimLeft(c.Name[len("commits/"):], "0"), 10, 64); err == nil && v > last {
				last = v
			}
		}
		if !pebble {
			probe, err := statestore.Open(ctx, folder, o)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := probe.Load(ctx, last)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range recs {
				total += r.NumRows()
				r.Release()
			}
			continue
		}
		o.Backend = pebblestore.BackendName
		s, err := pebblestore.Open(ctx, folder, pebblestore.Options{State: o, Dir: t.TempDir(), TimeIndex: timeCol})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Restore(ctx, last); err != nil {
			t.Fatal(err)
		}
		recs, err := s.Load(ctx, last)
		if err != nil {
			t.Fatal(err)
		}
		var loaded, indexed int64
		for _, r := range recs {
			loaded += r.NumRows()
			r.Release()
		}
		if timeCol != "" {
			err := s.ScanBefore(ctx, math.MaxInt64, 0, func(r arrow.RecordBatch) error { indexed += r.NumRows(); return nil })
			if err != nil {
				t.Fatal(err)
			}
			if indexed != loaded {
				t.Fatalf("partition %d: the time index reaches %d rows, the state holds %d", p, indexed, loaded)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		total += loaded
	}
	return total
}

// TestEvictingOperatorsOnPebbleMatchMemory: operators that evict by the
// watermark — tumbling windows (append, update), sliding windows by panes
// (append) and row per window (update), a group-by keyed by the event
// time (after a window, too), DropDuplicates keyed by the event time,
// DropDuplicatesWithinWatermark — and complete mode, on the pebble
// backend, give the in-memory backend's output batch for batch, with late
// rows, across a restart on the same machine and one on another (a fresh
// working directory). When the watermark has passed every group but the
// last few, the pebble state holds as many rows as the in-memory one, and
// its time index exactly those rows: eviction removed the rest from the
// LSM and from the index.
func TestEvictingOperatorsOnPebbleMatchMemory(t *testing.T) {
	sum := func() []batch.Agg {
		return []batch.Agg{batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n")}
	}
	type query struct {
		build   func(src engine.Source) *engine.Stream
		mode    engine.OutputMode
		timeCol string // the pebble store's time index
		migrate bool   // the first run of the pebble checkpoint is in memory
	}
	queries := map[string]query{
		"tumblingAppend": {func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", 2*time.Second).GroupByWindow(engine.TumblingWindow("ts", 3*time.Second), "k").ID("w").Agg(sum()...)
		}, engine.Append, "window_end", false},
		"tumblingUpdate": {func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", 2*time.Second).GroupByWindow(engine.TumblingWindow("ts", 3*time.Second), "k").ID("w").Agg(sum()...)
		}, engine.Update, "window_end", false},
		"slidingPanes": {func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", 2*time.Second).GroupByWindow(engine.SlidingWindow("ts", 6*time.Second, 2*time.Second), "k").ID("w").Agg(sum()...)
		}, engine.Append, "window_start", false},
		"slidingRows": {func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", 2*time.Second).GroupByWindow(engine.SlidingWindow("ts", 6*time.Second, 2*time.Second), "k").ID("w").Agg(sum()...)
		}, engine.Update, "window_end", false},
		"eventTimeKeyAppend": {func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", 2*time.Second).GroupBy("ts", "k").ID("w").Agg(sum()...)
		}, engine.Append, "ts", false},
		"dedupWithinWatermark": {func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", 2*time.Second).DropDuplicatesWithinWatermark("k").ID("w")
		}, engine.Append, "ts", false},
		"dedupEventTimeKey": {func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", 2*time.Second).DropDuplicates("k", "ts").ID("w")
		}, engine.Append, "ts", false},
		"windowThenEventTimeKey": {func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", 2*time.Second).
				GroupByWindow(engine.TumblingWindow("ts", 2*time.Second), "k").ID("first").Agg(batch.CountRows().As("n")).
				GroupBy("window_end").ID("w").Agg(batch.Sum(batch.Col("n")).As("rows"), batch.CountRows().As("keys"))
		}, engine.Append, "window_end", false},
		"completeWindows": {func(src engine.Source) *engine.Stream {
			return engine.ReadStream(src).WithWatermark("ts", 2*time.Second).GroupByWindow(engine.TumblingWindow("ts", 3*time.Second), "k").ID("w").Agg(sum()...)
		}, engine.Complete, "window_end", false},
	}
	const parts = 3
	// A checkpoint the in-memory backend began, continued on pebble (a
	// migration: the first Restore reads the memory backend's files and
	// builds the index from them).
	for _, name := range []string{"slidingPanes", "dedupWithinWatermark"} {
		q := queries[name]
		q.migrate = true
		queries[name+"Migrated"] = q
	}
	for name, q := range queries {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			src := &evSeq{perTrigger: 40, keys: 11, tail: 636}
			mem, disk := memsink.New("mem"), memsink.New("disk")
			memCP, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			diskCP, err := storage.OpenLocal(t.TempDir(), storage.LocalOptions{NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			work := t.TempDir()
			for i, avail := range []int64{200, 400, 640} {
				src.avail.Store(avail)
				common := []engine.Option{engine.WithTrigger(engine.AvailableNow()), engine.WithStatePartitions(parts), engine.WithMinBatchesToRetain(4), engine.WithOutputMode(q.mode)}
				if err := run(t, q.build(src), append(common, engine.WithCheckpoint(memCP), engine.WithSink(mem))...); err != nil {
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
				onDisk := engine.WithStateStore(b)
				if q.migrate && i == 0 {
					onDisk = engine.WithStateStore(nil)
				}
				err = run(t, q.build(src), append(common, engine.WithCheckpoint(diskCP), engine.WithSink(disk), onDisk)...)
				if cerr := b.Close(); err == nil {
					err = cerr
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			got, want := batches(disk), batches(mem)
			if got != want {
				g, w := strings.Split(got, "\n"), strings.Split(want, "\n")
				for i := range min(len(g), len(w)) {
					if g[i] != w[i] {
						t.Fatalf("pebble backend output differs from the in-memory one at batch line %d:\n--- pebble\n%s\n--- memory\n%s", i, g[i], w[i])
					}
				}
				t.Fatalf("pebble backend output has %d batch lines, the in-memory one %d", len(g), len(w))
			}
			if n := len(mem.BatchIDs()); n < 10 {
				t.Fatalf("only %d batches with output", n)
			}
			memRows := stateRows(t, memCP, "w", parts, false, "")
			diskRows := stateRows(t, diskCP, "w", parts, true, q.timeCol)
			if diskRows != memRows {
				t.Fatalf("the pebble state holds %d rows, the in-memory one %d", diskRows, memRows)
			}
			if q.mode != engine.Complete && memRows > 20 {
				t.Fatalf("%d state rows after the watermark passed all but the last 4 input rows: eviction leaks", memRows)
			}
			t.Logf("%d batches, %d state rows left", len(mem.BatchIDs()), memRows)
		})
	}
}
