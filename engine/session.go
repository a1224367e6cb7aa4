package engine

import (
	"context"
	"encoding/binary"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/internal/kernel"
)

// SessionWindow groups rows per key into sessions: rows of one key whose
// event times are less than gap apart belong to one session, which spans
// [first event, last event + gap). Sessions merge across batches when a
// row bridges two of them. Aggregates over sessions are Count, Sum, Min,
// Max and Avg (the ones that combine when sessions merge); output modes
// are append (a session is emitted once, when the watermark passes its
// end) and complete.
func SessionWindow(col string, gap time.Duration) Window {
	return Window{col: col, gap: gap}
}

// The session operator keeps its sessions in a GroupBy keyed by the user's
// keys and the session start (__s); every aggregate is stored in a form
// that a merged-in session can be fed back as one synthetic row: counts as
// sums of ones, averages as a sum and a count.
const (
	sessStart = "__s"
	sessTMin  = "__tmin"
	sessTMax  = "__tmax"
)

type sessionAgg struct {
	user  kernel.Agg
	col   int            // input column, -1 for count(*)
	typ   arrow.DataType // of the stored value(s)
	inner []string       // stored column names (avg: sum, count)
}

type sessionState struct {
	gap    int64 // in the event-time column's unit
	unit   arrow.TimeUnit
	tsType *arrow.TimestampType
	tsIdx  int
	nKeys  int
	inner  *arrow.Schema // GroupBy input
	gbKeys []string
	gbAggs []kernel.Agg
	aggs   []sessionAgg
	out    *arrow.Schema
}

// sessionOp is GroupByWindow(SessionWindow, keys).Agg(...).
type sessionOp struct {
	step        *aggregateStep
	mem         memory.Allocator
	in          *arrow.Schema // entering the operator
	exprs       *batch.Projection
	keyIdx      []int // in the kernel's input
	session     *sessionState
	keySchema   *arrow.Schema
	stateSchema *arrow.Schema
	outSchema   *arrow.Schema
	watermarked bool
}

