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
	"fmt"
	"os"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/examples/internal/cli"
	"github.com/onceflow/onceflow/examples/internal/payments"
	"github.com/onceflow/onceflow/foreachbatch/postgres"
	"github.com/onceflow/onceflow/source/files"
)

// DSNEnvVar is read when -dsn is not given.
const DSNEnvVar = "ONCEFLOW_PG_URL"

// Table is the target table.
const Table = "merchant_totals"

// The engine compares the sink's newest batch with the checkpoint at start
// (engine.SinkPosition), which refuses an output that lost batches or a
// checkpoint older than the output.
var _ engine.SinkPosition = (*postgres.Sink)(nil)

func main() { cli.Main("pgtotals", run) }

// run builds the query; c closes what it opened when run returns.
func run(ctx context.Context, c *cli.Command) error {
	fs := c.FlagSet()
	input := fs.String("input", "", "landing directory of payment JSON-lines files (required)")
	dsn := fs.String("dsn", os.Getenv(DSNEnvVar), "PostgreSQL URL (default $"+DSNEnvVar+")")
	job := fs.String("job", "pgtotals", "name of this job's row in onceflow_progress")
	create := fs.Bool("create-table", false, "create "+Table+" and onceflow_progress if missing")
	deadLetter := fs.String("dead-letter", "", "directory for bad lines (default: a bad line fails the batch)")
	maxFiles := fs.Int("max-files-per-trigger", 0, "most landing files one batch takes (0: all new files)")
	c.CheckpointFlag("", "checkpoint: a directory or s3://bucket/prefix (required)")
	c.TriggerFlag()
	c.GenerateFlags("first land N deterministic payments in -input (files already there are kept)")
	c.RetainFlag()
	c.VerboseFlag("log the driver's and the sink's steps")
	if err := c.Parse("input", "checkpoint"); err != nil {
		return err
	}
	if *dsn == "" {
		return fmt.Errorf("no database: give -dsn or set %s", DSNEnvVar)
	}
	if err := c.Land(*input); err != nil {
		return err
	}
	if err := c.OpenCheckpoint(ctx); err != nil {
		return err
	}
	pool, err := postgres.Connect(ctx, *dsn)
	if err != nil {
		return err
	}
	c.Defer(func() error { pool.Close(); return nil })

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
		postgres.WithLogger(c.Logger()),
	)
	if err != nil {
		return err
	}
	return c.Run(ctx, Stream(src), sink, func(p engine.Progress) string {
		return fmt.Sprintf("%d payments, %d merchants", p.NumInputRows, p.Sinks[0].NumOutputRows)
	}, engine.WithOutputMode(engine.Update))
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
