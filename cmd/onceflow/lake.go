package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/onceflow/onceflow/filesink"
	"github.com/onceflow/onceflow/iceberg"
)

// lakeCommand inspects a table written by the files sink (a directory or
// s3:// location) or an Iceberg table (iceberg:CATALOG#TABLE): its
// committed files, its rows, the unlisted files Vacuum would delete; and
// for Iceberg its snapshots, compaction and expiry.
func lakeCommand() *command {
	return &command{name: "lake", summary: "look at a table written by the files sink or an Iceberg table", subs: []*command{
		{
			name: "files", args: outputArgs + " DIR", nargs: 1,
			summary: "list a table's committed files (DIR, or iceberg:CATALOG#TABLE)",
			setup: func(fs *flag.FlagSet) action {
				out := outputFlag(fs, formatTable, formatJSONL)
				return func(ctx context.Context, args []string, stdout io.Writer) error {
					return lakeFiles(ctx, args[0], *out, stdout)
				}
			},
		},
		{
			name: "query", args: outputArgs + " [--limit N] DIR", nargs: 1,
			summary: "print a table's rows (default -o jsonl; DIR or iceberg:CATALOG#TABLE)",
			setup: func(fs *flag.FlagSet) action {
				out := outputFlag(fs, formatJSONL, "")
				limit := fs.Int64("limit", 0, "print at most N rows (0: all)")
				return func(ctx context.Context, args []string, stdout io.Writer) error {
					return lakeQuery(ctx, args[0], *limit, *out, stdout)
				}
			},
		},
		{
			name: "vacuum", args: outputArgs + " [--older-than D] [--delete] DIR", nargs: 1,
			summary: "list, or delete, the files no log entry lists any more",
			setup: func(fs *flag.FlagSet) action {
				out := outputFlag(fs, formatTable, "")
				olderThan := fs.Duration("older-than", 7*24*time.Hour, "only files unlisted (or removed) for longer than this")
				del := fs.Bool("delete", false, "delete the files; without it, only list them (dry run)")
				return func(ctx context.Context, args []string, stdout io.Writer) error {
					return lakeVacuum(ctx, args[0], *olderThan, *del, *out, stdout)
				}
			},
		},
		{
			name: "snapshots", args: outputArgs + " iceberg:CATALOG#TABLE", nargs: 1,
			summary: "list an Iceberg table's snapshots with their onceflow query and batch",
			setup: func(fs *flag.FlagSet) action {
				out := outputFlag(fs, formatTable, "")
				return func(ctx context.Context, args []string, stdout io.Writer) error {
					if !isIceberg(args[0]) {
						return fmt.Errorf("%w: lake snapshots works on Iceberg tables (iceberg:CATALOG#TABLE)", errUsage)
					}
					return icebergSnapshots(ctx, args[0], *out, stdout)
				}
			},
		},
		{
			name: "compact", args: outputArgs + " [--target-size BYTES] [--min-files N] iceberg:CATALOG#TABLE", nargs: 1,
			summary: "rewrite an Iceberg table's small data files (safe next to a running query)",
			setup: func(fs *flag.FlagSet) action {
				out := outputFlag(fs, formatTable, "")
				target := fs.Int64("target-size", 128<<20, "target data file size in bytes")
				minFiles := fs.Uint("min-files", 5, "compact a partition only when it has at least this many small files")
				return func(ctx context.Context, args []string, stdout io.Writer) error {
					return icebergCompact(ctx, args[0], *target, *minFiles, *out, stdout)
				}
			},
		},
		{
			name: "expire", args: outputArgs + " [--older-than D] [--retain-last N] [--orphans-older-than D] [--dry-run] iceberg:CATALOG#TABLE", nargs: 1,
			summary: "expire an Iceberg table's old snapshots and delete orphan files (safe next to a running query)",
			setup: func(fs *flag.FlagSet) action {
				out := outputFlag(fs, formatTable, "")
				olderThan := fs.Duration("older-than", 7*24*time.Hour, "expire snapshots older than this")
				retain := fs.Int("retain-last", 1, "always keep this many newest snapshots")
				orphans := fs.Duration("orphans-older-than", time.Hour, "delete unreferenced files older than this (negative: skip)")
				dry := fs.Bool("dry-run", false, "list the orphan files without deleting anything (snapshots are not expired)")
				return func(ctx context.Context, args []string, stdout io.Writer) error {
					return icebergExpire(ctx, args[0], iceberg.ExpireOptions{OlderThan: *olderThan, RetainLast: *retain,
						OrphansOlderThan: *orphans, DryRun: *dry}, *out, stdout)
				}
			},
		},
	}}
}

func lakeFiles(ctx context.Context, loc string, out format, stdout io.Writer) error {
	if isIceberg(loc) {
		return icebergFiles(ctx, loc, out, stdout)
	}
	table, err := openExisting(ctx, loc)
	if err != nil {
		return err
	}
	defer table.Close()
	version, err := filesink.Version(ctx, table)
	if err != nil {
		return err
	}
	files, err := filesink.Committed(ctx, table)
	if err != nil {
		return err
	}
	if out != formatTable {
		return writeList(stdout, out, files)
	}
	var rows, size int64
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "path\trows\tbytes\tbatch\tcommitted")
	for _, f := range files {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", f.Path, f.Rows, f.Size, f.BatchID, fmtMillis(f.Time))
		rows += f.Rows
		size += f.Size
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "version %d: %d files, %d rows, %d bytes\n", version, len(files), rows, size)
	return err
}

func lakeQuery(ctx context.Context, loc string, limit int64, out format, stdout io.Writer) error {
	if isIceberg(loc) {
		return icebergQuery(ctx, loc, limit, out, stdout)
	}
	table, err := openExisting(ctx, loc)
	if err != nil {
		return err
	}
	defer table.Close()
	var n int64
	w := newRowWriter(stdout, out)
	errLimit := errors.New("limit reached")
	err = filesink.ReadRows(ctx, table, func(_ filesink.File, columns []string, row []any) error {
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

// vacuumReport is what `lake vacuum -o json|jsonl` prints.
type vacuumReport struct {
	Deleted   bool     `json:"deleted"` // false: a dry run
	OlderThan string   `json:"olderThan"`
	Files     []string `json:"files"`
}

func lakeVacuum(ctx context.Context, loc string, olderThan time.Duration, del bool, out format, stdout io.Writer) error {
	table, err := openExisting(ctx, loc)
	if err != nil {
		return err
	}
	defer table.Close()
	names, err := filesink.Vacuum(ctx, table, olderThan, time.Now(), !del)
	if err != nil {
		return err
	}
	if out != formatTable {
		if names == nil {
			names = []string{}
		}
		return writeJSON(stdout, out, vacuumReport{Deleted: del, OlderThan: olderThan.String(), Files: names})
	}
	for _, n := range names {
		fmt.Fprintln(stdout, n)
	}
	verb := "would delete"
	if del {
		verb = "deleted"
	}
	_, err = fmt.Fprintf(stdout, "%s %d files unlisted for more than %s\n", verb, len(names), olderThan)
	return err
}
