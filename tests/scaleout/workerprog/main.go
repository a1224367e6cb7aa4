// Command workerprog is one worker of the scale-out tests, run by package
// scaleout, one task per partition of its input topic, each task with its
// checkpoint under -checkpoint (a directory or an s3:// location). -stage
// picks the query:
//
//   - settle (the default): payments → per-merchant sums, into the
//     transactional Kafka sink (topic settlements) and the PostgreSQL
//     offsets-in-sink table totals (a progress row per task);
//   - repartition: stage 1 of a grouping by customer, which is not the
//     payments' partitioning (merchant): each payment, keyed by customer,
//     through the transactional Kafka sink into the repartition topic
//     by-customer, partition = customer number mod the partition count;
//   - customers: stage 2, by-customer → per-customer sums, into the Kafka
//     topic customer-totals and the PostgreSQL table customer_totals.
//
// SIGTERM stops it gracefully: every task finishes its batch, then the
// worker leaves the group. It prints, for the test to read, one line per
// task event and per committed batch, with the wall clock in Unix
// milliseconds:
//
//	scaleout-event ms=… worker=W kind=started task=T
//	scaleout-batch ms=… worker=W task=T batch=N run=R end=E
//
// where E is the task's end offset in its input partition after batch N.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/twmb/franz-go/pkg/kgo"

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
	{Name: "customer_id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
}, nil)

var byCustomerSchema = arrow.NewSchema([]arrow.Field{
	{Name: "payment_id", Type: arrow.BinaryTypes.String},
	{Name: "customer_id", Type: arrow.BinaryTypes.String},
	{Name: "amount_cents", Type: arrow.PrimitiveTypes.Int64},
}, nil)

// stage is one query of the test, run by a group of workers.
type stage struct {
	input  string
	schema *arrow.Schema
	stream func(engine.Source) *engine.Stream
	mode   engine.OutputMode
	// sinks builds the task's sinks; closers are appended to.
	sinks func(t scaleout.Task, add func(engine.Sink), closers *[]func() error) error
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "workerprog:", err)
		os.Exit(1)
	}
}

