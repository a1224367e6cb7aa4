// Package kafka is onceflow's Kafka source: it reads partitions by offset
// range with franz-go, without a consumer group. The only authoritative
// position is the one the engine records in its offset log; nothing is
// committed to Kafka.
//
// # Positions
//
// A position is JSON, version 2:
// {"v":2,"topics":{"payments":{"id":"<topic id>","partitions":{"0":42,"1":17}}}}:
// for each topic its id and, per partition, the next offset to read; the
// end of a batch that adds partitions also says where each of them starts
// ("from"). Topics sort by name and partitions by number, so one position
// always has one encoding. Version 1, the bare {"payments":{"0":42}} of
// checkpoints written before, is still read (see Position and
// docs/format/kafka.md).
//
// WithPartitions restricts a source to some partition numbers of each topic
// it reads: the others are never listed into a position, planned or read.
// It is how package scaleout gives one task its partition; the partitions
// are part of the source's identity (SourceID), so a checkpoint of one
// task is never resumed by a source of another.
//
// # Lifecycle (the engine's calls, in order)
//
//  0. OpenCheckpoint (with WithDeadLetterTopic only) loads or creates the
//     dead-letter transactional id and starts the dead-letter producer
//     (see Bad values).
//  1. InitialOffset resolves the starting position (Earliest, Latest,
//     SpecificOffsets, AtTimestamp) once, for batch 0.
//  2. LatestOffset(start) plans the next batch's end: for each partition
//     the last stable offset (read_committed, the default) or the high
//     watermark (WithReadUncommitted), capped by WithMaxOffsetsPerTrigger, spread
//     over partitions in proportion to lag with at least one offset per
//     lagging partition, and by PrepareAvailableNow's snapshot. Topics
//     matching WithTopicPattern and partitions created since start are found
//     here, so the batch's write-ahead-log entry records them, starting at
//     their log start offset (recorded as "from", so a re-run reads the
//     same range). Each topic's id is recorded; a topic of start whose id
//     changed was deleted and created again (see Lost data). When nothing
//     is new the answer is start itself.
//  3. Prefetch(start, end), optional, between planning and reading (the
//     engine calls it while it writes the batch's write-ahead entry, or
//     the previous batch's commit): loads the leaders and sends every
//     partition's first fetch at once, and keeps the answers for the Read
//     of exactly that range. Read returns the same rows with or without
//     it; only small ranges (at most WithRowsPerRecord offsets) are
//     prefetched.
//  4. Read(start, end) emits [start, end) as Arrow records: partitions in
//     order, records in offset order, with direct Fetch requests to each
//     partition's leader. Termination is by offset: the fetch position
//     moves past transaction control markers and aborted records even
//     though they are never delivered, so a range that ends with them
//     still ends. The same range always yields the same rows.
//
// # Rows
//
// Columns: key (binary), the value columns, topic (utf8), partition
// (int32), offset (int64), timestamp (timestamp[ms, UTC]), headers
// (list<struct<key utf8, value binary>>). The value columns are "value"
// (binary with WithValueRaw, the default; utf8 with WithValueString) or, with
// WithValueJSON(schema), the schema's fields as top-level columns.
//
// # Bad values
//
// A value that does not decode fails the batch with a *DecodeError naming
// topic, partition, offset and field, unless a dead-letter output is set:
//
//   - WithDeadLetterDir: the bad records of one partition range go to one
//     JSON-lines file named by DeadLetterFileName(topic, partition, from,
//     to), written to a temporary file, fsynced and renamed. A re-run of the
//     batch (same range, from the offset log) rewrites the same file with
//     the same content.
//   - WithDeadLetterTopic: each bad record is produced to the topic with key
//     "topic/partition/offset" of the original, its value, timestamp and
//     headers, plus headers onceflow-error (the reason), onceflow-source
//     (the same "topic/partition/offset") and onceflow-original-key (when
//     the original had a key).
//
// The dead-letter topic is exactly-once for read_committed readers. The
// dead letters of one Read (every partition range of the batch) are
// produced in one Kafka transaction, after the last row is emitted and
// before Read returns, together with one progress marker per source
// partition on a compacted progress topic (WithDeadLetterProgressTopic,
// default "<dead-letter topic>-progress", created if missing). The marker
// says: the dead letters of every offset below End are committed. Before
// producing, Read drops the dead letters below the partition's committed
// marker, so a batch that runs again after a crash (the same range, from
// the engine's offset log) produces nothing twice:
//
//   - crash before the commit: the open transaction is never visible under
//     read_committed; the next process's InitProducerID aborts it (or the
//     broker does at WithDeadLetterTransactionTimeout), and the re-run
//     produces the dead letters once;
//   - crash after the commit, before the engine's commits/N: the re-run
//     finds the marker and produces nothing (Stats.DeadLettersSkipped);
//   - a transaction that fails before its commit is sent is tried once
//     more in the same Read with a new producer (the brokers forget a
//     transactional id idle for transactional.id.expiration.ms, a week by
//     default, so the first bad value after a quiet week meets that);
//   - a failed or unknown commit fails the Read; the next Read starts a new
//     producer, which completes the old transaction, and reads the markers
//     again before deciding;
//   - a zombie (an older process still running) is fenced: the transactional
//     id is stable, so the new process's InitProducerID bumps the epoch and
//     the zombie can no longer commit; a Source that sees itself fenced
//     fails every later Read with ErrFenced, until OpenCheckpoint (the
//     engine's restart of the query) takes the id over again.
//
// A marker names the source topic's id too: the markers of a topic that was
// deleted and created again do not cover the new topic's offsets. A reader
// with read_uncommitted sees the records of aborted attempts as well.
//
// The transactional id is WithDeadLetterTransactionalID when set; otherwise
// OpenCheckpoint creates one ("onceflow-deadletter-" and 24 random hex
// digits) on the query's first start and keeps it in the source's folder of
// the checkpoint, so it is stable across restarts and differs between
// checkpoints (a copied checkpoint shares it: the copy and the original
// fence each other). Without either, Read fails with ErrNoTransactionalID.
// OpenCheckpoint also starts the producer, so a restarted query fences its
// zombie before planning, and checks the transaction timeout against the
// brokers' transaction.max.timeout.ms (when the user may describe the
// cluster's configs; otherwise InitProducerID refuses a larger timeout).
// It creates the progress topic only when it is missing, so a user who
// may not create topics can run on one the operators created.
//
// # Lost data
//
// A recorded offset below a partition's log start offset (retention,
// DeleteRecords), a topic or partition that was deleted, a partition that
// now ends below the recorded offset, or a topic whose id differs from the
// recorded one (deleted and created again under the same name) is data
// loss. With WithFailOnDataLoss(true), the default, the call fails with a
// *DataLossError naming topic, partition, the expected and the available
// offsets, or, for a topic created again, both topic ids. With false, the
// gap is skipped, logged to the WithLogger logger and counted in Stats
// (DataLossGaps, SkippedOffsets); a topic created again is read again from
// its earliest offset, logged and counted in Stats.TopicsRecreated (the
// "topicsRecreated" figure of the progress metrics). A position of version
// 1 has no ids, so a topic recreated before the upgrade goes unnoticed; the
// first end planned after it records the ids.
//
// # Checkpoint folder
//
// With WithDeadLetterTopic and no WithDeadLetterTransactionalID, the source keeps
// one object in its folder of the checkpoint, written once with
// put-if-absent: DeadLetterIDFile ("deadletter.json"),
// {"v":1,"transactionalId":"onceflow-deadletter-<24 hex digits>"}.
//
// # Progress markers
//
// A marker on the progress topic has key
// "<transactional id>/<topic>/<partition>" and the JSON value
// {"v":1,"transactionalId":…,"topic":…,"topicId":"<32 hex digits>",
// "partition":…,"end":…,"source":"kafka[…]"}. The newest committed marker of
// a key wins, as compaction keeps it. Every marker goes to partition 0
// of the progress topic, so one key's markers stay in one log in commit
// order even when partitions are added to it. The source reads the markers
// read_uncommitted with the transaction control records and keeps only
// committed ones, so an open transaction of another query sharing the
// topic never delays it.
//
// # Concurrency
//
// The engine calls one method at a time; Stats may be called concurrently
// with any of them. Close releases the clients.
package kafka
