package postgres

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// retryable tells whether a failed batch transaction may be run again from
// the start: the connection was lost, the server shut the session down, or
// the transaction lost a serialization or deadlock race. Running it again is
// safe because the transaction either committed (then the progress guard
// skips it) or left no trace.
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", // serialization_failure
			"40P01", // deadlock_detected
			"57P01", // admin_shutdown
			"57P02", // crash_shutdown
			"57P03": // cannot_connect_now
			return true
		}
		return len(pgErr.Code) == 5 && pgErr.Code[:2] == "08" // connection_exception
	}
	if pgconn.SafeToRetry(err) {
		return true
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.EPIPE) || errors.Is(err, net.ErrClosed)
}

// backoff returns the wait before attempt n+1 after n failed attempts.
func backoff(cfg *config, n int) time.Duration {
	d := cfg.initialBackoff
	for i := 1; i < n && d < cfg.maxBackoff; i++ {
		d *= 2
	}
	return min(d, cfg.maxBackoff)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// retrier runs one batch transaction until it succeeds, fails for good, or
// runs out of attempts.
type retrier struct {
	cfg    *config
	scrub  scrubber
	onWait func() // counts retries
}

// do runs attempt until it returns nil or a non-retryable error, at most
// cfg.maxAttempts times. It returns how many attempts ran.
func (r *retrier) do(ctx context.Context, what string, attempt func(ctx context.Context) error) (int, error) {
	for n := 1; ; n++ {
		err := attempt(ctx)
		if err == nil {
			return n, nil
		}
		err = r.scrub.err(err)
		if !retryable(err) || ctx.Err() != nil {
			return n, r.scrub.err(wrapOp(what, err))
		}
		if n >= r.cfg.maxAttempts {
			return n, r.scrub.err(&exhaustedError{what: what, attempts: n, err: err})
		}
		d := backoff(r.cfg, n)
		if d > 1 {
			// Jitter (d/2 to d) keeps two deadlock victims from retrying in
			// step. Timing only: nothing that reaches a table depends on it.
			d = d/2 + rand.N(d/2+1)
		}
		r.cfg.logger.LogAttrs(ctx, slog.LevelWarn, "postgres: batch transaction failed, retrying",
			slog.String("what", what), slog.Int("attempt", n), slog.Duration("backoff", d), slog.String("error", err.Error()))
		if r.onWait != nil {
			r.onWait()
		}
		if serr := sleepCtx(ctx, d); serr != nil {
			return n, r.scrub.err(fmt.Errorf("postgres: %s: wait to retry: %w (last error: %w)", what, serr, err))
		}
	}
}

// exhaustedError is the last error of a batch transaction that failed on
// every attempt; errors.Is(err, ErrRetriesExhausted) holds.
type exhaustedError struct {
	what     string
	attempts int
	err      error
}

func (e *exhaustedError) Error() string {
	return fmt.Sprintf("postgres: %s: retries exhausted after %d attempts: %s", e.what, e.attempts, strings.TrimPrefix(e.err.Error(), "postgres: "))
}

func (e *exhaustedError) Unwrap() error { return e.err }

func (e *exhaustedError) Is(target error) bool { return target == ErrRetriesExhausted }

// rollbackTimeout bounds the rollback of a failed attempt: on a dead
// connection it fails fast, on a hung one the server aborts the
// transaction anyway when the connection goes.
const rollbackTimeout = 5 * time.Second

// rollback ends a failed attempt's transaction, even when ctx is done.
func rollback(ctx context.Context, tx pgx.Tx) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackTimeout)
	defer cancel()
	_ = tx.Rollback(ctx)
}
