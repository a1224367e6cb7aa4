package engine

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/internal/kernel"
)

// Order is the direction of a ranking.
type Order int

const (
	// Desc ranks the highest value first.
	Desc Order = iota
	// Asc ranks the lowest value first.
	Asc
)

func (o Order) String() string {
	if o == Asc {
		return "asc"
	}
	return "desc"
}

type topStep struct {
	id    string
	keys  []string
	n     int
	by    string
	order Order
}

// Top completes a grouping with the n best rows of each group by column
// by (SQL's RANK() ≤ n: rows tied at the n-th place are all kept), emitted
// once per group, when the watermark closes it. The group keys must hold
// the event time (a window's window_start and window_end, or the
// watermark's column), so the query runs in append mode. The output rows
// are the input rows, ordered by group (the group keys' values ascending,
// nulls last; float keys by their text), then rank, ties in arrival order. Nexmark q5's "hot items
// per window" is GroupBy("window_start", "window_end").Top(1, "bids", Desc)
// after a windowed count.
func (g *Grouped) Top(n int, by string, order Order) *Stream {
	id := g.id
	if id == "" {
		id = "top-" + fmt.Sprint(n) + "-" + by
	}
	return g.stream.with(step{kind: stepTop, top: &topStep{id: id, keys: g.keys, n: n, by: by, order: order}})
}

// topOp keeps, per group, the rows that can still rank among the n best,
// and emits them when the watermark closes the group. State is one row per
// held input row, keyed by the group keys and a sequence number assigned
// in merge order (batch id << 32 | position), so a restart re-reads the
// rows in the same order and breaks ties the same way.
type topOp struct {
	st      *topStep
	mem     memory.Allocator
	in      *arrow.Schema
	keyIdx  []int // group keys in in
	byIdx   int
	rest    []int // the other columns of in
	ev      *evictRule
	held    *arrow.Schema // keys, __seq, rest
	keyS    *arrow.Schema // keys, __seq
	valS    *arrow.Schema // rest
	evInKey int           // the event-time key's index among the keys
}

const topSeq = "__seq"

func newTopOp(cfg *config, in *arrow.Schema, st *topStep, ev eventTimeCol) (*topOp, error) {
	if st.n < 1 {
		return nil, fmt.Errorf("top %d: n must be at least 1", st.n)
	}
	if len(st.keys) == 0 {
		return nil, fmt.Errorf("top needs group keys that hold the event time")
	}
	o := &topOp{st: st, mem: cfg.mem, in: in, byIdx: -1}
	isKey := map[int]bool{}
	var keyFields []arrow.Field
	for _, k := range st.keys {
		idx := in.FieldIndices(k)
		if len(idx) != 1 {
			return nil, fmt.Errorf("key %q is not a column of %s", k, in)
		}
		o.keyIdx = append(o.keyIdx, idx[0])
		isKey[idx[0]] = true
		keyFields = append(keyFields, in.Field(idx[0]))
	}
	idx := in.FieldIndices(st.by)
	if len(idx) != 1 {
		return nil, fmt.Errorf("ranking column %q is not a column of %s", st.by, in)
	}
	o.byIdx = idx[0]
	switch t := in.Field(o.byIdx).Type; {
	case arrow.IsInteger(t.ID()), arrow.IsFloating(t.ID()), t.ID() == arrow.TIMESTAMP:
	default:
		return nil, fmt.Errorf("ranking column %q is %s; top ranks numbers and timestamps", st.by, t)
	}
	if ev.col >= 0 {
		for i, k := range o.keyIdx {
			if k == ev.col {
				o.ev = &evictRule{col: i, inKeys: true, offsetMs: ev.offsetMs}
				o.evInKey = i
			}
		}
	}
	if o.ev == nil {
		return nil, fmt.Errorf("top emits each group when the watermark closes it: its keys %v must include the event-time column (a window's window_end, or the watermark's column)", st.keys)
	}
	var valFields []arrow.Field
	for i, f := range in.Fields() {
		if !isKey[i] {
			o.rest = append(o.rest, i)
			valFields = append(valFields, f)
		}
	}
	keyFields = append(keyFields, arrow.Field{Name: topSeq, Type: arrow.PrimitiveTypes.Int64})
	o.keyS = arrow.NewSchema(keyFields, nil)
	o.valS = arrow.NewSchema(valFields, nil)
	o.held = arrow.NewSchema(append(append([]arrow.Field(nil), keyFields...), valFields...), nil)
	return o, nil
}

