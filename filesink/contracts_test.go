package filesink

import (
	"context"

	"github.com/apache/arrow-go/v18/arrow"
)

// The engine's contracts (engine/contracts.go), restated so that this
// package's tests do not depend on the engine building: the sink meets them
// structurally.
var (
	_ interface {
		AddBatch(ctx context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) error
	} = (*Sink)(nil)
	_ interface {
		Start(ctx context.Context, queryID string) error
	} = (*Sink)(nil)
	_ interface {
		ValidateSchema(schema *arrow.Schema) error
	} = (*Sink)(nil)
	_ interface{ Description() string } = (*Sink)(nil)
)
