package engine

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/internal/kernel"
)

// The columns a join adds to a buffered row in state: the row's key is
// (the batch it arrived in, its number among the rows of its side that
// reached its partition in that batch), so that the state loads in arrival
// order and a re-run of a batch numbers its rows alike; __matched records
// that an outer (or semi) row found a match.
const (
	joinBatchCol   = "__batch"
	joinRowCol     = "__row"
	joinMatchedCol = "__matched"
)

var joinSideNames = [2]string{"left", "right"}

// joinOp is Stream.Join: a symmetric hash join of two streams whose rows
// are buffered in state (named stores left and right of each partition)
// and evicted by the watermark through the range condition.
//
// Per batch and partition, in order: the new left rows probe every
// buffered and new right row; the new right rows probe the buffered left
// rows (so a pair of new rows is found once); a row whose key or range
// column is null can never match and is emitted at once with nulls when
// its side is outer, dropped otherwise; then rows no future row can match
// are evicted (left row l once l+upper is below the watermark minus the
// right side's event-time slack, right row r once r-lower is), and an
// evicted outer row without a match is emitted with nulls. The output's
// order is a function of the state (kept in arrival order) and the batch.
type joinOp struct {
	st   *joinStep
	mem  memory.Allocator
	br   *branch
	in   [2]*arrow.Schema
	keys [2][]int
	// rangeCol is the range condition's column per side (-1: no range).
	rangeCol     [2]int
	lower, upper int64 // ms
	evict        bool
	slack        [2]int64 // how far below the watermark an arriving row's range column may be
	track        [2]bool  // the side's matched flag is kept in state
	out          *arrow.Schema
	ev           eventTimeCol
	keySchema    *arrow.Schema
	value        [2]*arrow.Schema
}

func newJoinOp(cfg *config, in *arrow.Schema, st *joinStep, ev eventTimeCol, wm *watermarkStep) (*joinOp, error) {
	switch st.kind {
	case Inner, LeftOuter, RightOuter, FullOuter, LeftSemi:
	default:
		return nil, fmt.Errorf("join kind %s is not one of Inner, LeftOuter, RightOuter, FullOuter, LeftSemi", st.kind)
	}
	br, err := bindBranch(cfg, st.right, st.first)
	if err != nil {
		return nil, err
	}
	o := &joinOp{st: st, mem: cfg.mem, br: br, in: [2]*arrow.Schema{in, br.schema}, rangeCol: [2]int{-1, -1}}
	nRange := 0
	for _, c := range st.conds {
		li, ri := in.FieldIndices(c.left), br.schema.FieldIndices(c.right)
		if len(li) != 1 {
			return nil, fmt.Errorf("join condition %s: %q is not a column of the left side %s", c, c.left, in)
		}
		if len(ri) != 1 {
			return nil, fmt.Errorf("join condition %s: %q is not a column of the right side %s", c, c.right, br.schema)
		}
		lt, rt := in.Field(li[0]).Type, br.schema.Field(ri[0]).Type
		if c.within {
			nRange++
			if nRange > 1 {
				return nil, fmt.Errorf("join condition %s: a join takes one range condition (Within)", c)
			}
			if err := checkTimestampCol(in, c.left); err != nil {
				return nil, fmt.Errorf("join condition %s: left: %w", c, err)
			}
			if err := checkTimestampCol(br.schema, c.right); err != nil {
				return nil, fmt.Errorf("join condition %s: right: %w", c, err)
			}
			if c.lower > c.upper {
				return nil, fmt.Errorf("join condition %s: the lower bound %s is above the upper bound %s", c, c.lower, c.upper)
			}
			o.rangeCol = [2]int{li[0], ri[0]}
			o.lower, o.upper = c.lower.Milliseconds(), c.upper.Milliseconds()
			continue
		}
		if !arrow.TypeEqual(lt, rt) {
			return nil, fmt.Errorf("join condition %s: the left column is %s and the right one %s; equality keys need one type (cast one side with WithColumn)", c, lt, rt)
		}
		o.keys[0] = append(o.keys[0], li[0])
		o.keys[1] = append(o.keys[1], ri[0])
	}
	if len(o.keys[0]) == 0 {
		return nil, fmt.Errorf("join %q has no equality condition (On): a stream-stream join is partitioned by its keys", st.id)
	}
	// Eviction needs the range columns to be the event times that the
	// watermark filters on each side.
	if o.rangeCol[0] >= 0 && ev.col == o.rangeCol[0] && wm != nil && br.wm != nil && br.wmIdx == o.rangeCol[1] {
		o.evict = true
		o.slack = [2]int64{ev.offsetMs, 0}
	}
	if (st.kind.outer(0) || st.kind.outer(1)) && !o.evict {
		return nil, fmt.Errorf("%s join %q needs a range condition (Within) over the event-time columns and a watermark on both sides (WithWatermark on each stream, over those columns), so that a row without a match can be emitted once none can still arrive", st.kind, st.id)
	}
	for side := range 2 {
		o.track[side] = st.kind.outer(side) || (st.kind == LeftSemi && side == 0)
	}
	if err := o.bindSchemas(); err != nil {
		return nil, err
	}
	o.ev = noEventTime
	if o.evict {
		switch st.kind {
		case RightOuter:
			o.ev = eventTimeCol{col: len(in.Fields()) + o.rangeCol[1], offsetMs: max(o.slack[1], o.slack[0]-o.lower)}
		default:
			o.ev = eventTimeCol{col: o.rangeCol[0], offsetMs: max(o.slack[0], o.upper+o.slack[1])}
		}
	}
	return o, nil
}