func (o *topOp) id() string                    { return o.st.id }
func (o *topOp) kind() string                  { return "top" }
func (o *topOp) inputs() int                   { return 1 }
func (o *topOp) inputSchema(int) *arrow.Schema { return o.in }
func (o *topOp) outputSchema() *arrow.Schema   { return o.in }
func (o *topOp) partitionKeys(int) []int       { return o.keyIdx }
func (o *topOp) evicts() bool                  { return true }
func (o *topOp) aggregates() bool              { return false }
func (o *topOp) closes() bool                  { return true }
func (o *topOp) release()                      {}
func (o *topOp) stores() []storeSpec {
	return []storeSpec{{key: o.keyS, value: o.valS, uniqueUpserts: true}}
}
func (o *topOp) eventTime() eventTimeCol {
	return eventTimeCol{col: o.keyIdx[o.evInKey], offsetMs: o.ev.offsetMs}
}
func (o *topOp) conf() OperatorConf {
	return OperatorConf{ID: o.st.id, Kind: o.kind(), Keys: o.st.keys, KeySchema: o.keyS.String(), StateSchema: o.valS.String(),
		Params: fmt.Sprintf("n=%d by=%s %s", o.st.n, o.st.by, o.st.order)}
}

func (o *topOp) prepare(_ context.Context, _ int, rec arrow.RecordBatch, _ int64) (arrow.RecordBatch, int64, error) {
	rec.Retain()
	return rec, 0, nil
}

func (o *topOp) newPartition(int) (opPartition, error) { return &topPart{op: o}, nil }

type topPart struct {
	op      *topOp
	held    arrow.RecordBatch // in o.held's layout; nil for none
	pending []arrow.RecordBatch
}

func (p *topPart) load(ctx context.Context, _ string, recs []arrow.RecordBatch) error {
	all := append([]arrow.RecordBatch(nil), recs...)
	if p.held != nil {
		all = append([]arrow.RecordBatch{p.held}, all...)
	}
	if len(all) == 0 {
		return nil
	}
	joined, err := concatRecords(p.op.mem, p.op.held, all)
	if err != nil {
		return err
	}
	if p.held != nil {
		p.held.Release()
	}
	// The store returns rows in its own order: sort by sequence so ties
	// break as they did before the restart.
	p.held, err = p.sorted(ctx, joined)
	joined.Release()
	return err
}

func (p *topPart) merge(_ context.Context, _ int, rec arrow.RecordBatch) error {
	rec.Retain()
	p.pending = append(p.pending, rec)
	return nil
}

func (p *topPart) committed() {}

func (p *topPart) size() (int64, int64) {
	if p.held == nil {
		return 0, 0
	}
	var b int64
	for _, c := range p.held.Columns() {
		for _, buf := range c.Data().Buffers() {
			if buf != nil {
				b += int64(buf.Len())
			}
		}
	}
	return p.held.NumRows(), b
}

func (p *topPart) release() {
	for _, r := range p.pending {
		r.Release()
	}
	p.pending = nil
	if p.held != nil {
		p.held.Release()
		p.held = nil
	}
}

// sorted returns rec (in the held layout) ordered by sequence number.
func (p *topPart) sorted(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	seq := rec.Column(len(p.op.keyIdx)).(*array.Int64).Int64Values()
	idx := make([]int, len(seq))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return seq[idx[a]] < seq[idx[b]] })
	return takeRows(ctx, p.op.mem, rec, idx)
}

