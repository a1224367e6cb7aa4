package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/onceflow/onceflow/filesink"
)

const lakeUsage = "lake files [--json] DIR | lake query [--limit N] DIR | lake vacuum [--older-than D] [--delete] DIR"

// lakeCommand inspects a table written by the files sink: its committed
// files, its rows, and the unlisted files Vacuum would delete.
func lakeCommand(ctx context.Context, args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: %s", errUsage, lakeUsage)
	}
	switch args[0] {
	case "files":
		return lakeFiles(ctx, args[1:], stdout)
	case "query":
		return lakeQuery(ctx, args[1:], stdout)
	case "vacuum":
		return lakeVacuum(ctx, args[1:], stdout)
	}
	return fmt.Errorf("%w: unknown lake command %q; %s", errUsage, args[0], lakeUsage)
}

func lakeFiles(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("lake files", flag.ContinueOnError)
	asJSON := fs.Bool("json", false, "print each file's log record as a JSON line")
	if err := fs.Parse(splitFlags(args, "json")); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: lake files [--json] DIR", errUsage)
	}
	table, err := openExisting(ctx, fs.Arg(0))
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
	if *asJSON {
		enc := json.NewEncoder(stdout)
		for _, f := range files {
			if err := enc.Encode(f); err != nil {
				return err
			}
		}
		return nil
	}
	var rows, size int64
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "path\trows\tbytes\tbatch\tcommitted")
	for _, f := range files {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\n", f.Path, f.Rows, f.Size, f.BatchID, time.UnixMilli(f.Time).UTC().Format(time.RFC3339))
		rows += f.Rows
		size += f.Size
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err = fmt.Fprintf(stdout, "version %d: %d files, %d rows, %d bytes\n", version, len(files), rows, size)
	return err
}

func lakeQuery(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("lake query", flag.ContinueOnError)
	limit := fs.Int64("limit", 0, "print at most N rows (0: all)")
	if err := fs.Parse(splitFlags(args)); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: lake query [--limit N] DIR", errUsage)
	}
	table, err := openExisting(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	defer table.Close()
	var n int64
	var line bytes.Buffer
	errLimit := errors.New("limit reached")
	err = filesink.ReadRows(ctx, table, func(_ filesink.File, columns []string, row []any) error {
		if *limit > 0 && n >= *limit {
			return errLimit
		}
		n++
		line.Reset()
		line.WriteByte('{')
		for i, c := range columns {
			if i > 0 {
				line.WriteByte(',')
			}
			k, _ := json.Marshal(c)
			line.Write(k)
			line.WriteByte(':')
			v, err := marshalValue(row[i])
			if err != nil {
				return fmt.Errorf("column %s: %w", c, err)
			}
			line.Write(v)
		}
		line.WriteString("}\n")
		_, err := stdout.Write(line.Bytes())
		return err
	})
	if err != nil && !errors.Is(err, errLimit) {
		return err
	}
	return nil
}

func lakeVacuum(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("lake vacuum", flag.ContinueOnError)
	olderThan := fs.Duration("older-than", 7*24*time.Hour, "only files unlisted (or removed) for longer than this")
	del := fs.Bool("delete", false, "delete the files; without it, only list them (dry run)")
	if err := fs.Parse(splitFlags(args, "delete")); err != nil {
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: lake vacuum [--older-than D] [--delete] DIR", errUsage)
	}
	table, err := openExisting(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	defer table.Close()
	names, err := filesink.Vacuum(ctx, table, *olderThan, time.Now(), !*del)
	if err != nil {
		return err
	}
	for _, n := range names {
		fmt.Fprintln(stdout, n)
	}
	verb := "would delete"
	if *del {
		verb = "deleted"
	}
	_, err = fmt.Fprintf(stdout, "%s %d files unlisted for more than %s\n", verb, len(names), *olderThan)
	return err
}
