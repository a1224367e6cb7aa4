package kafkasink

import "errors"

var (
	// ErrConfig is returned by New for an invalid option set.
	ErrConfig = errors.New("kafkasink: invalid configuration")
	// ErrNotStarted is returned by AddBatch before Start.
	ErrNotStarted = errors.New("kafkasink: not started")
	// ErrTimeoutTooLarge is returned by Start when the transaction timeout
	// exceeds the broker's transaction.max.timeout.ms.
	ErrTimeoutTooLarge = errors.New("kafkasink: transaction timeout above the broker's maximum")
	// ErrFenced is returned once another producer with the same
	// transactional id took over (or the broker aborted our transaction
	// on timeout and bumped the epoch). The sink writes nothing more until
	// Start is called again.
	ErrFenced = errors.New("kafkasink: fenced by a newer producer with the same transactional id")
	// ErrSchema is returned for an output schema the sink cannot encode.
	ErrSchema = errors.New("kafkasink: unsupported output schema")
)
