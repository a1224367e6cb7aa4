package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// checkpointReport is what `checkpoint inspect` prints.
type checkpointReport struct {
	Location       string                `json:"location"`
	Metadata       engine.Metadata       `json:"metadata"`
	OffsetBatches  []int64               `json:"offsetBatches"`
	CommitBatches  []int64               `json:"commitBatches"`
	LastCommitted  *int64                `json:"lastCommitted"`
	Uncommitted    *int64                `json:"uncommitted"`
	LatestPlan     *engine.OffsetsEntry  `json:"latestPlan,omitempty"`
	LastProgress   *engine.Progress      `json:"lastProgress,omitempty"`
	StateOperators []stateOperatorReport `json:"stateOperators,omitempty"`
}

type stateOperatorReport struct {
	ID             string `json:"id"`
	Store          string `json:"store,omitempty"` // one of the operator's named stores
	Partitions     int    `json:"partitions"`
	Keys           int64  `json:"keys"`
	StateBytes     int64  `json:"stateBytes"`
	NewestVersion  int64  `json:"newestVersion"`
	NewestSnapshot int64  `json:"newestSnapshot"`
	// Backend is the state backend that keeps the operator's folders
	// ("memory", "pebble"; several, comma-separated, if they differ).
	Backend string `json:"backend"`
}

func inspectCommand() *command {
	return &command{
		name: "inspect", args: outputArgs + " DIR", nargs: 1,
		summary: "print a checkpoint's logs, latest plan, state and last progress",
		setup: func(fs *flag.FlagSet) action {
			out := outputFlag(fs, formatTable, formatJSON)
			return func(ctx context.Context, args []string, stdout io.Writer) error {
				store, err := openExisting(ctx, args[0])
				if err != nil {
					return err
				}
				defer store.Close()
				rep, err := inspectCheckpoint(ctx, store)
				if err != nil {
					return err
				}
				if *out != formatTable {
					return writeJSON(stdout, *out, rep)
				}
				return printCheckpoint(stdout, rep)
			}
		},
	}
}

func inspectCheckpoint(ctx context.Context, store storage.Store) (*checkpointReport, error) {
	cp := checkpoint.NewReader(store)
	meta, err := cp.Metadata(ctx)
	if err != nil {
		return nil, err
	}
	rep := &checkpointReport{Location: store.URL(), Metadata: meta}
	if rep.OffsetBatches, err = cp.OffsetIDs(ctx); err != nil {
		return nil, err
	}
	if rep.CommitBatches, err = cp.CommitIDs(ctx); err != nil {
		return nil, err
	}
	if n := len(rep.CommitBatches); n > 0 {
		c := rep.CommitBatches[n-1]
		rep.LastCommitted = &c
	}
	if n := len(rep.OffsetBatches); n > 0 {
		id := rep.OffsetBatches[n-1]
		plan, err := cp.Offsets(ctx, id)
		if err != nil {
			return nil, err
		}
		rep.LatestPlan = &plan
		if rep.LastCommitted == nil || *rep.LastCommitted < id {
			rep.Uncommitted = &id
		}
	}
	var p engine.Progress
	if _, ok, err := cp.LatestProgress(ctx, &p); err == nil && ok {
		rep.LastProgress = &p
	} else if err != nil && !errors.Is(err, offsetlog.ErrNotFound) {
		return nil, err
	}
	if rep.LatestPlan != nil {
		for _, op := range rep.LatestPlan.Conf.Operators {
			stores := []string{""}
			if len(op.Stores) > 0 {
				stores = op.Stores
			}
			for _, sn := range stores {
				or := stateOperatorReport{ID: op.ID, Store: sn, Partitions: rep.LatestPlan.Conf.StatePartitions, NewestVersion: -1, NewestSnapshot: -1}
				for p := 0; p < or.Partitions; p++ {
					version := int64(-1)
					if rep.LastCommitted != nil {
						version = *rep.LastCommitted
					}
					_, info, rows, closeState, err := openState(ctx, store, op.ID, sn, p, version)
					if err != nil {
						return nil, err
					}
					closeState()
					backend, err := statestore.ReadBackend(ctx, engine.StateFolder(store, op.ID, p, sn))
					if err != nil {
						return nil, err
					}
					if or.Backend == "" {
						or.Backend = backend
					} else if !slices.Contains(strings.Split(or.Backend, ","), backend) {
						or.Backend += "," + backend
					}
					or.Keys += rows
					or.StateBytes += info.Bytes
					or.NewestVersion = max(or.NewestVersion, info.NewestVersion)
					or.NewestSnapshot = max(or.NewestSnapshot, info.NewestSnapshot)
				}
				rep.StateOperators = append(rep.StateOperators, or)
			}
		}
	}
	return rep, nil
}

func printCheckpoint(w io.Writer, rep *checkpointReport) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "checkpoint\t%s\n", rep.Location)
	fmt.Fprintf(tw, "query\t%s (id %s, created %s, format v%d)\n", rep.Metadata.Name, rep.Metadata.ID, fmtTimeString(rep.Metadata.Created), rep.Metadata.Version)
	fmt.Fprintf(tw, "offsets\t%s\n", idRange(rep.OffsetBatches))
	fmt.Fprintf(tw, "commits\t%s\n", idRange(rep.CommitBatches))
	if rep.Uncommitted != nil {
		fmt.Fprintf(tw, "uncommitted\tbatch %d (re-run on next start)\n", *rep.Uncommitted)
	}
	if p := rep.LatestPlan; p != nil {
		wm := "none"
		if p.WatermarkMs > 0 {
			wm = fmtMillis(p.WatermarkMs)
		}
		fmt.Fprintf(tw, "latest plan\tbatch %d, timestamp %s, watermark %s, %d state partitions\n", p.BatchID, fmtMillis(p.TimestampMs), wm, p.Conf.StatePartitions)
		for i, s := range p.Sources {
			fmt.Fprintf(tw, "  source %d\t%s: %s → %s\n", i, s.Description, s.Start, s.End)
		}
	}
	for _, op := range rep.StateOperators {
		name := op.ID
		if op.Store != "" {
			name += " store " + op.Store
		}
		fmt.Fprintf(tw, "state %s\t%d partitions, %d keys, %d bytes, newest version %d, newest snapshot %d, backend %s\n", name, op.Partitions, op.Keys, op.StateBytes, op.NewestVersion, op.NewestSnapshot, op.Backend)
	}
	if p := rep.LastProgress; p != nil {
		fmt.Fprintf(tw, "last progress\tbatch %d at %s: %d rows in, %d ms, %.0f rows/s\n", p.BatchID, fmtTimeString(p.Timestamp), p.NumInputRows, p.BatchDurationMs, p.ProcessedRowsPerSecond)
	}
	return tw.Flush()
}

func idRange(ids []int64) string {
	if len(ids) == 0 {
		return "none"
	}
	gaps := 0
	for i := 1; i < len(ids); i++ {
		if ids[i] != ids[i-1]+1 {
			gaps++
		}
	}
	s := fmt.Sprintf("%d..%d (%d entries)", ids[0], ids[len(ids)-1], len(ids))
	if gaps > 0 {
		s += fmt.Sprintf(", %d gaps", gaps)
	}
	return s
}