// finish ranks the held and new rows of each group, emits the groups the
// watermark closed and keeps the best n (with ties) of the others.
func (p *topPart) finish(ctx context.Context, fc *finishCtx) (finished, error) {
	o := p.op
	pending := p.pending
	p.pending = nil
	defer func() {
		for _, r := range pending {
			r.Release()
		}
	}()
	// New rows in the held layout, numbered in merge order.
	recs := []arrow.RecordBatch{}
	if p.held != nil {
		recs = append(recs, p.held)
	}
	var fresh []arrow.RecordBatch
	defer func() {
		for _, r := range fresh {
			r.Release()
		}
	}()
	next := fc.batchID << 32
	for _, r := range pending {
		h := o.toHeld(r, next)
		next += r.NumRows()
		fresh = append(fresh, h)
		recs = append(recs, h)
	}
	if len(recs) == 0 {
		return finished{changes: map[string]stateChange{}}, nil
	}
	all, err := concatRecords(o.mem, o.held, recs)
	if err != nil {
		return finished{}, err
	}
	defer all.Release()
	nk := len(o.keyIdx)
	groups, err := topGroups(all.Columns()[:nk], int(all.NumRows()))
	if err != nil {
		return finished{}, err
	}
	better := o.ranker(all.Column(nk + 1 + indexOf(o.rest, o.byIdx)))
	heldBefore := 0
	if p.held != nil {
		heldBefore = int(p.held.NumRows())
	}
	evCol := all.Column(o.ev.col).(*array.Timestamp)
	unit := evCol.DataType().(*arrow.TimestampType).Unit
	var emit, keep, scratch []int
	removedOld := make([]bool, heldBefore)
	for _, rows := range groups {
		kept := o.rank(rows, better, &scratch)
		closed := o.ev.expired(kernel.TimestampMillis(int64(evCol.Value(rows[0])), unit), fc.watermark)
		gone := rows
		if closed {
			emit = append(emit, rows[:kept]...)
		} else {
			keep = append(keep, rows[:kept]...)
			gone = rows[kept:]
		}
		for _, r := range gone {
			if r < heldBefore {
				removedOld[r] = true
			}
		}
	}
	f := finished{changes: map[string]stateChange{}}
	if f.out, err = o.fromHeld(ctx, all, emit); err != nil {
		return finished{}, err
	}
	sort.Ints(keep)
	newHeld, err := takeRows(ctx, o.mem, all, keep)
	if err != nil {
		f.release()
		return finished{}, err
	}
	var ups []int
	for _, r := range keep {
		if r >= heldBefore {
			ups = append(ups, r)
		}
	}
	var gone []int
	for r, g := range removedOld {
		if g {
			gone = append(gone, r)
		}
	}
	upserts, err := takeRows(ctx, o.mem, all, ups)
	if err != nil {
		newHeld.Release()
		f.release()
		return finished{}, err
	}
	removed, err := takeRows(ctx, o.mem, all, gone)
	if err != nil {
		newHeld.Release()
		upserts.Release()
		f.release()
		return finished{}, err
	}
	removedKeys := array.NewRecordBatch(o.keyS, removed.Columns()[:nk+1], removed.NumRows())
	removed.Release()
	f.changes[""] = stateChange{upserts: upserts, removals: removedKeys}
	f.updated, f.removed = upserts.NumRows(), removedKeys.NumRows()
	if p.held != nil {
		p.held.Release()
	}
	p.held = newHeld
	return f, nil
}

// rank reorders rows (in index order) so that the rows ranked n or better
// come first, best first and ties in index order, and returns how many
// they are (SQL's RANK: a row's rank is 1 + the rows strictly better than
// it). For n = 1 the best rows are found in one pass; scratch is reused.
func (o *topOp) rank(rows []int, better func(a, b int) bool, scratch *[]int) int {
	if o.st.n == 1 {
		best := rows[0]
		for _, r := range rows[1:] {
			if better(r, best) {
				best = r
			}
		}
		rest := (*scratch)[:0]
		kept := 0
		for _, r := range rows {
			if better(best, r) {
				rest = append(rest, r)
			} else {
				rows[kept] = r
				kept++
			}
		}
		copy(rows[kept:], rest)
		*scratch = rest
		return kept
	}
	slices.SortStableFunc(rows, func(a, b int) int {
		switch {
		case better(a, b):
			return -1
		case better(b, a):
			return 1
		}
		return 0
	})
	kept := 0
	for j, r := range rows {
		rank := j + 1
		if j > 0 && !better(rows[j-1], r) {
			rank = -1 // tied with the row before: same rank
		}
		if rank > o.st.n {
			break
		}
		kept++
	}
	return kept
}

