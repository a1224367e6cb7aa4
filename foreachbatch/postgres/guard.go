package postgres

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onceflow/onceflow/internal/fault"
)

// Result tells what one batch did.
type Result struct {
	BatchID  int64
	Skipped  bool  // the batch (or a later one) was already applied: nothing was written
	Rows     int64 // rows staged and upserted (0 when skipped)
	Attempts int   // transaction attempts, 1 unless a retryable failure happened
}

// Stats counts batches over the life of a Guard or Sink.
type Stats struct {
	Applied int64 // batches committed
	Skipped int64 // batches found already applied
	Retries int64 // transaction attempts repeated after a retryable failure
}

type counters struct {
	applied, skipped, retries atomic.Int64
}

func (c *counters) stats() Stats {
	return Stats{Applied: c.applied.Load(), Skipped: c.skipped.Load(), Retries: c.retries.Load()}
}

// Guard is the offsets-in-sink protocol for one job: a row in the progress
// table holds the last batch id the job applied, and moves in the same
// transaction as the batch's effects. Use Run to wrap your own statements
// (foreachBatch), or NewOffsetsInSink to write whole tables.
//
// Safe for concurrent use; two transactions for the same job serialize on
// the progress row, and the second one sees the batch as applied.
type Guard struct {
	pool     *pgxpool.Pool
	job      string
	progress table
	cfg      config
	scrub    scrubber
	count    counters
	retry    retrier

	// afterProgress, when set, runs between the progress update and the
	// batch's effects (tests cut the connection there).
	afterProgress func(ctx context.Context, tx pgx.Tx)
}

// NewGuard returns the guard of job over the progress table (see
// WithProgressTable, WithTableSchema, WithCreateTables, WithRetry, WithLogger). The pool is the
// caller's; the guard never closes it.
func NewGuard(pool *pgxpool.Pool, job string, opts ...Option) (*Guard, error) {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	return newGuard(pool, job, cfg)
}

func newGuard(pool *pgxpool.Pool, job string, cfg config) (*Guard, error) {
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrConfig)
	}
	if job == "" {
		return nil, fmt.Errorf("%w: empty job name", ErrConfig)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	g := &Guard{pool: pool, job: job, progress: table{schema: cfg.schema, name: cfg.progress}, cfg: cfg, scrub: newScrubber(pool)}
	g.retry = retrier{cfg: &g.cfg, scrub: g.scrub, onWait: func() { g.count.retries.Add(1) }}
	return g, nil
}

// Start creates the progress table under WithCreateTables(true), checks its
// columns, and creates the job's row (batch id -1) if it is missing. It
// does not bind the job to a query; the sinks call StartFor.
func (g *Guard) Start(ctx context.Context) error { return g.StartFor(ctx, "") }

// StartFor is Start for the query queryID (the engine's checkpoint id):
// when the progress table has a query_id column, the job's row records the
// query that owns it, and a row owned by another query is refused with
// ErrOtherQuery — a new checkpoint counts batch ids from 0 again, and
// taking them for the old query's would skip its first batches. A row
// without an owner (written before the column existed) is claimed.
func (g *Guard) StartFor(ctx context.Context, queryID string) error {
	if g.cfg.createTables {
		if _, err := g.pool.Exec(ctx, createProgressSQL(g.progress)); err != nil {
			return g.scrub.err(fmt.Errorf("postgres: create progress table %s: %w", g.progress.sql(), err))
		}
	}
	hasQueryID, err := checkProgress(ctx, g.pool, g.progress)
	if err != nil {
		return g.scrub.err(wrapOp(fmt.Sprintf("job %q", g.job), err))
	}
	if !hasQueryID || queryID == "" {
		if _, err := g.pool.Exec(ctx, "INSERT INTO "+g.progress.sql()+
			" (job, batch_id, updated_at) VALUES ($1, -1, now()) ON CONFLICT (job) DO NOTHING", g.job); err != nil {
			return g.scrub.err(fmt.Errorf("postgres: job %q: create progress row: %w", g.job, err))
		}
		return nil
	}
	if _, err := g.pool.Exec(ctx, "INSERT INTO "+g.progress.sql()+
		" (job, batch_id, updated_at, query_id) VALUES ($1, -1, now(), $2) ON CONFLICT (job) DO NOTHING", g.job, queryID); err != nil {
		return g.scrub.err(fmt.Errorf("postgres: job %q: create progress row: %w", g.job, err))
	}
	if _, err := g.pool.Exec(ctx, "UPDATE "+g.progress.sql()+
		" SET query_id = $2 WHERE job = $1 AND query_id IS NULL", g.job, queryID); err != nil {
		return g.scrub.err(fmt.Errorf("postgres: job %q: claim progress row: %w", g.job, err))
	}
	var owner string
	var batchID int64
	if err := g.pool.QueryRow(ctx, "SELECT query_id, batch_id FROM "+g.progress.sql()+" WHERE job = $1", g.job).Scan(&owner, &batchID); err != nil {
		return g.scrub.err(fmt.Errorf("postgres: job %q: read progress row: %w", g.job, err))
	}
	if owner != queryID {
		return g.scrub.err(fmt.Errorf("%w: job %q in %s has applied batches up to %d of query %s, and this is query %s; give a new query (a new checkpoint) its own job name, or fork the old checkpoint",
			ErrOtherQuery, g.job, g.progress.sql(), batchID, owner, queryID))
	}
	return nil
}

