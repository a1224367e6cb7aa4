// Package checkpoint owns the layout and the file formats of a query's
// checkpoint, and reads a checkpoint without changing it.
//
// The layout, every name built by the functions of layout.go and nowhere
// else:
//
//	<checkpoint>/
//	  metadata                     Metadata (and, in a fork, ForkedFrom); written once
//	  offsets/<20-digit N>         OffsetsEntry: the write-ahead plan of batch N
//	  commits/<20-digit N>         CommitEntry: batch N is done
//	  progress/<20-digit N>        the engine's progress record of batch N
//	  state/<operator>/<partition>/ a statestore folder
//	  state/<operator>/deltas/     bundles of the partitions' deltas (statestore.Group)
//	  sources/<i>/                 source i's own files
//
// Log entries are offsetlog entries (a version line, then one JSON
// object); the types of format.go document every field. Their JSON is a
// contract: fields are only added, and a change of
// meaning bumps FormatVersion. A golden test pins the bytes.
//
// The package must not write a checkpoint: the engine alone writes one,
// through these names and types. It imports only offsetlog, storage and
// the standard library (internal/lint checks it), so the command line,
// audit and examples can read a checkpoint without the engine.
//
// A Reader is safe for concurrent use; it holds no state beyond its store.
package checkpoint
