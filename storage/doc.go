// Package storage moves bytes: it owns the flat, named objects that make up a
// checkpoint (offsets/N, commits/N, state files, sink logs) and the
// guarantees the exactly-once protocol builds on. It knows nothing of
// batches, sources or sinks.
//
// # Names
//
// An object name is a slash-separated relative path ("offsets/00000042").
// It never begins or ends with "/", has no empty, "." or ".." element, no NUL
// or backslash, and never ends in ".tmp" (reserved for the local backend's
// temporary files); anything else is rejected with an error wrapping
// ErrBadName. List takes a prefix that need not end at a folder boundary:
// "offsets/000" matches "offsets/0001". Sub gives a view of a store in which
// every name is relative to a folder.
//
// # Guarantees every backend keeps
//
//   - Whole-object visibility: a reader sees an object entirely or not at
//     all; Put over an existing object shows the old bytes or the new ones,
//     never a mix, to concurrent readers and after a crash.
//   - Put-if-absent: of any number of concurrent PutIfAbsent calls for one
//     name, in one process or many, exactly one succeeds and its bytes are
//     the object's; the others get an error wrapping ErrExist. An ambiguous
//     failure (a timeout after the server stored the object, an SDK retry of
//     a request that had in fact succeeded) can also surface as ErrExist to
//     the caller whose bytes are stored: callers that must know compare the
//     stored bytes with their own, as offsetlog.Log.Add does.
//   - Durability: once PutIfAbsent, Put or Delete returns nil, the change
//     survives a crash of the process or the machine. The one exception is
//     the optional VolatilePutter (PutVolatile, Local has it): atomic for
//     readers, not durable, for objects no recovery reads. The other is a
//     Put under a SyncGroup (WithSyncGroup, Local only): it returns with
//     the object written aside but neither in place nor durable, and the
//     group's Sync puts all of them in place and makes them durable at
//     once (the engine writes a batch's state files that way, and syncs
//     them while the sinks run).
//   - A missing object is an error wrapping ErrNotExist from Get; a missing
//     name given to Delete is not an error.
//   - No error message contains a credential; URL returns the location
//     without one.
//
// # Local backend (OpenLocal)
//
// Each object is one file below the root. A write goes to
// "<name>.<pid>.<seq>.tmp" in the object's own directory, is written and
// fsynced and closed; then PutIfAbsent links it to the final name with
// link(2), which fails if that name exists (so the race is decided by the
// kernel, across processes too), and Put renames it over the final name with
// rename(2), which replaces atomically. The temporary name is removed and the
// directory fsynced. Directories created on the way are made durable by
// fsyncing each new directory's parent, once per directory per process.
// OpenLocal fsyncs the root and its parent and deletes leftover temporary
// files, so a crash at any point leaves the old object or the new complete
// one and, at worst, a temporary file that List never shows and the next
// OpenLocal removes. OpenLocal leaves alone the temporary files whose pid
// is another live process, so opening a directory that a running process
// writes into (a second driver about to find the checkpoint locked) does not
// break that writer. Two stores on one directory in one process are not
// told apart that way: opening the second may fail a write of the first
// (with an error, never with a partial object).
// A name cannot be both an object and a folder on a local disk ("a" and
// "a/b"); object stores allow it. All file-system calls go through FS, which
// tests replace to inject faults and to simulate a crash.
//
// # S3 backend (package s3store)
//
// Object storage has no rename, and none is used: Put is one PutObject,
// PutIfAbsent is PutObject with "If-None-Match: *" (a conditional create
// decided by the server; 412 and 409 mean ErrExist), objects above a size
// threshold go through a multipart upload whose completion carries the same
// condition. A reader sees an object only once its upload completed.
//
// # Concurrency and lifecycle
//
// A Store is safe for concurrent use by many goroutines; the local backend
// also arbitrates between processes sharing a directory. Open a store with
// OpenLocal, Open (by location) or a backend's own constructor, use it, and
// Close it; views made with Sub need no closing of their own.
package storage
