package engine

import (
	"context"
	"fmt"
	"runtime"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"golang.org/x/sync/errgroup"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/statestore"
	"github.com/onceflow/onceflow/storage"
)

// op is a stateless step bound to its input schema: batch.Projection and
// batch.Filter.
type op interface {
	Apply(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error)
}

// executor runs one micro-batch of a bound stream. It owns the stateful
// operator's in-memory state between batches.
type executor struct {
	mem       memory.Allocator
	inSchema  *arrow.Schema
	pre       []op
	agg       *aggOperator
	post      []op
	outSchema *arrow.Schema
	mode      OutputMode

	// per batch
	out     []arrow.RecordBatch
	inRows  []int64 // per source
	outRows int64
}

type aggOperator struct {
	step        *aggregateStep
	keyIdx      []int
	parts       []*aggPartition
	keySchema   *arrow.Schema
	stateSchema *arrow.Schema
	outSchema   *arrow.Schema
}

type aggPartition struct {
	gb      *batch.GroupBy
	store   *statestore.Store
	pending []arrow.RecordBatch
	updated int64
}

// bindStream checks a stream against its sources' schemas and builds the
// operators. State stores are opened later, by openState, once the
// checkpoint's configuration has been checked.
func bindStream(s *Stream, cfg *config) (*executor, error) {
	if len(s.sources) == 0 {
		return nil, fmt.Errorf("%w: the stream has no source", ErrInvalidQuery)
	}
	schema := s.sources[0].Schema()
	for i, src := range s.sources[1:] {
		if !src.Schema().Equal(schema) {
			return nil, fmt.Errorf("%w: source %d (%s) has schema %s, but source 0 (%s) has %s; unioned sources need one schema",
				ErrInvalidQuery, i+1, describe(src), src.Schema(), describe(s.sources[0]), schema)
		}
	}
	ex := &executor{mem: cfg.mem, inSchema: schema, inRows: make([]int64, len(s.sources))}
	cur := &ex.pre
	for i, st := range s.steps {
		switch st.kind {
		case stepSelect:
			p, err := batch.NewProjection(cfg.mem, schema, st.cols)
			if err != nil {
				return nil, fmt.Errorf("%w: step %d: %w", ErrInvalidQuery, i+1, err)
			}
			*cur = append(*cur, p)
			schema = p.Schema()
		case stepWhere:
			f, err := batch.NewFilter(cfg.mem, schema, st.pred)
			if err != nil {
				return nil, fmt.Errorf("%w: step %d: %w", ErrInvalidQuery, i+1, err)
			}
			*cur = append(*cur, f)
		case stepAggregate:
			if ex.agg != nil {
				return nil, fmt.Errorf("%w: step %d: a second aggregation after %q is not supported", ErrInvalidQuery, i+1, ex.agg.step.id)
			}
			a, err := newAggOperator(cfg, schema, st.agg)
			if err != nil {
				return nil, fmt.Errorf("%w: step %d (%s): %w", ErrInvalidQuery, i+1, st.agg.id, err)
			}
			ex.agg = a
			schema = a.outSchema
			cur = &ex.post
		}
	}
	ex.outSchema = schema
	mode := cfg.mode
	if mode == 0 {
		mode = Append
		if ex.agg != nil {
			mode = Update
		}
	}
	switch {
	case ex.agg != nil && mode == Append:
		return nil, fmt.Errorf("%w: append output mode with an aggregation needs event-time windows and a watermark; use update or complete", ErrInvalidQuery)
	case ex.agg == nil && mode == Complete:
		return nil, fmt.Errorf("%w: complete output mode needs an aggregation (a stateless query's result is every row ever seen)", ErrInvalidQuery)
	case ex.agg == nil && mode == Update:
		mode = Append // the same thing for a stateless query, as in Spark
	}
	ex.mode = mode
	return ex, nil
}

func newAggOperator(cfg *config, in *arrow.Schema, st *aggregateStep) (*aggOperator, error) {
	a := &aggOperator{step: st}
	for _, k := range st.keys {
		idx := in.FieldIndices(k)
		if len(idx) != 1 {
			return nil, fmt.Errorf("group-by key %q is not a column of %s", k, in)
		}
		a.keyIdx = append(a.keyIdx, idx[0])
	}
	a.parts = make([]*aggPartition, cfg.partitions)
	for p := range a.parts {
		gb, err := batch.NewGroupBy(cfg.mem, in, st.keys, st.aggs)
		if err != nil {
			a.release()
			return nil, err
		}
		a.parts[p] = &aggPartition{gb: gb}
	}
	g := a.parts[0].gb
	a.keySchema, a.stateSchema, a.outSchema = g.KeySchema(), g.StateSchema(), g.OutputSchema()
	return a, nil
}

func (a *aggOperator) release() {
	for _, p := range a.parts {
		if p == nil {
			continue
		}
		for _, r := range p.pending {
			r.Release()
		}
		p.pending = nil
		if p.gb != nil {
			p.gb.Release()
		}
	}
}

func (a *aggOperator) conf() OperatorConf {
	return OperatorConf{ID: a.step.id, Kind: "groupby", Keys: a.step.keys, KeySchema: a.keySchema.String(), StateSchema: a.stateSchema.String()}
}