func newSessionOp(cfg *config, in *arrow.Schema, st *aggregateStep, ev eventTimeCol) (*sessionOp, error) {
	exprs, aggs, err := bindAggs(cfg.mem, in, st.aggs)
	if err != nil {
		return nil, err
	}
	opIn := in
	if exprs != nil {
		in = exprs.Schema()
	}
	w := st.window
	idx := in.FieldIndices(w.col)
	if len(idx) != 1 {
		return nil, fmt.Errorf("session window column %q is not a column of %s", w.col, in)
	}
	tsType, ok := in.Field(idx[0]).Type.(*arrow.TimestampType)
	if !ok {
		return nil, fmt.Errorf("session window column %q is %s, not a timestamp", w.col, in.Field(idx[0]).Type)
	}
	per := int64(tsType.Unit.Multiplier())
	if w.gap <= 0 || w.gap.Nanoseconds()%per != 0 {
		return nil, fmt.Errorf("session gap %s must be positive and a whole number of the column's unit %s", w.gap, tsType.Unit)
	}
	ss := &sessionState{gap: w.gap.Nanoseconds() / per, unit: tsType.Unit, tsType: tsType, tsIdx: idx[0], nKeys: len(st.keys)}
	a := &sessionOp{step: st, mem: cfg.mem, in: opIn, exprs: exprs, session: ss, watermarked: ev.col >= 0}
	var innerFields, outFields []arrow.Field
	outFields = append(outFields, arrow.Field{Name: batch.WindowStart, Type: tsType}, arrow.Field{Name: batch.WindowEnd, Type: tsType})
	for _, k := range st.keys {
		ki := in.FieldIndices(k)
		if len(ki) != 1 {
			return nil, fmt.Errorf("key %q is not a column of %s", k, in)
		}
		a.keyIdx = append(a.keyIdx, ki[0])
		innerFields = append(innerFields, in.Field(ki[0]))
		outFields = append(outFields, in.Field(ki[0]))
	}
	innerFields = append(innerFields,
		arrow.Field{Name: sessStart, Type: tsType},
		arrow.Field{Name: sessTMin, Type: tsType, Nullable: true},
		arrow.Field{Name: sessTMax, Type: tsType, Nullable: true})
	gbKeys := append(append([]string(nil), st.keys...), sessStart)
	gbAggs := []kernel.Agg{{Func: batch.AggMin, Column: sessTMin, Name: sessTMin}, {Func: batch.AggMax, Column: sessTMax, Name: sessTMax}}
	for i, ua := range aggs {
		sa := sessionAgg{user: ua, col: -1}
		if ua.Column != "" {
			ci := in.FieldIndices(ua.Column)
			if len(ci) != 1 {
				return nil, fmt.Errorf("%s over %q: not a column of %s", ua.Func, ua.Column, in)
			}
			sa.col = ci[0]
		}
		name := fmt.Sprintf("__a%d", i)
		colType := arrow.DataType(arrow.Null)
		if sa.col >= 0 {
			colType = in.Field(sa.col).Type
		}
		switch ua.Func {
		case batch.AggCount:
			sa.typ, sa.inner = arrow.PrimitiveTypes.Int64, []string{name}
			gbAggs = append(gbAggs, kernel.Agg{Func: batch.AggSum, Column: name, Name: name})
			outFields = append(outFields, arrow.Field{Name: ua.Name, Type: arrow.PrimitiveTypes.Int64})
		case batch.AggSum, batch.AggAvg:
			switch {
			case arrow.IsInteger(colType.ID()):
				sa.typ = arrow.PrimitiveTypes.Int64
			case arrow.IsFloating(colType.ID()):
				sa.typ = arrow.PrimitiveTypes.Float64
			default:
				return nil, fmt.Errorf("%s over %q: type %s is not a number", ua.Func, ua.Column, colType)
			}
			sa.inner = []string{name}
			gbAggs = append(gbAggs, kernel.Agg{Func: batch.AggSum, Column: name, Name: name})
			if ua.Func == batch.AggAvg {
				sa.inner = append(sa.inner, name+"_n")
				gbAggs = append(gbAggs, kernel.Agg{Func: batch.AggSum, Column: name + "_n", Name: name + "_n"})
				outFields = append(outFields, arrow.Field{Name: ua.Name, Type: arrow.PrimitiveTypes.Float64, Nullable: true})
			} else {
				outFields = append(outFields, arrow.Field{Name: ua.Name, Type: sa.typ, Nullable: true})
			}
		case batch.AggMin, batch.AggMax:
			if sa.col < 0 {
				return nil, fmt.Errorf("%s needs a column", ua.Func)
			}
			sa.typ, sa.inner = colType, []string{name}
			if ua.Func == batch.AggMin {
				gbAggs = append(gbAggs, kernel.Agg{Func: batch.AggMin, Column: name, Name: name})
			} else {
				gbAggs = append(gbAggs, kernel.Agg{Func: batch.AggMax, Column: name, Name: name})
			}
			outFields = append(outFields, arrow.Field{Name: ua.Name, Type: colType, Nullable: true})
		default:
			return nil, fmt.Errorf("%s over session windows is not supported (sessions merge; use count, sum, min, max or avg)", ua.Func)
		}
		for _, n := range sa.inner {
			t := sa.typ
			if strings.HasSuffix(n, "_n") {
				t = arrow.PrimitiveTypes.Int64
			}
			innerFields = append(innerFields, arrow.Field{Name: n, Type: t, Nullable: true})
		}
		ss.aggs = append(ss.aggs, sa)
	}
	ss.inner = arrow.NewSchema(innerFields, nil)
	ss.out = arrow.NewSchema(outFields, nil)
	ss.gbKeys, ss.gbAggs = gbKeys, gbAggs
	g, err := kernel.NewGroupBy(cfg.mem, ss.inner, gbKeys, gbAggs)
	if err != nil {
		return nil, err
	}
	defer g.Release()
	a.keySchema, a.stateSchema, a.outSchema = g.KeySchema(), g.StateSchema(), ss.out
	return a, nil
}