func (o *joinOp) bindSchemas() error {
	o.keySchema = arrow.NewSchema([]arrow.Field{{Name: joinBatchCol, Type: arrow.PrimitiveTypes.Int64}, {Name: joinRowCol, Type: arrow.PrimitiveTypes.Int64}}, nil)
	for side := range 2 {
		fs := []arrow.Field{}
		for _, f := range o.in[side].Fields() {
			switch f.Name {
			case joinBatchCol, joinRowCol, joinMatchedCol:
				return fmt.Errorf("the %s side has a column named %q, which the join's state uses", joinSideNames[side], f.Name)
			}
			f.Nullable = true
			fs = append(fs, f)
		}
		fs = append(fs, arrow.Field{Name: joinMatchedCol, Type: arrow.FixedWidthTypes.Boolean})
		o.value[side] = arrow.NewSchema(fs, nil)
	}
	if o.st.kind == LeftSemi {
		o.out = o.in[0]
		return nil
	}
	names := map[string]int{}
	for side := range 2 {
		for _, f := range o.in[side].Fields() {
			names[f.Name]++
		}
	}
	var fs []arrow.Field
	seen := map[string]bool{}
	for side := range 2 {
		for _, f := range o.in[side].Fields() {
			if names[f.Name] > 1 {
				f.Name = joinSideNames[side] + "_" + f.Name
			}
			if seen[f.Name] {
				return fmt.Errorf("output column %q appears twice (qualifying clashing names with left_/right_ made it); rename one with Select", f.Name)
			}
			seen[f.Name] = true
			if o.st.kind.outer(1 - side) {
				f.Nullable = true
			}
			fs = append(fs, f)
		}
	}
	o.out = arrow.NewSchema(fs, nil)
	return nil
}

func (o *joinOp) id() string                         { return o.st.id }
func (o *joinOp) kind() string                       { return "streamStreamJoin" }
func (o *joinOp) inputs() int                        { return 2 }
func (o *joinOp) inputSchema(side int) *arrow.Schema { return o.in[side] }
func (o *joinOp) outputSchema() *arrow.Schema        { return o.out }
func (o *joinOp) partitionKeys(side int) []int       { return o.keys[side] }
func (o *joinOp) eventTime() eventTimeCol            { return o.ev }
func (o *joinOp) aggregates() bool                   { return false }
func (o *joinOp) closes() bool                       { return true }
func (o *joinOp) evicts() bool                       { return o.evict }
func (o *joinOp) release()                           {}
func (o *joinOp) branch() *branch                    { return o.br }

