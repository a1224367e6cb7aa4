// Package postgres writes onceflow batches into PostgreSQL exactly once, for
// foreachbatch users and as ready-made sinks. pgx stays inside this package:
// the rest of onceflow never sees it.
//
// # Three tools
//
// Guard (NewGuard) is the offsets-in-sink protocol for any statements.
// Guard.Run(ctx, N, fn) runs one transaction:
//
//	UPDATE progress SET batch_id = N, updated_at = now()
//	  WHERE job = $job AND batch_id < N
//	-- no row moved: INSERT … ON CONFLICT (job) DO NOTHING tells a missing
//	-- row (now created at N) from a batch already applied (roll back,
//	-- Result.Skipped); otherwise:
//	fn(ctx, tx)  -- the batch's writes
//	COMMIT
//
// Progress and effects commit together or not at all, so a repeated batch
// id is always recognised.
//
// NewOffsetsInSink is the Guard plus the bulk table writer below. Any merge
// is exactly-once under it, deltas (MergeAdd) included.
//
// NewUpsert is the bulk table writer with a guard in every row instead of a
// progress table. Each row records the batch that last wrote it in a bigint
// column (default onceflow_batch_id, see WithBatchIDColumn), and
//
//	INSERT … ON CONFLICT (keys) DO UPDATE SET c = EXCLUDED.c, …,
//	  onceflow_batch_id = EXCLUDED.onceflow_batch_id
//	  WHERE dst.onceflow_batch_id IS NULL OR dst.onceflow_batch_id <= EXCLUDED.onceflow_batch_id
//
// changes a row only for that batch or a later one. A repeated batch
// rewrites the same values; an older batch finishing late (a stalled
// driver, a zombie on a checkpoint without a lock) cannot roll a row back
// to older totals. That makes it exactly-once for rows that carry full
// values under a deterministic key (update or complete output mode). It
// refuses MergeAdd, which would count a repeated batch twice. ValidateSchema
// refuses a table without the column and prints the ALTER TABLE that adds
// it; LastBatchID is the column's maximum, so the engine refuses a new
// checkpoint on a table an older query wrote (its rows would be ignored up
// to that id). Layout: docs/format/pg-upsert.md.
//
// Sink.Apply(ctx, tx, N, schema, records) is the table writer on its own, for
// a foreachBatch function that writes several tables under one Guard.Run.
//
// # The table writer
//
// A batch goes in with four steps, whatever its size. First, in one round
// trip, LOCK TABLE target IN ACCESS SHARE MODE (only ALTER TABLE and DROP
// conflict with it, so the columns cannot change until COMMIT) and a read of
// the target's columns: when they differ from the ones the plan was made for
// (the table was altered while the query ran), the batch is planned and
// checked again like a new one, so a compatible change (a widened type, a
// new nullable column) is followed and an incompatible one (a dropped or
// narrowed column, a new NOT NULL column without a default) fails the batch
// with a *ColumnError before anything is written. Then a temporary stage
// table (CREATE TEMPORARY TABLE … ON COMMIT DROP AS SELECT <columns> FROM
// <target> WITH NO DATA, so it has the target's column types), a binary COPY
// of every row into it (pgx CopyFrom), and one
//
//	INSERT INTO target AS dst (cols) SELECT cols FROM stage
//	ON CONFLICT (keys) DO UPDATE SET c = EXCLUDED.c, …
//
// MergeAdd columns become c = COALESCE(dst.c + EXCLUDED.c, dst.c, EXCLUDED.c):
// a NULL delta adds nothing, and a NULL stored value counts as absent.
// Without WithKeyColumns the INSERT has no ON CONFLICT (append).
//
// Two rows with the same key in one batch: when every non-key column is a
// MergeAdd, the INSERT groups the stage by key and sums the deltas (the
// result is the same as applying the rows one by one; only a batch that does
// hold a repeated key pays for the grouping). Otherwise the batch
// fails with ErrDuplicateKey naming the key and the two row numbers, before
// anything is written: with set merges the winner would be arbitrary. A NULL
// key fails the batch too.
//
// # Types
//
// Each output column must exist in the table under the same name, with a
// compatible type, and every other column of the table must be nullable or
// have a default; ValidateSchema (or the first batch) checks the catalog,
// every batch checks it again (see above), and a mismatch fails with a
// *ColumnError naming the column, the Arrow type and the PostgreSQL type. WithCreateTables(true) creates a missing table with the first
// type of each row below.
//
//	Arrow               PostgreSQL (accepted)
//	int8, int16, uint8  smallint (integer, bigint, numeric)
//	int32, uint16       integer (bigint, numeric)
//	int64, uint32       bigint (numeric)
//	uint64              numeric(20,0) (numeric)
//	float32             double precision (real)
//	float64             double precision
//	decimal128(p,s)     numeric(p,s) (numeric with scale >= s and room for p-s digits)
//	utf8, large_utf8    text (varchar)
//	bool                boolean
//	timestamp[unit,tz]  timestamp with time zone (timestamp without time zone when tz is empty)
//	date32              date
//
// Integers only widen, decimals are never rounded, and timestamps keep
// every digit: timestamp[ns] into timestamptz (which keeps microseconds), or
// any unit into timestamp(p) with fewer digits, is refused naming the
// column, unless WithTruncateTimestamps allows truncation toward the past;
// keys that become equal then fail the batch with ErrDuplicateKey. Nulls
// stay NULL.
//
// # Names and secrets
//
// Table, schema and column names are identifiers, always quoted
// (pgx.Identifier.Sanitize); no SQL is built from anything else, and values
// travel as parameters or COPY data. "a.b" is a table named a.b; use
// WithTableSchema to name a schema. No error returned or line logged contains
// the connection's password: the pool's password is removed from every
// error text (Connect does the same for a DSN).
//
// # Tables
//
// The progress table (default onceflow_progress, see WithProgressTable) is
//
//	CREATE TABLE onceflow_progress (
//	    job        text PRIMARY KEY,  -- one row per job; jobs may share the table
//	    batch_id   bigint NOT NULL,   -- last batch applied, -1 before the first
//	    updated_at timestamptz NOT NULL)
//
// created by Start under WithCreateTables(true) (off by default: a missing table
// is an error that prints this statement).
//
// # Failures and retries
//
// Errors are told apart by SQLSTATE class. A batch transaction that fails
// because the connection was lost (pgconn's SafeToRetry, network errors,
// class 08), the server shut the session down or timed it out (57P01,
// 57P02, 57P03, 57P05, 25P03), ran short of resources (class 53), a
// statement was cancelled (57014), or the transaction lost a serialization
// (40001), deadlock (40P01) or lock-timeout (55P03) race is run again from
// BEGIN, after 100ms, 200ms, … capped at 5s, at most 5 attempts in all (see
// WithRetry). That is safe even when a COMMIT's outcome is unknown: the
// guard sees a batch that did commit as applied. When the attempts run out
// the error (ErrRetriesExhausted) goes to the engine, which stops; on
// restart the engine repeats the batch and the guard keeps it exactly-once.
//
// An error the same batch meets on every run stops it at the first attempt
// with ErrRejected, naming the batch, the table, the SQLSTATE and its class,
// and PostgreSQL's detail: constraint violations (23), data exceptions (22),
// cardinality (21000, an ON CONFLICT that would change one row twice),
// undefined or forbidden objects (42), unsupported features (0A), errors
// raised in triggers and routines (P0, 38, 39, 2F), a deferred constraint at
// COMMIT (40002). Restarting cannot help; fixing the rows, the table or its
// triggers can. Other errors are returned at once too, without that label.
//
// Fault points (internal/fault) mark the protocol's steps for crash tests:
// pg-before-begin, pg-after-progress, pg-after-rows (before COMMIT) and
// pg-after-commit.
//
// # Lifecycle and concurrency
//
// New… validates the options; Start (offsets-in-sink) prepares the progress
// table and the job's row; ValidateSchema checks (or creates) the target
// table; AddBatch writes batches. The pool belongs to the caller and is never
// closed here. A Sink's AddBatch is meant for one goroutine at a time (the
// engine's driver); Guard, Apply and Stats are safe for concurrent use.
// Skipped batches and retries are counted in Stats and logged to the WithLogger
// option (silent by default).
package postgres
