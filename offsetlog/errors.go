package offsetlog

import (
	"errors"
	"fmt"
)

var (
	// ErrConflict is returned by Add when the batch id already holds an
	// entry with other content: another writer decided differently.
	ErrConflict = errors.New("offsetlog: entry exists with other content")
	// ErrNotFound is returned by Get for a batch id with no entry.
	ErrNotFound = errors.New("offsetlog: no entry")
	// ErrCorrupt marks every *CorruptionError, for errors.Is.
	ErrCorrupt = errors.New("offsetlog: corrupt entry")
)

// CorruptionError names an entry that exists but cannot be decoded.
type CorruptionError struct {
	File   string // store URL and object name
	Offset int    // byte offset of the problem
	Reason string
}

func (e *CorruptionError) Error() string {
	return fmt.Sprintf("offsetlog: corrupt entry %s at byte %d: %s", e.File, e.Offset, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptionError) Is(target error) bool { return target == ErrCorrupt }