func (o *joinOp) planWarnings() []string {
	if o.evict {
		return nil
	}
	return []string{fmt.Sprintf("join %q has no range condition (Within) over event-time columns with a watermark on both sides: its state keeps every row and grows without bound", o.st.id)}
}

func (o *joinOp) stores() []storeSpec {
	return []storeSpec{
		{name: joinSideNames[0], key: o.keySchema, value: o.value[0], uniqueUpserts: true},
		{name: joinSideNames[1], key: o.keySchema, value: o.value[1], uniqueUpserts: true},
	}
}

func (o *joinOp) conf() OperatorConf {
	keys := make([]string, 0, len(o.st.conds))
	for _, c := range o.st.conds {
		keys = append(keys, c.String())
	}
	return OperatorConf{ID: o.st.id, Kind: o.kind(), Keys: keys, KeySchema: o.keySchema.String(),
		StateSchema: "left: " + o.value[0].String() + "; right: " + o.value[1].String(),
		Params:      fmt.Sprintf("%s, range [%d ms, %d ms], evicts %t", o.st.kind, o.lower, o.upper, o.evict)}
}

func (o *joinOp) prepare(_ context.Context, _ int, rec arrow.RecordBatch, _ int64) (arrow.RecordBatch, int64, error) {
	rec.Retain()
	return rec, 0, nil
}

func (o *joinOp) newPartition(int) (opPartition, error) {
	return &joinPart{op: o}, nil
}

// joinBuf is one side's buffered rows in one partition, in arrival order,
// with what finish needs of each row computed once, when it arrives (or is
// loaded): its encoded key, whether it can match, its range time. Only the
// batch's new rows are encoded; the buffered ones are not again.
type joinBuf struct {
	rows     arrow.RecordBatch // nil when empty
	bat, seq []int64
	matched  []bool
	keys     []string
	usable   []bool
	ts       []int64 // nil without a range condition
	pending  []arrow.RecordBatch
}

func (b *joinBuf) len() int { return len(b.bat) }

type joinPart struct {
	op  *joinOp
	buf [2]joinBuf
}

func (p *joinPart) load(_ context.Context, store string, recs []arrow.RecordBatch) error {
	side := 0
	if store == joinSideNames[1] {
		side = 1
	}
	b := &p.buf[side]
	in := p.op.in[side]
	parts := []arrow.RecordBatch{}
	if b.rows != nil {
		parts = append(parts, b.rows)
	}
	var owned []arrow.RecordBatch
	defer func() {
		for _, r := range owned {
			r.Release()
		}
	}()
	for _, r := range recs {
		n := int(r.NumRows())
		if n == 0 {
			continue
		}
		if int(r.NumCols()) != 3+len(in.Fields()) {
			return fmt.Errorf("join state %s has %d columns, want %d", store, r.NumCols(), 3+len(in.Fields()))
		}
		bat, ok1 := r.Column(0).(*array.Int64)
		seq, ok2 := r.Column(1).(*array.Int64)
		m, ok3 := r.Column(int(r.NumCols()) - 1).(*array.Boolean)
		if !ok1 || !ok2 || !ok3 {
			return fmt.Errorf("join state %s: unexpected column types %s", store, r.Schema())
		}
		for i := range n {
			b.bat = append(b.bat, bat.Value(i))
			b.seq = append(b.seq, seq.Value(i))
			b.matched = append(b.matched, m.Value(i))
		}
		cols := make([]arrow.Array, len(in.Fields()))
		for c := range cols {
			cols[c] = r.Column(2 + c)
		}
		rec := array.NewRecordBatch(in, cols, int64(n))
		owned = append(owned, rec)
		parts = append(parts, rec)
		if err := p.op.encodeRows(side, rec, &b.keys, &b.usable, &b.ts); err != nil {
			return fmt.Errorf("join state %s: %w", store, err)
		}
	}
	if len(parts) == 0 {
		return nil
	}
	all, err := concatRecords(p.op.mem, in, parts)
	if err != nil {
		return err
	}
	if b.rows != nil {
		b.rows.Release()
	}
	b.rows = all
	return nil
}

