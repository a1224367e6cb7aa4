package contract

import (
	"context"
	"encoding/json"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/storage"
)

// Source is what the engine needs from an input. Every type in it is a
// plain Go, JSON or Arrow type.
//
// Offsets are the source's own JSON (for example {"0":42,"1":17} for Kafka
// partitions). They are stored verbatim in the write-ahead log, so a source
// must encode them deterministically: the same position always gives the
// same bytes, which is how the engine tells "no new data" (end == start).
type Source interface {
	// Schema is the Arrow schema of every record the source emits.
	Schema() *arrow.Schema
	// InitialOffset is where the query's first batch starts (the
	// starting-offsets option). Called once, when planning batch 0; the
	// answer is recorded in offsets/0, so a restart never asks again.
	InitialOffset(ctx context.Context) (json.RawMessage, error)
	// LatestOffset returns the end of the next batch that starts at start:
	// the newest available position, capped by the source's per-trigger
	// limit (and, after PrepareAvailableNow, by the position available
	// then). It returns start itself when nothing new is available.
	LatestOffset(ctx context.Context, start json.RawMessage) (json.RawMessage, error)
	// Read emits the records in [start, end) in a deterministic order: a
	// second Read of the same range emits the same rows in the same order.
	// The source owns each record it emits and releases it after emit
	// returns; the engine retains any record it keeps.
	Read(ctx context.Context, start, end json.RawMessage, emit func(arrow.RecordBatch) error) error
}

// SourceCheckpointer is implemented by a source that keeps its own log in
// the checkpoint (the files source remembers which files each batch took).
// The engine calls it once, before planning, with the store under
// <checkpoint>/sources/<i>/.
type SourceCheckpointer interface {
	OpenCheckpoint(ctx context.Context, dir storage.Store) error
}

// SourceCommitter is implemented by a source that acts after a batch commits
// (archive or delete files taken, for example). It is called after
// commits/N is durable, with batch N's end offset; it must be idempotent,
// since a crash can make it run again.
type SourceCommitter interface {
	Commit(ctx context.Context, end json.RawMessage) error
}

// AvailableNowSource is implemented by a source that supports the
// AvailableNow trigger: after PrepareAvailableNow, LatestOffset never goes
// beyond what was available at that call.
type AvailableNowSource interface {
	PrepareAvailableNow(ctx context.Context) error
}

// SourceIdentifier is implemented by a source whose offsets belong to what
// it reads (a directory, topics). The engine records SourceID at the first
// batch and refuses a restart that puts another source at that index. A
// source without it is identified by the kind in its description (the
// text before "["), so changing a rate source's rows per second is allowed.
type SourceIdentifier interface {
	SourceID() string
}

// SourceMetrics is implemented by a source that reports figures for the
// progress record (lag per partition, records skipped by a data-loss gap).
// It is called after a batch's Read.
type SourceMetrics interface {
	Metrics() map[string]any
}

// Describer gives a short human description ("kafka[payments]",
// "files[/landing/*.json]") of a source or a sink for progress and logs. It
// must not contain credentials.
type Describer interface {
	Description() string
}
