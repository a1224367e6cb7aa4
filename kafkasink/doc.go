// Package kafkasink is onceflow's transactional Kafka sink: batch N of a
// query becomes visible to read_committed consumers exactly once, however
// often AddBatch(N) runs.
//
// # Protocol
//
// One Kafka transaction per batch holds the batch's output records and a
// batch marker: a record on a small compacted progress topic (default
// "_onceflow_progress", created at Start with cleanup.policy=compact if
// missing) keyed by the transactional id, value
// {"v":1,"batchId":N,"query":"…","sink":"…"} (docs/format/kafka.md). The
// records and the marker commit or abort together, so "marker N committed"
// and "batch N visible" are the same fact.
//
//  1. Start(ctx, queryID) takes the transactional id "onceflow-" + queryID
//     + "-" + name (name defaults to the output topic; WithTransactionalID
//     overrides). It is stable per query and sink and never shared by two
//     queries. Start checks the transaction timeout against the broker's
//     transaction.max.timeout.ms (DescribeConfigs) and refuses a larger
//     one naming both numbers, then runs InitProducerID: the broker bumps
//     the epoch of the id, which fences any older instance (a zombie), and
//     completes that instance's open transaction (aborted, or committed if
//     it had already prepared the commit). Only then does it read the
//     progress topic with read_committed, to the end seen after the
//     InitProducerID (waiting until no other producer's open transaction
//     holds the last stable offset below it), and keep the highest batch
//     id of a marker with its key. A marker of another query under the
//     same id (an overridden WithTransactionalID reused) stops Start with an
//     error naming both queries.
//  2. AddBatch(N): a committed marker at or above N means the batch is
//     already visible; the call is skipped and counted (Skipped). Otherwise
//     BeginTransaction, produce the records and the marker, flush, commit.
//     On any error the transaction is aborted, the producer dropped and the
//     error returned; the next AddBatch starts again from InitProducerID and
//     the marker, so a commit whose outcome was unknown (a lost EndTxn
//     response) is found and not repeated, and an aborted one is re-run.
//     PRODUCER_FENCED and INVALID_PRODUCER_EPOCH are kept as ErrFenced: a
//     newer instance owns the id and this one writes nothing more until
//     Start is called again. Any other error leaves the instance able to
//     retry: its next AddBatch runs InitProducerID, which in turn fences a
//     newer instance if one exists. That costs liveness, not correctness
//     (each instance reads the marker only after its own InitProducerID
//     completed every earlier transaction of the id), and the engine's
//     checkpoint lock keeps a second driver of one query from running.
//
// Fault points (internal/fault): kafkasink-after-produce (records and
// marker in an open transaction) and kafkasink-after-commit (committed,
// AddBatch not returned).
//
// # Transaction timeout and recovery
//
// A transaction left open by a crashed process is aborted by the broker
// once the transaction timeout passes (or at once, when a new instance
// with the same id runs InitProducerID). That is where Flink's Kafka sink
// loses data: it pre-commits a transaction per checkpoint and commits it
// only after the checkpoint completes; if the job is down longer than the
// transaction timeout between the two, the broker aborts a transaction
// whose input offsets are already checkpointed as consumed, and the
// records are gone. Raising the timeout narrows the window at the price of
// read_committed consumers stalling behind an open transaction for as long.
//
// Here the order is the other way round. Batch N's transaction is opened,
// written and committed inside one AddBatch call, before the engine writes
// commits/N; nothing is carried across a checkpoint. If the process dies
// with the transaction open, commits/N does not exist, so the engine re-runs
// batch N from its write-ahead-log entry on recovery, however long the
// downtime: the timed-out (or fenced) transaction simply aborted, and the
// re-run writes it again. The timeout then only bounds how long a crashed
// transaction can hold back read_committed consumers (and the progress read
// of the next Start), so it can stay short (default 60s): it must cover one
// batch's produce and commit, nothing more.
//
// # An abandoned transactional id
//
// The transactional id is derived from the query id and the sink's name
// (or set with WithTransactionalID). When it changes (a new name, a new
// id, a copied checkpoint), the new id fences nothing of the old one: a
// transaction the old id left open in a crash stays open until the
// brokers' transaction timeout aborts it, and read_committed readers of the
// output topic stall behind it (their last stable offset cannot pass its
// first record) for that long. FenceTransactionalID(ctx, oldID,
// WithBrokers(…)) ends it at once: it runs InitProducerID for the old id,
// which aborts the open transaction and bumps the id's epoch, so a zombie
// still holding the old id cannot commit either. Only fence an id no
// running sink uses: that sink would fail with ErrFenced until its next
// Start.
//
// # Encoding
//
// Keys come from WithKeyColumn (utf8, binary, or an integer as decimal text);
// without it records have no key. Values are either WithValueColumn's bytes
// (utf8 or binary) or, by default, a JSON object of all or the chosen
// columns in schema order: strings as JSON strings, integers as JSON
// numbers (int64 cents stay exact), floats in shortest form (NaN and
// infinities fail the batch), booleans, binary as base64, date32 as
// "2006-01-02", timestamps as RFC 3339 in UTC with microseconds
// ("2026-11-30T10:00:00.123000Z"; nanoseconds for timestamp[ns]), nulls as
// null. Every record carries the header onceflow-batch with the batch id.
// Record timestamps come from WithTimestampColumn, or else the producer's
// clock (Kafka metadata, not part of the row; it differs between attempts
// of a batch, of which only the committed one is visible).
//
// # At-least-once
//
// WithAtLeastOnce() turns transactions off: an idempotent producer, no marker,
// a re-run batch is written again. Guarantee reports which mode runs.
//
// # Lifecycle and concurrency
//
// The caller creates the sink with New, hands it to the engine, and closes
// it with Close after the query stops: the engine calls Start and AddBatch
// (in that order, one call at a time) and never Close. AddBatch calls are
// serialised; Start, AddBatch and Close may be called from different
// goroutines.
//
// # kfake
//
// The tests run against franz-go's kfake, which implements transactions,
// fencing, read_committed, DescribeConfigs and CreateTopics with configs.
// One difference from Kafka: the commit of a fenced zombie whose
// transaction the new instance's InitProducerID already aborted fails with
// INVALID_TXN_STATE rather than PRODUCER_FENCED, so it is not reported as
// ErrFenced; it still fails, and nothing the zombie wrote becomes visible.
package kafkasink
