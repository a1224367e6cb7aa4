package engine

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/onceflow/onceflow/internal/kernel"
)

// dedupOp is DropDuplicates (within: false) or DropDuplicatesWithinWatermark
// (within: true). It keeps the first row of each key and emits it once, as
// the input row, in the batch it is first seen. DropDuplicates evicts a key
// when the event-time column is among the keys and the watermark passes it;
// within the watermark, a key expires when its first row's event time plus
// the watermark's delay falls below the watermark (Spark 3.5 semantics).
type dedupOp struct {
	step   *aggregateStep
	within bool
	h      *hashAgg
	dedup  *kernel.Dedup
	ev     eventTimeCol // of the input (and output: the same rows)
	rule   *evictRule
}

func newDedupOp(cfg *config, in *arrow.Schema, st *aggregateStep, ev eventTimeCol, wm *watermarkStep) (*dedupOp, error) {
	within := st.dedup == dedupWithinWatermark
	if within && (wm == nil || ev.col < 0) {
		return nil, fmt.Errorf("DropDuplicatesWithinWatermark needs a watermark (WithWatermark before it) whose event time reaches it")
	}
	d, err := kernel.NewDedup(in, st.keys)
	if err != nil {
		return nil, err
	}
	h := &hashAgg{mem: cfg.mem, in: in, gbIn: in}
	if err := h.bindKeys(st.keys, d.Aggs()); err != nil {
		return nil, err
	}
	if err := d.Bind(h.outSchema); err != nil {
		return nil, err
	}
	o := &dedupOp{step: st, within: within, h: h, dedup: d, ev: ev}
	if ev.col >= 0 {
		name := in.Field(ev.col).Name
		if within {
			idx := h.outSchema.FieldIndices(name)
			if len(idx) != 1 {
				return nil, fmt.Errorf("event-time column %q is not in the deduplication's state %s", name, h.outSchema)
			}
			o.rule = &evictRule{col: idx[0], offsetMs: wm.delay.Milliseconds() + ev.offsetMs}
		} else {
			for i, k := range st.keys {
				if k == name {
					o.rule = &evictRule{col: i, inKeys: true, offsetMs: ev.offsetMs}
				}
			}
		}
	}
	return o, nil
}

func (o *dedupOp) id() string { return o.step.id }
func (o *dedupOp) kind() string {
	if o.within {
		return "dropDuplicatesWithinWatermark"
	}
	return "dropDuplicates"
}
func (o *dedupOp) inputs() int                   { return 1 }
func (o *dedupOp) inputSchema(int) *arrow.Schema { return o.h.in }
func (o *dedupOp) outputSchema() *arrow.Schema   { return o.h.in }
func (o *dedupOp) stores() []storeSpec           { return []storeSpec{o.h.store(true)} }
func (o *dedupOp) partitionKeys(int) []int       { return o.h.keyIdx }
func (o *dedupOp) evicts() bool                  { return o.rule != nil }
func (o *dedupOp) aggregates() bool              { return false }
func (o *dedupOp) closes() bool                  { return true }
func (o *dedupOp) eventTime() eventTimeCol       { return o.ev }
func (o *dedupOp) release()                      {}
func (o *dedupOp) conf() OperatorConf            { return aggConf(o.step, o.kind(), o.h) }

func (o *dedupOp) prepare(_ context.Context, _ int, rec arrow.RecordBatch, _ int64) (arrow.RecordBatch, int64, error) {
	rec.Retain()
	return rec, 0, nil
}

func (o *dedupOp) newPartition(int) (opPartition, error) {
	p, err := o.h.newPart()
	if err != nil {
		return nil, err
	}
	return &dedupPart{aggPart: p, op: o}, nil
}

type dedupPart struct {
	*aggPart
	op *dedupOp
}

// finish emits the rows of keys first seen in this batch and evicts the
// keys the watermark expired.
func (p *dedupPart) finish(ctx context.Context, fc *finishCtx) (finished, error) {
	o := p.gb.Output(true)
	out, err := p.op.dedup.FirstSeen(ctx, p.h.mem, o)
	o.Release()
	if err != nil {
		return finished{}, err
	}
	var removed arrow.RecordBatch
	if fc.mode != Complete {
		if removed, err = p.evict(p.op.rule, fc.watermark); err != nil {
			out.Release()
			return finished{}, err
		}
	}
	f, err := p.commitChanges(ctx, removed)
	if err != nil {
		out.Release()
		return finished{}, err
	}
	f.out = out
	return f, nil
}
