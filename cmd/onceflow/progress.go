package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/offsetlog"
)

func progressCommand() *command {
	return &command{
		name: "progress", args: outputArgs + " [-n N] DIR", nargs: 1,
		summary: "print the newest batches' rows, rates and phase times",
		setup: func(fs *flag.FlagSet) action {
			out := outputFlag(fs, formatTable, formatJSONL)
			n := fs.Int("n", 20, "show the newest N batches (0: all kept)")
			return func(ctx context.Context, args []string, stdout io.Writer) error {
				recs, err := readProgress(ctx, args[0], *n)
				if err != nil {
					return err
				}
				if *out != formatTable {
					return writeList(stdout, *out, recs)
				}
				return printProgress(stdout, recs)
			}
		},
	}
}

// readProgress returns the newest n progress records of the checkpoint at
// loc (all of them for n <= 0), oldest first.
func readProgress(ctx context.Context, loc string, n int) ([]engine.Progress, error) {
	store, err := openExisting(ctx, loc)
	if err != nil {
		return nil, err
	}
	defer store.Close()
	cp := checkpoint.NewReader(store)
	ids, err := cp.ProgressIDs(ctx)
	if err != nil {
		return nil, err
	}
	if n > 0 && len(ids) > n {
		ids = ids[len(ids)-n:]
	}
	var recs []engine.Progress
	for _, id := range ids {
		var p engine.Progress
		if err := cp.Progress(ctx, id, &p); err != nil {
			if errors.Is(err, offsetlog.ErrCorrupt) {
				// Written without fsync (no recovery reads it) and torn
				// by a crash: the batch itself is committed or re-run.
				continue
			}
			return nil, err
		}
		recs = append(recs, p)
	}
	return recs, nil
}

func printProgress(w io.Writer, recs []engine.Progress) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', tabwriter.AlignRight)
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
		fmt.Fprintf(tw, "%d\t%s\t%d\t%.0f\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t%s\t\n", p.BatchID, fmtTimeString(p.Timestamp), p.NumInputRows,
			p.InputRowsPerSecond, p.ProcessedRowsPerSecond, p.BatchDurationMs,
			d[engine.PhaseWALCommit], d[engine.PhaseGetBatch], d[engine.PhaseStateCommit], d[engine.PhaseAddBatch], d[engine.PhaseCommitOffsets],
			stateRows, outRows, rec)
	}
	return tw.Flush()
}