func run() error {
	name := flag.String("name", "w", "worker name, for the printed lines")
	stageName := flag.String("stage", "settle", "the query: settle, repartition or customers")
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
	kafkaSink := func(add func(engine.Sink), closers *[]func() error, opts ...kafkasink.Option) error {
		ks, err := kafkasink.New(append([]kafkasink.Option{kafkasink.WithBrokers(addrs...), kafkasink.WithTransactionTimeout(10 * time.Second)}, opts...)...)
		if err != nil {
			return err
		}
		*closers = append(*closers, ks.Close)
		add(ks)
		return nil
	}

	stages := map[string]stage{
		"settle": {input: "payments", schema: paymentSchema, stream: totals("merchant_id"), mode: engine.Update,
			sinks: func(t scaleout.Task, add func(engine.Sink), closers *[]func() error) error {
				if err := kafkaSink(add, closers, kafkasink.WithTopic("settlements"), kafkasink.WithName("settlements"), kafkasink.WithKeyColumn("merchant_id"),
					kafkasink.WithValueJSON("merchant_id", "batch_id", "amount_cents", "payments", "total_cents")); err != nil {
					return err
				}
				return addPG(pool, t.Name("settle"), "totals", "merchant_id", add)
			}},
		"repartition": {input: "payments", schema: paymentSchema, mode: engine.Append,
			stream: func(src engine.Source) *engine.Stream {
				return engine.ReadStream(src).Select(
					batch.As(batch.Col("payment_id"), "payment_id"),
					batch.As(batch.Col("customer_id"), "customer_id"),
					batch.As(batch.Col("amount_cents"), "amount_cents"))
			},
			sinks: func(_ scaleout.Task, add func(engine.Sink), closers *[]func() error) error {
				return kafkaSink(add, closers, kafkasink.WithTopic("by-customer"), kafkasink.WithName("by-customer"), kafkasink.WithKeyColumn("customer_id"),
					kafkasink.WithClientOpts(kgo.RecordPartitioner(kgo.BasicConsistentPartitioner(func(string) func(*kgo.Record, int) int {
						return func(r *kgo.Record, n int) int { return CustomerNumber(string(r.Key)) % n }
					}))))
			}},
		"customers": {input: "by-customer", schema: byCustomerSchema, stream: totals("customer_id"), mode: engine.Update,
			sinks: func(t scaleout.Task, add func(engine.Sink), closers *[]func() error) error {
				if err := kafkaSink(add, closers, kafkasink.WithTopic("customer-totals"), kafkasink.WithName("customer-totals"), kafkasink.WithKeyColumn("customer_id"),
					kafkasink.WithValueJSON("customer_id", "batch_id", "amount_cents", "payments", "total_cents")); err != nil {
					return err
				}
				return addPG(pool, t.Name("customers"), "customer_totals", "customer_id", add)
			}},
	}
	st, ok := stages[*stageName]
	if !ok {
		return fmt.Errorf("-stage %q: want settle, repartition or customers", *stageName)
	}

	build := func(ctx context.Context, t scaleout.Task) (scaleout.Query, func() error, error) {
		var closers []func() error
		release := func() error {
			for _, c := range closers {
				_ = c()
			}
			return nil
		}
		src, err := kafka.New(kafka.WithBrokers(addrs...), kafka.WithTopics(st.input), kafka.WithPartitions(t.Partition),
			kafka.WithValueJSON(st.schema), kafka.WithMaxOffsetsPerTrigger(300))
		if err != nil {
			return nil, nil, err
		}
		closers = append(closers, src.Close)
		opts := []engine.Option{
			engine.WithName(t.Name(*stageName)),
			engine.WithCheckpoint(t.Checkpoint(root)),
			engine.WithTrigger(engine.Every(*trigger)),
			engine.WithOutputMode(st.mode),
			engine.WithStatePartitions(1),
			engine.WithSnapshotEvery(5),
			engine.WithMinBatchesToRetain(100000), // the audit recomputes from offsets/0
			engine.WithProgressListener(func(p engine.Progress) {
				end := int64(-1)
				if len(p.Sources) > 0 {
					if pos, err := kafka.ParsePosition(p.Sources[0].EndOffset); err == nil {
						end = pos.Offsets[st.input][t.Partition]
					}
				}
				printf("scaleout-batch ms=%d worker=%s task=%s batch=%d run=%s end=%d\n",
					time.Now().UnixMilli(), *name, t.ID(), p.BatchID, p.RunID, end)
			}),
		}
		if err := st.sinks(t, func(s engine.Sink) { opts = append(opts, engine.WithSink(s)) }, &closers); err != nil {
			_ = release()
			return nil, nil, err
		}
		q, err := engine.NewQuery(st.stream(src), opts...)
		if err != nil {
			_ = release()
			return nil, nil, err
		}
		return q, release, nil
	}
	w, err := scaleout.NewWorker(build,
		scaleout.WithBrokers(addrs...), scaleout.WithGroup(*stageName), scaleout.WithTopic(st.input),
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

// addPG adds the PostgreSQL offsets-in-sink sink of table, with the
// task's progress row (job), when a pool is given.
func addPG(pool *pgxpool.Pool, job, table, key string, add func(engine.Sink)) error {
	if pool == nil {
		return nil
	}
	ps, err := postgres.NewOffsetsInSink(pool, job, table,
		postgres.WithKeyColumns(key), postgres.WithMerge(postgres.MergeAdd, "amount_cents", "payments"),
		postgres.WithRetry(20, 50*time.Millisecond, time.Second))
	if err != nil {
		return err
	}
	add(ps)
	return nil
}

// CustomerNumber is n of customer "c-n" (0 for anything else).
func CustomerNumber(key string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(key, "c-"))
	return n
}

// totals is the settlement query grouped by key: per key, this batch's
// sum and count and the running total, with the batch id.
func totals(key string) func(engine.Source) *engine.Stream {
	return func(src engine.Source) *engine.Stream {
		return engine.ReadStream(src).
			Select(
				batch.As(batch.Col(key), key),
				batch.As(batch.Col("amount_cents"), "amount_cents"),
			).
			GroupBy(key).ID(key+"-totals").
			Agg(
				batch.Sum(batch.Col("amount_cents")).PerBatch().As("amount_cents"),
				batch.CountRows().PerBatch().As("payments"),
				batch.Sum(batch.Col("amount_cents")).As("total_cents"),
			).
			WithBatchIDColumn("batch_id")
	}
}
