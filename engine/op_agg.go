package engine

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/internal/kernel"
)

// hashAgg is the hash-aggregation machinery that the group-by, window and
// deduplication operators share by composition (each operator decides what
// it emits and evicts): the aggregates over expressions, the input pruned
// to the columns the kernel reads, and one kernel.GroupBy per partition.
type hashAgg struct {
	mem    memory.Allocator
	in     *arrow.Schema // entering the operator
	exprs  *batch.Projection
	prune  []int // input columns the kernel reads (nil: all)
	pruned *arrow.Schema
	gbIn   *arrow.Schema // the kernel's input
	keys   []string
	aggs   []kernel.Agg
	keyIdx []int // of keys in gbIn

	keySchema, stateSchema, outSchema *arrow.Schema
}

// newHashAgg binds aggs over in (pruneTo and bindKeys complete it).
func newHashAgg(mem memory.Allocator, in *arrow.Schema, aggs []batch.Agg) (*hashAgg, []kernel.Agg, error) {
	exprs, kaggs, err := bindAggs(mem, in, aggs)
	if err != nil {
		return nil, nil, err
	}
	h := &hashAgg{mem: mem, in: in, exprs: exprs, gbIn: in}
	if exprs != nil {
		h.gbIn = exprs.Schema()
	}
	return h, kaggs, nil
}

// pruneTo keeps only the named columns of the kernel's input.
func (h *hashAgg) pruneTo(need map[string]bool) {
	var fields []arrow.Field
	var idx []int
	for i, f := range h.gbIn.Fields() {
		if need[f.Name] {
			fields = append(fields, f)
			idx = append(idx, i)
		}
	}
	if len(idx) < h.gbIn.NumFields() && len(idx) > 0 {
		h.gbIn = arrow.NewSchema(fields, nil)
		h.prune, h.pruned = idx, h.gbIn
	}
}

// bindKeys resolves the kernel's keys in its input schema and builds the
// state and output schemas.
func (h *hashAgg) bindKeys(keys []string, aggs []kernel.Agg) error {
	h.keys, h.aggs = keys, aggs
	for _, k := range keys {
		idx := h.gbIn.FieldIndices(k)
		if len(idx) != 1 {
			return fmt.Errorf("key %q is not a column of %s", k, h.gbIn)
		}
		h.keyIdx = append(h.keyIdx, idx[0])
	}
	gb, err := h.newGroupBy()
	if err != nil {
		return err
	}
	defer gb.Release()
	h.keySchema, h.stateSchema, h.outSchema = gb.KeySchema(), gb.StateSchema(), gb.OutputSchema()
	return nil
}

func (h *hashAgg) newGroupBy() (*kernel.GroupBy, error) {
	return kernel.NewGroupBy(h.mem, h.gbIn, h.keys, h.aggs)
}

// project evaluates the aggregates' expressions and prunes: rec is
// released, the result is the kernel's input.
func (h *hashAgg) project(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	cur := rec
	if h.exprs != nil {
		next, err := h.exprs.Apply(ctx, cur)
		cur.Release()
		if err != nil {
			return nil, err
		}
		cur = next
	}
	if h.prune != nil {
		cols := make([]arrow.Array, len(h.prune))
		for i, c := range h.prune {
			cols[i] = cur.Column(c)
		}
		next := array.NewRecordBatch(h.pruned, cols, cur.NumRows())
		cur.Release()
		cur = next
	}
	return cur, nil
}

func (h *hashAgg) store(unique bool) storeSpec {
	return storeSpec{key: h.keySchema, value: h.stateSchema, uniqueUpserts: unique}
}

// evictRule says how a group's event time is read: from key column col
// (inKeys) or output column col, plus offsetMs. A group expires when its
// event time is below the watermark.
type evictRule struct {
	col      int
	inKeys   bool
	offsetMs int64
}

