package files

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
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
	// ErrFileChanged marks every *ChangedError (a taken file is not as
	// recorded: gone, of another size or modification time, or of other
	// bytes; the landing contract was broken), and the error of Read for
	// an entry that logged changed files when no dead-letter directory is
	// configured.
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

// ChangedError is a taken file found changed: by Read, when a batch's file
// is not as the files log recorded it, or by LatestOffset, when the listing
// finds a taken name with another size or modification time than recorded
// and no dead-letter directory was configured to receive the bytes no
// batch read. errors.Is(err, ErrFileChanged) is true.
type ChangedError struct {
	File  string // path of the file (in the landing directory or the archive)
	Entry int64  // the files log entry that recorded the file as it should be; -1 for ReadFiles

	// TakenSize and TakenModTime (Unix nanoseconds) are the recorded ones;
	// Size and ModTime are the file's now (Size -1 when it is gone).
	TakenSize, Size       int64
	TakenModTime, ModTime int64
	Reason                string // what it means and the way out
}

func (e *ChangedError) Error() string {
	var b strings.Builder
	if e.Entry < 0 {
		fmt.Fprintf(&b, "files: file changed: %s, recorded with %d bytes", e.File, e.TakenSize)
	} else {
		fmt.Fprintf(&b, "files: taken file changed: %s, recorded by files log entry %d with %d bytes", e.File, e.Entry, e.TakenSize)
	}
	if e.Size < 0 {
		b.WriteString(", is gone")
	} else {
		fmt.Fprintf(&b, ", has %d bytes now", e.Size)
		if e.ModTime != e.TakenModTime {
			fmt.Fprintf(&b, " and was modified at %s (at %s when recorded)", fmtTime(e.ModTime), fmtTime(e.TakenModTime))
		}
	}
	if e.Reason != "" {
		b.WriteString(": ")
		b.WriteString(e.Reason)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrFileChanged) true.
func (e *ChangedError) Is(target error) bool { return target == ErrFileChanged }

// fmtTime renders Unix nanoseconds for messages.
func fmtTime(ns int64) string { return time.Unix(0, ns).UTC().Format(time.RFC3339Nano) }

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
