package engine

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
)

// Table is a keyed changelog read as a table: each row of its stream sets
// the row of its key (the latest wins), and a row for which the delete
// predicate holds removes its key (a Kafka tombstone, a delete marker in a
// landing directory). Build one with ChangelogTable and join a stream with
// it with Stream.JoinTable.
type Table struct {
	stream *Stream
	keys   []string
	delete batch.Expr
}

// ChangelogTable reads s (a source of upserts, with stateless steps) as a
// table keyed by the key columns. Its offsets are planned in the query's
// offsets/N beside the stream's, so a re-run of a batch applies the same
// changes.
func ChangelogTable(s *Stream, keys ...string) *Table {
	return &Table{stream: s, keys: append([]string(nil), keys...)}
}

// DeleteWhen makes a row for which pred is true delete its key instead of
// setting it (null counts as false). For a compacted Kafka topic read with
// kafka.WithTombstones, a tombstone is a row whose value fields are null:
// DeleteWhen(batch.IsNull(batch.Col("<a value field>"))). Default: no
// deletes.
func (t *Table) DeleteWhen(pred batch.Expr) *Table {
	n := *t
	n.delete = pred
	return &n
}

// JoinTable joins each row of the stream with the row of table whose keys
// equal the On columns (the On conditions name exactly the table's keys),
// as a Kafka Streams KStream–KTable join: batch N first applies the
// table's changes of batch N (its offsets are in offsets/N), in the order
// read, then joins the stream's rows of batch N against that version.
// Inner drops a stream row without a table row (counted in progress as
// the custom metric droppedNoMatch); LeftOuter emits it with nulls. The
// table lives in the join's state (store table/ of each partition); the
// output holds the stream's columns then the table's (clashing names
// become left_<name> and right_<name>) and keeps the stream's event time.
// ID on the result names the operator; the default is "jointable-<key>…".
func (s *Stream) JoinTable(table *Table, kind JoinKind, conds ...JoinCond) *Joined {
	id := "jointable"
	for _, c := range conds {
		id += "-" + c.left
	}
	js := &joinStep{id: id, kind: kind, first: len(s.sources), conds: append([]JoinCond(nil), conds...), table: table}
	var right *Stream
	if table != nil {
		right = table.stream
		js.right = right
	}
	n := s.with(step{kind: stepJoin, join: js})
	if right != nil {
		n.sources = append(append([]Source(nil), s.sources...), right.sources...)
	}
	return &Joined{Stream: n}
}

const tableDeleteCol = "__delete"

// tableJoinOp is Stream.JoinTable.
type tableJoinOp struct {
	st        *joinStep
	mem       memory.Allocator
	br        *branch
	in        [2]*arrow.Schema // the stream; the table's rows (before prepare)
	keys      [2][]int         // stream key columns; table key columns in the stream keys' order (in prepare's output)
	del       *batch.Projection
	tbl       *arrow.Schema // the table's rows after prepare: in[1] then __delete
	valIdx    []int         // table columns that are not keys
	keySchema *arrow.Schema
	valSchema *arrow.Schema
	out       *arrow.Schema
	ev        eventTimeCol
}

