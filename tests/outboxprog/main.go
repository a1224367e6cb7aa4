// Command outboxprog is the process the outbox crash test kills. As
// "query" it runs the card-block rule (examples/cardblock) over a bounded
// deterministic payments source into a transactional Kafka topic; as
// "worker" it runs an outbox worker that POSTs the committed intents.
//
//	outboxprog query -checkpoint DIR -brokers ADDR -topic T -batches N
//	outboxprog worker -checkpoint DIR -brokers ADDR -topic T -endpoint URL
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/examples/cardblock"
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/outbox"
	"github.com/onceflow/onceflow/storage"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: outboxprog query|worker [flags]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	cpDir := fs.String("checkpoint", "", "checkpoint directory")
	brokers := fs.String("brokers", "", "Kafka brokers, comma-separated")
	topic := fs.String("topic", "blocks", "intents topic")
	batches := fs.Int("batches", 30, "query: input batches")
	perBatch := fs.Int("per-batch", 60, "query: payments per batch")
	endpoint := fs.String("endpoint", "", "worker: URL to POST to")
	idle := fs.Duration("idle-exit", time.Second, "worker: exit after this long without intents")
	_ = fs.Parse(os.Args[2:])
	cp, err := storage.OpenLocal(*cpDir, storage.LocalOptions{})
	if err == nil {
		switch os.Args[1] {
		case "query":
			err = query(cp, strings.Split(*brokers, ","), *topic, *batches, *perBatch)
		case "worker":
			err = worker(cp, strings.Split(*brokers, ","), *topic, *endpoint, *idle)
		default:
			err = fmt.Errorf("unknown mode %q", os.Args[1])
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "outboxprog:", err)
		os.Exit(1)
	}
}

func query(cp storage.Store, brokers []string, topic string, batches, perBatch int) error {
	sink, err := kafkasink.New(kafkasink.WithBrokers(brokers...), kafkasink.WithTopic(topic), kafkasink.WithKeyColumn("card_id"))
	if err != nil {
		return err
	}
	defer sink.Close()
	src := &payments{batches: batches, perBatch: perBatch}
	stream := cardblock.AddRule(engine.ReadStream(src).WithWatermark("ts", time.Minute), cardblock.Rule{})
	q, err := engine.NewQuery(stream, engine.WithName("cardblock"), engine.WithCheckpoint(cp), engine.WithSink(sink),
		engine.WithTrigger(engine.AvailableNow()), engine.WithStatePartitions(3))
	if err != nil {
		return err
	}
	return q.Run(context.Background())
}

func worker(cp storage.Store, brokers []string, topic, endpoint string, idle time.Duration) error {
	w, err := outbox.New(outbox.WithBrokers(brokers...), outbox.WithTopic(topic), outbox.WithCheckpoint(cp), outbox.WithEndpoint(endpoint),
		outbox.WithBackoff(5*time.Millisecond, 50*time.Millisecond), outbox.WithMaxAttempts(50), outbox.WithIdleExit(idle))
	if err != nil {
		return err
	}
	defer w.Close()
	return w.Run(context.Background())
}

var schema = arrow.NewSchema([]arrow.Field{
	{Name: "card_id", Type: arrow.BinaryTypes.String},
	{Name: "status", Type: arrow.BinaryTypes.String},
	{Name: "ts", Type: arrow.FixedWidthTypes.Timestamp_ms},
}, nil)

// payments is a bounded source: batch b holds payments b·perBatch … of a
// deterministic sequence (20 cards, one payment per 20 s, 35% declined).
type payments struct{ batches, perBatch int }

func (p *payments) Schema() *arrow.Schema { return schema }
func (p *payments) Description() string   { return "payments" }
func (p *payments) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("0"), nil
}
func (p *payments) LatestOffset(_ context.Context, start json.RawMessage) (json.RawMessage, error) {
	n, err := strconv.Atoi(string(start))
	if err != nil {
		return nil, err
	}
	return json.RawMessage(strconv.Itoa(min(n+1, p.batches))), nil
}
func (p *payments) Read(_ context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error {
	a, _ := strconv.Atoi(string(start))
	b, _ := strconv.Atoi(string(end))
	t0 := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	for batch := a; batch < b; batch++ {
		rb := array.NewRecordBuilder(memory.DefaultAllocator, schema)
		for j := range p.perBatch {
			i := batch*p.perBatch + j
			rng := rand.New(rand.NewPCG(uint64(i), 11))
			rb.Field(0).(*array.StringBuilder).Append(fmt.Sprintf("c%02d", rng.IntN(20)))
			st := "approved"
			if rng.Float64() < 0.35 {
				st = "declined"
			}
			rb.Field(1).(*array.StringBuilder).Append(st)
			rb.Field(2).(*array.TimestampBuilder).Append(arrow.Timestamp(t0.Add(time.Duration(i) * 20 * time.Second).UnixMilli()))
		}
		rec := rb.NewRecordBatch()
		rb.Release()
		err := emit(rec)
		rec.Release()
		if err != nil {
			return err
		}
	}
	return nil
}
