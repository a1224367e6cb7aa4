// Command chaosprog is the program the chaos tests kill: the settlement
// query (payments in Kafka → per-merchant sums) with up to four sinks
// attached to one query, one per output protocol:
//
//   - the transactional Kafka sink (-brokers, -settlements-topic),
//   - a Parquet file-sink table (-lake DIR),
//   - a PostgreSQL offsets-in-sink table (-pg URL, -pg-table), amounts
//     merged by addition under the progress guard,
//   - a foreachBatch function appending JSON lines to a file (-fb FILE),
//     guarded by the batch id: each batch ends with a marker line, a
//     torn tail after the last marker is cut off, and a batch at or below
//     the last marker is skipped.
//
// Every sink gets every batch. -broken-guard removes the foreachBatch
// function's batch-id check (and its tail repair), the bug the audit
// exists to catch. The process runs with trigger available-now and exits;
// fault points (internal/fault, env ONCEFLOW_FAULT) kill it mid-protocol.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/foreachbatch"
	"github.com/onceflow/onceflow/foreachbatch/postgres"
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
)

var paymentSchema = arrow.NewSchema([]arrow.Field{
	{Name: "payment_id", Type: arrow.BinaryTypes.String},
	{Name: "merchant_id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "chaosprog:", err)
		os.Exit(1)
	}
}

func run() error {
	brokers := flag.String("brokers", "", "Kafka brokers, host:port,…")
	cpDir := flag.String("checkpoint", "", "checkpoint directory")
	payments := flag.String("payments-topic", "payments", "input topic")
	settlements := flag.String("settlements-topic", "", "output topic of the transactional Kafka sink (empty: no Kafka sink)")
	lake := flag.String("lake", "", "file-sink table directory (empty: no file sink)")
	pgURL := flag.String("pg", "", "PostgreSQL URL of the offsets-in-sink table (empty: no PostgreSQL sink)")
	pgTable := flag.String("pg-table", "totals", "PostgreSQL table")
	fbFile := flag.String("fb", "", "JSON-lines file of the foreachBatch sink (empty: none)")
	brokenGuard := flag.Bool("broken-guard", false, "the foreachBatch function skips its batch-id check (a deliberate bug)")
	txnTimeout := flag.Duration("txn-timeout", 0, "Kafka sink transaction timeout (0: the sink's default)")
	maxPerTrigger := flag.Int64("max-offsets-per-trigger", 200, "Kafka offsets per batch")
	retain := flag.Int("retain", 3, "engine: minimum batches to retain")
	snapEvery := flag.Int("snapshot-every", 2, "engine: state snapshot every K versions")
	compactEvery := flag.Int64("compact-every", 4, "file sink: compact the log every C batches")
	verbose := flag.Bool("v", false, "log the driver's steps")
	flag.Parse()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	addrs := strings.Split(*brokers, ",")
	cp, err := storage.OpenLocal(*cpDir, storage.LocalOptions{})
	if err != nil {
		return err
	}
	defer cp.Close()
	src, err := kafka.New(kafka.WithBrokers(addrs...), kafka.WithTopics(*payments), kafka.WithValueJSON(paymentSchema),
		kafka.WithMaxOffsetsPerTrigger(*maxPerTrigger), kafka.WithLogger(logger))
	if err != nil {
		return err
	}
	defer src.Close()

	opts := []engine.Option{
		engine.WithName("chaos"),
		engine.WithCheckpoint(cp),
		engine.WithTrigger(engine.AvailableNow()),
		engine.WithOutputMode(engine.Update),
		engine.WithStatePartitions(4),
		engine.WithMinBatchesToRetain(*retain),
		engine.WithSnapshotEvery(*snapEvery),
		engine.WithLogger(logger),
		engine.WithProgressListener(func(p engine.Progress) {
			fmt.Fprintf(os.Stderr, "chaosprog: batch %d: %d payments\n", p.BatchID, p.NumInputRows)
		}),
	}
	if *settlements != "" {
		ko := []kafkasink.Option{
			kafkasink.WithBrokers(addrs...), kafkasink.WithTopic(*settlements), kafkasink.WithName("chaos-settlements"),
			kafkasink.WithKeyColumn("merchant_id"),
			kafkasink.WithValueJSON("merchant_id", "batch_id", "amount_cents", "payments", "total_cents"),
			kafkasink.WithLogger(logger),
		}
		if *txnTimeout > 0 {
			ko = append(ko, kafkasink.WithTransactionTimeout(*txnTimeout))
		}
		ks, err := kafkasink.New(ko...)
		if err != nil {
			return err
		}
		defer ks.Close()
		opts = append(opts, engine.WithSink(ks))
	}
	if *lake != "" {
		table, err := storage.OpenLocal(*lake, storage.LocalOptions{})
		if err != nil {
			return err
		}
		defer table.Close()
		fs, err := filesink.New(table, filesink.WithCompactEvery(*compactEvery))
		if err != nil {
			return err
		}
		opts = append(opts, engine.WithSink(fs))
	}
	if *pgURL != "" {
		pool, err := postgres.Connect(ctx, *pgURL)
		if err != nil {
			return err
		}
		defer pool.Close()
		ps, err := postgres.NewOffsetsInSink(pool, "chaos", *pgTable, postgres.WithCreateTables(true),
			postgres.WithKeyColumns("merchant_id"), postgres.WithMerge(postgres.MergeAdd, "amount_cents", "payments"),
			postgres.WithRetry(20, 50*time.Millisecond, time.Second), postgres.WithLogger(logger))
		if err != nil {
			return err
		}
		opts = append(opts, engine.WithSink(ps))
	}
	if *fbFile != "" {
		w := &lineSink{path: *fbFile, broken: *brokenGuard, last: -1}
		// Declared idempotent even when -broken-guard breaks the promise:
		// that is the bug (a sink that claims to skip and does not).
		opts = append(opts, engine.WithSink(foreachbatch.New(w.apply, foreachbatch.WithIdempotent())))
	}
	q, err := engine.NewQuery(stream(src), opts...)
	if err != nil {
		return err
	}
	return q.Run(ctx)
}

// stream is the settlement query: per merchant, this batch's sum and count
// and the running total, with the batch id.
func stream(src engine.Source) *engine.Stream {
	return engine.ReadStream(src).
		Select(
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