func (p *joinPart) merge(_ context.Context, side int, rec arrow.RecordBatch) error {
	rec.Retain()
	p.buf[side].pending = append(p.buf[side].pending, rec)
	return nil
}

func (p *joinPart) committed() {}

func (p *joinPart) size() (rows, bytes int64) {
	for side := range 2 {
		b := &p.buf[side]
		rows += int64(b.len())
		if b.rows != nil {
			for _, c := range b.rows.Columns() {
				bytes += int64(arrayBytes(c.Data()))
			}
		}
		bytes += int64(b.len()) * 17
	}
	return rows, bytes
}

func arrayBytes(d arrow.ArrayData) int {
	n := 0
	for _, b := range d.Buffers() {
		if b != nil {
			n += b.Len()
		}
	}
	for _, c := range d.Children() {
		n += arrayBytes(c)
	}
	return n
}

func (p *joinPart) release() {
	for side := range 2 {
		b := &p.buf[side]
		if b.rows != nil {
			b.rows.Release()
			b.rows = nil
		}
		for _, r := range b.pending {
			r.Release()
		}
		b.pending = nil
	}
}

// joinView is one side during finish: its buffered rows then this
// batch's, as one record.
type joinView struct {
	all     arrow.RecordBatch // nil when empty
	nOld    int
	keys    []string
	usable  []bool // key and range column not null: the row can match
	ts      []int64
	matched []bool // after this batch's probes
}

// encodeRows appends, for each row of rec (of side's input schema), its
// encoded key, whether it can match (no key column nor the range column
// null) and its range time in ms (ts stays nil without a range).
func (o *joinOp) encodeRows(side int, rec arrow.RecordBatch, keys *[]string, usable *[]bool, ts *[]int64) error {
	n := int(rec.NumRows())
	var tsValid []bool
	if o.rangeCol[side] >= 0 {
		t, valid, err := kernel.EventTimesMillis(rec, o.rangeCol[side])
		if err != nil {
			return err
		}
		*ts = append(*ts, t...)
		tsValid = valid
	}
	keyCols := make([]arrow.Array, len(o.keys[side]))
	for i, k := range o.keys[side] {
		keyCols[i] = rec.Column(k)
	}
	var buf []byte
	for i := range n {
		ok := tsValid == nil || tsValid[i]
		for _, c := range keyCols {
			ok = ok && !c.IsNull(i)
		}
		*usable = append(*usable, ok)
		k := ""
		if ok {
			buf = appendJoinKey(buf[:0], keyCols, i)
			k = string(buf)
		}
		*keys = append(*keys, k)
	}
	return nil
}

// appendJoinKey encodes row i of the key columns (none null) for the
// join's Go maps: an int64 column as 0x02 and its 8 bytes, any other as
// keyString's self-delimiting encoding of that column. Both sides' key
// columns have one type each, so equal keys encode alike.
func appendJoinKey(b []byte, cols []arrow.Array, i int) []byte {
	for c, col := range cols {
		if a, ok := col.(*array.Int64); ok {
			v := uint64(a.Value(i))
			b = append(b, 2, byte(v), byte(v>>8), byte(v>>16), byte(v>>24), byte(v>>32), byte(v>>40), byte(v>>48), byte(v>>56))
			continue
		}
		b = append(b, keyString(cols[c:c+1], i)...)
	}
	return b
}

