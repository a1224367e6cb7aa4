package files

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

var (
	// ErrBadOffset is returned for an offset that is not this source's JSON
	// ({"logOffset":k} with k >= -1) or that the files log does not hold.
	ErrBadOffset = errors.New("files: bad offset")
	// ErrBadOption is returned by New for a bad argument or option, and for
	// a schema column of a type the source cannot parse.
	ErrBadOption = errors.New("files: bad option")
	// ErrNotOpen is returned by LatestOffset, Read and Commit before
	// OpenCheckpoint.
	ErrNotOpen = errors.New("files: OpenCheckpoint was not called")
	// ErrFileChanged is returned by Read when a file a batch took is gone,
	// shorter than when it was taken, or (Parquet) of another size: the
	// landing contract was broken and the batch cannot be replayed.
	ErrFileChanged = errors.New("files: taken file changed")
	// ErrInput marks every *InputError, for errors.Is.
	ErrInput = errors.New("files: bad input")
)

// InputError is bad input in a landing file: a malformed line, a value of
// the wrong type, a missing column, a wrong number of CSV fields, a Parquet
// column that does not match the declared schema. Read returns it (wrapped
// in nothing else) unless a dead-letter directory was configured.
type InputError struct {
	File   string // path of the landing file
	Line   int    // 1-based line (JSON, CSV) or row (Parquet); 0 for the whole file
	Column string // the declared column, when one is at fault
	Reason string
}

func (e *InputError) Error() string {
	var b strings.Builder
	b.WriteString("files: ")
	b.WriteString(e.File)
	if e.Line > 0 {
		b.WriteString(" line ")
		b.WriteString(strconv.Itoa(e.Line))
	}
	b.WriteString(": ")
	if e.Column != "" {
		b.WriteString("column ")
		b.WriteString(e.Column)
		b.WriteString(": ")
	}
	b.WriteString(e.Reason)
	return b.String()
}

// Is makes errors.Is(err, ErrInput) true.
func (e *InputError) Is(target error) bool { return target == ErrInput }

// badValue is a parse problem inside one line, before the file and line are
// known.
type badValue struct {
	column string
	reason string
}

func (b *badValue) Error() string {
	if b.column == "" {
		return b.reason
	}
	return fmt.Sprintf("column %s: %s", b.column, b.reason)
}
