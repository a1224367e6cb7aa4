package engine

import (
	"cmp"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/internal/kernel"
)

// procOp runs a user Processor (GroupBy(...).Process). Each partition
// keeps, per key, the declared states as encoded rows and the key's
// timers. Every declared state is a named store (state/<id>/<p>/<name>/)
// and the timers are the store "timers"; docs/format/processor.md gives
// their layout.
type procOp struct {
	step        *processStep
	mem         memory.Allocator
	in          *arrow.Schema
	keyIdx      []int
	keyFields   []arrow.Field
	spec        *ProcessorSpec
	out         *arrow.Schema
	watermarked bool
	specs       []storeSpec
	parts       []*procPart
	initParts   [][]arrow.RecordBatch // per partition, the initial-state rows
	initSchema  *arrow.Schema
}

// timersStore names the store of a processor's timers; no state may take
// the name.
const timersStore = "timers"

// The reserved columns of a processor's stores.
const (
	colMapKey    = "_map_key"
	colValue     = "_value"
	colExpires   = "_expires_ms"
	colTimerKind = "_timer_kind"
	colTimerMs   = "_timer_ms"
)

func newProcOp(cfg *config, in *arrow.Schema, st *processStep, wm *watermarkStep) (*procOp, error) {
	if st.proc == nil {
		return nil, fmt.Errorf("Process: nil processor")
	}
	if len(st.keys) == 0 {
		return nil, fmt.Errorf("Process needs at least one grouping key")
	}
	o := &procOp{step: st, mem: cfg.mem, in: in, watermarked: wm != nil}
	for _, k := range st.keys {
		idx := in.FieldIndices(k)
		if len(idx) != 1 {
			return nil, fmt.Errorf("key %q is not a column of %s", k, in)
		}
		f := in.Field(idx[0])
		if len(f.Name) > 0 && f.Name[0] == '_' {
			return nil, fmt.Errorf("key %q: a processor's key columns may not start with '_' (reserved for its state columns)", k)
		}
		o.keyIdx = append(o.keyIdx, idx[0])
		o.keyFields = append(o.keyFields, arrow.Field{Name: f.Name, Type: f.Type, Nullable: f.Nullable})
	}
	o.spec = &ProcessorSpec{}
	if err := st.proc.Init(o.spec); err != nil {
		return nil, fmt.Errorf("processor Init: %w", err)
	}
	if o.spec.err != nil {
		return nil, fmt.Errorf("processor Init: %w", o.spec.err)
	}
	if o.spec.out == nil {
		return nil, fmt.Errorf("processor Init: no output type declared (ProcessorSpec.Output)")
	}
	o.out = o.spec.out.schema()
	for _, d := range o.spec.states {
		if d.name == timersStore {
			return nil, fmt.Errorf("processor Init: state name %q is reserved for the timers", d.name)
		}
		key := append([]arrow.Field(nil), o.keyFields...)
		if d.kind == mapState {
			key = append(key, arrow.Field{Name: colMapKey, Type: arrow.BinaryTypes.Binary})
		}
		o.specs = append(o.specs, storeSpec{
			name: d.name,
			key:  arrow.NewSchema(key, nil),
			value: arrow.NewSchema([]arrow.Field{
				{Name: colValue, Type: arrow.BinaryTypes.Binary},
				{Name: colExpires, Type: arrow.PrimitiveTypes.Int64},
			}, nil),
			uniqueUpserts: true,
		})
	}
	tkey := append(append([]arrow.Field(nil), o.keyFields...),
		arrow.Field{Name: colTimerKind, Type: arrow.PrimitiveTypes.Int8},
		arrow.Field{Name: colTimerMs, Type: arrow.PrimitiveTypes.Int64})
	o.specs = append(o.specs, storeSpec{name: timersStore, key: arrow.NewSchema(tkey, nil), value: arrow.NewSchema(nil, nil), uniqueUpserts: true})
	if len(st.initial) > 0 {
		if _, ok := st.proc.(InitialStater); !ok {
			return nil, fmt.Errorf("WithInitialState: the processor %T has no InitialState method (InitialStater)", st.proc)
		}
		if err := o.partitionInitial(cfg.partitions); err != nil {
			o.release()
			return nil, err
		}
	}
	return o, nil
}

