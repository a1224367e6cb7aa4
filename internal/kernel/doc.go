// Package kernel is the engine's columnar execution of the stateful steps
// of one micro-batch: the row hash and hash partitioning, the vectorised
// hash group-by that merges a batch into a partition's running
// aggregates (key tables, typed accumulators, their state rows), the
// deduplication built on it, event-time window assignment, and the row
// filters these need. Arrow's
// Go compute has no hash aggregation; this package has its own.
//
// It implements what package batch names: batch.AggFunc and batch.Agg's
// output names, batch.WindowStart and batch.WindowEnd, and it returns
// batch's errors (ErrSumOverflow, ErrAggSchema, ErrAggUnsupported,
// ErrWindow), which its messages still begin with "batch:", so users
// branch on and read one vocabulary. An aggregate reaches it as an Agg over
// It knows nothing of sources, sinks, checkpoints or batch ids: the engine
// feeds it records and keeps what it returns.
//
// # Partitioning and group-by
//
// HashRows hashes key columns with fixed seeds: the hash of a row is the
// same in every process and on every machine, because Partition assigns
// rows to the P state partitions of the checkpoint by it, and P is fixed at
// a query's first batch. Changing the hash function changes the checkpoint
// format (golden values in the tests pin it).
//
// A GroupBy is one partition's state of one operator: an open-addressing
// hash table from keys to group ids (keytable.go; specialised for one
// fixed-width key of at most 8 bytes, keytable_u64.go, and for byte-string
// and multi-column keys, keytable_bytes.go, whose row encoding is
// keycodec.go) and typed accumulator slices indexed by group id. Merge
// updates every aggregate of a record in tight loops; Changes returns the
// touched groups' keys and accumulator state for the state store's delta;
// Output returns results (touched groups in first-touch order, or all
// groups); ChangesOutput and StateOutput build the changes (or the whole
// state) and the touched groups' output together, the output's key
// columns and the results that equal a state column (count, sum, min,
// max, first, last) being slices of the state's arrays, never the
// accumulators' own memory; Load restores from state rows; Remove evicts. Integer sums that
// overflow fail the merge naming the column and group. MergeState folds
// another GroupBy's state rows (a partial aggregation of some rows) into
// the groups as if the rows were merged, where Combinable says it is
// exact (counts, integer sums and averages, min, max, first, last); Reset
// empties a GroupBy for reuse; Partitioner is Partition with its scratch
// kept between calls. A GroupBy is not
// safe for concurrent use: the engine runs one per partition, in parallel.
//
// # Deduplication
//
// Dedup keeps, per key, a running count, this batch's count and the first
// value of every other column in a GroupBy; FirstSeen emits the first row
// of each key new in the batch, in the input's columns.
//
// # Windows
//
// WindowAssigner adds window_start and window_end columns for tumbling and
// sliding windows aligned to the Unix epoch, repeating a row once per
// window that covers it; a row without an event time is an error, never
// dropped silently.
//
// Every function that allocates Arrow memory takes a memory.Allocator and
// returns records the caller releases.
package kernel
