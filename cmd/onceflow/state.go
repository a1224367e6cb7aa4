package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/statestore/pebblestore"
	"github.com/onceflow/onceflow/storage"
)

// stateReader loads a state folder's versions, whichever backend keeps it.
type stateReader interface {
	Load(ctx context.Context, version int64) ([]arrow.RecordBatch, error)
}

// openState opens one partition's state with the schemas it recorded and
// counts its rows at version (-1: none). A folder the pebble backend keeps
// is read through pebblestore, restored into a temporary directory that
// the returned close removes.
func openState(ctx context.Context, cp storage.Store, op, store string, part int, version int64) (stateReader, statestore.Info, int64, func(), error) {
	dir := engine.StateFolder(cp, op, part, store)
	var info statestore.Info
	nop := func() {}
	label := fmt.Sprintf("state of %s partition %d", op, part)
	if store != "" {
		label = fmt.Sprintf("state of %s store %s partition %d", op, store, part)
	}
	key, val, err := statestore.ReadSchemas(ctx, dir)
	if err != nil {
		return nil, info, 0, nop, fmt.Errorf("%s: %w", label, err)
	}
	backend, err := statestore.ReadBackend(ctx, dir)
	if err != nil {
		return nil, info, 0, nop, fmt.Errorf("%s: %w", label, err)
	}
	opts := statestore.Options{KeySchema: key, ValueSchema: val, Backend: backend}
	st, err := statestore.Open(ctx, dir, opts)
	if err != nil {
		return nil, info, 0, nop, fmt.Errorf("%s: %w", label, err)
	}
	if info, err = st.Info(ctx); err != nil {
		return nil, info, 0, nop, err
	}
	var r stateReader = st
	closeFn := nop
	switch backend {
	case statestore.BackendMemory:
	case pebblestore.BackendName:
		tmp, err := os.MkdirTemp("", "onceflow-state-")
		if err != nil {
			return nil, info, 0, nop, err
		}
		ps, err := pebblestore.Open(ctx, dir, pebblestore.Options{State: opts, Dir: tmp})
		if err != nil {
			os.RemoveAll(tmp)
			return nil, info, 0, nop, fmt.Errorf("%s: %w", label, err)
		}
		r = ps
		closeFn = func() {
			_ = ps.Close() // a working copy in a temporary directory
			os.RemoveAll(tmp)
		}
	default:
		return nil, info, 0, nop, fmt.Errorf("%s: kept by the %q state backend, which this build does not read", label, backend)
	}
	if version < 0 {
		return r, info, 0, closeFn, nil
	}
	recs, err := r.Load(ctx, version)
	if err != nil {
		closeFn()
		return nil, info, 0, nop, err
	}
	var n int64
	for _, rec := range recs {
		n += rec.NumRows()
		rec.Release()
	}
	return r, info, n, closeFn, nil
}

func stateCommand() *command {
	return &command{
		name: "state", args: outputArgs + " [--partition P] [--version N] [--store NAME] --operator ID DIR", nargs: 1,
		summary: "print a stateful operator's rows at a version",
		setup: func(fs *flag.FlagSet) action {
			out := outputFlag(fs, formatTable, formatJSONL)
			opID := fs.String("operator", "", "stateful operator id (checkpoint inspect lists them); required")
			part := fs.Int("partition", -1, "only this partition")
			version := fs.Int64("version", -1, "state version (default: the last committed batch)")
			storeName := fs.String("store", "", "only this store of an operator with several (a join's sides, a processor's states and timers); default: every store, each row led by a store column")
			return func(ctx context.Context, args []string, stdout io.Writer) error {
				return dumpState(ctx, args[0], *opID, *storeName, *part, *version, *out, stdout)
			}
		},
	}
}

func dumpState(ctx context.Context, loc, opID, storeName string, part int, version int64, out format, stdout io.Writer) error {
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
	var conf *checkpoint.OperatorConf
	for i, op := range plan.Conf.Operators {
		ids = append(ids, op.ID)
		if op.ID == opID {
			conf = &plan.Conf.Operators[i]
		}
	}
	if conf == nil {
		return fmt.Errorf("%w: no stateful operator %q; the checkpoint has: %s", errUsage, opID, strings.Join(ids, ", "))
	}
	stores := []string{""}
	if len(conf.Stores) > 0 {
		stores = conf.Stores
	}
	if storeName != "" {
		found := false
		for _, s := range conf.Stores {
			found = found || s == storeName
		}
		if !found {
			return fmt.Errorf("%w: operator %q has no store %q; its stores: %s", errUsage, opID, storeName, strings.Join(conf.Stores, ", "))
		}
		stores = []string{storeName}
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
	// With several stores dumped together (their schemas differ), every
	// row is led by its store; the columns of one store are its own.
	lead := len(stores) > 1
	for _, sn := range stores {
		for p := 0; p < plan.Conf.StatePartitions; p++ {
			if part >= 0 && p != part {
				continue
			}
			st, _, _, closeState, err := openState(ctx, store, opID, sn, p, -1)
			if err != nil {
				return err
			}
			recs, err := st.Load(ctx, v)
			closeState()
			if err != nil {
				return err
			}
			for _, r := range recs {
				err := dumpRecord(w, r, p, sn, lead)
				r.Release()
				if err != nil {
					return err
				}
			}
		}
	}
	return w.close()
}

// dumpRecord writes r's rows, each led by its partition (and its store,
// with lead).
func dumpRecord(w *rowWriter, r arrow.RecordBatch, part int, store string, lead bool) error {
	cols := []string{"partition"}
	if lead {
		cols = []string{"store", "partition"}
	}
	n := len(cols)
	for _, f := range r.Schema().Fields() {
		cols = append(cols, f.Name)
	}
	row := make([]any, len(cols))
	for i := 0; i < int(r.NumRows()); i++ {
		if lead {
			row[0] = store
		}
		row[n-1] = int64(part)
		for c := range r.Schema().Fields() {
			row[c+n] = memsink.Value(r.Column(c), i)
		}
		if err := w.write(cols, row); err != nil {
			return err
		}
	}
	return nil
}
