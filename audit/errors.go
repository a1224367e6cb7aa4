package audit

import "errors"

var (
	// ErrNoCommit is returned when the checkpoint has no committed batch.
	ErrNoCommit = errors.New("audit: checkpoint has no committed batch")
	// ErrConfig marks an invalid Config or command line.
	ErrConfig = errors.New("audit: invalid configuration")
)
