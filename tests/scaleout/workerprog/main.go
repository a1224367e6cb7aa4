// Command workerprog is one worker of the scale-out test: the settlement
// query (payments in Kafka → per-merchant sums) run by package scaleout,
// one task per payments partition, each with its checkpoint under
// -checkpoint (a directory or an s3:// location), the transactional Kafka
// sink and the PostgreSQL offsets-in-sink sink (a progress row per task).
// SIGTERM stops it gracefully: every task finishes its batch, then the
// worker leaves the group.
//
// It prints, for the test to read, one line per task event and per
// committed batch, with the wall clock in Unix milliseconds:
//
//	scaleout-event ms=… worker=W kind=started task=T
//	scaleout-batch ms=… worker=W task=T batch=N run=R end=E
//
// where E is the task's end offset in its partition after batch N.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/foreachbatch/postgres"
	"github.com/onceflow/onceflow/kafkasink"
	"github.com/onceflow/onceflow/scaleout"
	"github.com/onceflow/onceflow/source/kafka"
	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/s3store"
)

var paymentSchema = arrow.NewSchema([]arrow.Field{
	{Name: "payment_id", Type: arrow.BinaryTypes.String},
	{Name: "merchant_id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
}, nil)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "workerprog:", err)
		os.Exit(1)
	}
}

func run() error {
	name := flag.String("name", "w", "worker name, for the printed lines")
	brokers := flag.String("brokers", "", "Kafka brokers")
	cpLoc := flag.String("checkpoint", "", "checkpoint root: a directory or an s3:// location")
	pgURL := flag.String("pg", "", "PostgreSQL URL (empty: no PostgreSQL sink)")
	session := flag.Duration("session-timeout", 6*time.Second, "group session timeout")
	trigger := flag.Duration("trigger", 200*time.Millisecond, "trigger interval of each task")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	addrs := strings.Split(*brokers, ",")
	root, err := storage.Open(ctx, *cpLoc, map[string]storage.Opener{"s3": s3store.Open})
	if err != nil {
		return err
	}
	defer root.Close()
	var pool *pgxpool.Pool
	if *pgURL != "" {
		if pool, err = postgres.Connect(ctx, *pgURL); err != nil {
			return err
		}
		defer pool.Close()
	}
	var printMu sync.Mutex
	printf := func(format string, args ...any) {
		printMu.Lock()
		defer printMu.Unlock()
		fmt.Fprintf(os.Stderr, format, args...)
	}

	build := func(ctx context.Context, t scaleout.Task) (scaleout.Query, func() error, error) {
		var closers []func() error
		release := func() error {
			for _, c := range closers {
				_ = c()
			}
			return nil
		}
		src, err := kafka.New(kafka.WithBrokers(addrs...), kafka.WithTopics("payments"), kafka.WithPartitions(t.Partition),
			kafka.WithValueJSON(paymentSchema), kafka.WithMaxOffsetsPerTrigger(300))
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, src.Close)
		ks, err := kafkasink.New(kafkasink.WithBrokers(addrs...), kafkasink.WithTopic("settlements"), kafkasink.WithName("settlements"),
			kafkasink.WithKeyColumn("merchant_id"), kafkasink.WithTransactionTimeout(10*time.Second),
			kafkasink.WithValueJSON("merchant_id", "batch_id", "amount_cents", "payments", "total_cents"))
		if err != nil {
			_ = release()
			return nil, nil, err
		}
		closers = append(closers, ks.Close)
		opts := []engine.Option{
			engine.WithName(t.Name("settle")),
			engine.WithCheckpoint(t.Checkpoint(root)),
			engine.WithTrigger(engine.Every(*trigger)),
			engine.WithOutputMode(engine.Update),
			engine.WithStatePartitions(1),
			engine.WithSnapshotEvery(5),
			engine.WithMinBatchesToRetain(100000), // the audit recomputes from offsets/0
			engine.WithSink(ks),
			engine.WithProgressListener(func(p engine.Progress) {
				end := int64(-1)
				if len(p.Sources) > 0 {
					if pos, err := kafka.ParsePosition(p.Sources[0].EndOffset); err == nil {
						end = pos.Offsets["payments"][t.Partition]
					}
				}
				printf("scaleout-batch ms=%d worker=%s task=%s batch=%d run=%s end=%d\n",
					time.Now().UnixMilli(), *name, t.ID(), p.BatchID, p.RunID, end)
			}),
		}
		if pool != nil {
			ps, err := postgres.NewOffsetsInSink(pool, t.Name("settle"), "totals",
				postgres.WithKeyColumns("merchant_id"), postgres.WithMerge(postgres.MergeAdd, "amount_cents", "payments"),
				postgres.WithRetry(20, 50*time.Millisecond, time.Second))
			if err != nil {
				_ = release()
				return nil, nil, err
			}
			opts = append(opts, engine.WithSink(ps))
		}
		q, err := engine.NewQuery(stream(src), opts...)
		if err != nil {
			_ = release()
			return nil, nil, err
		}
		return q, release, nil
	}
	w, err := scaleout.NewWorker(build,
		scaleout.WithBrokers(addrs...), scaleout.WithGroup("settle"), scaleout.WithTopic("payments"),
		scaleout.WithSessionTimeout(*session), scaleout.WithRetryBackoff(100*time.Millisecond, time.Second),
		scaleout.WithTaskListener(func(e scaleout.Event) {
			msg := ""
			if e.Err != nil {
				msg = " err=" + strings.ReplaceAll(e.Err.Error(), "\n", " ")
			}
			printf("scaleout-event ms=%d worker=%s kind=%s task=%s%s\n", time.Now().UnixMilli(), *name, e.Kind, e.Task.ID(), msg)
		}))
	if err != nil {
		return err
	}
	return w.Run(ctx)
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
