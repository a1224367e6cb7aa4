// Package contract holds the interfaces between the engine and its plugins:
// what a source and a sink must do, and the optional capabilities the
// engine finds by type assertion. It is to onceflow what database/sql/driver
// is to database/sql: sources (source/…) and sinks (filesink, kafkasink,
// foreachbatch, memsink, consolesink, …) import it and assert their
// conformance,
//
//	var _ contract.Sink = (*Sink)(nil)
//	var _ contract.SinkStarter = (*Sink)(nil)
//
// and never import the engine. The package imports only Arrow, storage and
// the standard library, and holds no code beyond the Guarantee type: a test
// (internal/lint) fails when it grows another import. The engine re-exports
// every name here as an alias (engine.Source is contract.Source), so user
// code may use either.
//
// # Sources
//
// A Source (required) gives its schema, its first offset, the end of the
// next batch and the records of a range. What every source guarantees:
//
//   - offsets are the source's own JSON, encoded deterministically: the same
//     position always gives the same bytes, which is how the engine tells
//     "no new data" (end == start); the engine stores them verbatim in the
//     write-ahead log;
//   - Read of one [start, end) range emits the same rows in the same order
//     every time it is called, which is what makes a re-run of a batch after
//     a crash produce the same output;
//   - Read owns the records it emits and releases each after emit returns;
//     the engine retains what it keeps.
//
// Optional: SourceCheckpointer (the source keeps its own log in the
// checkpoint, opened before planning), SourceCommitter (acts after a batch
// commits; idempotent, since a crash can repeat it), AvailableNowSource
// (supports the AvailableNow and Scheduled triggers), SourceIdentifier (ties
// the checkpoint to what the source reads), SourceMetrics (figures for the
// progress record) and Describer.
//
// # Static tables
//
// A StaticTable is the static side of Stream.JoinStatic: a table read
// whole at a version it chooses (LatestVersion) and reads back
// (ReadVersion) the same, rows and order, for as long as the version can
// be read at all. Package statictable holds the lake and directory ones.
//
// # Sinks
//
// A Sink (required) adds batch N, exactly once in effect: AddBatch may be
// called again with the same batch id and the same rows after a crash or a
// failed attempt, and the sink makes the repeat harmless. The engine never
// calls AddBatch(N) before offsets/N is durable and calls batches in
// increasing order; it commits batch N only after every sink accepted it.
//
// Optional: SinkStarter (prepares before the first batch), SchemaValidator
// (refuses an output schema it cannot write, before any batch runs),
// SinkPosition (the newest batch id the sink applied, so the engine refuses
// a checkpoint older than the output), GuaranteeReporter (a sink below
// ExactlyOnce says so, and the engine refuses it unless the query allows
// AtLeastOnce) and Describer.
package contract
