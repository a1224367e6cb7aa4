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
// the start: the connection was lost, the server shut the session down or
// ran short of resources, or the transaction lost a serialization, deadlock
// or lock-timeout race. Running it again is safe because the transaction
// either committed (then the progress guard skips it, or the upsert's batch
// id column makes it a rewrite of the same values) or left no trace.
func retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case "40001", // serialization_failure
			"40P01", // deadlock_detected
			"40003", // statement_completion_unknown
			"55P03", // lock_not_available (lock_timeout)
			"57014", // query_canceled (statement_timeout, pg_cancel_backend)
			"57P01", // admin_shutdown
			"57P02", // crash_shutdown
			"57P03", // cannot_connect_now
			"57P05", // idle_session_timeout
			"25P03": // idle_in_transaction_session_timeout
			return true
		}
		switch sqlClass(pgErr.Code) {
		case "08", // connection_exception
			"53": // insufficient_resources: disk full, out of memory, too many connections
			return true
		}
		return false
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

func sqlClass(code string) string {
	if len(code) != 5 {
		return ""
	}
	return code[:2]
}

// rejectedClass names the SQLSTATE classes of errors a batch meets again
// on every run: the database refuses these rows or these statements, not
// this moment, and retrying them only delays the stop.
func rejectedClass(class string) (string, bool) {
	switch class {
	case "0A":
		return "feature not supported", true
	case "21":
		return "cardinality violation", true
	case "22":
		return "data exception", true
	case "23":
		return "integrity constraint violation", true
	case "27":
		return "triggered data change violation", true
	case "2F":
		return "SQL routine exception", true
	case "38":
		return "external routine exception", true
	case "39":
		return "external routine invocation exception", true
	case "42":
		return "syntax error or access rule violation", true
	case "44":
		return "with check option violation", true
	case "P0":
		return "PL/pgSQL error", true
	}
	return "", false
}

// rejected returns the PostgreSQL error and the name of its class when err
// is one the same batch meets on every run (see rejectedClass; 40002, a
// deferred constraint violated at COMMIT, too).
func rejected(err error) (*pgconn.PgError, string, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return nil, "", false
	}
	if pgErr.Code == "40002" {
		return pgErr, "integrity constraint violation at commit", true
	}
	name, ok := rejectedClass(sqlClass(pgErr.Code))
	return pgErr, name, ok
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
		if pgErr, class, ok := rejected(err); ok {
			return n, r.scrub.err(&rejectedError{what: what, pg: pgErr, class: class, err: err})
		}
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

// rejectedError is a batch the database refused for a reason a new attempt
// cannot change; errors.Is(err, ErrRejected) holds, and errors.As finds the
// *pgconn.PgError.
type rejectedError struct {
	what  string
	pg    *pgconn.PgError
	class string
	err   error
}

func (e *rejectedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "postgres: %s: rejected by the database, not retried (SQLSTATE %s, %s", e.what, e.pg.Code, e.class)
	if e.pg.TableName != "" {
		fmt.Fprintf(&b, "; table %q", e.pg.TableName)
	}
	if e.pg.ColumnName != "" {
		fmt.Fprintf(&b, ", column %q", e.pg.ColumnName)
	}
	if e.pg.ConstraintName != "" {
		fmt.Fprintf(&b, ", constraint %q", e.pg.ConstraintName)
	}
	b.WriteString("): every run of this batch fails the same way; fix the rows, the table or its triggers, then restart: ")
	b.WriteString(strings.TrimPrefix(e.err.Error(), "postgres: "))
	if e.pg.Detail != "" {
		b.WriteString("; " + e.pg.Detail)
	}
	if e.pg.Hint != "" {
		b.WriteString("; hint: " + e.pg.Hint)
	}
	if e.pg.Code == "21000" {
		b.WriteString("; two rows of the batch have keys the table compares equal though the output tells them apart (a nondeterministic collation, say)")
	}
	return b.String()
}

func (e *rejectedError) Unwrap() error { return e.err }

func (e *rejectedError) Is(target error) bool { return target == ErrRejected }

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
