package engine

import (
	"context"
	"encoding/json"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/storage"
)

// Source is what the engine needs from an input. Implementations live in
// source/… and never import this package: every type here is a plain Go,
// JSON or Arrow type.
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

// Describer gives a short human description ("kafka[payments]",
// "files[/landing/*.json]") for progress and logs. It must not contain
// credentials.
type Describer interface {
	Description() string
}

// Sink is what the engine needs from an output: add batch batchID, exactly
// once in effect. AddBatch may be called again with the same batchID and the
// same rows after a crash or a failed attempt; the sink makes the repeat
// harmless (it is idempotent in batchID). The engine never calls AddBatch(N)
// before offsets/N is durable, and calls batches in increasing order with
// no id left out: every batch reaches every sink (the late-rows sink
// included), with rows or without.
//
// records share schema; there may be none. The sink must not keep them past
// the call without retaining them.
type Sink interface {
	AddBatch(ctx context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) error
}

// SinkStarter is implemented by a sink that prepares before the first batch
// (a transactional producer fencing zombies, a table check). queryID is the
// checkpoint's stable query id.
type SinkStarter interface {
	Start(ctx context.Context, queryID string) error
}

// Delivery guarantees a sink reports through GuaranteeReporter.
const (
	ExactlyOnce = "exactly-once"
	AtLeastOnce = "at-least-once"
)

// GuaranteeReporter is implemented by a sink that tells which delivery
// guarantee it runs under (ExactlyOnce or AtLeastOnce). A sink that does not
// implement it is taken to be exactly-once (idempotent in the batch id).
type GuaranteeReporter interface {
	Guarantee() string
}

// SchemaValidator is implemented by a sink that can tell before the first
// batch whether it can write rows of the query's output schema (a column
// type it cannot encode, a partition column missing). The engine calls it
// at start, before any batch runs, and refuses to start on an error.
type SchemaValidator interface {
	ValidateSchema(schema *arrow.Schema) error
}

// SourceIdentifier is implemented by a source whose offsets belong to what
// it reads (a directory, topics). The engine records SourceID at the first
// batch and refuses a restart that puts another source at that index. A
// source without it is identified by the kind in its description (the
// text before "["), so changing a rate source's rows per second is allowed.
type SourceIdentifier interface {
	SourceID() string
}

// SinkPosition is implemented by a sink that knows the newest batch id it
// has applied (a file sink's log version, an offsets-in-sink progress row, a
// Kafka sink's committed marker). ok is false when the sink has applied
// nothing.
//
// The engine asks every such sink (the late-rows sink too) after Start and
// refuses to run, with ErrIncompatibleRestart, unless the answer is the
// checkpoint's newest commit, or the batch after it when that batch is
// planned (the sink applied it before the driver died), or nothing while
// the checkpoint has committed none of its own batches. A sink ahead of the
// checkpoint would skip re-planned batch ids as already applied; a sink
// behind it (restored from a backup, failed over to a replica that lagged)
// would never get the batches it lost. A sink that keeps no position in
// some configuration (an upsert sink) returns an error wrapping
// errors.ErrUnsupported, and a sink reporting AtLeastOnce is not asked.
type SinkPosition interface {
	LastBatchID(ctx context.Context) (id int64, ok bool, err error)
}
