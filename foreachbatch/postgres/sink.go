package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onceflow/onceflow/internal/fault"
)

// ExactlyOnce is what Guarantee reports (the engine's constant of the same
// value).
const ExactlyOnce = "exactly-once"

// validateTimeout bounds the catalog reads of ValidateSchema, which the
// engine calls without a context.
const validateTimeout = 30 * time.Second

// Sink writes each batch's rows into one PostgreSQL table. It implements the
// engine's Sink, SinkStarter, SchemaValidator and GuaranteeReporter
// contracts. Build it with NewOffsetsInSink or NewUpsert.
//
// AddBatch is meant to be called by one goroutine at a time (the engine's
// driver); Apply, Stats and Guard are safe for concurrent use.
type Sink struct {
	pool   *pgxpool.Pool
	target table
	guard  *Guard // nil for an upsert sink
	ap     *applier
	cfg    config
	scrub  scrubber
	count  counters
	retry  retrier
}

// NewOffsetsInSink returns a sink that applies batch N to table in one
// transaction with job's progress row (see Guard): a batch that was already
// applied is skipped, so any output mode and any merge (MergeAdd included)
// is exactly-once. Without KeyColumns rows are appended.
func NewOffsetsInSink(pool *pgxpool.Pool, job string, tableName string, opts ...Option) (*Sink, error) {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	if tableName == "" {
		return nil, fmt.Errorf("%w: empty table name", ErrConfig)
	}
	g, err := newGuard(pool, job, cfg)
	if err != nil {
		return nil, err
	}
	s := &Sink{pool: pool, target: table{schema: cfg.schema, name: tableName}, guard: g, cfg: cfg, scrub: g.scrub}
	s.ap = newApplier(s.target, &s.cfg)
	// ValidateSchema retries through the sink's own retrier (batches go
	// through the guard's); Stats reports the guard's counters, so both
	// count there.
	s.retry = retrier{cfg: &s.cfg, scrub: s.scrub, onWait: func() { g.count.retries.Add(1) }}
	return s, nil
}

