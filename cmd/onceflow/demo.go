package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/consolesink"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/monitor"
	"github.com/onceflow/onceflow/source/rate"
	"github.com/onceflow/onceflow/storage"
)

// demoCommand runs a rate source into a per-key running aggregation with a
// processing-time trigger, printing each batch's changed totals and its
// progress line.
func demoCommand() *command {
	return &command{
		name: "demo", args: "[-checkpoint DIR] [-trigger 1s] [-rows-per-second N] [-keys N] [-batches N] [-status HOST:PORT] [-v]",
		summary: "run a rate-source query and print its output and progress",
		setup: func(fs *flag.FlagSet) action {
			var o demoOptions
			fs.StringVar(&o.checkpoint, "checkpoint", "", "checkpoint location (default: a new temporary directory)")
			fs.StringVar(&o.trigger, "trigger", "1s", "trigger: a processing-time interval, once, or available-now")
			fs.Int64Var(&o.rowsPerSecond, "rows-per-second", 10000, "rows the rate source produces per second")
			fs.Int64Var(&o.keys, "keys", 5, "distinct keys")
			fs.IntVar(&o.batches, "batches", 5, "stop after this many batches (0: run until interrupted)")
			fs.StringVar(&o.status, "status", "", "serve the status page (/), /status and /metrics on this address while the demo runs (e.g. 127.0.0.1:8080)")
			fs.BoolVar(&o.verbose, "v", false, "log the driver's steps to stderr")
			return func(ctx context.Context, _ []string, stdout io.Writer) error { return runDemo(ctx, o, stdout) }
		},
	}
}

// demoOptions are the demo's flags.
type demoOptions struct {
	checkpoint, trigger string
	status              string
	rowsPerSecond, keys int64
	batches             int
	verbose             bool
}

func runDemo(ctx context.Context, o demoOptions, stdout io.Writer) error {
	trigger, err := engine.ParseTrigger(o.trigger)
	if err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	dir := o.checkpoint
	if dir == "" {
		if dir, err = os.MkdirTemp("", "onceflow-demo-"); err != nil {
			return err
		}
	}
	store, err := openStore(ctx, dir)
	if err != nil {
		return err
	}
	defer store.Close()
	src, err := rate.New(rate.WithRowsPerSecond(o.rowsPerSecond), rate.WithKeys(o.keys), rate.WithPartitions(2))
	if err != nil {
		return err
	}
	stream := engine.ReadStream(src).
		Where(batch.Gt(batch.Col(rate.ColAmountCents), batch.Lit(int64(0)))).
		GroupBy(rate.ColKey).ID("totals-by-key").
		Agg(batch.Sum(batch.Col(rate.ColAmountCents)).As("total_cents"), batch.CountRows().As("payments"), batch.Max(batch.Col(rate.ColTimestamp)).As("latest"))
	logger := slog.New(slog.DiscardHandler)
	if o.verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	var q *engine.Query
	n := 0
	opts := []engine.Option{}
	if o.status != "" {
		m := monitor.New(monitor.WithStatusServer(o.status))
		opts = append(opts, engine.WithListener(m), engine.WithListener(statusAnnouncer{m: m, w: stdout}))
	}
	q, err = engine.NewQuery(stream, append(opts,
		engine.WithName("demo"),
		engine.WithCheckpoint(store),
		engine.WithSink(consolesink.New(stdout, 10)),
		engine.WithAtLeastOnce(), // the console cannot un-print a repeated batch
		engine.WithTrigger(trigger),
		engine.WithOutputMode(engine.Update),
		engine.WithLogger(logger),
		engine.WithProgressListener(func(p engine.Progress) {
			fmt.Fprintf(stdout, "progress: batch %d, %d rows in, %.0f rows/s processed, %d ms (wal %d, read %d, state %d, sink %d, commit %d)\n",
				p.BatchID, p.NumInputRows, p.ProcessedRowsPerSecond, p.BatchDurationMs,
				p.DurationMs[engine.PhaseWALCommit], p.DurationMs[engine.PhaseGetBatch], p.DurationMs[engine.PhaseStateCommit],
				p.DurationMs[engine.PhaseAddBatch], p.DurationMs[engine.PhaseCommitOffsets])
			n++
			if o.batches > 0 && n >= o.batches {
				q.Stop()
			}
		}),
	)...)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "onceflow demo: checkpoint %s, trigger %s, %d rows/s; inspect it with: onceflow checkpoint inspect %s\n", storage.Redact(store.URL()), trigger, o.rowsPerSecond, dir)
	start := time.Now()
	err = q.Run(ctx)
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	fmt.Fprintf(stdout, "stopped after %d batches in %s\n", n, time.Since(start).Round(time.Millisecond))
	return err
}

// statusAnnouncer prints where the status page is once the status server
// listens (it is added after the monitor, so it is told of the start
// after it).
type statusAnnouncer struct {
	m *monitor.Listener
	w io.Writer
}

func (a statusAnnouncer) OnQueryStart(engine.QueryInfo) error {
	fmt.Fprintf(a.w, "status page: http://%s/\n", a.m.StatusAddr())
	return nil
}
