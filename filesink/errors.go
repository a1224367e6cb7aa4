package filesink

import "errors"

var (
	// ErrOtherQuery is returned by Start for a table another query wrote.
	ErrOtherQuery = errors.New("filesink: table belongs to another query")
	// ErrUnsupportedType is returned by ValidateSchema (and AddBatch) for a
	// column whose Arrow type the sink cannot write; the message names the
	// column and the type.
	ErrUnsupportedType = errors.New("filesink: unsupported column type")
	// ErrBadSchema is returned for a schema the sink cannot use: a
	// partition column missing, duplicate or empty column names, a schema
	// that differs from the table's partitioning.
	ErrBadSchema = errors.New("filesink: bad schema")
	// ErrBadOption is returned by New for an invalid option value.
	ErrBadOption = errors.New("filesink: bad option")
	// ErrBadData is returned by AddBatch for a value the sink refuses to
	// write (a null in a non-nullable column, a timestamp out of range).
	ErrBadData = errors.New("filesink: bad data")
	// ErrMissingBatches is returned when the table's log has a hole in its
	// batch ids (a table restored from an incomplete copy: readers would
	// see it without those batches), and by AddBatch for a batch id that
	// would leave one. The message names the missing ids and the log object.
	ErrMissingBatches = errors.New("filesink: batches missing from the table")
)

// ErrVersionGone is returned by SnapshotAt for a version the log can no
// longer rebuild: compaction purged the log objects that held it.
var ErrVersionGone = errors.New("filesink: table version no longer in the log")
