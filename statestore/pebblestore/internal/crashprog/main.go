// Command crashprog is the process the pebble backend's crash test
// (TestCrashOnPebble) kills. It runs a query from a bounded deterministic
// counter source through a group-by (or a deduplication, or a sliding
// window computed by panes that evicts by the watermark) whose state is
// kept by the pebble backend into a sink that writes each batch once to a
// directory, with the engine's fault points armed by ONCEFLOW_FAULT
// (compiled in with -tags onceflow_faults), and exits when the input is
// exhausted (trigger AvailableNow).
//
//	crashprog -checkpoint DIR -work DIR -out DIR -rows N -per-batch M -keys K [-dedup | -sliding]
//
// -work is the pebble backend's local working directory: a test may delete
// it between a kill and the restart, which then restores the state from
// the checkpoint (the uploaded SSTs and the deltas after them), as on
// another machine.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/statestore/pebblestore"
	"github.com/onceflow/onceflow/storage"
)

func main() {
	cpDir := flag.String("checkpoint", "", "checkpoint directory")
	workDir := flag.String("work", "", "the pebble backend's local working directory")
	outDir := flag.String("out", "", "output directory of the batch sink")
	rows := flag.Int64("rows", 3000, "total input rows")
	perBatch := flag.Int64("per-batch", 250, "rows per batch")
	keys := flag.Int64("keys", 13, "distinct keys")
	dedup := flag.Bool("dedup", false, "DropDuplicates(key, bucket) instead of GroupBy(key).Agg(sum, count)")
	sliding := flag.Bool("sliding", false, "a sliding window (6s every 2s, watermark 1s) by key, append mode, instead of GroupBy(key).Agg(sum, count)")
	flag.Parse()
	if err := run(*cpDir, *workDir, *outDir, *rows, *perBatch, *keys, *dedup, *sliding); err != nil {
		fmt.Fprintln(os.Stderr, "crashprog:", err)
		os.Exit(1)
	}
}

func run(cpDir, workDir, outDir string, rows, perBatch, keys int64, dedup, sliding bool) (err error) {
	if cpDir == "" || workDir == "" || outDir == "" {
		return errors.New("-checkpoint, -work and -out are required")
	}
	ctx := context.Background()
	cp, err := storage.OpenLocal(cpDir, storage.LocalOptions{})
	if err != nil {
		return err
	}
	out, err := storage.OpenLocal(outDir, storage.LocalOptions{})
	if err != nil {
		return err
	}
	// A small cache and memtables, and an upload every 2 versions, so a
	// run of a dozen batches uploads several incremental snapshots.
	backend, err := pebblestore.NewBackend(pebblestore.BackendOptions{
		Dir:          workDir,
		CacheSize:    1 << 20,
		MemTableSize: 1 << 20,
		UploadEvery:  2,
	})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, backend.Close()) }()

	stream := engine.ReadStream(&counter{total: rows, perBatch: perBatch, keys: keys})
	mode := engine.Update
	switch {
	case dedup:
		stream = stream.DropDuplicates("key", "bucket").ID("first")
	case sliding:
		mode = engine.Append
		stream = stream.WithWatermark("ts", time.Second).
			GroupByWindow(engine.SlidingWindow("ts", 6*time.Second, 2*time.Second), "key").ID("windows").
			Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
	default:
		stream = stream.GroupBy("key").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
	}
	q, err := engine.NewQuery(stream,
		engine.WithOutputMode(mode),
		engine.WithName("pebble-crashprog"),
		engine.WithCheckpoint(cp),
		engine.WithSink(&dirSink{store: out}),
		engine.WithStateStore(backend),
		engine.WithTrigger(engine.AvailableNow()),
		engine.WithStatePartitions(2),
		engine.WithSnapshotEvery(2),
		engine.WithMinBatchesToRetain(3),
	)
	if err != nil {
		return err
	}
	return q.Run(ctx)
}

// counter is a bounded source of rows: i, key = "k<i % keys>", amount =
// i*7 % 1000, bucket = i / 300 (so the deduplication meets new (key,
// bucket) pairs in most batches and repeats in every one), and an event
// time ts = i·20 ms from a fixed instant, 3 s earlier for every 17th row
// (late rows for the sliding window).
type counter struct {
	total, perBatch, keys int64
}

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "i", Type: arrow.PrimitiveTypes.Int64},
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
	{Name: "bucket", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}},
}, nil)

func (c *counter) Schema() *arrow.Schema { return schema }
func (c *counter) Description() string   { return "counter" }
func (c *counter) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (c *counter) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	s, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(strconv.FormatInt(min(s+c.perBatch, c.total), 10)), nil
}
func (c *counter) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	s, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return err
	}
	e, err := strconv.ParseInt(string(end), 10, 64)
	if err != nil {
		return err
	}
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	kb := array.NewStringBuilder(memory.DefaultAllocator)
	ab := array.NewInt64Builder(memory.DefaultAllocator)
	bb := array.NewInt64Builder(memory.DefaultAllocator)
	defer ib.Release()
	defer kb.Release()
	defer ab.Release()
	defer bb.Release()
	tb := array.NewTimestampBuilder(memory.DefaultAllocator, schema.Field(4).Type.(*arrow.TimestampType))
	defer tb.Release()
	for i := s; i < e; i++ {
		ib.Append(i)
		kb.Append("k" + strconv.FormatInt(i%c.keys, 10))
		ab.Append(i * 7 % 1000)
		bb.Append(i / 300)
		ts := int64(1_700_000_000_000) + i*20
		if i%17 == 3 {
			ts -= 3000
		}
		tb.Append(arrow.Timestamp(ts))
	}
	cols := []arrow.Array{ib.NewArray(), kb.NewArray(), ab.NewArray(), bb.NewArray(), tb.NewArray()}
	rec := array.NewRecordBatch(schema, cols, e-s)
	for _, col := range cols {
		col.Release()
	}
	defer rec.Release()
	return emit(rec)
}

// dirSink writes batch N's rows as JSON to <out>/batch-<N>.json with
// put-if-absent: a repeated AddBatch of N must bring the same bytes (it
// fails otherwise) and is counted in <out>/repeat-<N>-<k>.
type dirSink struct{ store storage.Store }

func (d *dirSink) Description() string { return "dir" }

func (d *dirSink) AddBatch(ctx context.Context, id int64, _ *arrow.Schema, recs []arrow.RecordBatch) error {
	rows, err := memsink.Rows(recs)
	if err != nil {
		return err
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return err
	}
	name := fmt.Sprintf("batch-%06d.json", id)
	err = d.store.PutIfAbsent(ctx, name, b)
	if storage.IsExist(err) {
		prev, gerr := d.store.Get(ctx, name)
		if gerr != nil {
			return gerr
		}
		if string(prev) != string(b) {
			return fmt.Errorf("batch %d re-run produced other rows than its first attempt", id)
		}
		for k := 0; ; k++ {
			if err := d.store.PutIfAbsent(ctx, fmt.Sprintf("repeat-%06d-%d", id, k), nil); err == nil {
				return nil
			} else if !storage.IsExist(err) {
				return err
			}
		}
	}
	return err
}
