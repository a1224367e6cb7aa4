package checkpoint

import "encoding/json"

// FormatVersion is the checkpoint format this build writes and reads.
const FormatVersion = 1

// Metadata is the checkpoint's metadata file, written once.
type Metadata struct {
	Version int    `json:"version"`
	ID      string `json:"id"`
	Name    string `json:"name"`
	Created string `json:"created"`
}

// ForkedFrom is recorded in a forked checkpoint's metadata file (beside
// the fields of Metadata) to say where it came from.
type ForkedFrom struct {
	Location string `json:"location"` // the source checkpoint, without credentials
	QueryID  string `json:"queryId"`
	Name     string `json:"name"`
	// Batch is the first batch the fork runs again.
	Batch int64 `json:"batch"`
}

// ForkMetadata is the metadata file of a fork: Metadata's fields plus
// forkedFrom, which ReadMetadata ignores.
type ForkMetadata struct {
	Metadata
	ForkedFrom ForkedFrom `json:"forkedFrom"`
}

// OffsetsEntry is offsets/N: the write-ahead plan of batch N. It is written
// before the batch runs, and a re-run of batch N uses it verbatim.
type OffsetsEntry struct {
	BatchID int64 `json:"batchId"`
	// TimestampMs is the batch timestamp (Unix milliseconds) from the
	// query's clock at planning time.
	TimestampMs int64 `json:"timestampMs"`
	// WatermarkMs is the event-time watermark in force for this batch
	// (Unix milliseconds; math.MinInt64 rendered as 0 when there is none).
	WatermarkMs int64 `json:"watermarkMs"`
	// LateWatermarkMs is the watermark below which rows are late for the
	// stateful operators after the first: the previous batch's watermark
	// (Spark 3.4's rule for chains). Omitted (0) for queries with at most
	// one stateful operator, which drop late rows by WatermarkMs.
	LateWatermarkMs int64 `json:"lateWatermarkMs,omitempty"`
	// RunID identifies the driver run that planned the batch.
	RunID   string         `json:"runId"`
	Sources []SourceOffset `json:"sources"`
	Conf    Conf           `json:"conf"`
}

// SourceOffset is one source's range in a batch.
type SourceOffset struct {
	Description string          `json:"description"`
	Start       json.RawMessage `json:"start"`
	End         json.RawMessage `json:"end"`
}

// Conf is the part of the query that must not change across restarts, as
// fixed at the query's first batch.
type Conf struct {
	StatePartitions int            `json:"statePartitions"`
	Operators       []OperatorConf `json:"operators,omitempty"`
	Sources         []string       `json:"sources"`
	// SourceIDs identify what each source reads (the engine's
	// SourceIdentifier); a restart with another source at an index is
	// refused.
	SourceIDs []string `json:"sourceIds,omitempty"`
	Sinks     []string `json:"sinks,omitempty"`
}

// OperatorConf names a stateful operator and the shape of its state.
type OperatorConf struct {
	ID          string   `json:"id"`
	Kind        string   `json:"kind"`
	Keys        []string `json:"keys"`
	KeySchema   string   `json:"keySchema"`
	StateSchema string   `json:"stateSchema"`
	// Stores names the operator's state stores when it has several, each
	// at state/<id>/<partition>/<store>/ (a join's sides, a processor's
	// states and timers); empty for the one store at state/<id>/<partition>/.
	Stores []string `json:"stores,omitempty"`
	// Params records settings that change what the state means without
	// changing its schema (a window's size, a top-N's n), compared at
	// restart when the checkpoint recorded them.
	Params string `json:"params,omitempty"`
}

// CommitEntry is commits/N: batch N is done.
type CommitEntry struct {
	BatchID int64  `json:"batchId"`
	RunID   string `json:"runId"`
	// NextWatermarkMs is the watermark computed at the end of this batch,
	// in force from batch N+1 on.
	NextWatermarkMs int64 `json:"nextWatermarkMs"`
	// EventTimeMaxMs is, per source, the newest event time seen up to and
	// including this batch (0: none yet). The watermark is derived from it.
	EventTimeMaxMs []int64 `json:"eventTimeMaxMs,omitempty"`
}
