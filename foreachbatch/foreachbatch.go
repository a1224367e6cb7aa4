package foreachbatch

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/contract"
)

var (
	_ contract.Sink              = (*Sink)(nil)
	_ contract.SinkStarter       = (*Sink)(nil)
	_ contract.SchemaValidator   = (*Sink)(nil)
	_ contract.GuaranteeReporter = (*Sink)(nil)
)

// Func receives batch batchID. The same batchID may arrive again with the
// same rows after a crash or a failed attempt; the function must use batchID
// to skip a batch it already applied (see the package documentation). The
// records share schema, may be empty, and must be retained to outlive the
// call. A returned error fails the batch and stops the query.
type Func func(ctx context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) error

// Sink adapts a Func to contract.Sink.
type Sink struct {
	fn  Func
	cfg config
}

type config struct {
	idempotent bool
	start      func(ctx context.Context, queryID string) error
	check      func(schema *arrow.Schema) error
}

// Option configures New.
type Option func(*config)

// WithIdempotent declares that the function skips batch ids it already applied,
// so the sink reports "exactly-once". Without it the sink reports
// "at-least-once", which is what a function without the check delivers.
func WithIdempotent() Option { return func(c *config) { c.idempotent = true } }

// WithStart runs fn once before the first batch with the query's stable id
// (create a progress table, check a connection). Default: nothing.
func WithStart(fn func(ctx context.Context, queryID string) error) Option {
	return func(c *config) { c.start = fn }
}

// WithSchemaCheck runs fn at query start with the output schema; an error
// stops the query before any batch runs. Default: every schema is accepted.
func WithSchemaCheck(fn func(schema *arrow.Schema) error) Option {
	return func(c *config) { c.check = fn }
}

// New returns a sink that calls fn for every batch. fn must not be nil.
func New(fn Func, opts ...Option) *Sink {
	if fn == nil {
		panic("foreachbatch: New with a nil Func")
	}
	s := &Sink{fn: fn}
	for _, o := range opts {
		o(&s.cfg)
	}
	return s
}

// AddBatch calls the function with batch batchID.
func (s *Sink) AddBatch(ctx context.Context, batchID int64, schema *arrow.Schema, records []arrow.RecordBatch) error {
	if err := s.fn(ctx, batchID, schema, records); err != nil {
		return fmt.Errorf("foreachbatch: batch %d: %w", batchID, err)
	}
	return nil
}

// Start runs the WithStart function, if any.
func (s *Sink) Start(ctx context.Context, queryID string) error {
	if s.cfg.start == nil {
		return nil
	}
	if err := s.cfg.start(ctx, queryID); err != nil {
		return fmt.Errorf("foreachbatch: start: %w", err)
	}
	return nil
}

// ValidateSchema runs the WithSchemaCheck function, if any.
func (s *Sink) ValidateSchema(schema *arrow.Schema) error {
	if s.cfg.check == nil {
		return nil
	}
	if err := s.cfg.check(schema); err != nil {
		return fmt.Errorf("foreachbatch: schema: %w", err)
	}
	return nil
}

// Guarantee reports contract.ExactlyOnce when WithIdempotent() was given,
// else contract.AtLeastOnce.
func (s *Sink) Guarantee() contract.Guarantee {
	if s.cfg.idempotent {
		return contract.ExactlyOnce
	}
	return contract.AtLeastOnce
}
