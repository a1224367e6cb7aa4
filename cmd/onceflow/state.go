package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/memsink"
	"github.com/onceflow/onceflow/offsetlog"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// openState opens one partition's state with the schemas it recorded and
// counts its rows at version (-1: none).
func openState(ctx context.Context, cp storage.Store, op string, part int, version int64) (*statestore.Store, statestore.Info, int64, error) {
	dir := storage.Sub(cp, fmt.Sprintf("state/%s/%d", op, part))
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

func stateCommand(ctx context.Context, args []string, stdout io.Writer) error {
	const use = "state dump DIR --operator ID [--partition P] [--version N] [--json]"
	if len(args) == 0 || args[0] != "dump" {
		return fmt.Errorf("%w: %s", errUsage, use)
	}
	fs := flag.NewFlagSet("state dump", flag.ContinueOnError)
	opID := fs.String("operator", "", "stateful operator id (see checkpoint inspect)")
	part := fs.Int("partition", -1, "only this partition")
	version := fs.Int64("version", -1, "state version (default: the last committed batch)")
	asJSON := fs.Bool("json", false, "print JSON lines")
	if err := fs.Parse(splitFlags(args[1:], "json")); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: %s", errUsage, use)
	}
	store, err := openExisting(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	defer store.Close()
	_, plan, ok, err := offsetlog.New[engine.OffsetsEntry](store, "offsets").Latest(ctx)
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
		found = found || op.ID == *opID
	}
	if !found {
		return fmt.Errorf("%w: no stateful operator %q; the checkpoint has: %s", errUsage, *opID, strings.Join(ids, ", "))
	}
	if *part >= plan.Conf.StatePartitions {
		return fmt.Errorf("%w: --partition %d: the checkpoint has partitions 0 to %d", errUsage, *part, plan.Conf.StatePartitions-1)
	}
	v := *version
	if v < 0 {
		cid, _, ok, err := offsetlog.New[engine.CommitEntry](store, "commits").Latest(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("checkpoint %s has no committed batch; give --version", store.URL())
		}
		v = cid
	}
	var tw *tabwriter.Writer
	enc := json.NewEncoder(stdout)
	header := false
	for p := 0; p < plan.Conf.StatePartitions; p++ {
		if *part >= 0 && p != *part {
			continue
		}
		st, _, _, err := openState(ctx, store, *opID, p, -1)
		if err != nil {
			return err
		}
		recs, err := st.Load(ctx, v)
		if err != nil {
			return err
		}
		for _, r := range recs {
			if !header && !*asJSON {
				tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
				fmt.Fprint(tw, "partition")
				for _, f := range r.Schema().Fields() {
					fmt.Fprintf(tw, "\t%s", f.Name)
				}
				fmt.Fprintln(tw)
				header = true
			}
			if err := dumpRecord(r, p, tw, enc, *asJSON); err != nil {
				r.Release()
				return err
			}
			r.Release()
		}
	}
	if tw != nil {
		return tw.Flush()
	}
	return nil
}

func dumpRecord(r arrow.RecordBatch, part int, tw *tabwriter.Writer, enc *json.Encoder, asJSON bool) error {
	for i := 0; i < int(r.NumRows()); i++ {
		if asJSON {
			row := map[string]any{"partition": part}
			for c, f := range r.Schema().Fields() {
				row[f.Name] = jsonValue(memsink.Value(r.Column(c), i))
			}
			if err := enc.Encode(row); err != nil {
				return err
			}
			continue
		}
		fmt.Fprint(tw, part)
		for c := range r.Schema().Fields() {
			fmt.Fprintf(tw, "\t%s", r.Column(c).ValueStr(i))
		}
		fmt.Fprintln(tw)
	}
	return nil
}