func newTableJoinOp(cfg *config, in *arrow.Schema, st *joinStep, ev eventTimeCol) (*tableJoinOp, error) {
	if st.kind != Inner && st.kind != LeftOuter {
		return nil, fmt.Errorf("a stream-table join is Inner or LeftOuter, not %s", st.kind)
	}
	br, err := bindBranch(cfg, st.right, st.first)
	if err != nil {
		return nil, fmt.Errorf("table: %w", err)
	}
	if br.wm != nil {
		return nil, fmt.Errorf("table: a changelog table takes no watermark (none of its changes is ever late)")
	}
	o := &tableJoinOp{st: st, mem: cfg.mem, br: br, in: [2]*arrow.Schema{in, br.schema}, ev: ev}
	tk := map[string]bool{}
	for _, k := range st.table.keys {
		if len(br.schema.FieldIndices(k)) != 1 {
			return nil, fmt.Errorf("table key %q is not a column of the table %s", k, br.schema)
		}
		tk[k] = true
	}
	if len(tk) == 0 {
		return nil, fmt.Errorf("the table has no key columns (ChangelogTable(stream, keys...))")
	}
	used := map[string]bool{}
	for _, c := range st.conds {
		if c.within {
			return nil, fmt.Errorf("join condition %s: a stream-table join joins on keys only (On)", c)
		}
		li, ri := in.FieldIndices(c.left), br.schema.FieldIndices(c.right)
		if len(li) != 1 {
			return nil, fmt.Errorf("join condition %s: %q is not a column of the stream %s", c, c.left, in)
		}
		if !tk[c.right] {
			return nil, fmt.Errorf("join condition %s: %q is not a key of the table (keys %s)", c, c.right, strings.Join(st.table.keys, ", "))
		}
		if lt, rt := in.Field(li[0]).Type, br.schema.Field(ri[0]).Type; !arrow.TypeEqual(lt, rt) {
			return nil, fmt.Errorf("join condition %s: the stream column is %s and the table's %s; keys need one type (cast one side with WithColumn)", c, lt, rt)
		}
		used[c.right] = true
		o.keys[0] = append(o.keys[0], li[0])
		o.keys[1] = append(o.keys[1], ri[0])
	}
	if len(used) != len(tk) {
		return nil, fmt.Errorf("the join's On conditions name the table keys %v; they must name every key of the table (%s) once", keysOf(used), strings.Join(st.table.keys, ", "))
	}
	cols := make([]batch.Named, 0, len(br.schema.Fields())+1)
	for _, f := range br.schema.Fields() {
		if f.Name == tableDeleteCol {
			return nil, fmt.Errorf("the table has a column named %q, which the join uses", f.Name)
		}
		cols = append(cols, batch.As(batch.Col(f.Name), f.Name))
	}
	var pred batch.Expr = batch.Lit(false)
	if st.table.delete != nil {
		pred = batch.Coalesce(st.table.delete, batch.Lit(false))
	}
	cols = append(cols, batch.As(pred, tableDeleteCol))
	if o.del, err = batch.NewProjection(cfg.mem, br.schema, cols); err != nil {
		return nil, fmt.Errorf("table delete predicate: %w", err)
	}
	o.tbl = o.del.Schema()
	if o.tbl.Field(len(cols)-1).Type.ID() != arrow.BOOL {
		return nil, fmt.Errorf("table delete predicate %s is %s, not a boolean", st.table.delete, o.tbl.Field(len(cols)-1).Type)
	}
	var kf, vf []arrow.Field
	for _, k := range o.keys[1] {
		kf = append(kf, br.schema.Field(k))
	}
	for i, f := range br.schema.Fields() {
		isKey := false
		for _, k := range o.keys[1] {
			isKey = isKey || k == i
		}
		if !isKey {
			o.valIdx = append(o.valIdx, i)
			f.Nullable = true
			vf = append(vf, f)
		}
	}
	o.keySchema, o.valSchema = arrow.NewSchema(kf, nil), arrow.NewSchema(vf, nil)
	// The output: the stream's columns, then the table's.
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
				return nil, fmt.Errorf("output column %q appears twice (qualifying clashing names with left_/right_ made it); rename one with Select", f.Name)
			}
			seen[f.Name] = true
			if side == 1 && st.kind == LeftOuter {
				f.Nullable = true
			}
			fs = append(fs, f)
		}
	}
	o.out = arrow.NewSchema(fs, nil)
	return o, nil
}

