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
)

// lakeCommand inspects a table written by the files sink: its committed
// files, its rows, and the unlisted files Vacuum would delete.
func lakeCommand() *command {
	return &command{name: "lake", summary: "look at a table written by the files sink", subs: []*command{
		{
			name: "files", args: outputArgs + " DIR", nargs: 1,
			summary: "list a file-sink table's committed files",
			setup: func(fs *flag.FlagSet) action {
				out := outputFlag(fs, formatTable, formatJSONL)
				return func(ctx context.Context, args []string, stdout io.Writer) error {
					return lakeFiles(ctx, args[0], *out, stdout)
				}
			},
		},
		{
			name: "query", args: outputArgs + " [--limit N] DIR", nargs: 1,
			summary: "print a file-sink table's rows (default -o jsonl)",
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
	}}
}

func lakeFiles(ctx context.Context, loc string, out format, stdout io.Writer) error {
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