// partitionInitial splits the initial-state table by key, as the input is.
func (o *procOp) partitionInitial(n int) error {
	o.initParts = make([][]arrow.RecordBatch, n)
	for ri, rec := range o.step.initial {
		idx := make([]int, len(o.keyFields))
		for i, kf := range o.keyFields {
			c := rec.Schema().FieldIndices(kf.Name)
			if len(c) != 1 || !arrow.TypeEqual(rec.Schema().Field(c[0]).Type, kf.Type) {
				return fmt.Errorf("WithInitialState: record %d needs key column %q of type %s, has schema %s", ri, kf.Name, kf.Type, rec.Schema())
			}
			idx[i] = c[0]
		}
		if o.initSchema == nil {
			o.initSchema = rec.Schema()
		} else if !o.initSchema.Equal(rec.Schema()) {
			return fmt.Errorf("WithInitialState: record %d has schema %s, record 0 has %s", ri, rec.Schema(), o.initSchema)
		}
		if rec.NumRows() == 0 {
			continue
		}
		pieces, err := kernel.Partition(o.mem, rec, idx, n)
		if err != nil {
			return fmt.Errorf("WithInitialState: %w", err)
		}
		for p, r := range pieces {
			if r != nil {
				o.initParts[p] = append(o.initParts[p], r)
			}
		}
	}
	return nil
}

func (o *procOp) id() string                    { return o.step.id }
func (o *procOp) kind() string                  { return "process" }
func (o *procOp) inputs() int                   { return 1 }
func (o *procOp) inputSchema(int) *arrow.Schema { return o.in }
func (o *procOp) outputSchema() *arrow.Schema   { return o.out }
func (o *procOp) stores() []storeSpec           { return o.specs }
func (o *procOp) partitionKeys(int) []int       { return o.keyIdx }
func (o *procOp) eventTime() eventTimeCol       { return noEventTime }
func (o *procOp) aggregates() bool              { return false }
func (o *procOp) closes() bool                  { return true }

// evicts: a moved watermark is work when a partition holds an event-time
// timer (it may be due).
func (o *procOp) evicts() bool {
	if !o.watermarked {
		return false
	}
	for _, p := range o.parts {
		if p.nextEvent.Load() != 0 {
			return true
		}
	}
	return false
}

func (o *procOp) prepare(_ context.Context, _ int, rec arrow.RecordBatch, _ int64) (arrow.RecordBatch, int64, error) {
	rec.Retain()
	return rec, 0, nil
}

func (o *procOp) release() {
	for _, rs := range o.initParts {
		for _, r := range rs {
			r.Release()
		}
	}
	o.initParts = nil
}

// processorStateConf is one state as the operator's conf records it (the
// stateSchema of offsets/N is a JSON list of them).
type processorStateConf struct {
	Name   string      `json:"name"`
	Kind   string      `json:"kind"`
	Fields []confField `json:"fields"`
	MapKey []confField `json:"mapKey,omitempty"`
}

type confField struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	Nullable bool   `json:"nullable,omitempty"`
}

func confFields(c *codec) []confField {
	out := make([]confField, len(c.fields))
	for i, f := range c.fields {
		out[i] = confField{Name: f.name, Type: f.arrow.String(), Nullable: f.nullable}
	}
	return out
}

func (o *procOp) conf() OperatorConf {
	var sts []processorStateConf
	for _, d := range o.spec.states {
		s := processorStateConf{Name: d.name, Kind: string(d.kind), Fields: confFields(d.val)}
		if d.key != nil {
			s.MapKey = confFields(d.key)
		}
		sts = append(sts, s)
	}
	b, err := json.Marshal(sts)
	if err != nil {
		panic(err) // plain strings and bools always marshal
	}
	return OperatorConf{ID: o.step.id, Kind: o.kind(), Keys: o.step.keys, KeySchema: arrow.NewSchema(o.keyFields, nil).String(), StateSchema: string(b)}
}