func (e *evictRule) expired(t, watermark int64) bool {
	return watermark > 0 && t+e.offsetMs < watermark
}

// aggPart is one partition of a hash aggregation.
type aggPart struct {
	h  *hashAgg
	gb *kernel.GroupBy
	// partial: the partition holds only the groups of the batch (a
	// disk-backed store), so its groups are never the whole state.
	partial bool
	// wholeParts > 0: the partition is the one working table of that many
	// state partitions (whole.go), and finishUpdate builds the state
	// change and output already split by partition.
	wholeParts int
}

// splitInto tells the partition it is the one working table of n state
// partitions (finishWhole).
func (p *aggPart) splitInto(n int) { p.wholeParts = n }

// setPartial tells the partition whether it holds only some groups
// (openState, by the operator's backend).
func (p *aggPart) setPartial(partial bool) { p.partial = partial }

func (h *hashAgg) newPart() (*aggPart, error) {
	gb, err := h.newGroupBy()
	if err != nil {
		return nil, err
	}
	return &aggPart{h: h, gb: gb}, nil
}

func (p *aggPart) load(_ context.Context, _ string, recs []arrow.RecordBatch) error {
	for _, r := range recs {
		if err := p.gb.Load(r); err != nil {
			return err
		}
	}
	return nil
}

func (p *aggPart) merge(_ context.Context, _ int, rec arrow.RecordBatch) error {
	return p.gb.Merge(rec)
}

func (p *aggPart) committed() { p.gb.ClearChanges() }

func (p *aggPart) size() (int64, int64) { return int64(p.gb.Len()), p.gb.MemoryBytes() }

func (p *aggPart) release() { p.gb.Release() }

// evict removes the groups the watermark expired and returns their keys
// (nil when the rule is nil or there is no watermark).
func (p *aggPart) evict(rule *evictRule, watermark int64) (arrow.RecordBatch, error) {
	if rule == nil || watermark <= 0 {
		return nil, nil
	}
	if rule.inKeys {
		var ferr error
		removed, err := p.gb.Remove(func(keys []arrow.Array, out []bool) {
			ts, ok := keys[rule.col].(*array.Timestamp)
			if !ok {
				ferr = fmt.Errorf("eviction column %d is %s", rule.col, keys[rule.col].DataType())
				return
			}
			unit := ts.DataType().(*arrow.TimestampType).Unit
			for i, v := range ts.TimestampValues() {
				out[i] = !rule.expired(kernel.TimestampMillis(int64(v), unit), watermark)
			}
		})
		if ferr != nil {
			if removed != nil {
				removed.Release()
			}
			return nil, ferr
		}
		return removed, err
	}
	all := p.gb.Output(false)
	ms, _, err := kernel.EventTimesMillis(all, rule.col)
	all.Release()
	if err != nil {
		return nil, err
	}
	return p.gb.Remove(func(_ []arrow.Array, out []bool) {
		for i, t := range ms {
			out[i] = !rule.expired(t, watermark)
		}
	})
}

// commitChanges takes the partition's changes after eviction: a group that
// changed and expired in one batch is recorded as removed only.
func (p *aggPart) commitChanges(ctx context.Context, removed arrow.RecordBatch) (finished, error) {
	changed := int64(p.gb.Changed())
	f := finished{updated: changed}
	if removed != nil {
		f.removed = removed.NumRows()
	}
	// When at least half the groups changed and none left, the version
	// is committed whole (the unchanged groups too), as a full delta: a
	// later load starts from it, and no snapshot is needed (statestore's
	// CommitFull). Writing the rest costs at most as much again as the
	// changes; a snapshot pass would read the older snapshot and every
	// delta since, and write the whole state.
	if p.commitsWhole() && f.removed == 0 {
		f.changes = map[string]stateChange{"": {upserts: p.gb.State(), removals: removed, full: true}}
		return f, nil
	}
	// Changes leaves out the groups Remove took (the kernel drops them
	// from its changed set), so no upsert repeats a removed key.
	changes := p.gb.Changes()
	f.changes = map[string]stateChange{"": {upserts: changes, removals: removed}}
	return f, nil
}

