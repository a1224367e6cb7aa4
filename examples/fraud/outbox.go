package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/onceflow/onceflow/engine"
	"github.com/onceflow/onceflow/examples/internal/cli"
	"github.com/onceflow/onceflow/outbox"
)

// DrainIdle is how long the outbox worker waits for another intent, after
// the queries of a finite trigger have ended, before it exits.
const DrainIdle = time.Second

// drainRounds bounds the worker runs of a drain: a run that exits with a
// partition lagging by more than one offset (one is the commit marker of
// the last transaction; a record and its marker are two) is followed by
// another, in case its first fetch came late.
const drainRounds = 3

// outboxRun runs the queries with an outbox worker in the same process:
// the worker reads the committed block intents (read_committed, from its
// own checkpoint) and POSTs them; it never shares a transaction or a
// position with the queries, so a crash of either side is recovered as if
// it were `onceflow outbox` in its own process.
type outboxRun struct {
	stderr io.Writer
	opts   []outbox.Option
}

func (o outboxRun) run(ctx context.Context, c *cli.Command, qs ...*engine.Query) error {
	// The worker stops on the signals that stop the queries.
	wctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if c.Finite() {
		// Once or available-now: the queries first, then the worker
		// delivers everything they committed and exits.
		if err := c.RunQueries(ctx, qs...); err != nil {
			return err
		}
		for range drainRounds {
			if wctx.Err() != nil {
				return nil // stopped by a signal
			}
			st, err := o.work(wctx, outbox.WithIdleExit(DrainIdle))
			if err != nil {
				return err
			}
			behind := false
			for _, lag := range st.Lag {
				behind = behind || lag > 1
			}
			if !behind {
				return nil
			}
		}
		return nil
	}
	// A continuous trigger: the worker beside the queries; the failure of
	// either side stops the other.
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	werr := make(chan error, 1)
	go func() {
		_, err := o.work(wctx)
		if err != nil {
			cancel()
		}
		werr <- err
	}()
	err := c.RunQueries(qctx, qs...)
	stop() // the queries are done: so is the worker
	if e := <-werr; e != nil && (err == nil || errors.Is(err, context.Canceled)) {
		err = e
	}
	return err
}

// work runs one worker until ctx ends (nil) or, with extra options such as
// WithIdleExit, until it returns by itself, and returns its figures.
func (o outboxRun) work(ctx context.Context, extra ...outbox.Option) (outbox.Stats, error) {
	w, err := outbox.New(slices.Concat(o.opts, extra)...)
	if err != nil {
		return outbox.Stats{}, err
	}
	defer w.Close()
	err = w.Run(ctx)
	st := w.Stats()
	fmt.Fprintf(o.stderr, "fraud-outbox: delivered %d, failed attempts %d, dead-lettered %d\n", st.Delivered, st.FailedAttempts, st.DeadLettered)
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		return st, nil // stopped: the checkpoint holds the position
	}
	return st, err
}