// Applied returns the last batch id the job applied, -1 when none.
func (g *Guard) Applied(ctx context.Context) (int64, error) {
	var id int64
	err := g.pool.QueryRow(ctx, "SELECT batch_id FROM "+g.progress.sql()+" WHERE job = $1", g.job).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		return -1, nil
	}
	if err != nil {
		return 0, g.scrub.err(fmt.Errorf("postgres: job %q: read progress: %w", g.job, err))
	}
	return id, nil
}

// Advance moves the job's progress to batchID inside tx if it is below
// batchID, creating the row when missing. It returns false when batchID (or
// a later batch) was already applied: the caller must then write nothing
// and roll back. Call it first in the transaction: the update locks the
// progress row until the transaction ends.
func (g *Guard) Advance(ctx context.Context, tx pgx.Tx, batchID int64) (bool, error) {
	ok, err := g.advance(ctx, tx, batchID)
	if err != nil {
		return false, g.scrub.err(wrapOp(fmt.Sprintf("job %q batch %d", g.job, batchID), err))
	}
	return ok, nil
}

func (g *Guard) advance(ctx context.Context, tx pgx.Tx, batchID int64) (bool, error) {
	if batchID < 0 {
		return false, fmt.Errorf("batch id %d is negative", batchID)
	}
	tag, err := tx.Exec(ctx, "UPDATE "+g.progress.sql()+
		" SET batch_id = $2, updated_at = now() WHERE job = $1 AND batch_id < $2", g.job, batchID)
	if err != nil {
		return false, fmt.Errorf("advance progress: %w", err)
	}
	if tag.RowsAffected() == 1 {
		return true, nil
	}
	// No row moved: either the job has no row yet, or it is at batchID or
	// beyond. Inserting decides which; a concurrent insert of the same job
	// makes ours do nothing, and then the batch belongs to the other one.
	tag, err = tx.Exec(ctx, "INSERT INTO "+g.progress.sql()+
		" (job, batch_id, updated_at) VALUES ($1, $2, now()) ON CONFLICT (job) DO NOTHING", g.job, batchID)
	if err != nil {
		return false, fmt.Errorf("create progress row: %w", err)
	}
	return tag.RowsAffected() == 1, nil
}

// Run applies batch batchID exactly once: in one transaction it advances the
// progress (Advance), calls fn with the transaction unless the batch was
// already applied, and commits. fn must do all its writes through tx and
// nothing else with side effects outside the database, since it may run
// again after a retryable failure (lost connection, 57P01, 40001, 40P01, …;
// see WithRetry). When the retries run out the error is returned; running
// the batch again later is safe. An error every run would meet (a
// constraint of fn's statements, say) is returned at once as ErrRejected.
func (g *Guard) Run(ctx context.Context, batchID int64, fn func(ctx context.Context, tx pgx.Tx) error) (Result, error) {
	res := Result{BatchID: batchID}
	n, err := g.retry.do(ctx, fmt.Sprintf("job %q batch %d", g.job, batchID), func(ctx context.Context) error {
		skipped, err := g.attempt(ctx, batchID, fn)
		res.Skipped = skipped
		return err
	})
	res.Attempts = n
	if err != nil {
		return res, err
	}
	if res.Skipped {
		g.count.skipped.Add(1)
		g.cfg.logger.LogAttrs(ctx, slog.LevelInfo, "postgres: batch already applied, skipped",
			slog.String("job", g.job), slog.Int64("batch", batchID))
	} else {
		g.count.applied.Add(1)
	}
	return res, nil
}

func (g *Guard) attempt(ctx context.Context, batchID int64, fn func(ctx context.Context, tx pgx.Tx) error) (skipped bool, err error) {
	fault.Point(fault.PGBeforeBegin)
	tx, err := g.pool.Begin(ctx)
	if err != nil {
		return false, fmt.Errorf("begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed { // failed, skipped, or fn panicked
			rollback(ctx, tx)
		}
	}()
	ok, err := g.advance(ctx, tx, batchID)
	if err != nil {
		return false, err
	}
	if !ok {
		return true, nil
	}
	fault.Point(fault.PGAfterProgress)
	if g.afterProgress != nil {
		g.afterProgress(ctx, tx)
	}
	if err := fn(ctx, tx); err != nil {
		return false, err
	}
	fault.Point(fault.PGAfterRows)
	if err := tx.Commit(ctx); err != nil {
		return false, fmt.Errorf("commit: %w", err)
	}
	committed = true
	fault.Point(fault.PGAfterCommit)
	return false, nil
}

// Stats returns the guard's counters.
func (g *Guard) Stats() Stats { return g.count.stats() }
