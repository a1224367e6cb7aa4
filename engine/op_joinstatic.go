package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/storage"
)

// Refresh says which version of a static table a batch joins against.
type Refresh int

const (
	// EveryBatch takes the newest version when each batch is planned.
	EveryBatch Refresh = iota + 1
	// Pinned takes the newest version once, at the query's first plan
	// after a start, and keeps it until the query restarts.
	Pinned
)

func (r Refresh) String() string {
	switch r {
	case EveryBatch:
		return "everyBatch"
	case Pinned:
		return "pinned"
	}
	return fmt.Sprintf("Refresh(%d)", int(r))
}

// JoinStatic joins each row of the stream with the rows of a static table
// whose columns equal the On columns (a broadcast hash join: the table is
// held in memory once, its size reported in progress as the custom
// metrics staticRows and staticBytes). Inner drops a stream row without a
// match (counted as droppedNoMatch); LeftOuter emits it with nulls. The
// table's version is planned into offsets/N as a source of the query
// (refresh says which), so a replay joins against the recorded version.
// The output holds the stream's columns then the table's (clashing names
// become left_<name> and right_<name>). ID on the result names the
// operator; the default is "joinstatic-<key>…".
func (s *Stream) JoinStatic(table StaticTable, kind JoinKind, refresh Refresh, conds ...JoinCond) *Joined {
	id := "joinstatic"
	for _, c := range conds {
		id += "-" + c.left
	}
	js := &joinStep{id: id, kind: kind, first: len(s.sources), conds: append([]JoinCond(nil), conds...), static: &staticSpec{table: table, refresh: refresh}}
	if table != nil {
		js.right = ReadStream(&staticVersions{t: table, refresh: refresh})
	}
	n := s.with(step{kind: stepJoin, join: js})
	if js.right != nil {
		n.sources = append(append([]Source(nil), s.sources...), js.right.sources...)
	}
	return &Joined{Stream: n}
}

type staticSpec struct {
	table   StaticTable
	refresh Refresh
}

// staticVersions is the static table seen as a source whose offsets are
// its versions: it places the version of each batch in offsets/N. It
// emits no rows; the join reads the table at the version itself.
type staticVersions struct {
	t       StaticTable
	refresh Refresh
	mu      sync.Mutex
	pinned  json.RawMessage
}

func (s *staticVersions) Schema() *arrow.Schema { return s.t.Schema() }
func (s *staticVersions) Description() string {
	return fmt.Sprintf("static[%s, %s]", s.t.Description(), s.refresh)
}
func (s *staticVersions) InitialOffset(context.Context) (json.RawMessage, error) {
	return json.RawMessage("null"), nil
}
func (s *staticVersions) LatestOffset(ctx context.Context, _ json.RawMessage) (json.RawMessage, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.refresh == Pinned && s.pinned != nil {
		return s.pinned, nil
	}
	v, err := s.t.LatestVersion(ctx)
	if err != nil {
		return nil, fmt.Errorf("static table %s: latest version: %w", s.t.Description(), err)
	}
	s.pinned = v
	return v, nil
}

// OpenCheckpoint is called once per run, before planning: a Pinned table
// takes a new version at each start.
func (s *staticVersions) OpenCheckpoint(context.Context, storage.Store) error {
	s.mu.Lock()
	s.pinned = nil
	s.mu.Unlock()
	return nil
}

// passive reports that a new version alone is no reason for a batch.
func (s *staticVersions) passive() bool { return true }

func (s *staticVersions) Read(context.Context, json.RawMessage, json.RawMessage, func(arrow.RecordBatch) error) error {
	return nil
}

// staticJoinOp is Stream.JoinStatic.
type staticJoinOp struct {
	st   *joinStep
	mem  memory.Allocator
	br   *branch
	in   [2]*arrow.Schema
	keys [2][]int
	out  *arrow.Schema
	ev   eventTimeCol

	// The table at version: read by atVersion before the batch's input,
	// then only read (by every partition at once).
	version json.RawMessage
	rows    arrow.RecordBatch
	index   map[string][]int32
	bytes   int64
}

