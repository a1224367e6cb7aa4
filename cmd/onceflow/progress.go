package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/offsetlog"
)

func progressCommand(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("progress", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print the records as JSON lines")
	n := fs.Int("n", 20, "show the newest N batches (0: all kept)")
	if err := fs.Parse(splitFlags(args, "json")); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: progress [--json] [-n N] DIR", errUsage)
	}
	store, err := openExisting(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	defer store.Close()
	log := offsetlog.New[engine.Progress](store, "progress")
	ids, err := log.List(ctx)
	if err != nil {
		return err
	}
	if *n > 0 && len(ids) > *n {
		ids = ids[len(ids)-*n:]
	}
	var recs []engine.Progress
	for _, id := range ids {
		p, err := log.Get(ctx, id)
		if err != nil {
			return err
		}
		recs = append(recs, p)
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, p := range recs {
			if err := enc.Encode(p); err != nil {
				return err
			}
		}
		return nil
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "batch\ttimestamp\tinput rows\tin rows/s\tprocessed rows/s\tms\twal\tread\tstate\tsink\tcommit\tstate rows\toutput rows\trecovered\t")
	for _, p := range recs {
		var stateRows, outRows int64
		for _, op := range p.StateOperators {
			stateRows += op.NumRowsTotal
		}
		if len(p.Sinks) > 0 {
			outRows = p.Sinks[0].NumOutputRows
		}
		rec := ""
		if p.Recovered {
			rec = "yes"
		}
		d := p.DurationMs
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.0f\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", p.BatchID, p.Timestamp, p.NumInputRows,
			p.InputRowsPerSecond, p.ProcessedRowsPerSecond, p.BatchDurationMs,
			d[engine.PhaseWALCommit], d[engine.PhaseGetBatch], d[engine.PhaseStateCommit], d[engine.PhaseAddBatch], d[engine.PhaseCommitOffsets],
			stateRows, outRows, rec)
	}
	return tw.Flush()
}
