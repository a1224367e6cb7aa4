// Package audit reconciles a query's committed output with its input: it
// recomputes, from the input and the query's checkpoint alone, what the
// output must hold per key, reads what the output does hold, and names the
// link of the exactly-once chain that a difference points at.
//
// # What is compared
//
// The query is taken to compute, per key, the sum of one value column of its
// input (the settlement shape: payments in, per-merchant sums out). The
// audit reads the checkpoint's write-ahead log without importing the engine:
//
//   - C is the last batch with commits/C. The expected result is the sum of
//     the input value per key over [start, end(C)), where end(C) is source
//     i's end offset in offsets/C and start is offsets/0's start offset if
//     that entry is still retained, else the source's initial offset (the
//     Report says which).
//   - A sink makes batch N visible before the engine writes commits/N, so an
//     output may legitimately hold batch C+1 when offsets/C+1 exists without
//     commits/C+1. The audit also computes the expected result at end(C+1)
//     and accepts a match against either; Report.MatchedBatch says which.
//
// Output semantics depend on the kind: Kafka records, file-sink (lake) rows
// and JSON-lines rows each carry a delta and are summed per key; a
// PostgreSQL table holds one cumulative row per key and its value is taken
// as is.
//
// A scaled-out query (package scaleout) has one checkpoint per task, each
// task reading one input partition, and its tasks share the outputs:
// audit each task with its checkpoint and Config.Keys accepting only the
// output keys of its partition.
//
// # Suspects
//
// Every difference is attributed to a link:
//
//   - SuspectSourceGap: the output lacks input rows (a key missing, or a
//     value below the input's sum).
//   - SuspectDoubleApplied: the output holds more than the input (a value
//     above the input's sum). When the output carries a batch id column, a
//     (key, batch) pair seen twice names the batch.
//   - SuspectUncommittedVisible: the output holds batch ids beyond C+1, or
//     keys the input never had.
//
// # Reads
//
// Kafka is read with read_committed through source/kafka (input: between the
// logged offsets; output: from the earliest offset to the last stable
// offset). A landing directory is read through source/files with the
// checkpoint's sources/<i>/ files log, so exactly the files each batch took
// are read. A file-sink table is read through its metadata log
// (filesink.ReadRows): only committed files. Nothing is written anywhere:
// the audit is safe to run next to a live query, though a live query makes
// its answer a snapshot that may race with the next commit.
//
// Run is safe for concurrent use with distinct Configs.
package audit
