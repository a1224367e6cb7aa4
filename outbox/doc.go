// Package outbox performs a query's side effects exactly once as the
// receiver sees them: it reads committed intent records and POSTs each to
// an HTTP endpoint with an Idempotency-Key derived from the intent's id.
//
// A processor (engine.Processor) must not call an HTTP endpoint itself: a
// batch that is re-run after a crash would call it again. It emits an
// intent row instead, the query writes the intents through a sink that
// commits them with the batch (kafkasink's transactions), and a Worker of
// this package delivers them.
//
// # Protocol
//
// The steps below are for Kafka; a PostgreSQL table works the same way
// with seq as its one partition's offset (see below).
//
//  1. Start: the worker reads its checkpoint (an offsetlog under
//     <checkpoint>/positions/, one entry per delivered round) and takes the
//     newest entry's position per partition of the intents topic (offset 0
//     without one). Never a consumer-group offset: the checkpoint is the
//     only authority, as the engine's offsets/ are for a query.
//  2. Read: a Kafka client with no group, isolation read_committed, assigned
//     every partition at the checkpoint's positions: records of aborted
//     transactions (a query batch that crashed before its commit) are
//     never seen.
//  3. Deliver, per polled round, in partition then offset order: POST the
//     record's value (Content-Type application/json) with the headers
//     Idempotency-Key (IdempotencyKey of the intent id) and
//     Onceflow-Intent-Id. A 2xx answer is a delivery. Anything else (an
//     error, a timeout, another status) is retried after a backoff that
//     doubles from WithBackoff's base up to its cap; after WithMaxAttempts
//     failed attempts the intent goes to the dead letter (WithDeadLetter,
//     by default a JSON file under <checkpoint>/deadletter/, written once)
//     and the worker goes on.
//  4. Checkpoint: after the round, the next entry of positions/ records
//     each partition's next offset (put-if-absent; old entries purged).
//
// A crash between 3 and 4 repeats the round's POSTs with the same
// Idempotency-Key, so a receiver that keeps the keys it has served (Stripe,
// Adyen and most payment APIs do) applies each intent once. Nothing is
// lost: positions move only after a delivery or a dead letter.
//
// # A PostgreSQL outbox table
//
// WithPostgres reads intents from a table instead of a topic: a table with
// a seq bigserial column that the query writes through the offsets-in-sink
// protocol (foreachbatch/postgres: NewOffsetsInSink, or inserts inside
// Guard.Run), so a batch's intents commit in the same transaction that
// advances its progress row, and a repeated batch adds none. The worker
// reads rows with seq at or above its position, in seq order, and POSTs
// each row as JSON (row_to_json). Only committed rows are visible; the
// guard's lock on the progress row orders the writing transactions, so seq
// grows in commit order (write the table under one job only). The position
// is partition "0" of the checkpoint, holding the next seq.
//
// # Intent ids
//
// The id is the string field named by WithIDField ("id") of the record's
// JSON value; a record without one uses "<topic>/<partition>/<offset>",
// which is stable too (a committed record never moves). Give intents an id
// derived from what they mean (card and window, order and step) so that
// the same intent emitted by two different batches still shares a key.
//
// # Metrics and lag
//
// WithRegisterer registers, on the caller's registry (never a global one),
// onceflow_outbox_delivered_total, onceflow_outbox_failed_attempts_total,
// onceflow_outbox_dead_lettered_total and onceflow_outbox_lag{partition}
// (the read_committed end offset minus the worker's position; a committed
// transaction's marker counts as one). Stats returns the same figures.
//
// # Secrets
//
// The endpoint's user info and WithHeader values never appear in errors,
// logs or dead letters.
//
// A Worker is used by one goroutine: New, Run (until its context ends or
// an error), Close.
package outbox
