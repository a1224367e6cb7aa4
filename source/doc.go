// Package source is the home of onceflow's inputs. Each subpackage
// implements contract.Source and, where it applies, SourceCheckpointer,
// SourceCommitter, AvailableNowSource, SourceIdentifier, SourceMetrics and
// Describer, and asserts so at compile time; none of them imports the
// engine.
//
//   - source/rate: a deterministic generator for demos, tests and
//     benchmarks; every row is a pure function of its offset.
//   - source/files: a landing directory of JSON-lines, CSV or Parquet files;
//     the files each batch took are logged in the checkpoint so a replay
//     reads exactly the same files.
//   - source/kafka: Kafka partitions through franz-go.
//
// What every source guarantees: offsets are encoded deterministically (the
// same position gives the same bytes), and Read of one [start, end) range
// emits the same rows in the same order every time it is called. Read
// releases each record after emit returns; a caller that keeps a record
// retains it.
package source
