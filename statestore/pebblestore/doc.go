// Package pebblestore is a disk-backed state backend: the state of one
// (operator, partition) kept in a pebble LSM on local disk, so that a
// query's state may be far larger than its memory. It is its own Go module
// (pebble brings cgo zstd and cockroachdb/errors), which the engine never
// imports: a program passes a Backend to engine.WithStateStore.
//
// # Durability: the same delta files
//
// The LSM is a working copy, a cache; pebble's WAL is off. What makes
// version N durable is the delta file statestore writes for it, in
// statestore's format, in the checkpoint folder (changelog checkpointing,
// as Spark's RocksDB store does). The LSM records, beside the rows, the
// version it holds and the SHA-256 of that version's delta file, so a
// working copy is used only if it holds a version at or before the one
// asked for and the delta it applied is the one the folder holds now (not
// one a crashed attempt wrote and its re-run replaced).
//
// # Snapshots: content-addressed SSTs, manifest last
//
// Every UploadEvery versions, Maintain flushes the memtables and links the
// LSM's files into a checkpoint directory (holding off commits only that
// long), uploads each SST the folder does not hold yet as
// sst/<sha256>.sst, and then writes the manifest <N>.pebble listing every
// file of the LSM at version N (small files inline). A file uploaded
// before is referenced, never uploaded again. docs/format/pebble.md gives
// the format.
//
// # Restore (any machine)
//
// Restore(N): the local copy when usable (then the deltas after it), else
// the newest manifest at or before N whose version's delta still has the
// SHA-256 it names, downloaded and checked, then the later deltas. A folder
// of the in-memory backend is taken over: its newest snapshot file, then
// its deltas. Manifests after N are an uncommitted attempt's and are
// deleted.
//
// # Lifecycle (the engine's duties, in order)
//
//  1. Open per (operator, partition), with the schemas; Restore(last
//     committed).
//  2. Per batch N: Lookup(the batch's keys) — sorted, so reads walk the
//     LSM forward — then Commit(N, upserts, deletes), before the sink sees
//     N. Commit writes the delta, then applies it; its cost depends on
//     the changed rows only. Scan(lo, hi) reads a key range;
//     ScanBefore(bound) the rows the time index puts below a time
//     (eviction by the watermark).
//  3. After commits/N: Maintain(N) (may run in the background) and
//     Purge(N), which keeps what [N-MinVersionsToRetain+1, N] needs: the
//     newest manifest at or before the oldest retained version, the
//     manifests after it, the deltas from its version on, and the SSTs
//     they name.
//  4. Close flushes and closes the LSM.
//
// # Time index
//
// A Store opened with Options.TimeIndex (a timestamp column, key or value)
// also keeps, in the same LSM and the same pebble batches as the rows, an
// index ordered by that column, so ScanBefore(bound) reads the rows a
// watermark expires in O(those rows): the engine's windows, event-time
// group-bys and deduplications evict through it. It is derived from the
// rows (rebuilt once when a working copy lacks it or indexes another
// column); the folder's files do not change. docs/format/pebble.md gives
// its keys.
//
// # Memory
//
// A Backend shares one block cache among its Stores; each Store has at
// most two memtables. Memory is about CacheSize + 2·MemTableSize·stores,
// plus the Go memory of the batch being merged.
//
// # Concurrency
//
// A Store's methods are safe for concurrent use: commits, lookups and
// scans serialize on the working copy; Maintain runs beside them and
// blocks them only while it flushes and links files; uploads, purges and
// restores serialize among themselves.
//
// # Types
//
// Keys are statestore's key types; values (and keys) are kept in a row
// encoding that carries booleans, fixed-width types, strings, binaries,
// and structs and lists of them; Open refuses other types, naming the
// column.
package pebblestore
