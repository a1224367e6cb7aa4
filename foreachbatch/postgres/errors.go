package postgres

import (
	"errors"
	"fmt"
	"strings"
)

var (
	// ErrSchemaMismatch marks every *ColumnError: the target table cannot
	// take the batch's columns.
	ErrSchemaMismatch = errors.New("postgres: table does not match the output schema")
	// ErrDuplicateKey is returned when one batch holds two rows with the same
	// key and they cannot be combined (see the package documentation).
	ErrDuplicateKey = errors.New("postgres: duplicate key in one batch")
	// ErrConfig is returned by the constructors for options that contradict
	// each other or the sink (an "add" merge on an upsert sink, say).
	ErrConfig = errors.New("postgres: bad configuration")
	// ErrRetriesExhausted wraps the last error of a batch transaction that
	// failed on every allowed attempt.
	ErrRetriesExhausted = errors.New("postgres: retries exhausted")
	// ErrRejected marks a batch the database refused with an error that
	// every run of the batch meets again, classified by SQLSTATE class:
	// constraint violations (23), data exceptions (22), cardinality (21, an
	// ON CONFLICT that would change a row twice), undefined or forbidden
	// objects (42), unsupported features (0A), errors raised by triggers
	// and routines (P0, 38, 39, 2F) and a few more. It is returned at the
	// first attempt, naming the batch, the table and the cause; the engine
	// stops, and a restart without a fix fails again. The *pgconn.PgError is
	// in the chain. Errors a new attempt can escape (a lost connection, 08;
	// 40001; 40P01; 55P03; 57P01; class 53) are retried instead (WithRetry).
	ErrRejected = errors.New("postgres: the database rejected the batch")
	// ErrOtherQuery is returned by Start when the job's progress row
	// belongs to another query (another checkpoint): its batch ids are not
	// this query's, and applying them as skipped would lose data.
	ErrOtherQuery = errors.New("postgres: the job's progress belongs to another query")
)

// ColumnError names a column of the target table that cannot take the
// output column of the same name.
type ColumnError struct {
	Table     string // the table as written in SQL (quoted)
	Column    string
	ArrowType string // "" when the column is missing from the output schema
	PGType    string // "" when the column is missing from the table
	Reason    string
}

func (e *ColumnError) Error() string {
	switch {
	case e.PGType == "" && e.ArrowType == "":
		return fmt.Sprintf("postgres: table %s has no column %q: %s", e.Table, e.Column, e.Reason)
	case e.PGType == "":
		return fmt.Sprintf("postgres: table %s has no column %q (output column of type %s)", e.Table, e.Column, e.ArrowType)
	case e.ArrowType == "":
		return fmt.Sprintf("postgres: table %s column %q (%s): %s", e.Table, e.Column, e.PGType, e.Reason)
	default:
		return fmt.Sprintf("postgres: table %s column %q: output type %s cannot be written to %s: %s",
			e.Table, e.Column, e.ArrowType, e.PGType, e.Reason)
	}
}

// Is makes errors.Is(err, ErrSchemaMismatch) true.
func (e *ColumnError) Is(target error) bool { return target == ErrSchemaMismatch }

// opError names the operation an error happened in, with the package prefix
// once: "postgres: job "j" batch 4: table "t" has no column …" rather than a
// prefix per layer.
type opError struct {
	op  string
	err error
}

func wrapOp(op string, err error) error { return &opError{op: op, err: err} }

func (e *opError) Error() string {
	return "postgres: " + e.op + ": " + strings.TrimPrefix(e.err.Error(), "postgres: ")
}

func (e *opError) Unwrap() error { return e.err }