func keysOf(m map[string]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (o *tableJoinOp) id() string                         { return o.st.id }
func (o *tableJoinOp) kind() string                       { return "streamTableJoin" }
func (o *tableJoinOp) inputs() int                        { return 2 }
func (o *tableJoinOp) inputSchema(side int) *arrow.Schema { return o.in[side] }
func (o *tableJoinOp) outputSchema() *arrow.Schema        { return o.out }
func (o *tableJoinOp) partitionKeys(side int) []int       { return o.keys[side] }
func (o *tableJoinOp) eventTime() eventTimeCol            { return o.ev }
func (o *tableJoinOp) aggregates() bool                   { return false }
func (o *tableJoinOp) closes() bool                       { return true }
func (o *tableJoinOp) evicts() bool                       { return false }
func (o *tableJoinOp) release()                           {}
func (o *tableJoinOp) branch() *branch                    { return o.br }

func (o *tableJoinOp) stores() []storeSpec {
	return []storeSpec{{name: "table", key: o.keySchema, value: o.valSchema, uniqueUpserts: true}}
}

func (o *tableJoinOp) conf() OperatorConf {
	keys := make([]string, 0, len(o.st.conds))
	for _, c := range o.st.conds {
		keys = append(keys, c.String())
	}
	return OperatorConf{ID: o.st.id, Kind: o.kind(), Keys: keys, KeySchema: o.keySchema.String(), StateSchema: o.valSchema.String(), Params: o.st.kind.String()}
}

// prepare adds the delete flag to the table's rows.
func (o *tableJoinOp) prepare(ctx context.Context, side int, rec arrow.RecordBatch, _ int64) (arrow.RecordBatch, int64, error) {
	if side == 0 {
		rec.Retain()
		return rec, 0, nil
	}
	out, err := o.del.Apply(ctx, rec)
	return out, 0, err
}

func (o *tableJoinOp) newPartition(int) (opPartition, error) {
	return &tablePart{op: o, index: map[string]int32{}}, nil
}

// tablePart is one partition of the table: its live rows (table columns,
// o.in[1]) and an index from key to row.
type tablePart struct {
	op      *tableJoinOp
	rows    arrow.RecordBatch // nil when empty; may hold dead rows, which index does not point to
	index   map[string]int32
	live    int
	pending [2][]arrow.RecordBatch
}

func (p *tablePart) keyCols(rec arrow.RecordBatch, cols []int) []arrow.Array {
	out := make([]arrow.Array, len(cols))
	for i, c := range cols {
		out[i] = rec.Column(c)
	}
	return out
}

func (p *tablePart) load(_ context.Context, _ string, recs []arrow.RecordBatch) error {
	o := p.op
	var parts []arrow.RecordBatch
	defer func() {
		for _, r := range parts {
			r.Release()
		}
	}()
	for _, r := range recs {
		if r.NumRows() == 0 {
			continue
		}
		nk := len(o.keys[1])
		if int(r.NumCols()) != nk+len(o.valIdx) {
			return fmt.Errorf("table state has %d columns, want %d", r.NumCols(), nk+len(o.valIdx))
		}
		// Back to the table's column order.
		cols := make([]arrow.Array, len(o.in[1].Fields()))
		for i, k := range o.keys[1] {
			cols[k] = r.Column(i)
		}
		for i, v := range o.valIdx {
			cols[v] = r.Column(nk + i)
		}
		parts = append(parts, array.NewRecordBatch(o.in[1], cols, r.NumRows()))
	}
	if len(parts) == 0 {
		return nil
	}
	all, err := concatRecords(o.mem, o.in[1], parts)
	if err != nil {
		return err
	}
	p.setRows(all)
	return nil
}

// setRows makes rec (owned) the table, every row live, keys unique.
func (p *tablePart) setRows(rec arrow.RecordBatch) {
	if p.rows != nil {
		p.rows.Release()
	}
	p.rows = rec
	p.index = make(map[string]int32, rec.NumRows())
	kc := p.keyCols(rec, p.op.keys[1])
	for i := range int(rec.NumRows()) {
		p.index[keyString(kc, i)] = int32(i)
	}
	p.live = len(p.index)
}

func (p *tablePart) merge(_ context.Context, side int, rec arrow.RecordBatch) error {
	rec.Retain()
	p.pending[side] = append(p.pending[side], rec)
	return nil
}

func (p *tablePart) committed() {}

func (p *tablePart) size() (int64, int64) {
	b := int64(0)
	if p.rows != nil {
		for _, c := range p.rows.Columns() {
			b += int64(arrayBytes(c.Data()))
		}
	}
	return int64(p.live), b
}

func (p *tablePart) release() {
	if p.rows != nil {
		p.rows.Release()
		p.rows = nil
	}
	for s := range 2 {
		for _, r := range p.pending[s] {
			r.Release()
		}
		p.pending[s] = nil
	}
}

func (p *tablePart) finish(ctx context.Context, fc *finishCtx) (finished, error) {
	o := p.op
	var f finished
	ok := false
	defer func() {
		for s := range 2 {
			for _, r := range p.pending[s] {
				r.Release()
			}
			p.pending[s] = p.pending[s][:0]
		}
		if !ok {
			f.release()
		}
	}()
	f.changes = map[string]stateChange{}
	if err := p.applyChanges(ctx, &f); err != nil {
		return f, err
	}
	// Join the stream's rows, in order, against the new version.
	var stream arrow.RecordBatch
	if len(p.pending[0]) > 0 {
		var err error
		if stream, err = concatRecords(o.mem, o.in[0], p.pending[0]); err != nil {
			return f, err
		}
		defer stream.Release()
	}
	dropped := int64(0)
	if stream != nil && stream.NumRows() > 0 {
		kc := p.keyCols(stream, o.keys[0])
		var sIdx, tIdx []int32
		for i := range int(stream.NumRows()) {
			j := int32(-1)
			null := false
			for _, c := range kc {
				null = null || c.IsNull(i)
			}
			if !null {
				if t, found := p.index[keyString(kc, i)]; found {
					j = t
				}
			}
			if j < 0 && o.st.kind == Inner {
				dropped++
				continue
			}
			sIdx, tIdx = append(sIdx, int32(i)), append(tIdx, j)
		}
		if len(sIdx) > 0 {
			ns := len(o.in[0].Fields())
			lc, err := takeColumns(ctx, o.mem, o.out.Fields()[:ns], stream, sIdx)
			if err != nil {
				return f, err
			}
			rc, err := takeColumns(ctx, o.mem, o.out.Fields()[ns:], p.rows, tIdx)
			if err != nil {
				for _, c := range lc {
					c.Release()
				}
				return f, err
			}
			cols := append(lc, rc...)
			f.out = array.NewRecordBatch(o.out, cols, int64(len(sIdx)))
			for _, c := range cols {
				c.Release()
			}
		}
	}
	f.custom = map[string]int64{"droppedNoMatch": dropped}
	ok = true
	return f, nil
}

// applyChanges applies the table's changes of this batch in the order read
// (the latest change of a key wins) and describes them for the store: the
// final row of each key set in this batch, and the keys deleted that the
// committed version held.
func (p *tablePart) applyChanges(ctx context.Context, f *finished) error {
	o := p.op
	if len(p.pending[1]) == 0 {
		return nil
	}
	ch, err := concatRecords(o.mem, o.tbl, p.pending[1])
	if err != nil {
		return err
	}
	defer ch.Release()
	n := int(ch.NumRows())
	del := ch.Column(len(o.tbl.Fields()) - 1).(*array.Boolean)
	kc := p.keyCols(ch, o.keys[1])
	last := map[string]int{} // key → its last change in ch
	var order []string       // keys in order of their first change
	for i := range n {
		null := false
		for _, c := range kc {
			null = null || c.IsNull(i)
		}
		if null {
			return fmt.Errorf("table row %d of this batch has a null key (%s): a table row needs its key", i, strings.Join(o.st.table.keys, ", "))
		}
		k := keyString(kc, i)
		if _, seen := last[k]; !seen {
			order = append(order, k)
		}
		last[k] = i
	}
	var setIdx []int32 // rows of ch that become live
	var delKeys []int32
	for _, k := range order {
		i := last[k]
		_, existed := p.index[k]
		if del.IsValid(i) && del.Value(i) {
			if existed {
				delKeys = append(delKeys, int32(i))
				delete(p.index, k)
			}
			continue
		}
		setIdx = append(setIdx, int32(i))
	}
	table := arrow.NewSchema(o.tbl.Fields()[:len(o.in[1].Fields())], nil)
	// The store's changes.
	if len(setIdx) > 0 {
		ups, err := takeRecord(ctx, o.mem, o.tbl, ch, setIdx)
		if err != nil {
			return err
		}
		cols := make([]arrow.Array, 0, len(o.keys[1])+len(o.valIdx))
		for _, k := range o.keys[1] {
			cols = append(cols, ups.Column(k))
		}
		for _, v := range o.valIdx {
			cols = append(cols, ups.Column(v))
		}
		f.changes["table"] = stateChange{upserts: array.NewRecordBatch(joinRowSchema(o.keySchema, o.valSchema), cols, int64(len(setIdx)))}
		f.updated = int64(len(setIdx))
		// The new table: the old rows still live, then the set ones.
		var liveOld []int32
		if p.rows != nil {
			set := map[string]bool{}
			for _, i := range setIdx {
				set[keyString(kc, int(i))] = true
			}
			okc := p.keyCols(p.rows, o.keys[1])
			for i := range int(p.rows.NumRows()) {
				k := keyString(okc, i)
				if j, live := p.index[k]; live && j == int32(i) && !set[k] {
					liveOld = append(liveOld, int32(i))
				}
			}
		}
		newRows := arrow.RecordBatch(nil)
		setRows := array.NewRecordBatch(table, ups.Columns()[:len(table.Fields())], ups.NumRows())
		ups.Release()
		if len(liveOld) > 0 {
			old, err := takeRecord(ctx, o.mem, table, p.rows, liveOld)
			if err != nil {
				setRows.Release()
				return err
			}
			newRows, err = concatRecords(o.mem, table, []arrow.RecordBatch{old, setRows})
			old.Release()
			setRows.Release()
			if err != nil {
				return err
			}
		} else {
			newRows = setRows
		}
		p.setRows(array.NewRecordBatch(o.in[1], newRows.Columns(), newRows.NumRows()))
		newRows.Release()
	} else {
		p.live = len(p.index)
	}
	if len(delKeys) > 0 {
		cols := make([]arrow.Array, 0, len(o.keys[1]))
		rm, err := takeRecord(ctx, o.mem, o.tbl, ch, delKeys)
		if err != nil {
			return err
		}
		for _, k := range o.keys[1] {
			cols = append(cols, rm.Column(k))
		}
		c := f.changes["table"]
		c.removals = array.NewRecordBatch(o.keySchema, cols, int64(len(delKeys)))
		f.changes["table"] = c
		rm.Release()
		f.removed = int64(len(delKeys))
	}
	return nil
}
