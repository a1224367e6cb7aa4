package contract

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
)

// Sink is what the engine needs from an output: add batch batchID, exactly
// once in effect. AddBatch may be called again with the same batchID and the
// same rows after a crash or a failed attempt; the sink makes the repeat
// harmless (it is idempotent in batchID). The engine never calls AddBatch(N)
// before offsets/N is durable, and calls batches in increasing order.
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
// Kafka sink's committed marker). The engine asks after Start and refuses to
// run when the sink is ahead of the checkpoint's newest plan: the checkpoint
// is older than the output (restored from a copy, say), and re-planned batch
// ids would be skipped by the sink as already applied. ok is false when the
// sink has applied nothing.
type SinkPosition interface {
	LastBatchID(ctx context.Context) (id int64, ok bool, err error)
}