// processorStateCompatible checks a processor's declared states against
// the ones the checkpoint recorded: the same states, each with the same
// kind, map key and fields, except that a value type may gain nullable
// fields at its end (old rows read them as null).
func processorStateCompatible(old, cur string) error {
	var a, b []processorStateConf
	if err := json.Unmarshal([]byte(old), &a); err != nil {
		return fmt.Errorf("recorded state schema %s: %w", old, err)
	}
	if err := json.Unmarshal([]byte(cur), &b); err != nil {
		return fmt.Errorf("state schema %s: %w", cur, err)
	}
	bad := func(why string) error {
		return fmt.Errorf("%s (only a nullable field added at the end of a state's type is allowed); the checkpoint's states are\n      %s\n    and this query declares\n      %s", why, old, cur)
	}
	if len(a) != len(b) {
		return bad(fmt.Sprintf("%d states declared, the checkpoint has %d", len(b), len(a)))
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Name != y.Name || x.Kind != y.Kind {
			return bad(fmt.Sprintf("state %d is %s %q, the checkpoint has %s %q", i, y.Kind, y.Name, x.Kind, x.Name))
		}
		if !slices.Equal(x.MapKey, y.MapKey) {
			return bad(fmt.Sprintf("state %q: the map key type changed", x.Name))
		}
		if len(y.Fields) < len(x.Fields) || !slices.Equal(x.Fields, y.Fields[:len(x.Fields)]) {
			return bad(fmt.Sprintf("state %q: the value type changed", x.Name))
		}
		for _, f := range y.Fields[len(x.Fields):] {
			if !f.Nullable {
				return bad(fmt.Sprintf("state %q: the new field %q is not nullable (use a pointer type)", x.Name, f.Name))
			}
		}
	}
	return nil
}

// timerDue reports whether a partition holds a processing-time timer due
// at ts (Unix ms): the planner runs a batch for it even without input.
func (o *procOp) timerDue(ts int64) bool {
	for _, p := range o.parts {
		if n := p.nextProc.Load(); n != 0 && n <= ts {
			return true
		}
	}
	return false
}

func (o *procOp) newPartition(p int) (opPartition, error) {
	part := &procPart{op: o, p: p, keys: map[string]*procKey{}}
	if p >= len(o.parts) {
		o.parts = append(o.parts, make([]*procPart, p+1-len(o.parts))...)
	}
	o.parts[p] = part
	return part, nil
}

// procPart is one partition of a processor: its keys with their states and
// timers, and what changed in the batch running.
type procPart struct {
	op      *procOp
	p       int
	keys    map[string]*procKey
	loaded  bool // load ran: the checkpoint had a committed version
	started bool // a batch finished in this process
	recs    []arrow.RecordBatch
	fc      *finishCtx

	dirty       []cellRef
	dirtySet    map[cellRef]bool
	dirtyTimer  []timerRef
	dirtyTSet   map[timerRef]bool
	out         *array.RecordBuilder
	outRows     int64
	nextProc    atomic.Int64 // earliest processing-time timer (Unix ms), 0 for none
	nextEvent   atomic.Int64 // earliest event-time timer (Unix ms), 0 for none
	rows, bytes int64
	fired       int64
	decoders    decoderCache
}

type procKey struct {
	key    Key
	cells  []map[string]*cell // per state, per map key encoding ("" for value and list state)
	timers map[timerID]bool
}

type cell struct {
	enc     []byte // the rows, encoded
	mkey    []any  // map state: the map key
	expires int64  // Unix ms; 0: never
}

func (c *cell) expired(ts int64) bool { return c.expires > 0 && c.expires <= ts }

func (c *cell) decode() ([][]any, error) {
	var rows [][]any
	b := c.enc
	for len(b) > 0 {
		r, rest, err := readRow(b)
		if err != nil {
			return nil, err
		}
		rows = append(rows, r)
		b = rest
	}
	return rows, nil
}

type timerID struct {
	kind TimerKind
	ms   int64
}

type cellRef struct {
	key   string
	state int
	mk    string
}

type timerRef struct {
	key string
	id  timerID
}

func (k *procKey) cell(state int, mk string) *cell {
	if k.cells[state] == nil {
		return nil
	}
	return k.cells[state][mk]
}

func (k *procKey) sortedTimers() []timerID {
	out := make([]timerID, 0, len(k.timers))
	for t := range k.timers {
		out = append(out, t)
	}
	slices.SortFunc(out, func(a, b timerID) int {
		return cmp.Or(cmp.Compare(a.ms, b.ms), cmp.Compare(a.kind, b.kind))
	})
	return out
}