func (p *joinPart) view(side int) (*joinView, error) {
	o := p.op
	b := &p.buf[side]
	parts := []arrow.RecordBatch{}
	if b.rows != nil {
		parts = append(parts, b.rows)
	}
	parts = append(parts, b.pending...)
	v := &joinView{nOld: b.len()}
	defer func() {
		for _, r := range b.pending {
			r.Release()
		}
		b.pending = b.pending[:0]
	}()
	if len(parts) == 0 {
		return v, nil
	}
	// The buffered rows' keys, usability and times as they were computed
	// when they arrived; the new rows' now.
	v.keys = append([]string(nil), b.keys...)
	v.usable = append([]bool(nil), b.usable...)
	if o.rangeCol[side] >= 0 {
		v.ts = append(make([]int64, 0, len(b.ts)), b.ts...)
	}
	for _, r := range b.pending {
		if err := o.encodeRows(side, r, &v.keys, &v.usable, &v.ts); err != nil {
			return nil, err
		}
	}
	all, err := concatRecords(o.mem, o.in[side], parts)
	if err != nil {
		return nil, err
	}
	v.all = all
	v.matched = make([]bool, len(v.keys))
	copy(v.matched, b.matched)
	return v, nil
}

func (v *joinView) release() {
	if v.all != nil {
		v.all.Release()
	}
}

func (v *joinView) rows() int {
	if v.all == nil {
		return 0
	}
	return int(v.all.NumRows())
}

// inRange reports whether left time l and right time r satisfy the range.
func (o *joinOp) inRange(l, r int64) bool {
	if o.rangeCol[0] < 0 {
		return true
	}
	return r >= l+o.lower && r <= l+o.upper
}

func (p *joinPart) finish(ctx context.Context, fc *finishCtx) (finished, error) {
	o := p.op
	var views [2]*joinView
	for side := range 2 {
		v, err := p.view(side)
		if err != nil {
			if views[0] != nil {
				views[0].release()
			}
			return finished{}, err
		}
		views[side] = v
	}
	defer views[0].release()
	defer views[1].release()
	L, R := views[0], views[1]

	// Probes: new left rows against every right row, then new right rows
	// against the old left rows.
	var lIdx, rIdx []int32
	pair := func(i, j int) {
		L.matched[i], R.matched[j] = true, true
		if o.st.kind != LeftSemi {
			lIdx = append(lIdx, int32(i))
			rIdx = append(rIdx, int32(j))
		}
	}
	semiBefore := append([]bool(nil), L.matched...)
	rIndex := map[string][]int32{}
	for j := range R.rows() {
		if R.usable[j] {
			rIndex[R.keys[j]] = append(rIndex[R.keys[j]], int32(j))
		}
	}
	for i := L.nOld; i < L.rows(); i++ {
		if !L.usable[i] {
			continue
		}
		for _, j := range rIndex[L.keys[i]] {
			if o.inRange(tsAt(L.ts, i), tsAt(R.ts, int(j))) {
				pair(i, int(j))
			}
		}
	}
	lIndex := map[string][]int32{}
	for i := range L.nOld {
		if L.usable[i] {
			lIndex[L.keys[i]] = append(lIndex[L.keys[i]], int32(i))
		}
	}
	for j := R.nOld; j < R.rows(); j++ {
		if !R.usable[j] {
			continue
		}
		for _, i := range lIndex[R.keys[j]] {
			if o.inRange(tsAt(L.ts, int(i)), tsAt(R.ts, j)) {
				pair(int(i), j)
			}
		}
	}
	var semiOut []int32
	if o.st.kind == LeftSemi {
		for i := range L.rows() {
			if L.matched[i] && !semiBefore[i] {
				semiOut = append(semiOut, int32(i))
			}
		}
	}

	// What stays, what goes; the outer rows that leave without a match.
	var keep [2][]bool
	outer := int64(0)
	for side := range 2 {
		v := views[side]
		keep[side] = make([]bool, v.rows())
		for i := range v.rows() {
			k := v.usable[i]
			if k && o.evict && fc.watermark > 0 {
				if side == 0 {
					k = v.ts[i]+o.upper >= fc.watermark-o.slack[1]
				} else {
					k = v.ts[i]-o.lower >= fc.watermark-o.slack[0]
				}
			}
			if k && side == 0 && o.st.kind == LeftSemi && v.matched[i] {
				k = false
			}
			keep[side][i] = k
			if !k && o.st.kind.outer(side) && !v.matched[i] {
				outer++
				if side == 0 {
					lIdx, rIdx = append(lIdx, int32(i)), append(rIdx, -1)
				} else {
					lIdx, rIdx = append(lIdx, -1), append(rIdx, int32(i))
				}
			}
		}
	}

	var f finished
	ok := false
	defer func() {
		if !ok {
			f.release()
		}
	}()
	f.changes = map[string]stateChange{}
	f.custom = map[string]int64{"outerRows": outer}
	for side := range 2 {
		ch, kept, err := p.changes(ctx, side, views[side], keep[side], fc.batchID)
		if err != nil {
			return f, err
		}
		f.changes[joinSideNames[side]] = ch
		if ch.upserts != nil {
			f.updated += ch.upserts.NumRows()
		}
		if ch.removals != nil {
			f.removed += ch.removals.NumRows()
		}
		f.custom[joinSideNames[side]+"Rows"] = int64(kept)
	}
	var err error
	if o.st.kind == LeftSemi {
		if len(semiOut) > 0 {
			f.out, err = takeRecord(ctx, o.mem, o.out, L.all, semiOut)
		}
	} else if len(lIdx) > 0 {
		f.out, err = o.pairs(ctx, L.all, R.all, lIdx, rIdx)
	}
	if err != nil {
		return f, err
	}
	ok = true
	return f, nil
}

