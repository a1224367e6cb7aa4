package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	"github.com/onceflow/onceflow/iceberg"
)

// icebergPrefix marks an Iceberg table where the lake commands take a
// directory: iceberg:CATALOG#NAMESPACE.TABLE, CATALOG being sqlite:PATH,
// postgres://… or rest+http(s)://…. s3:// locations are reached with
// ONCEFLOW_S3_ENDPOINT (path-style) and the AWS_* variables.
const icebergPrefix = "iceberg:"

func isIceberg(loc string) bool { return strings.HasPrefix(loc, icebergPrefix) }

// openIceberg opens the catalog of an iceberg: location and returns it with
// the table name.
func openIceberg(ctx context.Context, loc string) (*iceberg.Catalog, string, error) {
	rest := strings.TrimPrefix(loc, icebergPrefix)
	i := strings.LastIndexByte(rest, '#')
	if i < 0 || i == len(rest)-1 {
		return nil, "", fmt.Errorf("%w: %q: want iceberg:CATALOG#NAMESPACE.TABLE (e.g. iceberg:sqlite:/lake/catalog.db#lake.payments)", errUsage, "iceberg:…")
	}
	var opts []iceberg.CatalogOption
	if ep := os.Getenv("ONCEFLOW_S3_ENDPOINT"); ep != "" {
		opts = append(opts, iceberg.WithS3(iceberg.S3Config{Endpoint: ep, PathStyle: true}))
	}
	cat, err := iceberg.OpenCatalog(ctx, rest[:i], opts...)
	if err != nil {
		return nil, "", err
	}
	return cat, rest[i+1:], nil
}

// icebergFileRow is one line of `lake files` on an Iceberg table.
type icebergFileRow struct {
	Path    string `json:"path"`
	Rows    int64  `json:"rows"`
	Bytes   int64  `json:"bytes"`
	Content string `json:"content"`
}

func icebergFiles(ctx context.Context, loc string, out format, stdout io.Writer) error {
	cat, name, err := openIceberg(ctx, loc)
	if err != nil {
		return err
	}
	defer cat.Close()
	files, snap, err := iceberg.LiveFiles(ctx, cat, name)
	if err != nil {
		return err
	}
	rows := make([]icebergFileRow, 0, len(files))
	for _, f := range files {
		rows = append(rows, icebergFileRow{Path: f.Path, Rows: f.Rows, Bytes: f.Bytes, Content: f.Content})
	}
	if out != formatTable {
		return writeList(stdout, out, rows)
	}
	var nrows, size int64
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "path\trows\tbytes\tcontent")
	for _, f := range rows {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\n", f.Path, f.Rows, f.Bytes, f.Content)
		nrows += f.Rows
		size += f.Bytes
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "snapshot %d: %d files, %d rows, %d bytes\n", snap, len(rows), nrows, size)
	return err
}

// icebergSnapshotRow is one line of `lake snapshots`.
type icebergSnapshotRow struct {
	ID        int64  `json:"id"`
	Parent    int64  `json:"parent,omitempty"`
	Time      string `json:"time"`
	Operation string `json:"operation"`
	Query     string `json:"query,omitempty"`
	Batch     string `json:"batch,omitempty"`
	AddedRows string `json:"addedRows,omitempty"`
}

func icebergSnapshots(ctx context.Context, loc string, out format, stdout io.Writer) error {
	cat, name, err := openIceberg(ctx, loc)
	if err != nil {
		return err
	}
	defer cat.Close()
	snaps, err := iceberg.Snapshots(ctx, cat, name)
	if err != nil {
		return err
	}
	rows := make([]icebergSnapshotRow, 0, len(snaps))
	for _, s := range snaps {
		rows = append(rows, icebergSnapshotRow{ID: s.ID, Parent: s.Parent, Time: fmtMillis(s.TimestampMs),
			Operation: s.Operation, Query: s.Properties[iceberg.PropQueryID], Batch: s.Properties[iceberg.PropBatchID],
			AddedRows: s.Properties["added-records"]})
	}
	if out != formatTable {
		return writeList(stdout, out, rows)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "snapshot\tparent\ttime\toperation\tquery\tbatch\tadded rows")
	for _, r := range rows {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\n", r.ID, zeroDash(r.Parent), r.Time, r.Operation, dash(r.Query), dash(r.Batch), dash(r.AddedRows))
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func zeroDash(n int64) string {
	if n == 0 {
		return "-"
	}
	return strconv.FormatInt(n, 10)
}

func icebergQuery(ctx context.Context, loc string, limit int64, out format, stdout io.Writer) error {
	cat, name, err := openIceberg(ctx, loc)
	if err != nil {
		return err
	}
	defer cat.Close()
	w := newRowWriter(stdout, out)
	var n int64
	errLimit := errors.New("limit reached")
	err = iceberg.ReadRows(ctx, cat, name, func(columns []string, row []any) error {
		if limit > 0 && n >= limit {
			return errLimit
		}
		n++
		return w.write(columns, row)
	})
	if err != nil && !errors.Is(err, errLimit) {
		return err
	}
	return w.close()
}

func icebergCompact(ctx context.Context, loc string, target int64, minFiles uint, out format, stdout io.Writer) error {
	if !isIceberg(loc) {
		return fmt.Errorf("%w: lake compact works on Iceberg tables (iceberg:CATALOG#TABLE); a file-sink table compacts its log itself (filesink.WithCompactEvery) and drops unlisted files with lake vacuum", errUsage)
	}
	cat, name, err := openIceberg(ctx, loc)
	if err != nil {
		return err
	}
	defer cat.Close()
	res, err := iceberg.Compact(ctx, cat, name, target, minFiles)
	if err != nil {
		return err
	}
	if out != formatTable {
		return writeJSON(stdout, out, res)
	}
	_, err = fmt.Fprintf(stdout, "rewrote %d files (%d bytes) into %d (%d bytes) in %d groups\n",
		res.FilesRemoved, res.BytesBefore, res.FilesAdded, res.BytesAfter, res.Groups)
	return err
}

func icebergExpire(ctx context.Context, loc string, opts iceberg.ExpireOptions, out format, stdout io.Writer) error {
	if !isIceberg(loc) {
		return fmt.Errorf("%w: lake expire works on Iceberg tables (iceberg:CATALOG#TABLE); for a file-sink table use lake vacuum", errUsage)
	}
	cat, name, err := openIceberg(ctx, loc)
	if err != nil {
		return err
	}
	defer cat.Close()
	res, err := iceberg.Expire(ctx, cat, name, opts)
	if err != nil {
		return err
	}
	sort.Strings(res.OrphansDeleted)
	if out != formatTable {
		return writeJSON(stdout, out, res)
	}
	verb := "deleted"
	if opts.DryRun {
		verb = "would delete"
	}
	for _, f := range res.OrphansDeleted {
		fmt.Fprintln(stdout, f)
	}
	_, err = fmt.Fprintf(stdout, "snapshots %d → %d; %s %d orphan files; kept %d of the batch in flight\n",
		res.SnapshotsBefore, res.SnapshotsAfter, verb, len(res.OrphansDeleted), len(res.OrphansKept))
	return err
}
