package sql

import (
	"errors"
	"fmt"
)

// ErrUnsupported marks an Error about a construct the SQL front end does
// not compile (yet); test it with errors.Is.
var ErrUnsupported = errors.New("sql: unsupported")

// Error is a planning error at a place in the SQL text: a syntax error, an
// unsupported construct, an unknown name or a type error. Line and Col are
// 1-based and count bytes from the start of the user's text (before any
// rewriting); Col counts characters, not bytes. File is the name given with
// WithFile, or empty.
type Error struct {
	File      string
	Line, Col int
	Msg       string
	// unsupported is true for a construct the front end does not compile.
	unsupported bool
}

func (e *Error) Error() string {
	if e.File != "" {
		return fmt.Sprintf("sql: %s:%d:%d: %s", e.File, e.Line, e.Col, e.Msg)
	}
	return fmt.Sprintf("sql: line %d:%d: %s", e.Line, e.Col, e.Msg)
}

// Is makes errors.Is(err, ErrUnsupported) true for unsupported constructs.
func (e *Error) Is(target error) bool { return target == ErrUnsupported && e.unsupported }