// commitsWhole reports whether the batch's changes are committed as the
// whole state (a full delta), removals aside: at least half the groups
// changed, and the partition holds them all.
func (p *aggPart) commitsWhole() bool {
	n := p.gb.Len()
	return !p.partial && n > 0 && 2*p.gb.Changed() >= n
}

// filterExpired keeps the rows of rec whose column col holds an event time
// the watermark expired (want) or not (!want).
func filterExpired(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, rule *evictRule, watermark int64, want bool) (arrow.RecordBatch, error) {
	ms, _, err := kernel.EventTimesMillis(rec, rule.col)
	if err != nil {
		return nil, err
	}
	keep := make([]bool, len(ms))
	for i, t := range ms {
		keep[i] = rule.expired(t, watermark) == want
	}
	return kernel.FilterRows(ctx, mem, rec, keep)
}

// finishAgg is the output of a group-by or window partition: in append
// mode the groups the watermark closed (sorted by key, then evicted), in
// complete mode every group (sorted), in update mode the groups the batch
// changed in order of first touch. Groups the watermark passed are evicted
// in every mode but complete.
func (p *aggPart) finishAgg(ctx context.Context, fc *finishCtx, rule *evictRule, nKeys int) (finished, error) {
	var out arrow.RecordBatch
	var err error
	switch fc.mode {
	case Append:
		if rule == nil {
			return finished{}, fmt.Errorf("append output needs groups that close (an event-time window or an event-time key under a watermark)")
		}
		all := p.gb.Output(false)
		out, err = filterExpired(ctx, p.h.mem, all, rule, fc.watermark, true)
		all.Release()
		if err == nil {
			out, err = sortByKeys(ctx, p.h.mem, out, nKeys)
		}
	case Complete:
		out, err = sortByKeys(ctx, p.h.mem, p.gb.Output(false), nKeys)
	default:
		// Update: groups in order of first touch in this batch, a
		// function of the batch's input alone.
		if rule == nil {
			// Nothing is evicted: the output's columns are built with
			// the state's (the changes, or the whole state when it is
			// committed whole), once.
			return p.finishUpdate()
		}
		out = p.gb.Output(true)
	}
	if err != nil {
		return finished{}, err
	}
	var removed arrow.RecordBatch
	if fc.mode != Complete {
		if removed, err = p.evict(rule, fc.watermark); err != nil {
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

// finishUpdate is finishAgg in update mode when nothing is evicted: the
// changed groups in order of first touch, and the state committed as
// commitChanges would (without removals), built together so the columns
// they share (keys, and aggregates whose state is their result) are built
// once. On one working table both come split by state partition, built
// in partition order (kernel.GroupBy.StateOutputParts), so the commit
// neither hashes nor copies them again.
func (p *aggPart) finishUpdate() (finished, error) {
	f := finished{updated: int64(p.gb.Changed())}
	var state arrow.RecordBatch
	full := p.commitsWhole()
	if p.wholeParts > 0 {
		ups, out, err := p.gb.StateOutputParts(p.wholeParts, full)
		if err != nil {
			return finished{}, err
		}
		f.changes = map[string]stateChange{"": {full: full}}
		f.parts = &splitChange{upserts: ups, out: out}
		return f, nil
	}
	if full {
		state, f.out = p.gb.StateOutput()
	} else {
		state, f.out = p.gb.ChangesOutput()
	}
	f.changes = map[string]stateChange{"": {upserts: state, full: full}}
	f.outHead = true // the changed groups first, in the same order
	return f, nil
}

// groupByOp is GroupBy(keys).Agg(...): one row per distinct key. With the
// event-time column among its keys (a window's window_end from an
// operator before it, or the watermark's column) its groups close under
// the watermark: append mode emits them once, and every mode but complete
// evicts them.
type groupByOp struct {
	step *aggregateStep
	h    *hashAgg
	ev   *evictRule // nil: groups never close
}

func newGroupByOp(cfg *config, in *arrow.Schema, st *aggregateStep, ev eventTimeCol) (*groupByOp, error) {
	h, aggs, err := newHashAgg(cfg.mem, in, st.aggs)
	if err != nil {
		return nil, err
	}
	need := map[string]bool{}
	for _, k := range st.keys {
		need[k] = true
	}
	for _, a := range aggs {
		need[a.Column] = true
	}
	h.pruneTo(need)
	if err := h.bindKeys(st.keys, aggs); err != nil {
		return nil, err
	}
	o := &groupByOp{step: st, h: h}
	if ev.col >= 0 {
		name := in.Field(ev.col).Name
		for i, k := range st.keys {
			if k == name {
				o.ev = &evictRule{col: i, inKeys: true, offsetMs: ev.offsetMs}
			}
		}
	}
	return o, nil
}

func (o *groupByOp) id() string                    { return o.step.id }
func (o *groupByOp) kind() string                  { return "groupBy" }
func (o *groupByOp) inputs() int                   { return 1 }
func (o *groupByOp) inputSchema(int) *arrow.Schema { return o.h.in }
func (o *groupByOp) outputSchema() *arrow.Schema   { return o.h.outSchema }
func (o *groupByOp) stores() []storeSpec           { return []storeSpec{o.h.store(true)} }
func (o *groupByOp) partitionKeys(int) []int       { return o.h.keyIdx }
func (o *groupByOp) evicts() bool                  { return o.ev != nil }
func (o *groupByOp) release()                      {}
func (o *groupByOp) closes() bool                  { return o.ev != nil }
func (o *groupByOp) aggregates() bool              { return true }
func (o *groupByOp) conf() OperatorConf            { return aggConf(o.step, o.kind(), o.h) }
func (o *groupByOp) newPartition(int) (opPartition, error) {
	p, err := o.h.newPart()
	if err != nil {
		return nil, err
	}
	return &groupByPart{aggPart: p, op: o}, nil
}

func (o *groupByOp) prepare(ctx context.Context, _ int, rec arrow.RecordBatch, _ int64) (arrow.RecordBatch, int64, error) {
	rec.Retain()
	out, err := o.h.project(ctx, rec)
	return out, 0, err
}

func (o *groupByOp) eventTime() eventTimeCol {
	if o.ev == nil {
		return noEventTime
	}
	return eventTimeCol{col: o.ev.col, offsetMs: o.ev.offsetMs}
}

type groupByPart struct {
	*aggPart
	op *groupByOp
}

func (p *groupByPart) finish(ctx context.Context, fc *finishCtx) (finished, error) {
	return p.finishAgg(ctx, fc, p.op.ev, len(p.op.step.keys))
}

func aggConf(st *aggregateStep, kind string, h *hashAgg) OperatorConf {
	return OperatorConf{ID: st.id, Kind: kind, Keys: st.keys, KeySchema: h.keySchema.String(), StateSchema: h.stateSchema.String(), Params: aggParams(st)}
}

// aggParams spells what the state schema does not show: each aggregate's
// function and input, the window's size and slide or the session's gap.
func aggParams(st *aggregateStep) string {
	var parts []string
	if st.window != nil {
		parts = append(parts, "window="+st.window.String())
	}
	for _, a := range st.aggs {
		in := "*"
		if a.Input() != nil {
			in = a.Input().String()
		}
		pb := ""
		if a.IsPerBatch() {
			pb = " per batch"
		}
		parts = append(parts, fmt.Sprintf("%s(%s)%s AS %s", a.Func(), in, pb, a.Name()))
	}
	return strings.Join(parts, "; ")
}

// windowOp is GroupByWindow(TumblingWindow|SlidingWindow, keys).Agg(...):
// each row is assigned to the windows covering its time column, and the
// groups are (window_start, window_end, keys...). A window closes when the
// watermark passes its end: append mode emits it once, and every mode but
// complete evicts it. Its output carries window_end as event time (minus
// 1 ms: the last instant inside the window).
type windowOp struct {
	step   *aggregateStep
	h      *hashAgg
	window *kernel.WindowAssigner
	in     *arrow.Schema
	ev     *evictRule // nil without a watermark
}

func newWindowOp(cfg *config, in *arrow.Schema, st *aggregateStep, ev eventTimeCol) (*windowOp, error) {
	h, aggs, err := newHashAgg(cfg.mem, in, st.aggs)
	if err != nil {
		return nil, err
	}
	need := map[string]bool{st.window.col: true}
	for _, k := range st.keys {
		need[k] = true
	}
	for _, a := range aggs {
		need[a.Column] = true
	}
	h.pruneTo(need)
	w, err := kernel.NewWindowAssigner(cfg.mem, h.gbIn, st.window.col, st.window.size, st.window.slide)
	if err != nil {
		return nil, err
	}
	h.gbIn = w.Schema()
	if err := h.bindKeys(append([]string{batch.WindowStart, batch.WindowEnd}, st.keys...), aggs); err != nil {
		return nil, err
	}
	o := &windowOp{step: st, h: h, window: w, in: in}
	if ev.col >= 0 {
		o.ev = &evictRule{col: 1, inKeys: true, offsetMs: -1}
	}
	return o, nil
}

func (o *windowOp) id() string                    { return o.step.id }
func (o *windowOp) kind() string                  { return "windowAggregate" }
func (o *windowOp) inputs() int                   { return 1 }
func (o *windowOp) inputSchema(int) *arrow.Schema { return o.in }
func (o *windowOp) outputSchema() *arrow.Schema   { return o.h.outSchema }
func (o *windowOp) stores() []storeSpec           { return []storeSpec{o.h.store(true)} }
func (o *windowOp) partitionKeys(int) []int       { return o.h.keyIdx }
func (o *windowOp) evicts() bool                  { return o.ev != nil }
func (o *windowOp) release()                      {}
func (o *windowOp) closes() bool                  { return o.ev != nil }
func (o *windowOp) aggregates() bool              { return true }
func (o *windowOp) conf() OperatorConf            { return aggConf(o.step, o.kind(), o.h) }
func (o *windowOp) eventTime() eventTimeCol {
	if o.ev == nil {
		return noEventTime
	}
	return eventTimeCol{col: 1, offsetMs: -1}
}

func (o *windowOp) newPartition(int) (opPartition, error) {
	p, err := o.h.newPart()
	if err != nil {
		return nil, err
	}
	return &windowPart{aggPart: p, op: o}, nil
}

// prepare assigns windows. A row of a sliding window can fall in windows
// the watermark has closed (and emitted) as well as open ones: only the
// open ones are kept, or a closed window would be emitted twice. The rows
// taken out that way are counted as late.
func (o *windowOp) prepare(ctx context.Context, _ int, rec arrow.RecordBatch, watermark int64) (arrow.RecordBatch, int64, error) {
	rec.Retain()
	cur, err := o.h.project(ctx, rec)
	if err != nil {
		return nil, 0, err
	}
	next, err := o.window.Apply(ctx, cur)
	cur.Release()
	if err != nil {
		return nil, 0, err
	}
	cur = next
	if o.ev == nil || watermark <= 0 {
		return cur, 0, nil
	}
	ends, _, err := kernel.EventTimesMillis(cur, int(cur.NumCols()-1))
	if err != nil {
		cur.Release()
		return nil, 0, err
	}
	keep := make([]bool, len(ends))
	closed := int64(0)
	for i, e := range ends {
		keep[i] = e > watermark
		if !keep[i] {
			closed++
		}
	}
	if closed == 0 {
		return cur, 0, nil
	}
	next, err = kernel.FilterRows(ctx, o.h.mem, cur, keep)
	cur.Release()
	return next, closed, err
}

type windowPart struct {
	*aggPart
	op *windowOp
}

func (p *windowPart) finish(ctx context.Context, fc *finishCtx) (finished, error) {
	return p.finishAgg(ctx, fc, p.op.ev, len(p.op.step.keys)+2)
}

// sortByKeys orders rec (an aggregation output, keys first: nk columns) by
// its key columns, nulls last, and releases rec. Groups live in the hash
// table in insertion order, which differs between a run and its restart
// from a state snapshot; sorting makes what reaches the sink a function of
// the state alone, so a re-run batch is byte-for-byte its first attempt.
// The order is computed in Go (arrow-go's sort kernels keep scratch
// buffers of the allocator they are given), the rows moved with takeRows.
func sortByKeys(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, nk int) (arrow.RecordBatch, error) {
	defer rec.Release()
	n := int(rec.NumRows())
	if n < 2 {
		rec.Retain()
		return rec, nil
	}
	cmps := make([]func(a, b int) int, nk)
	for c := range cmps {
		cmp, err := columnCompare(rec.Column(c))
		if err != nil {
			return nil, fmt.Errorf("sort output by key: %w", err)
		}
		cmps[c] = cmp
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(x, y int) bool {
		for _, cmp := range cmps {
			if r := cmp(idx[x], idx[y]); r != 0 {
				return r < 0
			}
		}
		return false
	})
	sorted := true
	for i := range idx {
		if idx[i] != i {
			sorted = false
			break
		}
	}
	if sorted {
		rec.Retain()
		return rec, nil
	}
	return takeRows(ctx, mem, rec, idx)
}

// columnCompare orders the rows of one column: nulls after values.
func columnCompare(c arrow.Array) (func(a, b int) int, error) {
	var vals func(a, b int) int
	switch a := c.(type) {
	case *array.String:
		vals = func(x, y int) int { return strings.Compare(a.Value(x), a.Value(y)) }
	case *array.LargeString:
		vals = func(x, y int) int { return strings.Compare(a.Value(x), a.Value(y)) }
	case *array.Binary:
		vals = func(x, y int) int { return bytes.Compare(a.Value(x), a.Value(y)) }
	case *array.Boolean:
		vals = func(x, y int) int { return cmpBool(a.Value(x), a.Value(y)) }
	case *array.Float64:
		vals = func(x, y int) int { return cmp.Compare(a.Value(x), a.Value(y)) }
	case *array.Float32:
		vals = func(x, y int) int { return cmp.Compare(a.Value(x), a.Value(y)) }
	case *array.Uint64:
		vals = func(x, y int) int { return cmp.Compare(a.Value(x), a.Value(y)) }
	case *array.Date32:
		vals = func(x, y int) int { return cmp.Compare(a.Value(x), a.Value(y)) }
	case *array.Date64:
		vals = func(x, y int) int { return cmp.Compare(a.Value(x), a.Value(y)) }
	default:
		if !arrow.IsInteger(c.DataType().ID()) && c.DataType().ID() != arrow.TIMESTAMP {
			return nil, fmt.Errorf("cannot order a key column of type %s", c.DataType())
		}
		iv := integerValues(c)
		vals = func(x, y int) int { return cmp.Compare(iv(x), iv(y)) }
	}
	if c.NullN() == 0 {
		return vals, nil
	}
	return func(x, y int) int {
		nx, ny := c.IsNull(x), c.IsNull(y)
		switch {
		case nx && ny:
			return 0
		case nx:
			return 1
		case ny:
			return -1
		}
		return vals(x, y)
	}, nil
}

func cmpBool(a, b bool) int {
	switch {
	case a == b:
		return 0
	case !a:
		return -1
	}
	return 1
}
