package engine

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/internal/kernel"
)

// paneOp is a sliding-window aggregation in append mode computed by panes
// (slices): a row updates the one pane of its slide, state holds one row
// per (pane, keys) instead of size/slide copies of every row, and a window
// is the combination of its size/slide panes when the watermark closes it.
// It serves count, sum, min, max and avg, whose pane values combine (avg as
// a sum and a count), over windows whose size is a multiple of their slide.
// Its output is the row-per-window operator's, row for row; a checkpoint
// written by that operator keeps it (adoptRows).
type paneOp struct {
	rows  *windowOp // the row-per-window form, for its output schema and old checkpoints
	h     *hashAgg  // panes: keys (window_start, window_end, keys...) of the tumbling pane
	panes *kernel.WindowAssigner
	aggs  []paneAgg
	// size and slide in the event-time column's unit; sizeMs in ms.
	size, slide, sizeMs int64
	unit                arrow.TimeUnit
	ev                  *evictRule // panes: expired when pane_start + size <= watermark
	combineKeys         []string
	combineAggs         []kernel.Agg
	combineIn           *arrow.Schema
	// direct: every stored value is an int64 combined by sum, min or max,
	// and every user key compares equal exactly when its bytes do, so
	// windows combine panes by a sort and one pass (windowsDirect)
	// instead of a kernel GroupBy; combOut is that GroupBy's output
	// schema, which final reads.
	direct  bool
	combOut *arrow.Schema
}

// paneAgg is how one user aggregate lives in a pane and combines: its
// stored columns (avg: a sum and a count) and the combining function.
type paneAgg struct {
	user    kernel.Agg
	stored  []string
	combine []batch.AggFunc
}

// decomposable reports whether every aggregate combines across panes.
func decomposable(aggs []kernel.Agg) bool {
	for _, a := range aggs {
		if a.PerBatch {
			return false
		}
		switch a.Func {
		case batch.AggCount, batch.AggSum, batch.AggMin, batch.AggMax, batch.AggAvg:
		default:
			return false
		}
	}
	return true
}

// newPaneOp builds the pane form of w, or returns nil when w's window or
// aggregates do not allow it.
func newPaneOp(cfg *config, w *windowOp) (*paneOp, error) {
	st := w.step
	if w.ev == nil || len(st.keys) == 0 || st.window.slide >= st.window.size || st.window.size%st.window.slide != 0 || !decomposable(w.h.aggs) {
		return nil, nil
	}
	in := w.h.gbIn // the rows form's kernel input: the pruned columns, window_start, window_end
	base := arrow.NewSchema(in.Fields()[:in.NumFields()-2], nil)
	panes, err := kernel.NewWindowAssigner(cfg.mem, base, st.window.col, st.window.slide, st.window.slide)
	if err != nil {
		return nil, err
	}
	o := &paneOp{rows: w, panes: panes}
	ts := base.Field(base.FieldIndices(st.window.col)[0]).Type.(*arrow.TimestampType)
	per := int64(ts.Unit.Multiplier())
	o.unit = ts.Unit
	o.size, o.slide = st.window.size.Nanoseconds()/per, st.window.slide.Nanoseconds()/per
	o.sizeMs = st.window.size.Milliseconds()
	var stored []kernel.Agg
	combineIn := []arrow.Field{w.h.outSchema.Field(0), w.h.outSchema.Field(1)}
	for _, k := range st.keys {
		combineIn = append(combineIn, w.h.outSchema.Field(w.h.outSchema.FieldIndices(k)[0]))
	}
	for i, a := range w.h.aggs {
		name := fmt.Sprintf("__p%d", i)
		pa := paneAgg{user: a}
		switch a.Func {
		case batch.AggCount:
			pa.stored, pa.combine = []string{name}, []batch.AggFunc{batch.AggSum}
			stored = append(stored, kernel.Agg{Func: batch.AggCount, Column: a.Column, Name: name})
		case batch.AggAvg:
			pa.stored, pa.combine = []string{name, name + "_n"}, []batch.AggFunc{batch.AggSum, batch.AggSum}
			stored = append(stored, kernel.Agg{Func: batch.AggSum, Column: a.Column, Name: name}, kernel.Agg{Func: batch.AggCount, Column: a.Column, Name: name + "_n"})
		default:
			pa.stored, pa.combine = []string{name}, []batch.AggFunc{a.Func}
			stored = append(stored, kernel.Agg{Func: a.Func, Column: a.Column, Name: name})
		}
		o.aggs = append(o.aggs, pa)
	}
	o.h = &hashAgg{mem: cfg.mem, in: w.in, exprs: w.h.exprs, prune: w.h.prune, pruned: w.h.pruned, gbIn: panes.Schema()}
	if err := o.h.bindKeys(append([]string{batch.WindowStart, batch.WindowEnd}, st.keys...), stored); err != nil {
		return nil, err
	}
	nk := 2 + len(st.keys)
	for i := range o.h.stateSchema.Fields() {
		combineIn = append(combineIn, o.h.outSchema.Field(nk+i))
	}
	o.combineIn = arrow.NewSchema(combineIn, nil)
	o.combineKeys = append([]string{batch.WindowStart, batch.WindowEnd}, st.keys...)
	for _, pa := range o.aggs {
		for j, s := range pa.stored {
			o.combineAggs = append(o.combineAggs, kernel.Agg{Func: pa.combine[j], Column: s, Name: s})
		}
	}
	o.direct = directCombine(o.combineIn, nk, o.combineAggs)
	if o.direct {
		gb, err := kernel.NewGroupBy(cfg.mem, o.combineIn, o.combineKeys, o.combineAggs)
		if err != nil {
			return nil, err
		}
		o.combOut = gb.OutputSchema()
		gb.Release()
	}
	// A pane is needed until the last window over it closes: the one
	// starting at the pane, ending at pane_start + size.
	o.ev = &evictRule{col: 0, inKeys: true, offsetMs: o.sizeMs - 1}
	return o, nil
}

