package contract

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
)

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

// Guarantee is a sink's delivery guarantee, as GuaranteeReporter reports it
// and as the progress record and the logs print it.
type Guarantee string

// The delivery guarantees.
const (
	// ExactlyOnce: every batch's rows take effect in the output once,
	// whatever crashes and re-runs happen (the sink is idempotent in the
	// batch id).
	ExactlyOnce Guarantee = "exactly-once"
	// AtLeastOnce: a re-run after a crash may apply a batch's rows again.
	// The engine refuses such a sink unless the query allows it.
	AtLeastOnce Guarantee = "at-least-once"
)

// GuaranteeReporter is implemented by a sink that tells which delivery
// guarantee it runs under (ExactlyOnce or AtLeastOnce). A sink that does not
// implement it is taken to be exactly-once (idempotent in the batch id).
type GuaranteeReporter interface {
	Guarantee() Guarantee
}

// SchemaValidator is implemented by a sink that can tell before the first
// batch whether it can write rows of the query's output schema (a column
// type it cannot encode, a partition column missing). The engine calls it
// at start, before any batch runs, and refuses to start on an error.
type SchemaValidator interface {
	ValidateSchema(schema *arrow.Schema) error
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

// SinkHighWater is implemented by a sink that knows only a lower bound of
// the batches it applied: the highest batch id any of its rows carries (an
// upsert table's batch id column). Batches that wrote no row leave no
// trace, so it cannot prove a sink behind; the engine asks it when the
// sink has no exact SinkPosition and refuses a checkpoint that has not
// planned that batch (its re-planned, lower batch ids would be ignored).
// ok is false when no row carries a batch id.
type SinkHighWater interface {
	HighestBatchID(ctx context.Context) (id int64, ok bool, err error)
}