func (k *procKey) empty() bool {
	if len(k.timers) > 0 {
		return false
	}
	for _, m := range k.cells {
		if len(m) > 0 {
			return false
		}
	}
	return true
}

// keyOf returns the partition's entry for the key with plain values vals,
// creating it.
func (p *procPart) keyOf(vals []any) *procKey {
	enc := string(appendRow(nil, vals))
	if k, ok := p.keys[enc]; ok {
		return k
	}
	k := &procKey{key: Key{vals: vals, enc: enc}, cells: make([]map[string]*cell, len(p.op.spec.states)), timers: map[timerID]bool{}}
	p.keys[enc] = k
	return k
}

// appendKeyEnc appends the encoding of row i's key columns, the same bytes
// as appendRow of keyVals, without boxing the common column types.
func appendKeyEnc(dst []byte, rec arrow.RecordBatch, cols []int, i int) ([]byte, error) {
	dst = binary.AppendUvarint(dst, uint64(len(cols)))
	for _, c := range cols {
		arr := rec.Column(c)
		if arr.IsNull(i) {
			dst = append(dst, tagNull)
			continue
		}
		switch a := arr.(type) {
		case *array.String:
			v := a.Value(i)
			dst = binary.AppendUvarint(append(dst, tagString), uint64(len(v)))
			dst = append(dst, v...)
		case *array.Int64:
			dst = binary.AppendVarint(append(dst, tagInt), a.Value(i))
		default:
			v, err := plainAt(arr, i)
			if err != nil {
				return nil, fmt.Errorf("key column %q: %w", rec.Schema().Field(c).Name, err)
			}
			dst = appendRow(dst, []any{v})[1:] // one field: drop its count byte
		}
	}
	return dst, nil
}

func keyVals(rec arrow.RecordBatch, cols []int, i int) ([]any, error) {
	vals := make([]any, len(cols))
	for j, c := range cols {
		v, err := plainAt(rec.Column(c), i)
		if err != nil {
			return nil, fmt.Errorf("key column %q: %w", rec.Schema().Field(c).Name, err)
		}
		vals[j] = v
	}
	return vals, nil
}

func (p *procPart) load(_ context.Context, store string, recs []arrow.RecordBatch) error {
	p.loaded = true
	nk := len(p.op.keyFields)
	keyCols := make([]int, nk)
	for i := range keyCols {
		keyCols[i] = i
	}
	if store == timersStore {
		for _, rec := range recs {
			kinds := rec.Column(nk).(*array.Int8)
			ms := rec.Column(nk + 1).(*array.Int64)
			for i := range int(rec.NumRows()) {
				vals, err := keyVals(rec, keyCols, i)
				if err != nil {
					return err
				}
				kind := TimerKind(kinds.Value(i))
				if kind != EventTime && kind != ProcessingTime {
					return fmt.Errorf("timers store: row %d has timer kind %d (1: event time, 2: processing time)", i, kind)
				}
				k := p.keyOf(vals)
				k.timers[timerID{kind: kind, ms: ms.Value(i)}] = true
				p.rows++
			}
		}
		p.updateNextTimers()
		return nil
	}
	var d *stateDecl
	for _, s := range p.op.spec.states {
		if s.name == store {
			d = s
		}
	}
	if d == nil {
		return fmt.Errorf("unknown store %q", store)
	}
	for _, rec := range recs {
		vc := nk
		var mkeys *array.Binary
		if d.kind == mapState {
			mkeys = rec.Column(nk).(*array.Binary)
			vc++
		}
		vals := rec.Column(vc).(*array.Binary)
		exp := rec.Column(vc + 1).(*array.Int64)
		for i := range int(rec.NumRows()) {
			kv, err := keyVals(rec, keyCols, i)
			if err != nil {
				return err
			}
			k := p.keyOf(kv)
			c := &cell{enc: append([]byte(nil), vals.Value(i)...), expires: exp.Value(i)}
			mk := ""
			if mkeys != nil {
				mk = string(mkeys.Value(i))
				r, _, err := readRow(mkeys.Value(i))
				if err != nil {
					return fmt.Errorf("key %s: map key: %w", k.key, err)
				}
				c.mkey = r
			}
			if k.cells[d.idx] == nil {
				k.cells[d.idx] = map[string]*cell{}
			}
			k.cells[d.idx][mk] = c
			p.rows++
			p.bytes += int64(len(c.enc))
		}
	}
	return nil
}

