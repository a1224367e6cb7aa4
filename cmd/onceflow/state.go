package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// openState opens one partition's state with the schemas it recorded and
// counts its rows at version (-1: none).
func openState(ctx context.Context, cp storage.Store, op string, part int, version int64) (*statestore.Store, statestore.Info, int64, error) {
	dir := checkpoint.NewReader(cp).State(op, part)
	var info statestore.Info
	key, val, err := statestore.ReadSchemas(ctx, dir)
	if err != nil {
		return nil, info, 0, fmt.Errorf("state of %s partition %d: %w", op, part, err)
	}
	st, err := statestore.Open(ctx, dir, statestore.Options{KeySchema: key, ValueSchema: val})
	if err != nil {
		return nil, info, 0, fmt.Errorf("state of %s partition %d: %w", op, part, err)
	}
	if info, err = st.Info(ctx); err != nil {
		return nil, info, 0, err
	}
	if version < 0 {
		return st, info, 0, nil
	}
	recs, err := st.Load(ctx, version)
	if err != nil {
		return nil, info, 0, err
	}
	var n int64
	for _, r := range recs {
		n += r.NumRows()
		r.Release()
	}
	return st, info, n, nil
}

func stateCommand() *command {
	return &command{
		name: "state", args: outputArgs + " [--partition P] [--version N] --operator ID DIR", nargs: 1,
		summary: "print a stateful operator's rows at a version",
		setup: func(fs *flag.FlagSet) action {
			out := outputFlag(fs, formatTable, formatJSONL)
			opID := fs.String("operator", "", "stateful operator id (checkpoint inspect lists them); required")
			part := fs.Int("partition", -1, "only this partition")
			version := fs.Int64("version", -1, "state version (default: the last committed batch)")
			return func(ctx context.Context, args []string, stdout io.Writer) error {
				return dumpState(ctx, args[0], *opID, *part, *version, *out, stdout)
			}
		},
	}
}

func dumpState(ctx context.Context, loc, opID string, part int, version int64, out format, stdout io.Writer) error {
	store, err := openExisting(ctx, loc)
	if err != nil {
		return err
	}
	defer store.Close()
	_, plan, ok, err := checkpoint.NewReader(store).LatestOffsets(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return fmt.Errorf("checkpoint %s has no batches", store.URL())
	}
	var ids []string
	found := false
	for _, op := range plan.Conf.Operators {
		ids = append(ids, op.ID)
		found = found || op.ID == opID
	}
	if !found {
		return fmt.Errorf("%w: no stateful operator %q; the checkpoint has: %s", errUsage, opID, strings.Join(ids, ", "))
	}
	if part >= plan.Conf.StatePartitions {
		return fmt.Errorf("%w: --partition %d: the checkpoint has partitions 0 to %d", errUsage, part, plan.Conf.StatePartitions-1)
	}
	v := version
	if v < 0 {
		cid, _, ok, err := checkpoint.NewReader(store).LatestCommit(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("checkpoint %s has no committed batch; give --version", store.URL())
		}
		v = cid
	}
	w := newRowWriter(stdout, out)
	for p := 0; p < plan.Conf.StatePartitions; p++ {
		if part >= 0 && p != part {
			continue
		}
		st, _, _, err := openState(ctx, store, opID, p, -1)
		if err != nil {
			return err
		}
		recs, err := st.Load(ctx, v)
		if err != nil {
			return err
		}
		for _, r := range recs {
			err := dumpRecord(w, r, p)
			r.Release()
			if err != nil {
				return err
			}
		}
	}
	return w.close()
}

// dumpRecord writes r's rows, each led by its partition.
func dumpRecord(w *rowWriter, r arrow.RecordBatch, part int) error {
	cols := []string{"partition"}
	for _, f := range r.Schema().Fields() {
		cols = append(cols, f.Name)
	}
	row := make([]any, len(cols))
	for i := 0; i < int(r.NumRows()); i++ {
		row[0] = int64(part)
		for c := range r.Schema().Fields() {
			row[c+1] = memsink.Value(r.Column(c), i)
		}
		if err := w.write(cols, row); err != nil {
			return err
		}
	}
	return nil
}
