package statestore

import (
	"errors"
	"fmt"
)

var (
	// ErrCorrupt marks every *CorruptionError, for errors.Is.
	ErrCorrupt = errors.New("statestore: corrupt state file")
	// ErrMissing is matched (errors.Is) by a load that needs a delta or
	// snapshot file the folder does not hold: the chain of versions is
	// broken (purged too early, or a version never committed).
	ErrMissing = errors.New("statestore: missing state file")
	// ErrSchemaMismatch is matched (errors.Is) by Open when the folder was
	// created for other key or value schemas.
	ErrSchemaMismatch = errors.New("statestore: schema mismatch")
	// ErrBackendMismatch is matched (errors.Is) by Open when another
	// backend keeps the folder.
	ErrBackendMismatch = errors.New("statestore: backend mismatch")
)

// CorruptionError names a state file that exists but cannot be read back:
// truncated, flipped bits, not a state file, or a format this build does
// not read.
type CorruptionError struct {
	File   string // store URL and object name
	Offset int64  // byte offset of the problem, -1 when it is the whole file
	Reason string
}

func (e *CorruptionError) Error() string {
	if e.Offset < 0 {
		return fmt.Sprintf("statestore: corrupt state file %s: %s", e.File, e.Reason)
	}
	return fmt.Sprintf("statestore: corrupt state file %s: %s (at byte %d)", e.File, e.Reason, e.Offset)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }

// missingError reports a file a load needs and the folder lacks; its text is
// completed by the caller's operation ("statestore: load version 42: ...").
type missingError struct {
	name string
	dir  string
	hint string // why, when known
}

func (e *missingError) Error() string {
	if e.hint != "" {
		return fmt.Sprintf("missing %s in %s (%s)", e.name, e.dir, e.hint)
	}
	return fmt.Sprintf("missing %s in %s", e.name, e.dir)
}

func (e *missingError) Is(target error) bool { return target == ErrMissing }

// SchemaMismatchError is returned by Open when the folder's schema file
// records other schemas than the ones asked for.
type SchemaMismatchError struct {
	Dir                string // store URL of the state folder
	OldKey, OldValue   string // schemas recorded in the folder
	NewKey, NewValue   string // schemas the caller asked for
	KeyDiff, ValueDiff bool   // which of the two differ
}

func (e *SchemaMismatchError) Error() string {
	what := "key and value schemas"
	switch {
	case e.KeyDiff && !e.ValueDiff:
		what = "key schema"
	case !e.KeyDiff && e.ValueDiff:
		what = "value schema"
	}
	return fmt.Sprintf("statestore: schema mismatch in %s: the %s changed; the state was written with\n  key:   %s\n  value: %s\nand this query asks for\n  key:   %s\n  value: %s\n(the checkpoint is left untouched; run the changed query on a new checkpoint)",
		e.Dir, what, e.OldKey, e.OldValue, e.NewKey, e.NewValue)
}

// Is makes errors.Is(err, ErrSchemaMismatch) true.
func (e *SchemaMismatchError) Is(target error) bool { return target == ErrSchemaMismatch }

// BackendMismatchError is returned by Open when the folder is kept by
// another backend than the one asked for (its backend file).
type BackendMismatchError struct {
	Dir  string // store URL of the state folder
	Have string // backend recorded in the folder
	Want string // backend the caller asked for
}

func (e *BackendMismatchError) Error() string {
	return fmt.Sprintf("statestore: %s is kept by the %s state backend, and this query asks for the %s backend: the %s backend's snapshots are not read by the %s one (the checkpoint is left untouched; run the query with the %s backend, e.g. engine.WithStateStore, or on a new checkpoint)",
		e.Dir, e.Have, e.Want, e.Have, e.Want, e.Have)
}

// Is makes errors.Is(err, ErrBackendMismatch) true.
func (e *BackendMismatchError) Is(target error) bool { return target == ErrBackendMismatch }
