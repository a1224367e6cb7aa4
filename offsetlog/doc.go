// Package offsetlog keeps durable entries keyed by batch id (0, 1, 2, …) over
// a storage.Store: the engine's offsets/ (the write-ahead plan of each batch)
// and commits/ (batch done), and any per-batch metadata a source or sink
// needs to remember.
//
// It knows nothing of Kafka, sinks or state: an entry is any value that
// encodes to JSON.
//
// # Guarantees
//
//   - Add(N, e) is put-if-absent: of concurrent writers of N exactly one
//     succeeds; adding the same bytes again is a no-op (a re-run that reached
//     the same decision); adding other bytes fails with ErrConflict.
//   - An entry is visible whole or not at all (the store's atomic writes).
//   - An entry that cannot be read back fails with a *CorruptionError
//     naming the file, never with a zero value.
//
// # On-disk format (version 1)
//
// One object per batch, named <dir>/<N zero-padded to 20 digits>, holding two
// lines: the format version ("v1") and the entry as one line of JSON:
//
//	v1
//	{"batchId":42,"sources":[...]}
//
// Safe for concurrent use.
package offsetlog
