// Command pgtotals keeps per-merchant payment totals in PostgreSQL from
// payments landing as JSON-lines files in a directory, exactly once: each
// batch adds its per-merchant sums to
//
//	merchant_totals(merchant_id text PRIMARY KEY, total_cents bigint, payments bigint)
//
// in the same transaction that moves the job's row of onceflow_progress to
// the batch id (the offsets-in-sink guard), so a batch repeated after a
// crash is recognised and skipped.
//
// A landing file holds one payment per line (see examples/lake):
//
//	{"payment_id": "p-…", "merchant_id": "m-…", "amount_cents": 1234, "ts": "2026-11-30T10:00:00.123Z"}
//
//	pgtotals -input DIR -checkpoint DIR [-dsn postgres://…] [-job pgtotals]
//	         [-trigger 1s|available-now|once] [-create-table] [-dead-letter DIR]
//	         [-generate N] [-max-files-per-trigger N] [-retain N] [-v]
//
// -dsn defaults to the environment variable ONCEFLOW_PG_URL. -create-table
// creates merchant_totals and onceflow_progress when they are missing;
// without it a missing table is an error that prints its CREATE statement.
// SIGTERM or SIGINT lets the batch in flight commit and exits 0; a second
// one aborts it (it is re-run on restart). Bad input fails the batch,
// uncommitted, with an error naming the file and line (exit 1); with
// -dead-letter DIR bad lines go there and every good line is counted.
//
// The progress row recognises a batch by its id, so pgtotals refuses to
// start when the row and the checkpoint do not belong together: a
// checkpoint that did not move the job's row (lost, replaced) would number
// batches from 0 again and the guard would skip them as already applied
// (the sink refuses another query's row); a row set back (a failover to a
// replica that lagged) would never get the batches it lost (the engine
// compares the row's batch with the checkpoint's newest commit).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/examples/internal/payments"
	"github.com/onceflow/onceflow/foreachbatch/postgres"
	"github.com/onceflow/onceflow/source/files"
	"github.com/onceflow/onceflow/storage"
	"github.com/onceflow/onceflow/storage/s3store"
)

// DSNEnvVar is read when -dsn is not given.
const DSNEnvVar = "ONCEFLOW_PG_URL"

// Table is the target table.
const Table = "merchant_totals"

// The engine compares the sink's newest batch with the checkpoint at start
// (engine.SinkPosition), which refuses an output that lost batches or a
// checkpoint older than the output.
var _ engine.SinkPosition = (*postgres.Sink)(nil)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtotals:", err)
		os.Exit(1)
	}
}

// run owns everything it opens and closes it when the query has stopped
// (the engine never closes what it is given).
func run() (err error) {
	input := flag.String("input", "", "landing directory of payment JSON-lines files (required)")
	cpLoc := flag.String("checkpoint", "", "checkpoint: a directory or s3://bucket/prefix (required)")
	dsn := flag.String("dsn", os.Getenv(DSNEnvVar), "PostgreSQL URL (default $"+DSNEnvVar+")")
	job := flag.String("job", "pgtotals", "name of this job's row in onceflow_progress")
	trig := flag.String("trigger", "1s", "processing-time interval, once, or available-now")
	create := flag.Bool("create-table", false, "create "+Table+" and onceflow_progress if missing")
	deadLetter := flag.String("dead-letter", "", "directory for bad lines (default: a bad line fails the batch)")
	generate := flag.Int("generate", 0, "first land N deterministic payments in -input (files already there are kept)")
	merchants := flag.Int("merchants", 50, "distinct merchants of generated payments")
	maxFiles := flag.Int("max-files-per-trigger", 0, "most landing files one batch takes (0: all new files)")
	retain := flag.Int("retain", engine.DefaultMinBatchesToRetain, "batches of checkpoint logs kept for recovery and inspection")
	verbose := flag.Bool("v", false, "log the driver's and the sink's steps")
	flag.Parse()
	if *input == "" || *cpLoc == "" {
		flag.Usage()
		return fmt.Errorf("-input and -checkpoint are required")
	}
	if *dsn == "" {
		return fmt.Errorf("no database: give -dsn or set %s", DSNEnvVar)
	}
	ctx := context.Background()
	logger := slog.New(slog.DiscardHandler)
	if *verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, nil))
	}
	trigger, err := engine.ParseTrigger(*trig)
	if err != nil {
		return err
	}
	if *generate > 0 {
		n, err := payments.Generate(*input, *generate, 1000, *merchants)
		if err != nil {
			return err
		}
		fmt.Fprintf(os.Stderr, "pgtotals: landed %d generated files in %s\n", n, *input)
	}
	cp, err := storage.Open(ctx, *cpLoc, map[string]storage.Opener{"s3": s3store.Open})
	if err != nil {
		return fmt.Errorf("open checkpoint: %w", err)
	}
	defer func() { err = errors.Join(err, cp.Close()) }()
	pool, err := postgres.Connect(ctx, *dsn)
	if err != nil {
		return err
	}
	defer pool.Close()

	srcOpts := []files.Option{files.WithMaxFilesPerTrigger(*maxFiles)}
	if *deadLetter != "" {
		srcOpts = append(srcOpts, files.WithDeadLetter(*deadLetter))
	}
	src, err := files.New(*input, files.JSON, payments.Schema, srcOpts...)
	if err != nil {
		return err
	}
	sink, err := postgres.NewOffsetsInSink(pool, *job, Table,
		postgres.WithKeyColumns("merchant_id"),
		postgres.WithMerge(postgres.MergeAdd, "total_cents", "payments"),
		postgres.WithCreateTables(*create),
		postgres.WithLogger(logger),
	)
	if err != nil {
		return err
	}
	q, err := engine.NewQuery(Stream(src),
		engine.WithName("pgtotals"),
		engine.WithCheckpoint(cp),
		engine.WithSink(sink),
		engine.WithTrigger(trigger),
		engine.WithOutputMode(engine.Update),
		engine.WithMinBatchesToRetain(*retain),
		engine.WithLogger(logger),
		engine.WithProgressListener(func(p engine.Progress) {
			fmt.Fprintf(os.Stderr, "pgtotals: batch %d: %d payments, %d merchants, %d ms\n", p.BatchID, p.NumInputRows, p.Sinks[0].NumOutputRows, p.BatchDurationMs)
		}),
	)
	if err != nil {
		return err
	}
	return engine.RunUntilSignal(ctx, q)
}

// Stream is the totals query: per merchant, this batch's sum and count,
// which the sink adds to the stored totals.
func Stream(src engine.Source) *engine.Stream {
	return engine.ReadStream(src).
		GroupBy("merchant_id").ID("merchant-totals").
		Agg(
			batch.Sum(batch.Col("amount_cents")).PerBatch().As("total_cents"),
			batch.CountRows().PerBatch().As("payments"),
		)
}