func tsAt(ts []int64, i int) int64 {
	if ts == nil {
		return 0
	}
	return ts[i]
}

// changes computes side's state change and replaces its buffer with the
// kept rows. It returns the number of rows kept.
func (p *joinPart) changes(ctx context.Context, side int, v *joinView, keep []bool, batchID int64) (stateChange, int, error) {
	o := p.op
	b := &p.buf[side]
	var ch stateChange
	var ups, kept []int32
	var rmBat, rmSeq []int64
	newBat := make([]int64, 0, v.rows())
	newSeq := make([]int64, 0, v.rows())
	newMatched := make([]bool, 0, v.rows())
	newKeys := make([]string, 0, v.rows())
	newUsable := make([]bool, 0, v.rows())
	var newTs []int64
	if v.ts != nil {
		newTs = make([]int64, 0, v.rows())
	}
	for i := range v.rows() {
		bat, seq := batchID, int64(i-v.nOld)
		if i < v.nOld {
			bat, seq = b.bat[i], b.seq[i]
		}
		if !keep[i] {
			if i < v.nOld {
				rmBat, rmSeq = append(rmBat, bat), append(rmSeq, seq)
			}
			continue
		}
		kept = append(kept, int32(i))
		m := o.track[side] && v.matched[i]
		if i >= v.nOld || (o.track[side] && m != b.matched[i]) {
			ups = append(ups, int32(i))
		}
		newBat, newSeq, newMatched = append(newBat, bat), append(newSeq, seq), append(newMatched, m)
		newKeys, newUsable = append(newKeys, v.keys[i]), append(newUsable, v.usable[i])
		if newTs != nil {
			newTs = append(newTs, v.ts[i])
		}
	}
	seqOf := func(i int32) (int64, int64, bool) {
		if int(i) < v.nOld {
			return b.bat[i], b.seq[i], o.track[side] && v.matched[i]
		}
		return batchID, int64(int(i) - v.nOld), o.track[side] && v.matched[i]
	}
	if len(ups) > 0 {
		rows, err := takeRecord(ctx, o.mem, o.in[side], v.all, ups)
		if err != nil {
			return ch, 0, err
		}
		bb, sb := array.NewInt64Builder(o.mem), array.NewInt64Builder(o.mem)
		mb := array.NewBooleanBuilder(o.mem)
		for _, i := range ups {
			bt, sq, m := seqOf(i)
			bb.Append(bt)
			sb.Append(sq)
			mb.Append(m)
		}
		cols := []arrow.Array{bb.NewArray(), sb.NewArray()}
		cols = append(cols, rows.Columns()...)
		mArr := mb.NewArray()
		cols = append(cols, mArr)
		ch.upserts = array.NewRecordBatch(joinRowSchema(o.keySchema, o.value[side]), cols, int64(len(ups)))
		cols[0].Release()
		cols[1].Release()
		mArr.Release()
		rows.Release()
		bb.Release()
		sb.Release()
		mb.Release()
	}
	if len(rmBat) > 0 {
		bb, sb := array.NewInt64Builder(o.mem), array.NewInt64Builder(o.mem)
		bb.AppendValues(rmBat, nil)
		sb.AppendValues(rmSeq, nil)
		c0, c1 := bb.NewArray(), sb.NewArray()
		ch.removals = array.NewRecordBatch(o.keySchema, []arrow.Array{c0, c1}, int64(len(rmBat)))
		c0.Release()
		c1.Release()
		bb.Release()
		sb.Release()
	}
	// The new buffer.
	var rows arrow.RecordBatch
	if len(kept) > 0 {
		var err error
		if rows, err = takeRecord(ctx, o.mem, o.in[side], v.all, kept); err != nil {
			if ch.upserts != nil {
				ch.upserts.Release()
			}
			if ch.removals != nil {
				ch.removals.Release()
			}
			return stateChange{}, 0, err
		}
	}
	if b.rows != nil {
		b.rows.Release()
	}
	b.rows, b.bat, b.seq, b.matched = rows, newBat, newSeq, newMatched
	b.keys, b.usable, b.ts = newKeys, newUsable, newTs
	return ch, len(kept), nil
}

