// Package kafka is onceflow's Kafka source: it reads partitions by offset
// range with franz-go, without a consumer group. The only authoritative
// position is the one the engine records in its offset log; nothing is
// committed to Kafka.
//
// # Positions
//
// Offsets are JSON, {"payments":{"0":42,"1":17}}: for each topic and
// partition the next offset to read. Topics sort by name and partitions by
// number, so one position always has one encoding (see Offsets and
// docs/format/kafka.md).
//
// # Lifecycle (the engine's calls, in order)
//
//  1. InitialOffset resolves the starting position (Earliest, Latest,
//     SpecificOffsets, AtTimestamp) once, for batch 0.
//  2. LatestOffset(start) plans the next batch's end: for each partition
//     the last stable offset (read_committed, the default) or the high
//     watermark (ReadUncommitted), capped by MaxOffsetsPerTrigger, spread
//     over partitions in proportion to lag with at least one offset per
//     lagging partition, and by PrepareAvailableNow's snapshot. Topics
//     matching TopicPattern and partitions created since start are found
//     here, so the batch's write-ahead-log entry records them; a partition
//     absent from start is read from offset 0. When nothing is new the
//     answer is start itself.
//  3. Read(start, end) emits [start, end) as Arrow records: partitions in
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
// (binary with ValueRaw, the default; utf8 with ValueString) or, with
// ValueJSON(schema), the schema's fields as top-level columns.
//
// # Bad values
//
// A value that does not decode fails the batch with a *DecodeError naming
// topic, partition, offset and field, unless a dead-letter output is set:
//
//   - DeadLetterDir: the bad records of one partition range go to one
//     JSON-lines file named by DeadLetterFileName(topic, partition, from,
//     to), written to a temporary file, fsynced and renamed. A re-run of the
//     batch (same range, from the offset log) rewrites the same file with
//     the same content.
//   - DeadLetterTopic: each bad record is produced, before Read returns,
//     with key "topic/partition/offset" of the original, its value and
//     headers, plus headers onceflow-error (the reason), onceflow-source
//     and onceflow-original-key. A re-run after a crash produces the same
//     records again with the same keys: the dead-letter topic should be
//     compacted (cleanup.policy=compact), or its readers deduplicate by
//     key. This is idempotent keying rather than a transaction: a dead
//     letter may be visible before its batch commits, never twice once
//     compacted, and never lost.
//
// # Lost data
//
// A recorded offset below a partition's log start offset (retention,
// DeleteRecords), a topic or partition that was deleted, or a partition
// that now ends below the recorded offset is data loss. With
// FailOnDataLoss(true), the default, the call fails with a *DataLossError
// naming topic, partition, the expected and the available offsets. With
// false, the gap is skipped, logged to the Logger and counted in Stats.
//
// # Concurrency
//
// The engine calls one method at a time; Stats may be called concurrently
// with any of them. Close releases the client.
package kafka
