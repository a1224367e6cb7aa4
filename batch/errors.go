package batch

import "errors"

// Sentinel errors of the expression, projection and filter code. Errors
// returned by NewProjection, NewFilter and Apply wrap one of them (through
// *ExprError), so callers can branch with errors.Is.
var (
	// ErrUnknownColumn: an expression refers to a column the input schema
	// does not have.
	ErrUnknownColumn = errors.New("batch: unknown column")
	// ErrType: an expression does not type-check (adding a string to a
	// number, a non-boolean filter predicate, an unsupported literal).
	ErrType = errors.New("batch: type error")
	// ErrOverflow: integer arithmetic left the range of its result type.
	// Integer arithmetic never wraps silently.
	ErrOverflow = errors.New("batch: integer overflow")
	// ErrDivideByZero: Div or Mod with a zero divisor on a non-null row
	// (SQL-standard behaviour: an error, not a null).
	ErrDivideByZero = errors.New("batch: division by zero")
	// ErrConvert: a value did not convert (Cast, ParseTime).
	ErrConvert = errors.New("batch: value does not convert")
	// ErrSchema: Apply got a record whose schema is not the one the
	// projection or filter was built for.
	ErrSchema = errors.New("batch: record schema does not match")
)

// Errors of aggregates and windows. The engine's kernels return them
// (wrapped, naming the column, type or group concerned) when a query's
// aggregates or windows do not fit its input, or a sum leaves the int64
// range.
var (
	// ErrSumOverflow: an integer sum left the int64 range. Integer sums
	// never wrap silently; the batch fails and is re-run from the state
	// last committed.
	ErrSumOverflow = errors.New("batch: integer sum overflow")
	// ErrAggUnsupported: an aggregate or key over a type it does not support.
	ErrAggUnsupported = errors.New("batch: unsupported aggregate or key type")
	// ErrAggSchema: a missing column, a mismatched record or state schema.
	ErrAggSchema = errors.New("batch: aggregate schema mismatch")
	// ErrWindow marks a window definition that does not fit its input.
	ErrWindow = errors.New("batch: bad window")
)

// ExprError is the error of binding or evaluating an expression. Its message
// names the expression (as Expr.String prints it) and, for errors found while
// evaluating, the first failing row of the record batch and its value(s).
type ExprError struct {
	// Expr is the failing expression, as Expr.String prints it.
	Expr string
	// Row is the index, within the record batch given to Apply, of the first
	// row that failed, or -1 for errors found when binding.
	Row int
	// Err is one of the sentinels of this package.
	Err error

	msg string
}

func (e *ExprError) Error() string { return e.msg }

// Unwrap returns the sentinel, for errors.Is.
func (e *ExprError) Unwrap() error { return e.Err }

// bindErr builds an error found while binding expression label.
func bindErr(kind error, label, msg string) *ExprError {
	return &ExprError{Expr: label, Row: -1, Err: kind, msg: "batch: " + label + ": " + msg}
}

// rowErr builds an error found while evaluating expression label at row.
func rowErr(kind error, label string, row int, msg string) *ExprError {
	return &ExprError{Expr: label, Row: row, Err: kind, msg: "batch: " + label + ": " + msg}
}