// topGroups splits rows 0..n-1 into groups of equal keys: groups in the
// order of their keys (columnCompare's: values ascending, nulls last),
// rows in index order within a group. Keys of a type whose order calls
// distinct groups equal (floats: 0 and -0) are grouped by keyString and
// ordered by it instead.
func topGroups(keys []arrow.Array, n int) ([][]int, error) {
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	exact := true
	for _, k := range keys {
		exact = exact && exactKeyType(k.DataType())
	}
	if !exact {
		groups := map[string][]int{}
		var order []string
		for i := 0; i < n; i++ {
			k := keyString(keys, i)
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], i)
		}
		sort.Strings(order)
		out := make([][]int, len(order))
		for i, k := range order {
			out[i] = groups[k]
		}
		return out, nil
	}
	var compare func(a, b int) int
	if ints := int64Keys(keys); ints != nil {
		compare = func(a, b int) int {
			for _, v := range ints {
				if c := cmp.Compare(v[a], v[b]); c != 0 {
					return c
				}
			}
			return 0
		}
	} else {
		cmps := make([]func(a, b int) int, len(keys))
		for c, k := range keys {
			f, err := columnCompare(k)
			if err != nil {
				return nil, fmt.Errorf("group rows by key: %w", err)
			}
			cmps[c] = f
		}
		compare = func(a, b int) int {
			for _, f := range cmps {
				if c := f(a, b); c != 0 {
					return c
				}
			}
			return 0
		}
	}
	slices.SortStableFunc(idx, compare)
	var out [][]int
	for lo := 0; lo < n; {
		hi := lo + 1
		for hi < n && compare(idx[lo], idx[hi]) == 0 {
			hi++
		}
		out = append(out, idx[lo:hi:hi])
		lo = hi
	}
	return out, nil
}

// int64Keys returns the values of key columns that are all int64 or
// timestamps without nulls, or nil.
func int64Keys(keys []arrow.Array) [][]int64 {
	out := make([][]int64, len(keys))
	for i, k := range keys {
		if k.NullN() > 0 {
			return nil
		}
		switch a := k.(type) {
		case *array.Int64:
			out[i] = a.Int64Values()
		case *array.Timestamp:
			d := a.Data()
			out[i] = arrow.Int64Traits.CastFromBytes(d.Buffers()[1].Bytes())[d.Offset() : d.Offset()+d.Len()]
		default:
			return nil
		}
	}
	return out
}

// toHeld rearranges an input record into the held layout, numbering its
// rows from seq.
func (o *topOp) toHeld(rec arrow.RecordBatch, seq int64) arrow.RecordBatch {
	n := int(rec.NumRows())
	b := array.NewInt64Builder(o.mem)
	b.Reserve(n)
	for i := 0; i < n; i++ {
		b.UnsafeAppend(seq + int64(i))
	}
	seqs := b.NewArray()
	b.Release()
	defer seqs.Release()
	cols := make([]arrow.Array, 0, rec.NumCols()+1)
	for _, k := range o.keyIdx {
		cols = append(cols, rec.Column(k))
	}
	cols = append(cols, seqs)
	for _, c := range o.rest {
		cols = append(cols, rec.Column(c))
	}
	return array.NewRecordBatch(o.held, cols, rec.NumRows())
}