func (o *paneOp) id() string                    { return o.rows.id() }
func (o *paneOp) kind() string                  { return "slidingWindowPanes" }
func (o *paneOp) inputs() int                   { return 1 }
func (o *paneOp) inputSchema(int) *arrow.Schema { return o.rows.in }
func (o *paneOp) outputSchema() *arrow.Schema   { return o.rows.h.outSchema }
func (o *paneOp) stores() []storeSpec           { return []storeSpec{o.h.store(true)} }
func (o *paneOp) partitionKeys(int) []int       { return o.h.keyIdx[2:] }
func (o *paneOp) evicts() bool                  { return true }
func (o *paneOp) aggregates() bool              { return true }
func (o *paneOp) closes() bool                  { return true }
func (o *paneOp) eventTime() eventTimeCol       { return o.rows.eventTime() }
func (o *paneOp) release()                      {}
func (o *paneOp) needsPrevWatermark() bool      { return true }
func (o *paneOp) conf() OperatorConf            { return aggConf(o.rows.step, o.kind(), o.h) }

func (o *paneOp) prepare(ctx context.Context, _ int, rec arrow.RecordBatch, _ int64) (arrow.RecordBatch, int64, error) {
	rec.Retain()
	cur, err := o.h.project(ctx, rec)
	if err != nil {
		return nil, 0, err
	}
	out, err := o.panes.Apply(ctx, cur)
	cur.Release()
	return out, 0, err
}

func (o *paneOp) newPartition(int) (opPartition, error) {
	p, err := o.h.newPart()
	if err != nil {
		return nil, err
	}
	return &panePart{aggPart: p, op: o}, nil
}

// panePart is one partition's panes. Rows are partitioned by the keys
// alone (not the pane), so every pane of a key, and so every window of it,
// is in one partition.
type panePart struct {
	*aggPart
	op *paneOp
}

// finish emits the windows whose end the watermark passed since the
// previous batch (prev < end <= watermark), each combined from its panes,
// then evicts the panes no open window needs.
func (p *panePart) finish(ctx context.Context, fc *finishCtx) (finished, error) {
	o := p.op
	var out arrow.RecordBatch
	if fc.watermark > 0 {
		all := p.gb.Output(false)
		var err error
		out, err = o.windows(ctx, all, fc.prevWatermark, fc.watermark)
		all.Release()
		if err != nil {
			return finished{}, err
		}
	}
	removed, err := p.evict(o.ev, fc.watermark)
	if err != nil {
		if out != nil {
			out.Release()
		}
		return finished{}, err
	}
	f, err := p.commitPanes(ctx, removed, fc.watermark)
	if err != nil {
		if out != nil {
			out.Release()
		}
		return finished{}, err
	}
	f.out = out
	return f, nil
}

// commitPanes is commitChanges for panes: a pane is expired by its key
// (its start) alone, so a pane that changed and expired in this batch is
// dropped from the upserts by that rule, without matching the removed
// keys row by row.
func (p *panePart) commitPanes(ctx context.Context, removed arrow.RecordBatch, watermark int64) (finished, error) {
	changes := p.gb.Changes()
	f := finished{updated: changes.NumRows()}
	if removed != nil {
		f.removed = removed.NumRows()
		if removed.NumRows() > 0 && changes.NumRows() > 0 {
			kept, err := filterExpired(ctx, p.h.mem, changes, p.op.ev, watermark, false)
			changes.Release()
			if err != nil {
				removed.Release()
				return finished{}, err
			}
			changes = kept
			f.updated = changes.NumRows()
		}
	}
	f.changes = map[string]stateChange{"": {upserts: changes, removals: removed}}
	return f, nil
}