func (p *procPart) merge(_ context.Context, _ int, rec arrow.RecordBatch) error {
	rec.Retain()
	p.recs = append(p.recs, rec)
	return nil
}

func (p *procPart) setCell(k *procKey, state int, mk string, c *cell) {
	if k.cells[state] == nil {
		k.cells[state] = map[string]*cell{}
	}
	if c == nil {
		if _, ok := k.cells[state][mk]; !ok {
			return
		}
		delete(k.cells[state], mk)
	} else {
		k.cells[state][mk] = c
	}
	ref := cellRef{key: k.key.enc, state: state, mk: mk}
	if !p.dirtySet[ref] {
		p.dirtySet[ref] = true
		p.dirty = append(p.dirty, ref)
	}
}

func (p *procPart) setTimer(k *procKey, id timerID, on bool) {
	if k.timers[id] == on {
		return
	}
	if on {
		k.timers[id] = true
	} else {
		delete(k.timers, id)
	}
	ref := timerRef{key: k.key.enc, id: id}
	if !p.dirtyTSet[ref] {
		p.dirtyTSet[ref] = true
		p.dirtyTimer = append(p.dirtyTimer, ref)
	}
}

func (p *procPart) emit(row any) error {
	c := p.op.spec.out
	v := reflectValueOf(row)
	if v.Type() != c.typ {
		return fmt.Errorf("emit: a %s, but the processor declared output %s", v.Type(), c.typ)
	}
	for i, x := range c.plain(v) {
		if err := appendPlain(p.out.Field(i), x); err != nil {
			return fmt.Errorf("emit: field %s: %w", c.fields[i].name, err)
		}
	}
	p.outRows++
	return nil
}

// finish runs the batch: the initial state (first batch of a new
// checkpoint), Handle per key in the order of first appearance, the due
// timers in order of time then key, the TTL sweep; then it describes the
// changes of every store.
func (p *procPart) finish(ctx context.Context, fc *finishCtx) (finished, error) {
	defer func() {
		for _, r := range p.recs {
			r.Release()
		}
		p.recs = p.recs[:0]
	}()
	p.fc = fc
	p.dirty, p.dirtySet = p.dirty[:0], map[cellRef]bool{}
	p.dirtyTimer, p.dirtyTSet = p.dirtyTimer[:0], map[timerRef]bool{}
	p.out = array.NewRecordBuilder(fc.mem, p.op.out)
	defer p.out.Release()
	p.outRows = 0
	proc := p.op.step.proc

	if !p.loaded && !p.started && p.op.initParts != nil {
		err := p.eachKey(p.op.initParts[p.p], p.op.initSchema, p.op.keyColsIn(p.op.initSchema), func(k *KeyContext, rows *Rows) error {
			return proc.(InitialStater).InitialState(k, rows)
		})
		if err != nil {
			return finished{}, fmt.Errorf("initial state: %w", err)
		}
	}
	p.started = true
	if err := p.eachKey(p.recs, p.op.in, p.op.keyIdx, func(k *KeyContext, rows *Rows) error {
		return proc.Handle(k, rows)
	}); err != nil {
		return finished{}, err
	}
	if err := ctx.Err(); err != nil {
		return finished{}, err
	}
	if err := p.fireTimers(); err != nil {
		return finished{}, err
	}
	p.sweep()

	f := finished{changes: map[string]stateChange{}}
	ok := false
	defer func() {
		if !ok {
			f.release()
		}
	}()
	for i, d := range p.op.spec.states {
		ch, up, rm, err := p.stateChanges(i, d)
		if err != nil {
			return finished{}, err
		}
		f.changes[d.name] = ch
		f.updated += up
		f.removed += rm
	}
	ch, up, rm := p.timerChanges()
	f.changes[timersStore] = ch
	f.updated += up
	f.removed += rm
	for enc, k := range p.keys {
		if k.empty() {
			delete(p.keys, enc)
		}
	}
	p.recount()
	p.updateNextTimers()
	if p.outRows > 0 {
		f.out = p.out.NewRecordBatch()
	}
	f.custom = map[string]int64{"numTimersFired": p.fired}
	ok = true
	return f, nil
}

