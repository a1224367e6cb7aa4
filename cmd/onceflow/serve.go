package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	"github.com/onceflow/onceflow/checkpoint"
	"github.com/onceflow/onceflow/monitor"
	"github.com/onceflow/onceflow/storage"
)

// serveCommand serves the status page of a checkpoint, read-only: the
// page a running query serves with monitor.WithStatusServer, drawn from
// the checkpoint's progress/ records.
func serveCommand() *command {
	return &command{
		name: "serve", args: "[-addr HOST:PORT] [-n N] DIR", nargs: 1,
		summary: "serve a checkpoint's status page (charts of its last batches) over HTTP, read-only",
		setup: func(fs *flag.FlagSet) action {
			addr := fs.String("addr", "127.0.0.1:8080", "address to listen on (port 0 picks a free one)")
			n := fs.Int("n", monitor.DefaultHistory, "how many of the latest batches to chart and list")
			return func(ctx context.Context, args []string, stdout io.Writer) error {
				if *n <= 0 {
					return fmt.Errorf("%w: -n %d: the page needs at least one batch", errUsage, *n)
				}
				return serveCheckpoint(ctx, args[0], *addr, *n, stdout)
			}
		},
	}
}

func serveCheckpoint(ctx context.Context, location, addr string, n int, stdout io.Writer) error {
	store, err := openExisting(ctx, location)
	if err != nil {
		return err
	}
	defer store.Close()
	// A checkpoint without metadata is no checkpoint: say so now, not on
	// the first page load.
	if _, err := checkpoint.NewReader(store).Metadata(ctx); err != nil {
		return err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", addr, err)
	}
	srv := &http.Server{Handler: monitor.CheckpointHandler(store, monitor.WithHistory(n)), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "serving the status page of %s at http://%s/ (read-only; interrupt to stop)\n", storage.Redact(store.URL()), ln.Addr())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	err = srv.Shutdown(sctx)
	if serr := <-done; !errors.Is(serr, http.ErrServerClosed) {
		err = errors.Join(err, serr)
	}
	return err
}
