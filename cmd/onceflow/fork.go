package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/storage"
)

// forkCommand is `onceflow checkpoint fork SRC DST --from-batch N`: a new
// checkpoint at DST that replays SRC from batch N (engine.ForkCheckpoint).
func forkCommand() *command {
	return &command{
		name: "fork", args: "SRC DST --from-batch N", nargs: 2,
		summary: "write a new checkpoint DST that replays SRC from batch N",
		setup: func(fs *flag.FlagSet) action {
			from := fs.Int64("from-batch", -1, "first batch the new checkpoint runs again (batch N-1 must be committed in SRC); required")
			return func(ctx context.Context, args []string, stdout io.Writer) error {
				if *from < 0 {
					return fmt.Errorf("%w: --from-batch N is required", errUsage)
				}
				src, err := openExisting(ctx, args[0])
				if err != nil {
					return err
				}
				defer src.Close()
				dst, err := openStore(ctx, args[1])
				if err != nil {
					return err
				}
				defer dst.Close()
				stats, err := engine.ForkCheckpoint(ctx, src, dst, *from)
				if err != nil {
					return err
				}
				meta, err := engine.ReadMetadata(ctx, dst)
				if err != nil {
					return errors.Join(errors.New("the fork was written but its metadata does not read back"), err)
				}
				fmt.Fprintf(stdout, "forked %s at batch %d into %s\nquery id %s (name %q)\n", storage.Redact(src.URL()), *from, storage.Redact(dst.URL()), meta.ID, meta.Name)
				fmt.Fprintf(stdout, "copied %d log entries, %d state files, %d source files\n", stats.LogEntries, stats.StateFiles, stats.SourceFiles)
				for _, name := range stats.LeftOut {
					fmt.Fprintf(stdout, "left out %s: the fork's source makes its own at its first start\n", name)
				}
				fmt.Fprintf(stdout, "a query started on %s runs batch %d next; give it new sinks: its output replays batches %d onwards\n", storage.Redact(dst.URL()), *from, *from)
				return nil
			}
		},
	}
}