func (o *sessionOp) id() string                    { return o.step.id }
func (o *sessionOp) kind() string                  { return "sessionWindowAggregate" }
func (o *sessionOp) inputs() int                   { return 1 }
func (o *sessionOp) inputSchema(int) *arrow.Schema { return o.in }
func (o *sessionOp) outputSchema() *arrow.Schema   { return o.outSchema }
func (o *sessionOp) partitionKeys(int) []int       { return o.keyIdx }
func (o *sessionOp) evicts() bool                  { return o.watermarked }
func (o *sessionOp) aggregates() bool              { return true }
func (o *sessionOp) closes() bool                  { return o.watermarked }
func (o *sessionOp) release()                      {}
func (o *sessionOp) stores() []storeSpec {
	return []storeSpec{{key: o.keySchema, value: o.stateSchema, uniqueUpserts: true}}
}
func (o *sessionOp) conf() OperatorConf {
	return OperatorConf{ID: o.step.id, Kind: o.kind(), Keys: o.step.keys, KeySchema: o.keySchema.String(), StateSchema: o.stateSchema.String(), Params: aggParams(o.step)}
}

// eventTime is the session's end (window_end) minus 1 ms.
func (o *sessionOp) eventTime() eventTimeCol {
	if !o.watermarked {
		return noEventTime
	}
	return eventTimeCol{col: 1, offsetMs: -1}
}

func (o *sessionOp) prepare(ctx context.Context, _ int, rec arrow.RecordBatch, _ int64) (arrow.RecordBatch, int64, error) {
	if o.exprs == nil {
		rec.Retain()
		return rec, 0, nil
	}
	out, err := o.exprs.Apply(ctx, rec)
	return out, 0, err
}

func (o *sessionOp) newPartition(int) (opPartition, error) {
	gb, err := kernel.NewGroupBy(o.mem, o.session.inner, o.session.gbKeys, o.session.gbAggs)
	if err != nil {
		return nil, err
	}
	return &sessionPart{op: o, gb: gb}, nil
}

// sessionPart is one partition of a session window: its sessions in a
// GroupBy, and the batch's rows, which are placed only at finish (a row
// may bridge sessions that other rows of the batch open).
type sessionPart struct {
	op      *sessionOp
	gb      *kernel.GroupBy
	pending []arrow.RecordBatch
}

func (p *sessionPart) load(_ context.Context, _ string, recs []arrow.RecordBatch) error {
	for _, r := range recs {
		if err := p.gb.Load(r); err != nil {
			return err
		}
	}
	return nil
}

func (p *sessionPart) merge(_ context.Context, _ int, rec arrow.RecordBatch) error {
	rec.Retain()
	p.pending = append(p.pending, rec)
	return nil
}

func (p *sessionPart) committed()           { p.gb.ClearChanges() }
func (p *sessionPart) size() (int64, int64) { return int64(p.gb.Len()), p.gb.MemoryBytes() }
func (p *sessionPart) release() {
	for _, r := range p.pending {
		r.Release()
	}
	p.pending = nil
	p.gb.Release()
}

// innerColumns builds the stored-value columns of the operator's input rows.
func (ss *sessionState) innerColumns(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch) ([]arrow.Array, error) {
	var out []arrow.Array
	fail := func(err error) ([]arrow.Array, error) {
		for _, c := range out {
			c.Release()
		}
		return nil, err
	}
	n := int(rec.NumRows())
	ones := func(col int) arrow.Array {
		b := array.NewInt64Builder(mem)
		defer b.Release()
		b.Reserve(n)
		for i := 0; i < n; i++ {
			if col >= 0 && rec.Column(col).IsNull(i) {
				b.UnsafeAppend(0)
			} else {
				b.UnsafeAppend(1)
			}
		}
		return b.NewArray()
	}
	for _, sa := range ss.aggs {
		switch sa.user.Func {
		case batch.AggCount:
			out = append(out, ones(sa.col))
		default:
			c := rec.Column(sa.col)
			if arrow.TypeEqual(c.DataType(), sa.typ) {
				c.Retain()
				out = append(out, c)
			} else {
				cast, err := compute.CastToType(compute.WithAllocator(ctx, mem), c, sa.typ)
				if err != nil {
					return fail(fmt.Errorf("session aggregate %s: %w", sa.user.Name, err))
				}
				out = append(out, cast)
			}
			if sa.user.Func == batch.AggAvg {
				out = append(out, ones(sa.col))
			}
		}
	}
	return out, nil
}

type sessPoint struct {
	start, end int64 // end = last event + gap
	existing   int   // index into the current groups, or -1 for a batch row
}

