// Package batch is the Arrow-columnar execution of one micro-batch:
// expressions, projection and filter, event-time window assignment, hash
// partitioning, and the vectorised hash group-by that merges a batch into a
// partition's running aggregates. Arrow's Go compute has no hash
// aggregation; this package has its own.
//
// It knows nothing of sources, sinks, checkpoints or batch ids: the engine
// feeds it records and keeps what it returns.
//
// # Expressions
//
// An Expr (Col, Lit, Add, Eq, And, Cast, If, Upper, DateTrunc, FormatTime,
// …) is bound once to an input schema by NewProjection or NewFilter, which
// type-check it and report errors naming the expression and the column.
// Apply evaluates a whole column at a time — arrow-go's kernels where they
// are right, typed loops elsewhere — never row by row through interfaces.
// Integer overflow and division by zero are errors naming the expression,
// the row and the operands: arithmetic on money never wraps silently. A
// null predicate row counts as false. Projection and Filter are safe for
// concurrent use.
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
// hash table from keys to group ids (specialised for a single int64 and a
// single string key) and typed accumulator slices indexed by group id.
// Merge updates every aggregate of a record in tight loops; Changes
// returns the touched groups' keys and accumulator state for the state
// store's delta; Output returns results (touched groups in first-touch
// order, or all groups); Load restores from state rows; Remove evicts.
// Integer sums that overflow fail the merge naming the column and group. A
// GroupBy is not safe for concurrent use: the engine runs one per
// partition, in parallel.
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
package batch