// openState opens every partition's state store and loads version
// committed (-1: empty).
func (a *aggOperator) openState(ctx context.Context, cfg *config, committed int64) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for p, part := range a.parts {
		g.Go(func() error {
			st, err := statestore.Open(ctx, storage.Sub(cfg.checkpoint, fmt.Sprintf("%s/%s/%d", stateDir, a.step.id, p)), statestore.Options{
				KeySchema:           a.keySchema,
				ValueSchema:         a.stateSchema,
				SnapshotEvery:       cfg.snapshotEvery,
				MinVersionsToRetain: cfg.minBatchesToRetain,
				Allocator:           cfg.mem,
			})
			if err != nil {
				return fmt.Errorf("operator %s partition %d: %w", a.step.id, p, err)
			}
			part.store = st
			if committed < 0 {
				return nil
			}
			recs, err := st.Load(ctx, committed)
			if err != nil {
				return fmt.Errorf("operator %s partition %d: %w", a.step.id, p, err)
			}
			defer func() {
				for _, r := range recs {
					r.Release()
				}
			}()
			for _, r := range recs {
				if err := part.gb.Load(r); err != nil {
					return fmt.Errorf("operator %s partition %d: load state version %d: %w", a.step.id, p, committed, err)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

// consume takes one source record through the stateless steps and into the
// aggregation's partitions or the output.
func (ex *executor) consume(ctx context.Context, rec arrow.RecordBatch) error {
	rec.Retain()
	cur := rec
	for _, o := range ex.pre {
		next, err := o.Apply(ctx, cur)
		cur.Release()
		if err != nil {
			return err
		}
		cur = next
	}
	defer cur.Release()
	if cur.NumRows() == 0 {
		return nil
	}
	if ex.agg == nil {
		return ex.emit(ctx, cur)
	}
	parts, err := batch.Partition(ex.mem, cur, ex.agg.keyIdx, len(ex.agg.parts))
	if err != nil {
		return err
	}
	for p, r := range parts {
		if r == nil {
			continue
		}
		if r.NumRows() == 0 {
			r.Release()
			continue
		}
		ex.agg.parts[p].pending = append(ex.agg.parts[p].pending, r)
	}
	return nil
}

// emit takes a record after the stateful step through the remaining steps
// into the batch output.
func (ex *executor) emit(ctx context.Context, rec arrow.RecordBatch) error {
	rec.Retain()
	cur := rec
	ops := ex.post
	if ex.agg == nil {
		ops = nil
	}
	for _, o := range ops {
		next, err := o.Apply(ctx, cur)
		cur.Release()
		if err != nil {
			return err
		}
		cur = next
	}
	if cur.NumRows() == 0 {
		cur.Release()
		return nil
	}
	ex.out = append(ex.out, cur)
	ex.outRows += cur.NumRows()
	return nil
}

// finishState merges the buffered rows into each partition's state (in
// parallel), writes state version batchID, and emits the output rows in
// partition order.
func (ex *executor) finishState(ctx context.Context, batchID int64) (commitTime time.Duration, err error) {
	if ex.agg == nil {
		return 0, nil
	}
	a := ex.agg
	outs := make([]arrow.RecordBatch, len(a.parts))
	defer func() {
		for _, o := range outs {
			if o != nil {
				o.Release()
			}
		}
	}()
	start := time.Now()
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for p, part := range a.parts {
		g.Go(func() error {
			defer func() {
				for _, r := range part.pending {
					r.Release()
				}
				part.pending = part.pending[:0]
			}()
			for _, r := range part.pending {
				if err := part.gb.Merge(r); err != nil {
					return fmt.Errorf("operator %s partition %d: %w", a.step.id, p, err)
				}
			}
			changes := part.gb.Changes()
			defer changes.Release()
			part.updated = changes.NumRows()
			if err := part.store.Commit(gctx, batchID, changes, nil); err != nil {
				return fmt.Errorf("operator %s partition %d: commit state version %d: %w", a.step.id, p, batchID, err)
			}
			outs[p] = part.gb.Output(ex.mode == Update)
			part.gb.ClearChanges()
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return 0, err
	}
	commitTime = time.Since(start)
	for _, o := range outs {
		if o == nil || o.NumRows() == 0 {
			continue
		}
		if err := ex.emit(ctx, o); err != nil {
			return 0, err
		}
	}
	return commitTime, nil
}

// reset releases the batch's output.
func (ex *executor) reset() {
	for _, r := range ex.out {
		r.Release()
	}
	ex.out = ex.out[:0]
	ex.outRows = 0
	for i := range ex.inRows {
		ex.inRows[i] = 0
	}
	if ex.agg != nil {
		for _, p := range ex.agg.parts {
			for _, r := range p.pending {
				r.Release()
			}
			p.pending = p.pending[:0]
		}
	}
}

func (ex *executor) release() {
	ex.reset()
	if ex.agg != nil {
		ex.agg.release()
	}
}

func describe(v any) string {
	if d, ok := v.(Describer); ok {
		return d.Description()
	}
	return fmt.Sprintf("%T", v)
}
