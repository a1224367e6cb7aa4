package filesink

import "encoding/json"

// FormatVersion is the version of the log entries this build writes and
// reads (the "formatVersion" field); see docs/format/filesink-log.md.
const FormatVersion = 1

// Log entry kinds.
const (
	KindDelta   = "delta"
	KindCompact = "compact"
)

// Actions of a log entry.
const (
	ActionAdd    = "add"
	ActionRemove = "remove"
)

// Entry is the delta of one batch, _onceflow_log/<N> (offsetlog format: a
// version line and this object as one JSON line). A compact file,
// _onceflow_log/<N>.compact, holds the same header fields with an action
// count, then one Action per line; see docs/format/filesink-log.md.
type Entry struct {
	FormatVersion int    `json:"formatVersion"`
	Kind          string `json:"kind"`
	BatchID       int64  `json:"batchId"`
	// QueryID is the id of the query that wrote the batch (the engine's
	// checkpoint id). A table's batch ids belong to one query: a sink
	// started by another query refuses the table.
	QueryID string `json:"queryId,omitempty"`
	// CommitTime is the commit time of batch BatchID, Unix milliseconds,
	// from the sink's clock.
	CommitTime int64 `json:"commitTime"`
	// Schema lists every column of the table in order, partition columns
	// included; PartitionColumns names the partition columns in folder
	// order.
	Schema           []Column `json:"schema"`
	PartitionColumns []string `json:"partitionColumns"`
	// Actions lists the batch's removes then its adds, each sorted by
	// path.
	Actions []Action `json:"actions"`
}

// Column describes one table column in the log.
type Column struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable"`
}

// Action adds a file to the table or removes it.
type Action struct {
	Action string `json:"action"`
	File
}

// File is one data file of the table as the log describes it.
type File struct {
	// Path is relative to the table root, Hive folders included.
	Path string `json:"path"`
	Size int64  `json:"size"`
	Rows int64  `json:"rows"`
	// BatchID is the batch that added the file (for a remove: the batch
	// that removed it).
	BatchID int64 `json:"batchId"`
	// Time is the commit time (Unix ms) of that batch.
	Time int64 `json:"time"`
	// Partition holds the file's partition values in PartitionColumns
	// order; Value is nil for a null.
	Partition []PartitionValue `json:"partition,omitempty"`
	// Stats holds min, max and null count per column, partition columns
	// included, for the columns where they are known.
	Stats []ColumnStats `json:"stats,omitempty"`
}

// PartitionValue is a partition column's value in a file, rendered as in
// the folder name but unescaped; nil means null.
type PartitionValue struct {
	Column string  `json:"column"`
	Value  *string `json:"value"`
}

// ColumnStats are a column's statistics over one file. Min and Max are JSON
// values: numbers for integer and float columns (int64 beyond ±2^53 as
// strings), strings for text, dates ("2026-11-30"), timestamps (RFC 3339,
// UTC, microseconds) and decimals ("123.45"), booleans for bool; absent
// when every value is null or a bound is not known (binary columns, long
// strings).
type ColumnStats struct {
	Column    string          `json:"column"`
	Min       json.RawMessage `json:"min,omitempty"`
	Max       json.RawMessage `json:"max,omitempty"`
	NullCount int64           `json:"nullCount"`
}
