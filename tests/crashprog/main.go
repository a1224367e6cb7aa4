// Command crashprog is the process the crash tests kill. It runs a
// query from a bounded deterministic counter source through a per-key
// aggregation into a sink that writes each batch once to a directory, with
// the engine's fault points armed by ONCEFLOW_FAULT, and exits when the
// input is exhausted (trigger AvailableNow).
//
//	crashprog -checkpoint DIR -out DIR -rows N -per-batch M -keys K [-stateless|-windowed|-sessions|-chain|-join|-tablejoin]
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
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
	join := flag.Bool("join", false, "a full outer stream-stream join of two counters (keys K and K-2, ts ±50 ms, 500 ms watermarks)")
	tableJoin := flag.Bool("tablejoin", false, "a left outer stream-table join of the counter with a changelog of its keys (upserts, every 7th a delete)")
	process := flag.Bool("process", false, "a user processor: running sum per key, an event-time timer 1 s after a key's first row, a 500 ms watermark")
	landing := flag.String("landing", "", "read JSON-lines files from this directory (one file per batch) instead of the counter")
	flag.BoolVar(&everyZero, "every0", false, "trigger Every(0) (batches back to back, planned ahead) instead of AvailableNow; the query stops when the counter is asked twice for the batch after its last row")
	flag.Parse()
	if err := run(*cpDir, *outDir, *landing, *rows, *perBatch, *keys, *stateless, *windowed || *sliding, *sessions, *chain, *sliding, *join, *tableJoin, *process); err != nil {
		fmt.Fprintln(os.Stderr, "crashprog:", err)
		os.Exit(1)
	}
}

func run(cpDir, outDir, landing string, rows, perBatch, keys int64, stateless, windowed, sessions, chain, sliding, join, tableJoin, process bool) error {
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
	case tableJoin:
		mode = engine.Append
		table := engine.ChangelogTable(engine.ReadStream(&changelog{total: rows, perBatch: perBatch, keys: keys}), "key").DeleteWhen(batch.Col("del"))
		stream = stream.JoinTable(table, engine.LeftOuter, engine.On("key", "key")).ID("enrich")
	case join:
		mode = engine.Append
		right := engine.ReadStream(&counter{total: rows, perBatch: perBatch, keys: keys - 2, shiftUs: 3_000, name: "counter-right"}).
			WithWatermark("ts", 500*time.Millisecond)
		stream = stream.WithWatermark("ts", 500*time.Millisecond).
			Join(right, engine.FullOuter, engine.On("key", "key"), engine.Within("ts", "ts", -50*time.Millisecond, 50*time.Millisecond)).ID("join")
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
	case process:
		mode = engine.Append
		stream = stream.WithWatermark("ts", 500*time.Millisecond).GroupBy("key").ID("proc").Process(&sumTimer{})
	default:
		stream = stream.GroupBy("key").ID("totals").Agg(batch.Sum(batch.Col("amount")).As("total"), batch.CountRows().As("n"))
	}
	trigger := engine.AvailableNow()
	if everyZero {
		trigger = engine.Every(0)
	}
	q, err := engine.NewQuery(stream,
		engine.WithOutputMode(mode),
		engine.WithName("crashprog"),
		engine.WithCheckpoint(cp),
		engine.WithSink(&dirSink{store: out}),
		engine.WithTrigger(trigger),
		engine.WithStatePartitions(4),
		engine.WithSnapshotEvery(3),
		engine.WithMinBatchesToRetain(5),
	)
	if err != nil {
		return err
	}
	stopQuery.Store(q)
	return q.Run(ctx)
}

// everyZero (-every0) runs under Every(0); stopQuery is then stopped by
// the counter when it is asked twice for the batch after its last row.
var (
	everyZero bool
	stopQuery atomic.Pointer[engine.Query]
)

// counter is a bounded source of rows (key = i % keys, amount = i*7 % 1000,
// ts = i·10 ms, with every fifth row 700 ms older so some rows arrive out of
// order and some late).
type counter struct {
	total, perBatch, keys int64
	shiftUs               int64  // added to every ts
	name                  string // "" for "counter"
	asksAtEnd             atomic.Int64
}

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "i", Type: arrow.PrimitiveTypes.Int64},
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "amount", Type: arrow.PrimitiveTypes.Int64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}},
}, nil)

