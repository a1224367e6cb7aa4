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
// exists to catch. The process runs with trigger available-now and exits
// (-trigger picks another); fault points (internal/fault, env
// ONCEFLOW_FAULT) kill it mid-protocol.
//
// The faults beyond SIGKILL:
//
//   - -checkpoint and -lake take a directory or an s3:// location (the
//     tests point the latter at a fault proxy, internal/s3fault);
//   - -checkpoint-faults and -lake-faults take a storage/faultstore spec
//     ("seed=3; op=put-if-absent path=commits/* nth=2 fault=eio") applied to
//     that store, for a local directory at both the store and the
//     file-system layer; every injected fault is printed to standard error
//     as "chaosprog: checkpoint: faultstore: injected ...";
//   - -clock-jumps "seed=N every=K max=D" gives the engine a clock that,
//     every K readings, jumps to a new offset from real time drawn from
//     [-D, +D], backwards as often as forwards, printing each jump.
//
// Each committed batch prints "chaosprog: batch N: R payments in Mms".
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
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
	"github.com/onceflow/onceflow/storage/faultstore"
	"github.com/onceflow/onceflow/storage/s3store"
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
	cpLoc := flag.String("checkpoint", "", "checkpoint: a directory or an s3:// location")
	cpFaults := flag.String("checkpoint-faults", "", "storage/faultstore spec for the checkpoint store (empty: none)")
	payments := flag.String("payments-topic", "payments", "input topic")
	settlements := flag.String("settlements-topic", "", "output topic of the transactional Kafka sink (empty: no Kafka sink)")
	lake := flag.String("lake", "", "file-sink table: a directory or an s3:// location (empty: no file sink)")
	lakeFaults := flag.String("lake-faults", "", "storage/faultstore spec for the file sink's table store (empty: none)")
	pgURL := flag.String("pg", "", "PostgreSQL URL of the offsets-in-sink table (empty: no PostgreSQL sink)")
	pgTable := flag.String("pg-table", "totals", "PostgreSQL table")
	fbFile := flag.String("fb", "", "JSON-lines file of the foreachBatch sink (empty: none)")
	brokenGuard := flag.Bool("broken-guard", false, "the foreachBatch function skips its batch-id check (a deliberate bug)")
	txnTimeout := flag.Duration("txn-timeout", 0, "Kafka sink transaction timeout (0: the sink's default)")
	maxPerTrigger := flag.Int64("max-offsets-per-trigger", 200, "Kafka offsets per batch")
	retain := flag.Int("retain", 3, "engine: minimum batches to retain")
	snapEvery := flag.Int("snapshot-every", 2, "engine: state snapshot every K versions")
	compactEvery := flag.Int64("compact-every", 4, "file sink: compact the log every C batches")
	trigger := flag.String("trigger", "available-now", "engine trigger: available-now, once, a duration (1s), schedule:SPEC")
	clockJumps := flag.String("clock-jumps", "", `engine clock that jumps: "seed=N every=K max=D" (empty: the system clock)`)
	verbose := flag.Bool("v", false, "log the driver's steps")
	flag.Parse()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	addrs := strings.Split(*brokers, ",")
	cp, err := openStore(ctx, "checkpoint", *cpLoc, *cpFaults)
	if err != nil {
		return err
	}
	defer cp.Close()
	trig, err := engine.ParseTrigger(*trigger)
	if err != nil {
		return err
	}
	src, err := kafka.New(kafka.WithBrokers(addrs...), kafka.WithTopics(*payments), kafka.WithValueJSON(paymentSchema),
		kafka.WithMaxOffsetsPerTrigger(*maxPerTrigger), kafka.WithLogger(logger))
	if err != nil {
		return err
	}
	defer src.Close()

	opts := []engine.Option{
		engine.WithName("chaos"),
		engine.WithCheckpoint(cp),
		engine.WithTrigger(trig),
		engine.WithOutputMode(engine.Update),
		engine.WithStatePartitions(4),
		engine.WithMinBatchesToRetain(*retain),
		engine.WithSnapshotEvery(*snapEvery),
		engine.WithLogger(logger),
		engine.WithProgressListener(func(p engine.Progress) {
			fmt.Fprintf(os.Stderr, "chaosprog: batch %d: %d payments in %dms\n", p.BatchID, p.NumInputRows, p.BatchDurationMs)
		}),
	}
	if *clockJumps != "" {
		c, err := newJumpClock(*clockJumps)
		if err != nil {
			return err
		}
		opts = append(opts, engine.WithClock(c.now))
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
		table, err := openStore(ctx, "lake", *lake, *lakeFaults)
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

// openStore opens a directory or an s3:// location, with the faults of
// spec when it is not empty.
func openStore(ctx context.Context, label, loc, spec string) (storage.Store, error) {
	var in *faultstore.Injector
	if spec != "" {
		cfg, err := faultstore.Parse(spec)
		if err != nil {
			return nil, fmt.Errorf("-%s-faults: %w", label, err)
		}
		cfg.OnInject = func(e faultstore.Event) { fmt.Fprintf(os.Stderr, "chaosprog: %s: %s\n", label, e) }
		if in, err = faultstore.New(cfg); err != nil {
			return nil, fmt.Errorf("-%s-faults: %w", label, err)
		}
	}
	if !strings.Contains(loc, "://") {
		if in == nil {
			return storage.OpenLocal(loc, storage.LocalOptions{})
		}
		return faultstore.OpenLocal(loc, in)
	}
	s, err := storage.Open(ctx, loc, map[string]storage.Opener{"s3": s3store.Open})
	if err != nil || in == nil {
		return s, err
	}
	return faultstore.Wrap(s, in), nil
}

// jumpClock is a clock that jumps: every few readings it moves to a new
// offset from real time, as far back as forward. Deterministic in the
// number of readings for a seed.
type jumpClock struct {
	every int
	max   time.Duration

	mu  sync.Mutex
	rng *rand.Rand
	n   int
	off time.Duration
}

// newJumpClock parses "seed=N every=K max=D".
func newJumpClock(spec string) (*jumpClock, error) {
	c := &jumpClock{every: 3, max: time.Hour}
	seed := uint64(1)
	for _, f := range strings.Fields(spec) {
		k, v, _ := strings.Cut(f, "=")
		var err error
		switch k {
		case "seed":
			seed, err = strconv.ParseUint(v, 10, 64)
		case "every":
			c.every, err = strconv.Atoi(v)
			if err == nil && c.every < 1 {
				err = fmt.Errorf("not positive")
			}
		case "max":
			c.max, err = time.ParseDuration(v)
			if err == nil && c.max <= 0 {
				err = fmt.Errorf("not positive")
			}
		default:
			err = fmt.Errorf("unknown key (want seed, every, max)")
		}
		if err != nil {
			return nil, fmt.Errorf("-clock-jumps %q: field %q: %v", spec, f, err)
		}
	}
	c.rng = rand.New(rand.NewPCG(seed, seed^0xc10c))
	return c, nil
}

func (c *jumpClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	if c.n%c.every == 0 {
		prev := c.off
		c.off = time.Duration(c.rng.Int64N(2*int64(c.max)+1)) - c.max
		fmt.Fprintf(os.Stderr, "chaosprog: clock jumps by %s (offset %s)\n", (c.off - prev).Round(time.Millisecond), c.off.Round(time.Millisecond))
	}
	return time.Now().Add(c.off)
}