// windows combines the panes (a GroupBy output: window_start, window_end,
// keys, stored values) into the windows that close in (prev, watermark].
func (o *paneOp) windows(ctx context.Context, panes arrow.RecordBatch, prev, watermark int64) (arrow.RecordBatch, error) {
	if o.direct {
		out, ok, err := o.windowsDirect(ctx, panes, prev, watermark)
		if ok || err != nil {
			return out, err
		}
		// An int64 sum overflowed: the kernel's combination below
		// reports it as every other sum does.
	}
	return o.windowsByGroupBy(ctx, panes, prev, watermark)
}

// windowsByGroupBy is windows for any aggregate: the panes each window
// covers are taken into one record (a row per pane and window) and
// combined by a kernel GroupBy, then sorted.
func (o *paneOp) windowsByGroupBy(ctx context.Context, panes arrow.RecordBatch, prev, watermark int64) (arrow.RecordBatch, error) {
	mem := o.h.mem
	starts := panes.Column(0).(*array.Timestamp).TimestampValues()
	per := o.size / o.slide
	var take []int64
	var wstart []int64
	for i, ps := range starts {
		for j := int64(0); j < per; j++ {
			s := int64(ps) - j*o.slide
			endMs := kernel.TimestampMillis(s+o.size, o.unit)
			if endMs > prev && endMs <= watermark {
				take = append(take, int64(i))
				wstart = append(wstart, s)
			}
		}
	}
	if len(take) == 0 {
		return nil, nil
	}
	idx := make([]int, len(take))
	for i, t := range take {
		idx[i] = int(t)
	}
	rows, err := takeRows(ctx, mem, panes, idx)
	if err != nil {
		return nil, err
	}
	defer rows.Release()
	tsType := o.combineIn.Field(0).Type.(*arrow.TimestampType)
	sb := array.NewTimestampBuilder(mem, tsType)
	eb := array.NewTimestampBuilder(mem, tsType)
	for _, s := range wstart {
		sb.Append(arrow.Timestamp(s))
		eb.Append(arrow.Timestamp(s + o.size))
	}
	ws, we := sb.NewArray(), eb.NewArray()
	sb.Release()
	eb.Release()
	cols := append([]arrow.Array{ws, we}, rows.Columns()[2:]...)
	syn := array.NewRecordBatch(o.combineIn, cols, int64(len(take)))
	ws.Release()
	we.Release()
	defer syn.Release()
	gb, err := kernel.NewGroupBy(mem, o.combineIn, o.combineKeys, o.combineAggs)
	if err != nil {
		return nil, err
	}
	defer gb.Release()
	if err := gb.Merge(syn); err != nil {
		return nil, err
	}
	comb := gb.Output(false)
	defer comb.Release()
	res, err := o.final(ctx, comb)
	if err != nil {
		return nil, err
	}
	return sortByKeys(ctx, mem, res, len(o.combineKeys))
}

// final turns combined pane values into the row-per-window output: counts,
// sums, mins and maxes as they are, averages as sum / count.
func (o *paneOp) final(ctx context.Context, comb arrow.RecordBatch) (arrow.RecordBatch, error) {
	mem := o.h.mem
	outS := o.outputSchema()
	nk := len(o.combineKeys)
	cols := make([]arrow.Array, 0, outS.NumFields())
	release := func() {
		for _, c := range cols {
			c.Release()
		}
	}
	for i := 0; i < nk; i++ {
		c := comb.Column(i)
		c.Retain()
		cols = append(cols, c)
	}
	at := nk
	cctx := compute.WithAllocator(ctx, mem)
	for i, pa := range o.aggs {
		want := outS.Field(nk + i).Type
		var c arrow.Array
		if pa.user.Func == batch.AggAvg {
			c = averages(mem, comb.Column(at), comb.Column(at+1))
			at += 2
		} else {
			c = comb.Column(at)
			c.Retain()
			at++
		}
		if !arrow.TypeEqual(c.DataType(), want) {
			cast, err := compute.CastToType(cctx, c, want)
			c.Release()
			if err != nil {
				release()
				return nil, fmt.Errorf("window aggregate %s: %w", pa.user.Name, err)
			}
			c = cast
		}
		cols = append(cols, c)
	}
	out := array.NewRecordBatch(outS, cols, comb.NumRows())
	release()
	return out, nil
}

// averages divides sums (int64 or float64) by counts; null where the count
// is zero.
func averages(mem memory.Allocator, sums, counts arrow.Array) arrow.Array {
	b := array.NewFloat64Builder(mem)
	defer b.Release()
	n := counts.(*array.Int64)
	for i := 0; i < sums.Len(); i++ {
		if sums.IsNull(i) || n.IsNull(i) || n.Value(i) == 0 {
			b.AppendNull()
			continue
		}
		var s float64
		switch a := sums.(type) {
		case *array.Int64:
			s = float64(a.Value(i))
		case *array.Float64:
			s = a.Value(i)
		}
		b.Append(s / float64(n.Value(i)))
	}
	return b.NewArray()
}
