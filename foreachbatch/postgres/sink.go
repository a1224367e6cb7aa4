package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/onceflow/onceflow/contract"
	"github.com/onceflow/onceflow/internal/fault"
)

var (
	_ contract.Sink              = (*Sink)(nil)
	_ contract.SinkStarter       = (*Sink)(nil)
	_ contract.SchemaValidator   = (*Sink)(nil)
	_ contract.GuaranteeReporter = (*Sink)(nil)
	_ contract.SinkPosition      = (*Sink)(nil)
	_ contract.SinkHighWater     = (*Sink)(nil)
	_ contract.Describer         = (*Sink)(nil)
)

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
// is exactly-once. Without WithKeyColumns rows are appended.
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
	if cfg.batchColSet {
		return nil, fmt.Errorf("%w: %q: WithBatchIDColumn applies to NewUpsert; the offsets-in-sink progress row guards every batch", ErrConfig, tableName)
	}
	cfg.batchCol = "" // the progress row is the guard
	s := &Sink{pool: pool, target: table{schema: cfg.schema, name: tableName}, guard: g, cfg: cfg, scrub: g.scrub}
	s.ap = newApplier(s.target, &s.cfg)
	// ValidateSchema retries through the sink's own retrier (batches go
	// through the guard's); Stats reports the guard's counters, so both
	// count there.
	s.retry = retrier{cfg: &s.cfg, scrub: s.scrub, onWait: func() { g.count.retries.Add(1) }}
	return s, nil
}

// NewUpsert returns a sink that upserts each batch into table under
// WithKeyColumns (required), with no progress table. Every row records the
// batch that last wrote it in the batch id column (WithBatchIDColumn), and a
// row changes only for a batch at or after that one: a repeated batch
// rewrites the same values, and an older batch (a stalled driver's, late)
// never overwrites a newer one. It is exactly-once when every row carries
// the full value of its key (update or complete output mode); MergeAdd,
// which carries deltas, and WithProgressTable are refused.
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
		return nil, fmt.Errorf("%w: upsert into %q needs WithKeyColumns", ErrConfig, tableName)
	}
	for _, col := range cfg.mergeOrder {
		if cfg.merge[col] == MergeAdd {
			return nil, fmt.Errorf("%w: upsert into %q: column %q has an add merge, which would add a repeated batch twice; "+
				"use NewOffsetsInSink for deltas, or send full values", ErrConfig, tableName, col)
		}
	}
	if cfg.progressSet {
		return nil, fmt.Errorf("%w: upsert into %q keeps no progress table; WithProgressTable applies to NewOffsetsInSink", ErrConfig, tableName)
	}
	if isKey(cfg.keys, cfg.batchCol) || cfg.merge[cfg.batchCol] != MergeSet {
		return nil, fmt.Errorf("%w: upsert into %q: batch id column %q is also a key or merge column; name another with WithBatchIDColumn", ErrConfig, tableName, cfg.batchCol)
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
// only). An upsert sink keeps no progress: it returns an error wrapping
// errors.ErrUnsupported, which tells the engine not to compare it with the
// checkpoint.
func (s *Sink) LastBatchID(ctx context.Context) (int64, bool, error) {
	if s.guard == nil {
		return 0, false, fmt.Errorf("postgres: upsert into %s keeps no batch position: %w", s.target.sql(), errors.ErrUnsupported)
	}
	id, err := s.guard.Applied(ctx)
	if err != nil {
		return 0, false, err
	}
	return id, id >= 0, nil
}

// HighestBatchID reports, for an upsert sink, the highest batch id in the
// table's batch id column (read at start; without an index on the column
// that reads the table). Batches that wrote no row leave no trace, so it
// is only a lower bound of what the sink applied: the engine refuses a
// checkpoint that has not planned that batch (the guarded upsert would
// ignore the rows of its re-planned, lower batch ids). The offsets-in-sink
// sink answers its exact position through LastBatchID instead.
func (s *Sink) HighestBatchID(ctx context.Context) (int64, bool, error) {
	if s.guard != nil {
		return s.LastBatchID(ctx)
	}
	var id *int64
	err := s.pool.QueryRow(ctx, "SELECT max("+quote(s.cfg.batchCol)+") FROM "+s.target.sql()).Scan(&id)
	if err != nil {
		return 0, false, s.scrub.err(fmt.Errorf("postgres: read the newest batch id in %s.%s: %w", s.target.sql(), quote(s.cfg.batchCol), err))
	}
	if id == nil || *id < 0 {
		return 0, false, nil
	}
	return *id, true, nil
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
// creating the table first under WithCreateTables(true). A *ColumnError names
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
	return err // named and scrubbed by the retrier
}

// AddBatch writes batch batchID (see Write).
func (s *Sink) AddBatch(ctx context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) error {
	_, err := s.Write(ctx, batchID, schema, records)
	return err
}

// Write writes batch batchID in one transaction, retried as WithRetry says, and
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

// Guarantee reports contract.ExactlyOnce: the offsets-in-sink sink's
// progress row and the upsert sink's batch id column (with full values
// under a deterministic key, which NewUpsert requires) both make a
// repeated batch harmless and an older batch unable to overwrite a newer
// one.
func (s *Sink) Guarantee() contract.Guarantee { return contract.ExactlyOnce }