func (o *procOp) keyColsIn(s *arrow.Schema) []int {
	out := make([]int, len(o.keyFields))
	for i, kf := range o.keyFields {
		out[i] = s.FieldIndices(kf.Name)[0]
	}
	return out
}

// eachKey groups recs by key, in the order keys first appear, and calls f
// once per key.
func (p *procPart) eachKey(recs []arrow.RecordBatch, schema *arrow.Schema, keyCols []int, f func(*KeyContext, *Rows) error) error {
	var order []*procKey
	groups := map[*procKey][]rowRef{}
	var buf []byte
	for _, rec := range recs {
		for i := range int(rec.NumRows()) {
			var err error
			buf, err = appendKeyEnc(buf[:0], rec, keyCols, i)
			if err != nil {
				return err
			}
			k, ok := p.keys[string(buf)]
			if !ok {
				vals, err := keyVals(rec, keyCols, i)
				if err != nil {
					return err
				}
				k = p.keyOf(vals)
			}
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], rowRef{rec: rec, i: i})
		}
	}
	for _, k := range order {
		kc := &KeyContext{part: p, key: k}
		err := f(kc, &Rows{schema: schema, refs: groups[k], cache: &p.decoders})
		if err == nil {
			err = kc.err
		}
		if err != nil {
			return fmt.Errorf("processor: key %s: %w", k.key, err)
		}
	}
	return nil
}

// fireTimers calls OnTimer for every timer due in this batch (event time
// at or below the watermark, processing time at or below the batch
// timestamp), in order of time, kind, then key encoding.
func (p *procPart) fireTimers() error {
	p.fired = 0
	type due struct {
		k  *procKey
		id timerID
	}
	var ds []due
	for _, k := range p.keys {
		for id := range k.timers {
			if (id.kind == EventTime && p.fc.watermark > 0 && id.ms <= p.fc.watermark) ||
				(id.kind == ProcessingTime && id.ms <= p.fc.timestampMs) {
				ds = append(ds, due{k: k, id: id})
			}
		}
	}
	slices.SortFunc(ds, func(a, b due) int {
		return cmp.Or(cmp.Compare(a.id.ms, b.id.ms), cmp.Compare(a.id.kind, b.id.kind), cmp.Compare(a.k.key.enc, b.k.key.enc))
	})
	proc := p.op.step.proc
	for _, d := range ds {
		p.setTimer(d.k, d.id, false)
		kc := &KeyContext{part: p, key: d.k}
		err := proc.OnTimer(kc, Timer{Kind: d.id.kind, At: timeMs(d.id.ms)})
		if err == nil {
			err = kc.err
		}
		if err != nil {
			return fmt.Errorf("processor: key %s: %s timer at %s: %w", d.k.key, d.id.kind, timeMs(d.id.ms).Format("2006-01-02T15:04:05.000Z"), err)
		}
		p.fired++
	}
	return nil
}

// sweep deletes the values whose TTL ran out by the batch timestamp.
func (p *procPart) sweep() {
	ttl := false
	for _, d := range p.op.spec.states {
		ttl = ttl || d.ttlMs > 0
	}
	if !ttl {
		return
	}
	encs := make([]string, 0, len(p.keys))
	for enc := range p.keys {
		encs = append(encs, enc)
	}
	slices.Sort(encs)
	for _, enc := range encs {
		k := p.keys[enc]
		for i, m := range k.cells {
			if p.op.spec.states[i].ttlMs == 0 {
				continue
			}
			mks := make([]string, 0, len(m))
			for mk, c := range m {
				if c.expired(p.fc.timestampMs) {
					mks = append(mks, mk)
				}
			}
			slices.Sort(mks)
			for _, mk := range mks {
				p.setCell(k, i, mk, nil)
			}
		}
	}
}

