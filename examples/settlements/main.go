// Command settlements is the seed scenario made runnable: payments in a
// Kafka topic, per-merchant running totals in state, and for each batch and
// each merchant with payments in it one settlement record in a settlements
// topic, written through the transactional Kafka sink.
//
// A payment is a JSON value
//
//	{"payment_id": "p-…", "merchant_id": "m-…", "amount_cents": 1234, "ts": "2026-11-30T10:00:00.123Z"}
//
// and a settlement, keyed by merchant id, is
//
//	{"merchant_id": "m-…", "batch_id": 7, "amount_cents": 5400, "payments": 3, "total_cents": 91200}
//
// with this batch's sum and count and the running total after the batch,
// so the sum of amount_cents over the committed settlements equals the sum
// of the payments per merchant exactly when nothing was lost or duplicated.
//
//	settlements [-brokers host:port,…] [-checkpoint DIR] [-payments-topic payments]
//	            [-settlements-topic settlements] [-trigger 1s] [-generate N]
//
// With -brokers empty it starts the embedded Kafka (kfake) in-process; the
// data then lives only as long as the process. It stops cleanly on SIGTERM:
// the batch in flight commits; a second signal aborts at once.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/examples/internal/payments"
	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

// The engine compares the sink's newest batch with the checkpoint at start
// (engine.SinkPosition), which refuses an output that lost batches or a
// checkpoint older than the output.
var _ engine.SinkPosition = (*kafkasink.Sink)(nil)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "settlements:", err)
		os.Exit(1)
	}
}

// run owns everything it opens and closes it when the query has stopped
// (the engine never closes what it is given).
func run() (err error) {
	brokers := flag.String("brokers", "", "Kafka brokers, host:port,…; empty starts the embedded Kafka")
	cpDir := flag.String("checkpoint", "settlements-checkpoint", "checkpoint directory or s3:// URL")
	paymentsTopic := flag.String("payments-topic", "payments", "topic the payments arrive in")
	settlementsTopic := flag.String("settlements-topic", "settlements", "topic the settlements go to")
	trig := flag.String("trigger", "1s", "processing-time interval, once, or available-now")
	generate := flag.Int("generate", 0, "also produce N random payments first (0: something else feeds the topic)")
	merchants := flag.Int("merchants", 50, "distinct merchants of generated payments")
	maxPerTrigger := flag.Int64("max-offsets-per-trigger", 0, "cap on Kafka offsets per batch (0: none)")
	verbose := flag.Bool("v", false, "log the driver's steps")
	flag.Parse()

	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	trigger, err := engine.ParseTrigger(*trig)
	if err != nil {
		return err
	}
	addrs := splitList(*brokers)
	if len(addrs) == 0 {
		c, err := kafkadev.Start(ctx, kafkadev.Options{Topics: map[string]int32{*paymentsTopic: 4, *settlementsTopic: 4}})
		if err != nil {
			return err
		}
		defer c.Close()
		addrs = c.Addrs()
		fmt.Fprintf(os.Stderr, "settlements: embedded Kafka on %s\n", strings.Join(addrs, ","))
	}
	if *generate > 0 {
		if err := Produce(ctx, addrs, *paymentsTopic, *generate, *merchants, 1); err != nil {
			return err
		}
	}
	cp, err := storage.Open(ctx, *cpDir, openers())
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cp.Close()) }()

	srcOpts := []kafka.Option{kafka.WithBrokers(addrs...), kafka.WithTopics(*paymentsTopic), kafka.WithValueJSON(payments.Schema), kafka.WithLogger(logger)}
	if *maxPerTrigger > 0 {
		srcOpts = append(srcOpts, kafka.WithMaxOffsetsPerTrigger(*maxPerTrigger))
	}
	src, err := kafka.New(srcOpts...)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, src.Close()) }()
	sink, err := kafkasink.New(
		kafkasink.WithBrokers(addrs...),
		kafkasink.WithTopic(*settlementsTopic),
		kafkasink.WithName("settlements"),
		kafkasink.WithKeyColumn("merchant_id"),
		kafkasink.WithValueJSON("merchant_id", "batch_id", "amount_cents", "payments", "total_cents"),
		kafkasink.WithLogger(logger),
	)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, sink.Close()) }()
	q, err := engine.NewQuery(Stream(src),
		engine.WithName("settlements"),
		engine.WithCheckpoint(cp),
		engine.WithSink(sink),
		engine.WithTrigger(trigger),
		engine.WithOutputMode(engine.Update),
		engine.WithLogger(logger),
		engine.WithProgressListener(func(p engine.Progress) {
			fmt.Fprintf(os.Stderr, "settlements: batch %d: %d payments in, %d settlements out, %d ms\n", p.BatchID, p.NumInputRows, p.Sinks[0].NumOutputRows, p.BatchDurationMs)
		}),
	)
	if err != nil {
		return err
	}
	return engine.RunUntilSignal(ctx, q)
}

// Stream is the settlement query: per merchant, this batch's sum and count
// and the running total, with the batch id.
func Stream(src engine.Source) *engine.Stream {
	return engine.ReadStream(src).
		Select(
			batch.As(batch.Col("payment_id"), "payment_id"),
			batch.As(batch.Col("merchant_id"), "merchant_id"),
			batch.As(batch.Col("amount_cents"), "amount_cents"),
		).
		GroupBy("merchant_id").ID("merchant-totals").
		Agg(
			batch.Sum(batch.Col("amount_cents")).PerBatch().As("amount_cents"),
			batch.CountRows().PerBatch().As("payments"),
			batch.Sum(batch.Col("amount_cents")).As("total_cents"),
		).
		WithBatchIDColumn("batch_id")
}

func splitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
