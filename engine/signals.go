package engine

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

// RunUntilSignal runs q until it ends by itself or a signal asks it to
// stop. sigs defaults to SIGINT and SIGTERM.
//
// The first signal calls q.Stop: the batch in flight finishes, commits,
// and Run returns nil, so a restart has nothing to re-run. A second signal
// cancels Run's context: the batch in flight is abandoned at once, which
// is still safe (a restart re-runs it from its write-ahead entry, and
// every sink is idempotent in the batch id); RunUntilSignal then returns
// an error wrapping context.Canceled that names the signal.
//
// It restores the default handling of sigs before returning.
func RunUntilSignal(ctx context.Context, q *Query, sigs ...os.Signal) error {
	if len(sigs) == 0 {
		sigs = []os.Signal{os.Interrupt, syscall.SIGTERM}
	}
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, sigs...)
	defer signal.Stop(ch)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- q.Run(ctx) }()
	var aborted os.Signal
	stopping := false
	for {
		select {
		case err := <-done:
			if aborted != nil && err != nil {
				return fmt.Errorf("engine: aborted by a second %v: %w", aborted, err)
			}
			return err
		case sig := <-ch:
			if !stopping {
				stopping = true
				q.cfg.logger.Info("stopping after the batch in flight; signal again to abort it", "signal", sig.String())
				q.Stop() // final: it holds even if Run has not begun yet
				continue
			}
			if aborted == nil {
				aborted = sig
				q.cfg.logger.Warn("aborting the batch in flight; it is re-run on restart", "signal", sig.String())
				cancel()
			}
		}
	}
}