func newStaticJoinOp(cfg *config, in *arrow.Schema, st *joinStep, ev eventTimeCol) (*staticJoinOp, error) {
	if st.kind != Inner && st.kind != LeftOuter {
		return nil, fmt.Errorf("a stream-static join is Inner or LeftOuter, not %s", st.kind)
	}
	if st.static.refresh != EveryBatch && st.static.refresh != Pinned {
		return nil, fmt.Errorf("static table refresh %s is not EveryBatch or Pinned", st.static.refresh)
	}
	br, err := bindBranch(cfg, st.right, st.first)
	if err != nil {
		return nil, err
	}
	o := &staticJoinOp{st: st, mem: cfg.mem, br: br, in: [2]*arrow.Schema{in, br.schema}, ev: ev}
	for _, c := range st.conds {
		if c.within {
			return nil, fmt.Errorf("join condition %s: a stream-static join joins on keys only (On)", c)
		}
		li, ri := in.FieldIndices(c.left), br.schema.FieldIndices(c.right)
		if len(li) != 1 {
			return nil, fmt.Errorf("join condition %s: %q is not a column of the stream %s", c, c.left, in)
		}
		if len(ri) != 1 {
			return nil, fmt.Errorf("join condition %s: %q is not a column of the static table %s", c, c.right, br.schema)
		}
		if lt, rt := in.Field(li[0]).Type, br.schema.Field(ri[0]).Type; !arrow.TypeEqual(lt, rt) {
			return nil, fmt.Errorf("join condition %s: the stream column is %s and the table's %s; keys need one type (cast one side with WithColumn)", c, lt, rt)
		}
		o.keys[0] = append(o.keys[0], li[0])
		o.keys[1] = append(o.keys[1], ri[0])
	}
	if len(o.keys[0]) == 0 {
		return nil, fmt.Errorf("join %q has no equality condition (On)", st.id)
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

func (o *staticJoinOp) id() string                         { return o.st.id }
func (o *staticJoinOp) kind() string                       { return "streamStaticJoin" }
func (o *staticJoinOp) inputs() int                        { return 2 }
func (o *staticJoinOp) inputSchema(side int) *arrow.Schema { return o.in[side] }
func (o *staticJoinOp) outputSchema() *arrow.Schema        { return o.out }
func (o *staticJoinOp) partitionKeys(side int) []int       { return o.keys[side] }
func (o *staticJoinOp) eventTime() eventTimeCol            { return o.ev }
func (o *staticJoinOp) aggregates() bool                   { return false }
func (o *staticJoinOp) closes() bool                       { return true }
func (o *staticJoinOp) evicts() bool                       { return false }
func (o *staticJoinOp) stores() []storeSpec                { return nil }
func (o *staticJoinOp) branch() *branch                    { return o.br }

func (o *staticJoinOp) release() {
	if o.rows != nil {
		o.rows.Release()
		o.rows = nil
	}
}

func (o *staticJoinOp) conf() OperatorConf {
	keys := make([]string, 0, len(o.st.conds))
	for _, c := range o.st.conds {
		keys = append(keys, c.String())
	}
	return OperatorConf{ID: o.st.id, Kind: o.kind(), Keys: keys, StateSchema: "none (broadcast " + o.in[1].String() + ")", Params: o.st.kind.String() + ", " + o.st.static.refresh.String()}
}

// planBroadcast is the table's size at its newest version, as the table
// tells it without reading its rows ("" when it cannot).
func (o *staticJoinOp) planBroadcast() string {
	sz, ok := o.st.static.table.(StaticSizer)
	if !ok {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	files, rows, bytes, err := sz.StaticSize(ctx)
	if err != nil {
		return fmt.Sprintf("%s (size unknown: %v)", o.st.static.table.Description(), err)
	}
	r := "rows unknown until read"
	if rows >= 0 {
		r = fmt.Sprintf("%d rows", rows)
	}
	return fmt.Sprintf("%s: %d files, %s, %d bytes stored at the newest version (held decoded in memory: progress staticRows, staticBytes)", o.st.static.table.Description(), files, r, bytes)
}

func (o *staticJoinOp) prepare(_ context.Context, _ int, rec arrow.RecordBatch, _ int64) (arrow.RecordBatch, int64, error) {
	rec.Retain()
	return rec, 0, nil
}

// atVersion makes the table the one at version (read unless it is the
// version held).
func (o *staticJoinOp) atVersion(ctx context.Context, version json.RawMessage) error {
	if o.rows != nil && bytes.Equal(version, o.version) {
		return nil
	}
	t := o.st.static.table
	var recs []arrow.RecordBatch
	defer func() {
		for _, r := range recs {
			r.Release()
		}
	}()
	err := t.ReadVersion(ctx, version, func(r arrow.RecordBatch) error {
		if !r.Schema().Equal(o.in[1]) {
			return fmt.Errorf("a record of schema %s, but the table's schema is %s", r.Schema(), o.in[1])
		}
		r.Retain()
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return fmt.Errorf("static table %s: read version %s: %w", t.Description(), version, err)
	}
	var rows arrow.RecordBatch
	if len(recs) == 0 {
		rows = array.NewRecordBatch(o.in[1], emptyColumns(o.mem, o.in[1]), 0)
	} else if rows, err = concatRecords(o.mem, o.in[1], recs); err != nil {
		return fmt.Errorf("static table %s: %w", t.Description(), err)
	}
	index := map[string][]int32{}
	kc := make([]arrow.Array, len(o.keys[1]))
	for i, k := range o.keys[1] {
		kc[i] = rows.Column(k)
	}
	for i := range int(rows.NumRows()) {
		null := false
		for _, c := range kc {
			null = null || c.IsNull(i)
		}
		if !null {
			k := keyString(kc, i)
			index[k] = append(index[k], int32(i))
		}
	}
	o.release()
	o.rows, o.index, o.version = rows, index, append(json.RawMessage(nil), version...)
	o.bytes = 0
	for _, c := range rows.Columns() {
		o.bytes += int64(arrayBytes(c.Data()))
	}
	return nil
}

func emptyColumns(mem memory.Allocator, s *arrow.Schema) []arrow.Array {
	cols := make([]arrow.Array, len(s.Fields()))
	for i, f := range s.Fields() {
		cols[i] = array.MakeArrayOfNull(mem, f.Type, 0)
	}
	return cols
}

func (o *staticJoinOp) newPartition(p int) (opPartition, error) {
	return &staticPart{op: o, first: p == 0}, nil
}

type staticPart struct {
	op      *staticJoinOp
	first   bool
	pending []arrow.RecordBatch
}

func (p *staticPart) load(context.Context, string, []arrow.RecordBatch) error { return nil }
func (p *staticPart) committed()                                              {}
func (p *staticPart) size() (int64, int64)                                    { return 0, 0 }

func (p *staticPart) merge(_ context.Context, side int, rec arrow.RecordBatch) error {
	if side != 0 {
		return fmt.Errorf("a static join takes rows of the stream only")
	}
	rec.Retain()
	p.pending = append(p.pending, rec)
	return nil
}

func (p *staticPart) release() {
	for _, r := range p.pending {
		r.Release()
	}
	p.pending = nil
}

func (p *staticPart) finish(ctx context.Context, _ *finishCtx) (finished, error) {
	o := p.op
	defer p.release()
	f := finished{custom: map[string]int64{}}
	if p.first && o.rows != nil {
		f.custom["staticRows"] = o.rows.NumRows()
		f.custom["staticBytes"] = o.bytes
	}
	if len(p.pending) == 0 {
		return f, nil
	}
	if o.rows == nil {
		return f, fmt.Errorf("static table %s: no version loaded", o.st.static.table.Description())
	}
	stream, err := concatRecords(o.mem, o.in[0], p.pending)
	if err != nil {
		return f, err
	}
	defer stream.Release()
	kc := make([]arrow.Array, len(o.keys[0]))
	for i, k := range o.keys[0] {
		kc[i] = stream.Column(k)
	}
	var sIdx, tIdx []int32
	dropped := int64(0)
	for i := range int(stream.NumRows()) {
		null := false
		for _, c := range kc {
			null = null || c.IsNull(i)
		}
		var m []int32
		if !null {
			m = o.index[keyString(kc, i)]
		}
		for _, j := range m {
			sIdx, tIdx = append(sIdx, int32(i)), append(tIdx, j)
		}
		if len(m) == 0 {
			if o.st.kind == LeftOuter {
				sIdx, tIdx = append(sIdx, int32(i)), append(tIdx, -1)
			} else {
				dropped++
			}
		}
	}
	f.custom["droppedNoMatch"] = dropped
	if len(sIdx) == 0 {
		return f, nil
	}
	ns := len(o.in[0].Fields())
	lc, err := takeColumns(ctx, o.mem, o.out.Fields()[:ns], stream, sIdx)
	if err != nil {
		return f, err
	}
	rc, err := takeColumns(ctx, o.mem, o.out.Fields()[ns:], o.rows, tIdx)
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
	return f, nil
}

// staticSide is an operator that reads a static table at the version
// planned for its branch's source.
type staticSide interface {
	branch() *branch
	atVersion(ctx context.Context, version json.RawMessage) error
}

// atStaticVersions reads every static table at the version plan records
// for it, before the batch's input.
func (ex *executor) atStaticVersions(ctx context.Context, plan *OffsetsEntry) error {
	for _, c := range ex.ops {
		s, ok := c.op.(staticSide)
		if !ok {
			continue
		}
		i := s.branch().first
		if i >= len(plan.Sources) {
			return fmt.Errorf("operator %s: offsets/%d has no version for its static table (source %d)", c.op.id(), plan.BatchID, i)
		}
		if err := s.atVersion(ctx, plan.Sources[i].End); err != nil {
			return fmt.Errorf("operator %s: %w", c.op.id(), err)
		}
	}
	return nil
}
