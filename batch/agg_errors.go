package batch

import "errors"

// Errors of hash partitioning and group-by aggregation. Wrapped errors name
// the column, type or group concerned.
var (
	// ErrSumOverflow: an integer sum left the int64 range. The merge that
	// returned it left the GroupBy partly updated: discard it and rebuild
	// from the state store.
	ErrSumOverflow = errors.New("batch: integer sum overflow")
	// ErrAggUnsupported: an aggregate or key over a type it does not support.
	ErrAggUnsupported = errors.New("batch: unsupported aggregate or key type")
	// ErrAggSchema: a missing column, a mismatched record or state schema.
	ErrAggSchema = errors.New("batch: aggregate schema mismatch")
)
