// Package foreachbatch hands each micro-batch to user code: the batch id and
// the batch's Arrow records. It is the escape hatch for outputs onceflow has
// no sink for (an HTTP API, a ledger service, several tables at once).
//
// # The batch id is the whole contract
//
// The engine may call a sink's AddBatch(N) more than once with the same N and
// the same rows: after a crash between the sink's write and the engine's
// commits/N, or after a failed attempt. The batch id N is stable across those
// retries; the rows are the same. Exactly-once output is therefore the user
// function's job, and the only tool it needs is N:
//
//	The function must remember, atomically with its output, the highest batch
//	id it applied, and skip any batch id at or below it.
//
// A function that writes without that check delivers at least once: a crash
// at the wrong moment applies a batch twice. That is why New reports
// "at-least-once" unless the caller declares WithIdempotent().
//
// # The guard pattern
//
// For a transactional target, keep a progress row per job next to the data and
// move it in the same transaction as the rows:
//
//	BEGIN;
//	UPDATE progress SET batch_id = N WHERE job = 'j' AND batch_id < N;
//	-- 0 rows updated: batch N (or a later one) is already applied: ROLLBACK, done.
//	-- 1 row updated: apply the rows of batch N, then
//	COMMIT;
//
// Package foreachbatch/postgres implements exactly this for PostgreSQL
// (Guard.Run for your own statements, NewOffsetsInSink for whole tables, and
// NewUpsert when every row carries its full value under a deterministic key).
// For a target without transactions, write an idempotence key derived from N
// (and the row's position in the batch) with every effect, so the target can
// reject a second copy.
//
// # Lifecycle and concurrency
//
// New returns a Sink; the engine calls Start (when WithStart was given),
// ValidateSchema (when WithSchemaCheck was given), then AddBatch for batches in
// increasing order, one at a time. The Sink adds no locking of its own: the
// function is called on the engine's goroutine, one call at a time. The
// records are valid only during the call; retain them to keep them.
package foreachbatch