func (c *counter) Schema() *arrow.Schema { return schema }
func (c *counter) Description() string {
	if c.name != "" {
		return c.name
	}
	return "counter"
}
func (c *counter) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (c *counter) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	s, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return nil, err
	}
	// The second ask past the end: the batch the first planned (new data
	// or, with a watermark, the windows it closes) has run.
	if everyZero && s >= c.total && c.asksAtEnd.Add(1) >= 2 {
		if q := stopQuery.Load(); q != nil {
			q.Stop()
		}
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
		tb.Append(arrow.Timestamp(t + c.shiftUs))
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

// changelog is a bounded changelog of the counter's keys: row i sets key
// k<i*3 % keys> to "v<i>", and every 7th row deletes its key instead.
type changelog struct {
	total, perBatch, keys int64
}

var changelogSchema = arrow.NewSchema([]arrow.Field{
	{Name: "key", Type: arrow.BinaryTypes.String},
	{Name: "val", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "del", Type: arrow.FixedWidthTypes.Boolean},
}, nil)

func (c *changelog) Schema() *arrow.Schema { return changelogSchema }
func (c *changelog) Description() string   { return "changelog" }
func (c *changelog) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (c *changelog) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	s, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(strconv.FormatInt(min(s+c.perBatch, c.total), 10)), nil
}
func (c *changelog) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	s, _ := strconv.ParseInt(string(start), 10, 64)
	e, _ := strconv.ParseInt(string(end), 10, 64)
	kb := array.NewStringBuilder(memory.DefaultAllocator)
	vb := array.NewStringBuilder(memory.DefaultAllocator)
	db := array.NewBooleanBuilder(memory.DefaultAllocator)
	for i := s; i < e; i++ {
		kb.Append("k" + strconv.FormatInt(i*3%c.keys, 10))
		del := i%7 == 0
		if del {
			vb.AppendNull()
		} else {
			vb.Append("v" + strconv.FormatInt(i, 10))
		}
		db.Append(del)
	}
	cols := []arrow.Array{kb.NewArray(), vb.NewArray(), db.NewArray()}
	rec := array.NewRecordBatch(changelogSchema, cols, e-s)
	for _, col := range cols {
		col.Release()
	}
	defer rec.Release()
	return emit(rec)
}

// sumTimer keeps a running sum and count per key and emits them each
// batch; an event-time timer 1 s after a key's first row since its last
// flush emits a flush row and clears the key.
type sumTimer struct {
	acc *engine.ValueState[acc]
}

type acc struct{ Sum, N int64 }

type procOut struct {
	Key   string
	What  string
	Sum   int64
	N     int64
	Batch int64
}

func (p *sumTimer) Init(s *engine.ProcessorSpec) error {
	s.Output(procOut{})
	p.acc = engine.NewValueState[acc](s, "acc")
	return nil
}

func (p *sumTimer) Handle(k *engine.KeyContext, rows *engine.Rows) error {
	var in []struct {
		Amount int64
		Ts     time.Time
	}
	if err := rows.Decode(&in); err != nil {
		return err
	}
	a, ok := p.acc.Get(k)
	if !ok {
		k.RegisterTimer(engine.EventTime, in[0].Ts.Add(time.Second))
	}
	for _, r := range in {
		a.Sum += r.Amount
		a.N++
	}
	p.acc.Set(k, a)
	k.Emit(procOut{Key: k.Key().Values()[0].(string), What: "sum", Sum: a.Sum, N: a.N, Batch: k.BatchID()})
	return nil
}

func (p *sumTimer) OnTimer(k *engine.KeyContext, t engine.Timer) error {
	a, _ := p.acc.Get(k)
	p.acc.Clear(k)
	k.Emit(procOut{Key: k.Key().Values()[0].(string), What: "flush@" + t.At.Format(time.StampMilli), Sum: a.Sum, N: a.N, Batch: k.BatchID()})
	return nil
}
