package engine

import (
	"encoding/json"
)

// Progress is the record of one batch, delivered to listeners and kept in
// the checkpoint's progress/ log (bounded by the retention). Field names
// follow Spark's StreamingQueryProgress where the meaning is the same.
type Progress struct {
	ID                     string                  `json:"id"`
	RunID                  string                  `json:"runId"`
	Name                   string                  `json:"name"`
	Timestamp              string                  `json:"timestamp"`
	BatchID                int64                   `json:"batchId"`
	BatchDurationMs        int64                   `json:"batchDuration"`
	NumInputRows           int64                   `json:"numInputRows"`
	InputRowsPerSecond     float64                 `json:"inputRowsPerSecond"`
	ProcessedRowsPerSecond float64                 `json:"processedRowsPerSecond"`
	DurationMs             map[string]int64        `json:"durationMs"`
	EventTime              map[string]string       `json:"eventTime,omitempty"`
	StateOperators         []StateOperatorProgress `json:"stateOperators,omitempty"`
	Sources                []SourceProgress        `json:"sources"`
	Sinks                  []SinkProgress          `json:"sinks"`
	// Recovered is true when this batch was planned by an earlier run and
	// re-run from its write-ahead entry after a restart.
	Recovered bool `json:"recovered,omitempty"`
}

// Phase names in Progress.DurationMs.
const (
	PhaseLatestOffset     = "latestOffset"
	PhaseWALCommit        = "walCommit"
	PhaseGetBatch         = "getBatch"
	PhaseAddBatch         = "addBatch"
	PhaseStateCommit      = "stateCommit"
	PhaseCommitOffsets    = "commitOffsets"
	PhaseTriggerExecution = "triggerExecution"
)

// StateOperatorProgress is one stateful operator's figures for a batch.
type StateOperatorProgress struct {
	OperatorID                string `json:"operatorId"`
	OperatorName              string `json:"operatorName"`
	NumRowsTotal              int64  `json:"numRowsTotal"`
	NumRowsUpdated            int64  `json:"numRowsUpdated"`
	NumRowsRemoved            int64  `json:"numRowsRemoved"`
	NumRowsDroppedByWatermark int64  `json:"numRowsDroppedByWatermark"`
	CommitTimeMs              int64  `json:"commitTimeMs"`
	MemoryUsedBytes           int64  `json:"memoryUsedBytes"`
	NumPartitions             int    `json:"numPartitions"`
	// CustomMetrics holds operator-specific figures (a join's unmatched
	// rows, a processor's timers fired), summed over partitions.
	CustomMetrics map[string]int64 `json:"customMetrics,omitempty"`
}

// SourceProgress is one source's figures for a batch.
type SourceProgress struct {
	Description            string          `json:"description"`
	StartOffset            json.RawMessage `json:"startOffset"`
	EndOffset              json.RawMessage `json:"endOffset"`
	LatestOffset           json.RawMessage `json:"latestOffset,omitempty"`
	NumInputRows           int64           `json:"numInputRows"`
	InputRowsPerSecond     float64         `json:"inputRowsPerSecond"`
	ProcessedRowsPerSecond float64         `json:"processedRowsPerSecond"`
	Metrics                map[string]any  `json:"metrics,omitempty"`
}

// SinkProgress is one sink's figures for a batch.
type SinkProgress struct {
	Description   string    `json:"description"`
	NumOutputRows int64     `json:"numOutputRows"`
	Guarantee     Guarantee `json:"guarantee"`
}