// NewUpsert returns a sink that upserts each batch into table under
// KeyColumns (required), with no progress table: repeating a batch rewrites
// the same values, so it is exactly-once only when every row carries the
// full value of its key (update or complete output mode). MergeAdd and
// ProgressTable are refused.
func NewUpsert(pool *pgxpool.Pool, tableName string, opts ...Option) (*Sink, error) {
	cfg := defaults()
	for _, o := range opts {
		o(&cfg)
	}
	if pool == nil {
		return nil, fmt.Errorf("%w: nil pool", ErrConfig)
	}
	if tableName == "" {
		return nil, fmt.Errorf("%w: empty table name", ErrConfig)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if len(cfg.keys) == 0 {
		return nil, fmt.Errorf("%w: upsert into %q needs KeyColumns", ErrConfig, tableName)
	}
	for _, col := range cfg.mergeOrder {
		if cfg.merge[col] == MergeAdd {
			return nil, fmt.Errorf("%w: upsert into %q: column %q has an add merge, which would add a repeated batch twice; "+
				"use NewOffsetsInSink for deltas, or send full values", ErrConfig, tableName, col)
		}
	}
	if cfg.progressSet {
		return nil, fmt.Errorf("%w: upsert into %q keeps no progress table; ProgressTable applies to NewOffsetsInSink", ErrConfig, tableName)
	}
	s := &Sink{pool: pool, target: table{schema: cfg.schema, name: tableName}, cfg: cfg, scrub: newScrubber(pool)}
	s.ap = newApplier(s.target, &s.cfg)
	s.retry = retrier{cfg: &s.cfg, scrub: s.scrub, onWait: func() { s.count.retries.Add(1) }}
	return s, nil
}

// Start prepares the progress table and the job's row (offsets-in-sink; see
// Guard.Start). An upsert sink has nothing to prepare: its table is checked
// by ValidateSchema.
func (s *Sink) Start(ctx context.Context, queryID string) error {
	if s.guard == nil {
		return nil
	}
	return s.guard.StartFor(ctx, queryID)
}

// LastBatchID reports the newest batch the job applied (offsets-in-sink
// only; an upsert sink keeps no progress).
func (s *Sink) LastBatchID(ctx context.Context) (int64, bool, error) {
	if s.guard == nil {
		return 0, false, nil
	}
	id, err := s.guard.Applied(ctx)
	if err != nil {
		return 0, false, err
	}
	return id, id >= 0, nil
}

// Description names the sink for progress and logs: the kind, the target
// table and, for the offsets-in-sink sink, the job. It holds no DSN.
func (s *Sink) Description() string {
	if s.guard != nil {
		return "postgres[" + s.target.sql() + ", job " + s.guard.job + "]"
	}
	return "postgres[" + s.target.sql() + "]"
}

// ValidateSchema checks that the target table has a column of a compatible
// type for every output column, and a unique index on the key columns,
// creating the table first under CreateTables(true). A *ColumnError names
// the column and both types.
func (s *Sink) ValidateSchema(schema *arrow.Schema) error {
	ctx, cancel := context.WithTimeout(context.Background(), validateTimeout)
	defer cancel()
	// A lost connection (or a restarting server) is retried like a batch;
	// a table that does not fit fails at once.
	_, err := s.retry.do(ctx, "validate "+s.target.sql(), func(ctx context.Context) error {
		_, err := s.ap.planFor(ctx, s.pool, schema)
		return err
	})
	if err != nil {
		return s.scrub.err(wrapOp("validate "+s.target.sql(), err))
	}
	return nil
}

// AddBatch writes batch batchID (see Write).
func (s *Sink) AddBatch(ctx context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) error {
	_, err := s.Write(ctx, batchID, schema, records)
	return err
}

// Write writes batch batchID in one transaction, retried as Retry says, and
// tells what happened: an offsets-in-sink sink reports Skipped for a batch
// already applied.
func (s *Sink) Write(ctx context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) (Result, error) {
	if s.guard != nil {
		var rows int64
		res, err := s.guard.Run(ctx, batchID, func(ctx context.Context, tx pgx.Tx) error {
			n, err := s.ap.apply(ctx, tx, batchID, schema, records)
			rows = n
			return err
		})
		if !res.Skipped {
			res.Rows = rows
		}
		return res, err
	}

	res := Result{BatchID: batchID}
	if countRows(records) == 0 {
		s.count.applied.Add(1)
		return res, nil // nothing to upsert, and no progress to move
	}
	n, err := s.retry.do(ctx, fmt.Sprintf("upsert %s batch %d", s.target.sql(), batchID), func(ctx context.Context) error {
		rows, err := s.upsertOnce(ctx, batchID, schema, records)
		res.Rows = rows
		return err
	})
	res.Attempts = n
	if err != nil {
		return res, err
	}
	s.count.applied.Add(1)
	return res, nil
}

func (s *Sink) upsertOnce(ctx context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) (n int64, err error) {
	fault.Point(fault.PGBeforeBegin)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, fmt.Errorf("begin: %w", err)
	}
	committed := false
	defer func() {
		if !committed {
			rollback(ctx, tx)
		}
	}()
	if n, err = s.ap.apply(ctx, tx, batchID, schema, records); err != nil {
		return 0, err
	}
	fault.Point(fault.PGAfterRows)
	if err := tx.Commit(ctx); err != nil {
		return 0, fmt.Errorf("commit: %w", err)
	}
	committed = true
	fault.Point(fault.PGAfterCommit)
	return n, nil
}

// Apply writes the rows of one batch through tx without the progress guard
// and without committing: the building block for a foreachBatch function
// that writes several tables in one transaction under Guard.Run. It returns
// the number of rows written. batchID only names the batch in errors.
func (s *Sink) Apply(ctx context.Context, tx pgx.Tx, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) (int64, error) {
	n, err := s.ap.apply(ctx, tx, batchID, schema, records)
	if err != nil {
		return 0, s.scrub.err(wrapOp(fmt.Sprintf("apply batch %d to %s", batchID, s.target.sql()), err))
	}
	return n, nil
}

// Guard returns the offsets-in-sink guard (nil for an upsert sink).
func (s *Sink) Guard() *Guard { return s.guard }

// Stats returns the sink's counters.
func (s *Sink) Stats() Stats {
	if s.guard != nil {
		return s.guard.Stats()
	}
	return s.count.stats()
}

// Guarantee reports "exactly-once".
func (s *Sink) Guarantee() string { return ExactlyOnce }
