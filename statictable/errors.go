package statictable

import "errors"

var (
	// ErrVersionChanged is returned by ReadVersion when the table no longer
	// holds the version as recorded: a lake version whose files differ
	// from the recorded digest, or a directory file changed or gone.
	ErrVersionChanged = errors.New("statictable: table version changed")
	// ErrVersionGone is returned by ReadVersion when the version can no
	// longer be read: its log entries were compacted away, or its files
	// were deleted (a lake's Vacuum).
	ErrVersionGone = errors.New("statictable: table version gone")
	// ErrBadVersion is returned for a version that is not the table's JSON.
	ErrBadVersion = errors.New("statictable: bad version")
)
