// Command lake appends payments landing as JSON-lines files in a directory
// to a Parquet lake partitioned by day, one row per payment, exactly once:
// the files source logs which files each batch took, and the files sink
// makes a batch's Parquet files visible only through its log entry.
//
// A landing file holds one payment per line:
//
//	{"payment_id": "p-…", "merchant_id": "m-…", "amount_cents": 1234, "ts": "2026-11-30T10:00:00.123Z"}
//
// Writers write a file under another name (.name.tmp) and rename it to
// name.json when it is complete. The lake's rows are payment_id,
// merchant_id, amount_cents, ts and the partition column day (the UTC date
// of ts): <lake>/day=2026-11-30/part-….zstd.parquet, listed in
// <lake>/_onceflow_log/.
//
//	lake -input DIR -lake DIR|s3://bucket/prefix -checkpoint DIR|s3://bucket/prefix
//	     [-trigger 1s|available-now|once] [-dead-letter DIR] [-generate N]
//	     [-max-files-per-trigger N] [-retain N] [-v]
//
// S3 locations take their credentials and region from the standard AWS
// environment (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION) and
// their endpoint from ONCEFLOW_S3_ENDPOINT or AWS_ENDPOINT_URL_S3 (or
// ?endpoint=… in the URL). -trigger available-now processes what has landed
// and exits 0. SIGTERM or SIGINT lets the batch in flight commit and exits
// 0; a second one aborts it (it is re-run on restart). Bad input fails the
// batch, uncommitted, with an error naming the file and line, and the
// process exits 1; with -dead-letter DIR bad lines go to
// DIR/deadletter-<k>.jsonl with their reason and every good line is written.
//
// The lake recognises a batch by its id, so the run refuses to start when
// the lake and the checkpoint do not belong together: a checkpoint that is
// not the one that wrote the lake (lost, replaced) would number batches
// from 0 again and the lake would skip them (the files sink refuses another
// query's table); an older copy of the checkpoint would re-plan batch ids
// the lake holds, and a lake restored from an older copy would never get
// the batches it lost (the engine compares the lake's newest batch with the
// checkpoint's newest commit).
package main

import (
	"context"
	"fmt"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/examples/internal/cli"
	"github.com/onceflow/onceflow/examples/internal/payments"
	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/source/files"
)

// The engine compares the sink's newest batch with the checkpoint at start
// (engine.SinkPosition), which refuses an output that lost batches or a
// checkpoint older than the output.
var _ engine.SinkPosition = (*filesink.Sink)(nil)

func main() { cli.Main("lake", run) }

// run builds the query; c closes what it opened when run returns.
func run(ctx context.Context, c *cli.Command) error {
	fs := c.FlagSet()
	input := fs.String("input", "", "landing directory of payment JSON-lines files (required)")
	lake := fs.String("lake", "", "lake table: a directory or s3://bucket/prefix (required)")
	deadLetter := fs.String("dead-letter", "", "directory for bad lines (default: a bad line fails the batch)")
	maxFiles := fs.Int("max-files-per-trigger", 0, "most landing files one batch takes (0: all new files)")
	c.CheckpointFlag("", "checkpoint: a directory or s3://bucket/prefix (required)")
	c.TriggerFlag()
	c.GenerateFlags("first land N deterministic payments in -input (files already there are kept)")
	c.RetainFlag()
	c.VerboseFlag("log the driver's steps")
	if err := c.Parse("input", "lake", "checkpoint"); err != nil {
		return err
	}
	if err := c.Land(*input); err != nil {
		return err
	}
	if err := c.OpenCheckpoint(ctx); err != nil {
		return err
	}
	table, err := c.Open(ctx, "lake", *lake)
	if err != nil {
		return err
	}

	srcOpts := []files.Option{files.WithMaxFilesPerTrigger(*maxFiles)}
	if *deadLetter != "" {
		srcOpts = append(srcOpts, files.WithDeadLetter(*deadLetter))
	}
	src, err := files.New(*input, files.JSON, payments.Schema, srcOpts...)
	if err != nil {
		return err
	}
	sink, err := filesink.New(table, filesink.WithPartitionBy("day"))
	if err != nil {
		return err
	}
	return c.Run(ctx, Stream(src), sink, func(p engine.Progress) string {
		return fmt.Sprintf("%d payments", p.NumInputRows)
	})
}

// Stream is the lake query: every payment, with its UTC day as the
// partition column.
func Stream(src engine.Source) *engine.Stream {
	return engine.ReadStream(src).Select(
		batch.As(batch.Col("payment_id"), "payment_id"),
		batch.As(batch.Col("merchant_id"), "merchant_id"),
		batch.As(batch.Col("amount_cents"), "amount_cents"),
		batch.As(batch.Col("ts"), "ts"),
		batch.As(batch.FormatTime(batch.Col("ts"), "2006-01-02"), "day"),
	)
}
