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
	"fmt"
	"os"
	"strings"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/examples/internal/cli"
	"github.com/onceflow/onceflow/examples/internal/payments"
	"github.com/onceflow/onceflow/internal/kafkadev"
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/source/kafka"
)

// The engine compares the sink's newest batch with the checkpoint at start
// (engine.SinkPosition), which refuses an output that lost batches or a
// checkpoint older than the output.
var _ engine.SinkPosition = (*kafkasink.Sink)(nil)

func main() { cli.Main("settlements", run) }

// run builds the query; c closes what it opened when run returns.
func run(ctx context.Context, c *cli.Command) error {
	fs := c.FlagSet()
	brokers := fs.String("brokers", "", "Kafka brokers, host:port,…; empty starts the embedded Kafka")
	paymentsTopic := fs.String("payments-topic", "payments", "topic the payments arrive in")
	settlementsTopic := fs.String("settlements-topic", "settlements", "topic the settlements go to")
	maxPerTrigger := fs.Int64("max-offsets-per-trigger", 0, "cap on Kafka offsets per batch (0: none)")
	c.CheckpointFlag("settlements-checkpoint", "checkpoint directory or s3:// URL")
	c.TriggerFlag()
	c.GenerateFlags("also produce N random payments first (0: something else feeds the topic)")
	c.VerboseFlag("log the driver's steps")
	if err := c.Parse(); err != nil {
		return err
	}
	addrs := splitList(*brokers)
	if len(addrs) == 0 {
		k, err := kafkadev.Start(ctx, kafkadev.Options{Topics: map[string]int32{*paymentsTopic: 4, *settlementsTopic: 4}})
		if err != nil {
			return err
		}
		c.Defer(func() error { k.Close(); return nil })
		addrs = k.Addrs()
		fmt.Fprintf(os.Stderr, "settlements: embedded Kafka on %s\n", strings.Join(addrs, ","))
	}
	if c.Generate() > 0 {
		if err := Produce(ctx, addrs, *paymentsTopic, c.Generate(), c.Merchants(), 1); err != nil {
			return err
		}
	}
	if err := c.OpenCheckpoint(ctx); err != nil {
		return err
	}

	srcOpts := []kafka.Option{kafka.WithBrokers(addrs...), kafka.WithTopics(*paymentsTopic), kafka.WithValueJSON(payments.Schema), kafka.WithLogger(c.Logger())}
	if *maxPerTrigger > 0 {
		srcOpts = append(srcOpts, kafka.WithMaxOffsetsPerTrigger(*maxPerTrigger))
	}
	src, err := kafka.New(srcOpts...)
	if err != nil {
		return err
	}
	c.Defer(src.Close)
	sink, err := kafkasink.New(
		kafkasink.WithBrokers(addrs...),
		kafkasink.WithTopic(*settlementsTopic),
		kafkasink.WithName("settlements"),
		kafkasink.WithKeyColumn("merchant_id"),
		kafkasink.WithValueJSON("merchant_id", "batch_id", "amount_cents", "payments", "total_cents"),
		kafkasink.WithLogger(c.Logger()),
	)
	if err != nil {
		return err
	}
	c.Defer(sink.Close)
	return c.Run(ctx, Stream(src), sink, func(p engine.Progress) string {
		return fmt.Sprintf("%d payments in, %d settlements out", p.NumInputRows, p.Sinks[0].NumOutputRows)
	}, engine.WithOutputMode(engine.Update))
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