func joinRowSchema(key, value *arrow.Schema) *arrow.Schema {
	return arrow.NewSchema(append(append([]arrow.Field(nil), key.Fields()...), value.Fields()...), nil)
}

// takeRecord gathers rows idx of rec (idx -1: a null row) into a record
// of schema out (rec's columns, possibly marked nullable).
func takeRecord(ctx context.Context, mem memory.Allocator, out *arrow.Schema, rec arrow.RecordBatch, idx []int32) (arrow.RecordBatch, error) {
	cols, err := takeColumns(ctx, mem, out.Fields(), rec, idx)
	if err != nil {
		return nil, err
	}
	r := array.NewRecordBatch(out, cols, int64(len(idx)))
	for _, c := range cols {
		c.Release()
	}
	return r, nil
}

func takeColumns(ctx context.Context, mem memory.Allocator, fields []arrow.Field, rec arrow.RecordBatch, idx []int32) ([]arrow.Array, error) {
	cols := make([]arrow.Array, 0, len(fields))
	fail := func(err error) ([]arrow.Array, error) {
		for _, c := range cols {
			c.Release()
		}
		return nil, err
	}
	if rec == nil || rec.NumRows() == 0 {
		for _, f := range fields {
			cols = append(cols, array.MakeArrayOfNull(mem, f.Type, len(idx)))
		}
		return cols, nil
	}
	ib := array.NewInt32Builder(mem)
	for _, i := range idx {
		if i < 0 {
			ib.AppendNull()
		} else {
			ib.Append(i)
		}
	}
	ia := ib.NewArray()
	ib.Release()
	defer ia.Release()
	cctx := compute.WithAllocator(ctx, mem)
	for c := range fields {
		t, err := compute.TakeArray(cctx, rec.Column(c), ia)
		if err != nil {
			return fail(fmt.Errorf("take column %q: %w", fields[c].Name, err))
		}
		cols = append(cols, t)
	}
	return cols, nil
}

// pairs builds the output rows: left row lIdx[k] beside right row rIdx[k]
// (-1: nulls).
func (o *joinOp) pairs(ctx context.Context, l, r arrow.RecordBatch, lIdx, rIdx []int32) (arrow.RecordBatch, error) {
	nl := len(o.in[0].Fields())
	lc, err := takeColumns(ctx, o.mem, o.out.Fields()[:nl], l, lIdx)
	if err != nil {
		return nil, err
	}
	rc, err := takeColumns(ctx, o.mem, o.out.Fields()[nl:], r, rIdx)
	if err != nil {
		for _, c := range lc {
			c.Release()
		}
		return nil, err
	}
	cols := append(lc, rc...)
	out := array.NewRecordBatch(o.out, cols, int64(len(lIdx)))
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}
