// Package statestore keeps the durable, versioned state of one stateful
// operator partition: a key-value table whose keys and values are Arrow
// rows. The working copy lives in the operator (a hash table in package
// batch); this package is its log and its loader.
//
// It owns one folder of the checkpoint, state/<operator>/<partition>/, given
// to Open as a storage.Store already narrowed to it (storage.Sub), or a
// Group's view of it: a Group keeps the partitions' deltas of one batch in
// one bundle file, state/<operator>/deltas/<N>.delta (format version 3),
// which each partition's Store reads and purges as its own files. It knows
// nothing of operators, batches or sinks, and never imports the engine.
//
// # Versions
//
// Version N is the state after batch N; version -1 is the empty state
// before batch 0. Version N is version N-1 plus the changes of batch N,
// written by Commit as one delta file. Maintain writes a full snapshot of a
// committed version when one is due: at least SnapshotEvery (K) versions
// after the newest snapshot, and only once the deltas written since weigh
// SnapshotDeltaRatio of that snapshot's bytes (or SnapshotMaxEvery versions
// have passed), so that snapshots of a large state with few changes per
// batch cost in proportion to the changes, not to the state. Load(N) reads the
// newest snapshot at or before N and replays the deltas after it, in
// order; a later upsert of a key replaces its row, a delete removes it.
//
// CommitFull writes a delta marked full: its upserts are every live row of
// the version (the caller vouches for it). A full delta is a base like a
// snapshot: Load starts from the newest full delta after the newest
// snapshot, Maintain counts it as a snapshot (a state that changes whole
// every batch is never snapshotted, its deltas already being as large),
// and Purge drops what precedes it. Which deltas are full is cached in the
// Store as Commit writes them or a read finds them, so Maintain and Purge
// decide without reading files.
//
// # Lifecycle (the engine's duties, in order)
//
//  1. Open once per (operator, partition) and query start, with the key and
//     value schemas. The first Open records them in the folder; a later
//     Open with other schemas fails with *SchemaMismatchError and changes
//     nothing.
//  2. Load(last committed version) to rebuild the operator's table.
//  3. For each batch N: Commit(N, upserts, deletes) before the sink sees
//     batch N. A re-run of batch N after a crash commits N again, which
//     replaces the delta the crashed attempt left. Versions are committed
//     in order, and only the newest version is ever re-committed.
//  4. After commits/N is durable: Maintain(N) (may run in a background
//     goroutine while N+1, N+2, … are committed) and Purge(N).
//
// # Guarantees
//
//   - Commit and CommitFull write exactly one file and read none: the cost depends on the
//     changed rows, never on the size of the state.
//   - Every file is written whole through the store's atomic Put; a file
//     that is truncated, altered or not a state file fails the load with a
//     *CorruptionError (errors.Is ErrCorrupt) naming it. A gap in the chain
//     of deltas fails naming the missing file (errors.Is ErrMissing).
//   - Load's rows are in ascending key order (column by column, each in its
//     natural order, nulls first; docs/format/state.md), so the same state
//     loads in the same order whatever snapshots exist. Snapshots are
//     stored in that order too.
//   - Purge(c) keeps every file needed to load any version in
//     [c-MinVersionsToRetain+1, c], and every file of a version after c.
//   - Loaded records share the bytes read from the files (Arrow IPC
//     sections are decoded in place, after the checksum is verified), so
//     those buffers are Go memory, not the Allocator's.
//
// # Concurrency
//
// A Store holds no mutable state beyond a couple of spare encoding buffers
// Commit reuses, the cache of which deltas are full, and the versions of
// the Maintain passes in flight (a Purge leaves their files alone, so a
// pass that lags behind a full delta is not cut short; a pass that starts
// after a Purge dropped its version's files does nothing). Its methods are
// safe for concurrent use, with
// the limits the protocol implies: Maintain(c) and Purge(c) may
// run alongside Commit of versions after c; Purge(c') must not run while a
// Maintain(c) with c < c'-MinVersionsToRetain+1 is reading the files it
// may delete; two Commits of one version must not race.
//
// # On-disk layout
//
//	schema                          key and value schemas, written once
//	<N zero-padded to 20>.delta     changes of batch N
//	<N zero-padded to 20>.snapshot  every live row of version N
//
// Each file is an Arrow IPC stream (or two) inside a versioned envelope:
// magic "OFST", format version, kind, version, then length-prefixed
// sections and a CRC-32C trailer. docs/format/state.md gives the bytes.
package statestore