// keyString encodes row i of the key columns for grouping in Go maps:
// per column 0x00 for a null, else 0x01, the length of the value's bytes
// as a uvarint, and the bytes (a string's or binary's own, any other
// type's ValueStr). Length-prefixed, so two different keys never encode
// alike, whatever bytes their strings hold. It lives only in memory: the
// state stores the key columns themselves (docs/format/state.md).
func keyString(cols []arrow.Array, i int) string {
	var b []byte
	for _, c := range cols {
		if c.IsNull(i) {
			b = append(b, 0)
			continue
		}
		var v string
		switch a := c.(type) {
		case *array.String:
			v = a.Value(i)
		case *array.LargeString:
			v = a.Value(i)
		case *array.Binary:
			v = string(a.Value(i))
		case *array.LargeBinary:
			v = string(a.Value(i))
		default:
			v = c.ValueStr(i)
		}
		b = append(b, 1)
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	return string(b)
}

func tsValues(a arrow.Array) []arrow.Timestamp { return a.(*array.Timestamp).TimestampValues() }

// finishSession merges the partition's buffered rows into its sessions:
// sessions a row bridges are merged (removed and fed back as one row each
// under the merged start), rows get their session's start, and closed
// sessions are emitted and evicted in append mode.
func (p *sessionPart) finish(ctx context.Context, fc *finishCtx) (finished, error) {
	a, part := p.op, p
	ss := a.session
	gb := part.gb
	defer func() {
		for _, r := range part.pending {
			r.Release()
		}
		part.pending = part.pending[:0]
	}()
	// The sessions that exist, and the batch's rows, per key.
	all := gb.Output(false)
	defer all.Release()
	groups := map[string][]sessPoint{}
	gKeys := all.Columns()[:ss.nKeys]
	gStart := tsValues(all.Column(ss.nKeys))
	gMax := tsValues(all.Column(ss.nKeys + 2))
	for _, r := range part.pending {
		keys := make([]arrow.Array, ss.nKeys)
		for j, k := range a.keyIdx {
			keys[j] = r.Column(k)
		}
		ts := tsValues(r.Column(ss.tsIdx))
		for i := 0; i < int(r.NumRows()); i++ {
			if r.Column(ss.tsIdx).IsNull(i) {
				return finished{}, fmt.Errorf("session window over %q: a row has no event time (null)", a.step.window.col)
			}
			k := keyString(keys, i)
			groups[k] = append(groups[k], sessPoint{start: int64(ts[i]), end: int64(ts[i]) + ss.gap, existing: -1})
		}
	}
	for g := 0; g < int(all.NumRows()); g++ {
		k := keyString(gKeys, g)
		if _, ok := groups[k]; ok {
			groups[k] = append(groups[k], sessPoint{start: int64(gStart[g]), end: int64(gMax[g]) + ss.gap, existing: g})
		}
	}
	// Merge overlapping intervals per key; every point learns its start.
	newStart := map[int]int64{}      // existing group → merged start
	rowStart := map[string][]int64{} // key → starts of its batch rows, in row order
	keysSorted := make([]string, 0, len(groups))
	for k := range groups {
		keysSorted = append(keysSorted, k)
	}
	sort.Strings(keysSorted)
	for _, k := range keysSorted {
		pts := groups[k]
		order := make([]int, len(pts))
		for i := range order {
			order[i] = i
		}
		sort.SliceStable(order, func(x, y int) bool { return pts[order[x]].start < pts[order[y]].start })
		starts := make([]int64, len(pts))
		var curStart, curEnd int64
		for n, i := range order {
			p := pts[i]
			if n == 0 || p.start >= curEnd {
				curStart, curEnd = p.start, p.end
			} else {
				curEnd = max(curEnd, p.end)
			}
			starts[i] = curStart
		}
		for i, p := range pts {
			if p.existing >= 0 {
				newStart[p.existing] = starts[i]
			} else {
				rowStart[k] = append(rowStart[k], starts[i])
			}
		}
	}
	// A session's start only moves earlier in a merge, so it can take the
	// merged start only if it was already the earliest; every other one
	// merged into it is removed and fed back.
	keep := make([]bool, all.NumRows())
	var moved []int
	for g := range keep {
		s, ok := newStart[g]
		keep[g] = !ok || s == int64(gStart[g])
		if !keep[g] {
			moved = append(moved, g)
		}
	}
	var deletes []arrow.RecordBatch
	defer func() {
		for _, d := range deletes {
			d.Release()
		}
	}()
	var synthetic arrow.RecordBatch
	if len(moved) > 0 {
		var err error
		if synthetic, err = a.sessionSynthetic(ctx, all, moved, newStart); err != nil {
			return finished{}, err
		}
		defer synthetic.Release()
		removed, err := gb.Remove(func(_ []arrow.Array, out []bool) { copy(out, keep) })
		if err != nil {
			return finished{}, err
		}
		deletes = append(deletes, removed)
		if err := gb.Merge(synthetic); err != nil {
			return finished{}, err
		}
	}
	// The batch's rows under their sessions' starts.
	next := map[string]int{}
	for _, r := range part.pending {
		inner, err := a.sessionRows(ctx, r, rowStart, next)
		if err != nil {
			return finished{}, err
		}
		err = gb.Merge(inner)
		inner.Release()
		if err != nil {
			return finished{}, err
		}
	}
	// Output and eviction.
	final := gb.Output(false)
	defer final.Release()
	ends := make([]int64, final.NumRows())
	for g, t := range tsValues(final.Column(ss.nKeys + 2)) {
		ends[g] = kernel.TimestampMillis(int64(t)+ss.gap, ss.unit)
	}
	closed := make([]bool, len(ends))
	anyClosed := false
	for g, e := range ends {
		closed[g] = fc.mode == Append && fc.watermark > 0 && e <= fc.watermark
		anyClosed = anyClosed || closed[g]
	}
	var out arrow.RecordBatch
	var err error
	switch fc.mode {
	case Append:
		sel, ferr := kernel.FilterRows(ctx, a.mem, final, closed)
		if ferr != nil {
			return finished{}, ferr
		}
		out, err = a.sessionOutput(sel)
		sel.Release()
	default:
		out, err = a.sessionOutput(final)
	}
	if err != nil {
		return finished{}, err
	}
	if out, err = sortByKeys(ctx, a.mem, out, ss.nKeys+2); err != nil {
		return finished{}, err
	}
	changes := gb.Changes()
	f := finished{updated: changes.NumRows()}
	if anyClosed {
		removed, err := gb.Remove(func(_ []arrow.Array, o []bool) {
			for g := range o {
				o[g] = !closed[g]
			}
		})
		if err != nil {
			out.Release()
			changes.Release()
			return finished{}, err
		}
		deletes = append(deletes, removed)
	}
	var del arrow.RecordBatch
	if len(deletes) > 0 {
		if del, err = concatRecords(a.mem, a.keySchema, deletes); err != nil {
			out.Release()
			changes.Release()
			return finished{}, err
		}
		f.removed = del.NumRows()
	}
	f.out = out
	f.changes = map[string]stateChange{"": {upserts: changes, removals: del}}
	return f, nil
}

// sessionSynthetic returns one GroupBy input row per moved session, holding
// its stored values under its new start.
func (a *sessionOp) sessionSynthetic(ctx context.Context, all arrow.RecordBatch, moved []int, newStart map[int]int64) (arrow.RecordBatch, error) {
	ss := a.session
	ib := array.NewInt32Builder(a.mem)
	for _, g := range moved {
		ib.Append(int32(g))
	}
	idx := ib.NewArray()
	ib.Release()
	defer idx.Release()
	cctx := compute.WithAllocator(ctx, a.mem)
	var cols []arrow.Array
	release := func() {
		for _, c := range cols {
			c.Release()
		}
	}
	take := func(c arrow.Array) error {
		t, err := compute.TakeArray(cctx, c, idx)
		if err != nil {
			return err
		}
		cols = append(cols, t)
		return nil
	}
	for j := 0; j < ss.nKeys; j++ {
		if err := take(all.Column(j)); err != nil {
			release()
			return nil, err
		}
	}
	sb := array.NewTimestampBuilder(a.mem, ss.tsType)
	for _, g := range moved {
		sb.Append(arrow.Timestamp(newStart[g]))
	}
	cols = append(cols, sb.NewArray())
	sb.Release()
	// __tmin, __tmax, then the stored values, in GroupBy output order.
	for c := ss.nKeys + 1; c < int(all.NumCols()); c++ {
		if err := take(all.Column(c)); err != nil {
			release()
			return nil, err
		}
	}
	rec := array.NewRecordBatch(ss.inner, cols, int64(len(moved)))
	release()
	return rec, nil
}

// sessionRows builds GroupBy input rows from operator input rows, giving
// row i of key k the next start from rowStart[k].
func (a *sessionOp) sessionRows(ctx context.Context, r arrow.RecordBatch, rowStart map[string][]int64, next map[string]int) (arrow.RecordBatch, error) {
	ss := a.session
	keys := make([]arrow.Array, ss.nKeys)
	for j, k := range a.keyIdx {
		keys[j] = r.Column(k)
	}
	sb := array.NewTimestampBuilder(a.mem, ss.tsType)
	defer sb.Release()
	for i := 0; i < int(r.NumRows()); i++ {
		k := keyString(keys, i)
		sb.Append(arrow.Timestamp(rowStart[k][next[k]]))
		next[k]++
	}
	vals, err := ss.innerColumns(ctx, a.mem, r)
	if err != nil {
		return nil, err
	}
	start := sb.NewArray()
	ts := r.Column(ss.tsIdx)
	cols := append(append([]arrow.Array(nil), keys...), start, ts, ts)
	cols = append(cols, vals...)
	rec := array.NewRecordBatch(ss.inner, cols, r.NumRows())
	start.Release()
	for _, v := range vals {
		v.Release()
	}
	return rec, nil
}

// sessionOutput turns GroupBy output rows into the operator's output:
// window_start, window_end, keys, aggregates.
func (a *sessionOp) sessionOutput(rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	ss := a.session
	n := int(rec.NumRows())
	cols := []arrow.Array{}
	start := rec.Column(ss.nKeys)
	start.Retain()
	cols = append(cols, start)
	eb := array.NewTimestampBuilder(a.mem, ss.tsType)
	maxCol := rec.Column(ss.nKeys + 2).(*array.Timestamp)
	for i := 0; i < n; i++ {
		eb.Append(maxCol.Value(i) + arrow.Timestamp(ss.gap))
	}
	cols = append(cols, eb.NewArray())
	eb.Release()
	for j := 0; j < ss.nKeys; j++ {
		c := rec.Column(j)
		c.Retain()
		cols = append(cols, c)
	}
	c := ss.nKeys + 3
	for _, sa := range ss.aggs {
		if sa.user.Func != batch.AggAvg {
			col := rec.Column(c)
			col.Retain()
			cols = append(cols, col)
			c++
			continue
		}
		fb := array.NewFloat64Builder(a.mem)
		cnt := rec.Column(c + 1).(*array.Int64)
		for i := 0; i < n; i++ {
			if rec.Column(c).IsNull(i) || cnt.IsNull(i) || cnt.Value(i) == 0 {
				fb.AppendNull()
				continue
			}
			var sum float64
			switch v := rec.Column(c).(type) {
			case *array.Int64:
				sum = float64(v.Value(i))
			case *array.Float64:
				sum = v.Value(i)
			}
			fb.Append(sum / float64(cnt.Value(i)))
		}
		cols = append(cols, fb.NewArray())
		fb.Release()
		c += 2
	}
	out := array.NewRecordBatch(ss.out, cols, int64(n))
	for _, col := range cols {
		col.Release()
	}
	return out, nil
}

func concatRecords(mem memory.Allocator, schema *arrow.Schema, recs []arrow.RecordBatch) (arrow.RecordBatch, error) {
	if len(recs) == 1 {
		recs[0].Retain()
		return recs[0], nil
	}
	var n int64
	cols := make([]arrow.Array, schema.NumFields())
	for c := range cols {
		parts := make([]arrow.Array, len(recs))
		for i, r := range recs {
			parts[i] = r.Column(c)
		}
		joined, err := array.Concatenate(parts, mem)
		if err != nil {
			for _, done := range cols[:c] {
				done.Release()
			}
			return nil, err
		}
		cols[c] = joined
	}
	for _, r := range recs {
		n += r.NumRows()
	}
	out := array.NewRecordBatch(schema, cols, n)
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}
