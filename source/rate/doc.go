// Package rate is a deterministic row generator: contract.Source
// over an endless sequence of rows numbered 0, 1, 2, … For demos,
// tests and benchmarks.
//
// # Rows
//
// Every column of the row at offset o is a pure function of o and the
// options, never of the clock or of when it is read:
//
//	timestamp     timestamp[us, UTC]  start time + o/rowsPerSecond seconds
//	              (integer microseconds, rounded down)
//	value         int64               o
//	partition     int32               o % partitions
//	key           string              "k-" + decimal(o % keys)
//	amount_cents  int64               1 + splitmix64(o) % 100000
//
// The start time defaults to a fixed instant (DefaultStartTime), so two runs
// with the same options produce the same rows for the same offsets.
//
// # Offsets
//
// An offset is {"rows":N}: the number of rows before the position.
// InitialOffset is {"rows":0}; a batch [start, end) holds the rows with
// start.rows <= o < end.rows.
//
// # How far LatestOffset reaches
//
// Only LatestOffset looks at the clock (WithClock, default time.Now). Rows
// arrive at rowsPerSecond from the moment New was called, after the start
// offset of the first LatestOffset call: a query that restarts at {"rows":N}
// sees N, N+1, … arrive at the configured rate. The answer is capped at
// start + max rows per trigger when WithMaxRowsPerTrigger is set. With
// WithUnbounded the clock is ignored and every call advances by the max rows
// per trigger (the rows per second when none is set).
//
// PrepareAvailableNow freezes the clock at the moment of the call: later
// LatestOffset calls reach no further than the rows available then (in
// unbounded mode: one trigger's worth beyond the next start).
//
// # Lifecycle and concurrency
//
// New, then any number of LatestOffset and Read calls. A Source holds no
// resources and needs no Close. It is safe for concurrent use. Read builds
// Arrow arrays directly (no per-row allocation), emits records of at most
// WithBatchSize rows, and releases each record after emit returns.
package rate
