// Package source is the home of onceflow's inputs. Each subpackage
// implements contract.Source and, where it applies, SourceCheckpointer,
// SourceCommitter, AvailableNowSource, SourceIdentifier, SourceMetrics and
// Describer, and asserts so at compile time; none of them imports the
// engine.
//
// What every source guarantees: offsets are encoded deterministically (the
// same position gives the same bytes), and Read of one [start, end) range
// emits the same rows in the same order every time it is called, or fails:
// a re-run of a batch never reads other data than the first attempt did.
// Bad input fails the batch with an error naming the source, the position
// and the reason, or goes to a dead-letter output when the user asked for
// one; nothing is dropped silently. Read releases each record after emit
// returns; a caller that keeps a record retains it.
//
// The sources, and what each adds:
//
//   - source/rate: a deterministic row generator for demos, tests and
//     benchmarks. Offset {"rows":N}. Every column of row o is a pure
//     function of o and the options (the start time is a fixed instant by
//     default); only LatestOffset looks at the clock, to pace how far a
//     batch reaches. No checkpoint state, nothing to close.
//   - source/nexmark: the Nexmark benchmark's people, auctions and bids.
//     Offset {"events":N}. Event n is a pure function of n and the options
//     (a generator seeded with n), as a flattened event row or, with
//     WithBidsOnly, a bid row keeping the full stream's numbering; bounded
//     with WithTotalEvents (an AvailableNow query ends), else paced by the
//     clock like rate. Also renders events as JSON for a Kafka producer.
//   - source/files: a landing directory of JSON-lines, CSV or Parquet
//     files. Offset {"logOffset":k}, an entry of the source's own files
//     log in the checkpoint, written before the engine's offsets/N: the
//     files batch k took, with size, modification time and XXH64, so a
//     re-run reads exactly the same bytes. A taken file that changes fails
//     the batch or the next plan (*ChangedError), or, with WithDeadLetter,
//     its bytes that no batch read are copied there. A name is never taken
//     twice (WithMaxFileAge bounds that memory). Committed files can be
//     archived or deleted, and the log compacts.
//   - source/kafka: Kafka partitions through franz-go, without a consumer
//     group. Offset {"<topic>":{"<partition>":next}}, the engine's offset
//     log being the only position; read_committed by default (the last
//     stable offset bounds a batch). Values that do not decode fail the
//     batch with a *DecodeError, or go to a dead-letter directory or,
//     exactly once, to a dead-letter topic.
//
// Parts the sources share live in source/internal: the offset codec of the
// single-integer offsets of rate, nexmark and files (offset), the options
// they have in common (options), and the clock pacing of the generators
// (pace).
package source
