package engine

import "errors"

var (
	// ErrConcurrentDriver is returned when another driver runs (or ran a
	// conflicting plan) on the same checkpoint.
	ErrConcurrentDriver = errors.New("engine: another driver is running on this checkpoint")
	// ErrIncompatibleRestart is returned when a restart changes what the
	// checkpoint fixed at the first batch (partition count, stateful
	// operators, sources) in a way that would misread state or offsets.
	ErrIncompatibleRestart = errors.New("engine: incompatible restart")
	// ErrInvalidQuery is returned for a query definition that cannot run.
	ErrInvalidQuery = errors.New("engine: invalid query")
)
