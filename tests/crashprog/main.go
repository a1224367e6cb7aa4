// Command crashprog is the process the crash tests kill. It runs a
// query from a bounded deterministic counter source through a per-key
// aggregation into a sink that writes each batch once to a directory, with
// the engine's fault points armed by ONCEFLOW_FAULT, and exits when the
// input is exhausted (trigger AvailableNow).
//
//	crashprog -checkpoint DIR -out DIR -rows N -per-batch M -keys K [-stateless|-windowed|-sessions|-chain]
package main

import (
	"context"
	"encoding/json"
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
	"github.com/onceflow/onceflow/source/files"
	"github.com/onceflow/onceflow/storage"
)

func main() {
	cpDir := flag.String("checkpoint", "", "checkpoint directory")
	outDir := flag.String("out", "", "output directory of the batch sink")
	rows := flag.Int64("rows", 10000, "total input rows")
	perBatch := flag.Int64("per-batch", 1000, "rows per batch")
	keys := flag.Int64("keys", 17, "distinct keys")
	stateless := flag.Bool("stateless", false, "no aggregation: write the input rows")
	windowed := flag.Bool("windowed", false, "tumbling 1 s event-time windows with a 500 ms watermark, append mode")
	sessions := flag.Bool("sessions", false, "session windows (gap 120 ms) with a 500 ms watermark, append mode")
	sliding := flag.Bool("sliding", false, "sliding 2 s windows every 500 ms with a 500 ms watermark, append mode (computed by panes)")
	chain := flag.Bool("chain", false, "two stateful operators: tumbling 1 s windows per key, then per window across keys (append mode)")
	landing := flag.String("landing", "", "read JSON-lines files from this directory (one file per batch) instead of the counter")
	flag.Parse()
	if err := run(*cpDir, *outDir, *landing, *rows, *perBatch, *keys, *stateless, *windowed || *sliding, *sessions, *chain, *sliding); err != nil {
		fmt.Fprintln(os.Stderr, "crashprog:", err)
		os.Exit(1)
	}
}

func run(cpDir, outDir, landing string, rows, perBatch, keys int64, stateless, windowed, sessions, chain, sliding bool) error {
	ctx := context.Background()
	cp, err := storage.OpenLocal(cpDir, storage.LocalOptions{})
	if err != nil {
		return err
	}
	out, err := storage.OpenLocal(outDir, storage.LocalOptions{})
	if err != nil {
		return err
	}
	var src engine.Source = &counter{total: rows, perBatch: perBatch, keys: keys}
	if landing != "" {
		fsrc, err := files.New(landing, files.JSON, schema, files.WithMaxFilesPerTrigger(1))
		if err != nil {
			return err
		}
		src = fsrc
	}
	stream := engine.ReadStream(src).Where(batch.Ge(batch.Col("amount"), batch.Lit(int64(0))))
	mode := engine.Update
	switch {
	case stateless:
		mode = engine.Append
	case sliding:
		mode = engine.Append
		stream = stream.WithWatermark("ts", 500*time.Millisecond).
			GroupByWindow(engine.SlidingWindow("ts", 2*time.Second, 500*time.Millisecond), "key").ID("sliding").
			Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"), batch.Avg(batch.Col("amount")).As("avg"))
	case windowed:
		mode = engine.Append
		stream = stream.WithWatermark("ts", 500*time.Millisecond).
			GroupByWindow(engine.TumblingWindow("ts", time.Second), "key").ID("windows").
			Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
	case chain:
		mode = engine.Append
		stream = stream.WithWatermark("ts", 500*time.Millisecond).
			GroupByWindow(engine.TumblingWindow("ts", time.Second), "key").ID("windows").
			Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n")).
			GroupBy("window_start", "window_end").ID("per-window").
			Agg(batch.Sum(batch.Col("total")).As("total"), batch.Sum(batch.Col("n")).As("n"), batch.CountRows().As("keys"))
	case sessions:
		mode = engine.Append
		stream = stream.WithWatermark("ts", 500*time.Millisecond).
			GroupByWindow(engine.SessionWindow("ts", 120*time.Millisecond), "key").ID("sessions").
			Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
	default:
		stream = stream.GroupBy("key").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
	}
	q, err := engine.NewQuery(stream,
		engine.WithOutputMode(mode),
		engine.WithName("crashprog"),
		engine.WithCheckpoint(cp),
		engine.WithSink(&dirSink{store: out}),
		engine.WithTrigger(engine.AvailableNow()),
		engine.WithStatePartitions(4),
		engine.WithSnapshotEvery(3),
		engine.WithMinBatchesToRetain(5),
	)
	if err != nil {
		return err
	}
	return q.Run(ctx)
}

// counter is a bounded source of rows (key = i % keys, amount = i*7 % 1000,
// ts = i·10 ms, with every fifth row 700 ms older so some rows arrive out of
// order and some late).
type counter struct {
	total, perBatch, keys int64
}

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "i", Type: arrow.PrimitiveTypes.Int64},
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
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
	s, _ := strconv.ParseInt(string(start), 10, 64)
	e, _ := strconv.ParseInt(string(end), 10, 64)
	ib := array.NewInt64Builder(memory.DefaultAllocator)
	kb := array.NewStringBuilder(memory.DefaultAllocator)
	ab := array.NewInt64Builder(memory.DefaultAllocator)
	tb := array.NewTimestampBuilder(memory.DefaultAllocator, schema.Field(3).Type.(*arrow.TimestampType))
	for i := s; i < e; i++ {
		ib.Append(i)
		kb.Append("k" + strconv.FormatInt(i%c.keys, 10))
		ab.Append(i * 7 % 1000)
		t := i * 10_000
		if i%5 == 0 {
			t -= 700_000
		}
		tb.Append(arrow.Timestamp(t))
	}
	cols := []arrow.Array{ib.NewArray(), kb.NewArray(), ab.NewArray(), tb.NewArray()}
	rec := array.NewRecordBatch(schema, cols, e-s)
	for _, col := range cols {
		col.Release()
	}
	defer rec.Release()
	return emit(rec)
}

// dirSink writes batch N's rows as JSON to <out>/batch-<N>.json with
// put-if-absent, and counts repeats in <out>/repeat-<N>-<k>.
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
