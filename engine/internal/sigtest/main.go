// Command sigtest runs a query whose sink is slow, under
// engine.RunUntilSignal, for the engine's signal tests. It prints one line
// per event on standard output:
//
//	sink start N     the sink began batch N
//	sink done N      the sink finished batch N
//	committed N recovered=B
//
// and logs the driver's lines (slog text) on standard error. It exits 0
// when Run returned nil, 1 otherwise.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/storage"
)

var schema = arrow.NewSchema([]arrow.Field{{Name: "i", Type: arrow.PrimitiveTypes.Int64}}, nil)

// counter emits 0, 1, 2, … without end, perBatch rows a batch.
type counter struct{ perBatch int64 }

func (c counter) Schema() *arrow.Schema { return schema }
func (c counter) Description() string   { return "counter" }
func (c counter) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (c counter) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	n, err := strconv.ParseInt(string(start), 10, 64)
	if err != nil {
		return nil, err
	}
	return json.RawMessage(strconv.FormatInt(n+c.perBatch, 10)), nil
}
func (c counter) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.ParseInt(string(start), 10, 64)
	b, _ := strconv.ParseInt(string(end), 10, 64)
	bld := array.NewInt64Builder(memory.DefaultAllocator)
	defer bld.Release()
	for i := a; i < b; i++ {
		bld.Append(i)
	}
	col := bld.NewArray()
	defer col.Release()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, b-a)
	defer rec.Release()
	return emit(rec)
}

// slowSink takes delay per batch and says so on standard output.
type slowSink struct{ delay time.Duration }

func (s slowSink) Description() string { return "slow" }
func (s slowSink) AddBatch(ctx context.Context, id int64, _ *arrow.Schema, _ []arrow.RecordBatch) error {
	fmt.Printf("sink start %d\n", id)
	select {
	case <-time.After(s.delay):
	case <-ctx.Done():
		return ctx.Err()
	}
	fmt.Printf("sink done %d\n", id)
	return nil
}

func main() {
	dir := flag.String("checkpoint", "", "checkpoint directory")
	delay := flag.Duration("sink-delay", 500*time.Millisecond, "time the sink takes per batch")
	trigger := flag.String("trigger", "0s", "trigger: once, available-now or a duration")
	flag.Parse()
	if err := run(*dir, *delay, *trigger); err != nil {
		fmt.Fprintln(os.Stderr, "sigtest:", err)
		os.Exit(1)
	}
}

func run(dir string, delay time.Duration, trig string) error {
	store, err := storage.OpenLocal(dir, storage.LocalOptions{})
	if err != nil {
		return err
	}
	t, err := engine.ParseTrigger(trig)
	if err != nil {
		return err
	}
	q, err := engine.NewQuery(engine.ReadStream(counter{perBatch: 10}),
		engine.WithName("sigtest"), engine.WithCheckpoint(store), engine.WithSink(slowSink{delay: delay}), engine.WithTrigger(t),
		engine.WithLogger(slog.New(slog.NewTextHandler(os.Stderr, nil))),
		engine.WithProgressListener(func(p engine.Progress) {
			fmt.Printf("committed %d recovered=%t\n", p.BatchID, p.Recovered)
		}))
	if err != nil {
		return err
	}
	fmt.Println("running")
	return engine.RunUntilSignal(context.Background(), q)
}