// fromHeld takes rows of a held-layout record back into the input layout.
func (o *topOp) fromHeld(ctx context.Context, held arrow.RecordBatch, rows []int) (arrow.RecordBatch, error) {
	if len(rows) == 0 {
		return nil, nil
	}
	t, err := takeRows(ctx, o.mem, held, rows)
	if err != nil {
		return nil, err
	}
	defer t.Release()
	nk := len(o.keyIdx)
	cols := make([]arrow.Array, o.in.NumFields())
	for i, k := range o.keyIdx {
		cols[k] = t.Column(i)
	}
	for i, c := range o.rest {
		cols[c] = t.Column(nk + 1 + i)
	}
	return array.NewRecordBatch(o.in, cols, t.NumRows()), nil
}

// ranker returns "row a ranks before row b" over column c; equal values
// rank alike (the caller's stable sort keeps sequence order among them).
// Nulls rank last either way; NaN is above every other float (as in Spark),
// so a NaN ranks first in Desc order and last among the non-nulls in Asc.
// Unsigned integers compare as unsigned.
func (o *topOp) ranker(c arrow.Array) func(a, b int) bool {
	var cmpRows func(a, b int) int // -1, 0, 1 for a below, equal to, above b
	switch arr := c.(type) {
	case *array.Float64:
		cmpRows = func(a, b int) int { return cmpFloat(arr.Value(a), arr.Value(b)) }
	case *array.Float32:
		cmpRows = func(a, b int) int { return cmpFloat(float64(arr.Value(a)), float64(arr.Value(b))) }
	case *array.Uint64:
		cmpRows = func(a, b int) int { return cmp.Compare(arr.Value(a), arr.Value(b)) }
	default:
		ints := integerValues(c)
		cmpRows = func(a, b int) int { return cmp.Compare(ints(a), ints(b)) }
	}
	desc := o.st.order == Desc
	return func(a, b int) bool {
		if c.IsNull(a) || c.IsNull(b) {
			return !c.IsNull(a) && c.IsNull(b)
		}
		if desc {
			return cmpRows(a, b) > 0
		}
		return cmpRows(a, b) < 0
	}
}

// cmpFloat orders floats with NaN above every other value and equal to
// itself: a total order, which sorting and ranking need.
func cmpFloat(a, b float64) int {
	switch an, bn := math.IsNaN(a), math.IsNaN(b); {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	return cmp.Compare(a, b)
}

// integerValues reads a signed integer, a narrow unsigned integer or a
// timestamp column as int64 (uint64 is compared apart: it does not fit).
func integerValues(c arrow.Array) func(int) int64 {
	switch a := c.(type) {
	case *array.Int64:
		return func(i int) int64 { return a.Value(i) }
	case *array.Int32:
		return func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int16:
		return func(i int) int64 { return int64(a.Value(i)) }
	case *array.Int8:
		return func(i int) int64 { return int64(a.Value(i)) }
	case *array.Uint32:
		return func(i int) int64 { return int64(a.Value(i)) }
	case *array.Uint16:
		return func(i int) int64 { return int64(a.Value(i)) }
	case *array.Uint8:
		return func(i int) int64 { return int64(a.Value(i)) }
	case *array.Timestamp:
		return func(i int) int64 { return int64(a.Value(i)) }
	}
	panic(fmt.Sprintf("engine: top ranks %s", c.DataType())) // checked at bind
}

func indexOf(s []int, v int) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// takeRows returns the rows of rec at idx, in that order.
func takeRows(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, idx []int) (arrow.RecordBatch, error) {
	b := array.NewInt64Builder(mem)
	b.Reserve(len(idx))
	for _, i := range idx {
		b.UnsafeAppend(int64(i))
	}
	ind := b.NewArray()
	b.Release()
	defer ind.Release()
	cctx := compute.WithAllocator(ctx, mem)
	cols := make([]arrow.Array, rec.NumCols())
	for c := range cols {
		t, err := compute.TakeArray(cctx, rec.Column(c), ind)
		if err != nil {
			for _, done := range cols[:c] {
				done.Release()
			}
			return nil, fmt.Errorf("take rows: %w", err)
		}
		cols[c] = t
	}
	out := array.NewRecordBatch(rec.Schema(), cols, int64(len(idx)))
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}