// stateChanges builds state i's upserts and removals from the dirty cells.
func (p *procPart) stateChanges(i int, d *stateDecl) (stateChange, int64, int64, error) {
	spec := p.op.specs[i]
	rowSchema := arrow.NewSchema(append(append([]arrow.Field(nil), spec.key.Fields()...), spec.value.Fields()...), nil)
	ub := array.NewRecordBuilder(p.fc.mem, rowSchema)
	defer ub.Release()
	rb := array.NewRecordBuilder(p.fc.mem, spec.key)
	defer rb.Release()
	nk := len(p.op.keyFields)
	var ups, rms int64
	for _, ref := range p.dirty {
		if ref.state != i {
			continue
		}
		k := p.keys[ref.key]
		c := k.cell(i, ref.mk)
		b := rb
		if c != nil {
			b = ub
		}
		for j, v := range k.key.vals {
			if err := appendPlain(b.Field(j), v); err != nil {
				return stateChange{}, 0, 0, fmt.Errorf("state %q: key column %d: %w", d.name, j, err)
			}
		}
		col := nk
		if d.kind == mapState {
			b.Field(col).(*array.BinaryBuilder).Append([]byte(ref.mk))
			col++
		}
		if c == nil {
			rms++
			continue
		}
		b.Field(col).(*array.BinaryBuilder).Append(c.enc)
		b.Field(col + 1).(*array.Int64Builder).Append(c.expires)
		ups++
	}
	var ch stateChange
	if ups > 0 {
		ch.upserts = ub.NewRecordBatch()
	}
	if rms > 0 {
		ch.removals = rb.NewRecordBatch()
	}
	return ch, ups, rms, nil
}

func (p *procPart) timerChanges() (stateChange, int64, int64) {
	spec := p.op.specs[len(p.op.specs)-1]
	ub := array.NewRecordBuilder(p.fc.mem, spec.key)
	defer ub.Release()
	rb := array.NewRecordBuilder(p.fc.mem, spec.key)
	defer rb.Release()
	nk := len(p.op.keyFields)
	var ups, rms int64
	for _, ref := range p.dirtyTimer {
		k := p.keys[ref.key]
		b := rb
		if k.timers[ref.id] {
			b = ub
			ups++
		} else {
			rms++
		}
		for j, v := range k.key.vals {
			_ = appendPlain(b.Field(j), v) // the key's values came from these columns' types
		}
		b.Field(nk).(*array.Int8Builder).Append(int8(ref.id.kind))
		b.Field(nk + 1).(*array.Int64Builder).Append(ref.id.ms)
	}
	var ch stateChange
	if ups > 0 {
		ch.upserts = ub.NewRecordBatch()
	}
	if rms > 0 {
		ch.removals = rb.NewRecordBatch()
	}
	return ch, ups, rms
}

func (p *procPart) recount() {
	p.rows, p.bytes = 0, 0
	for _, k := range p.keys {
		p.rows += int64(len(k.timers))
		for _, m := range k.cells {
			for _, c := range m {
				p.rows++
				p.bytes += int64(len(c.enc))
			}
		}
	}
}

// updateNextTimers records the earliest timer of each kind, for the
// planner (timerDue, evicts).
func (p *procPart) updateNextTimers() {
	var next [3]int64
	for _, k := range p.keys {
		for id := range k.timers {
			if n := &next[id.kind]; *n == 0 || id.ms < *n {
				*n = id.ms
			}
		}
	}
	p.nextEvent.Store(next[EventTime])
	p.nextProc.Store(next[ProcessingTime])
}

func (p *procPart) committed() {
	p.dirty, p.dirtyTimer = p.dirty[:0], p.dirtyTimer[:0]
	p.dirtySet, p.dirtyTSet = nil, nil
}

func (p *procPart) size() (rows, bytes int64) { return p.rows, p.bytes }

func (p *procPart) release() {
	for _, r := range p.recs {
		r.Release()
	}
	p.recs = nil
	p.keys = nil
}

func timeMs(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// reflectValueOf is the value row holds (a pointer is followed once, so
// Emit(&row) works too).
func reflectValueOf(row any) reflect.Value {
	v := reflect.ValueOf(row)
	if v.Kind() == reflect.Pointer && !v.IsNil() && v.Elem().Kind() == reflect.Struct {
		return v.Elem()
	}
	return v
}
