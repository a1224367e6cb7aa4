package engine

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Processor is user code that runs per key per batch after
// GroupBy(keys...).Process: Spark's transformWithState, Flink's
// KeyedProcessFunction. The engine groups the batch's rows by key and calls
// Handle once per key that has rows, then OnTimer once per due timer; state
// and timers are durable with the batch (state version N holds what the
// calls of batch N left), and the emitted rows are the operator's output,
// each emitted once (append).
//
// # The determinism rule
//
// A batch may run twice (a crash between its state and its commit), and the
// engine promises that the second run writes what the first would have.
// So a processor's calls must be a function of their arguments: the key,
// its rows, its state and timers, and what the KeyContext tells of the
// batch (BatchID, BatchTime — the timestamp recorded in offsets/N —,
// Watermark, Seed, Rand). A processor must never read the wall clock
// (time.Now), a random source of its own, Go map iteration order, or any
// state of its own outside the declared states: fields of the processor
// value set in Init are fine, fields written in Handle are not (partitions
// run concurrently, and a restart loses them). Side effects (an HTTP call,
// an email) belong in an intent row sent to the outbox (package outbox),
// never in the processor. processortest.Check runs a processor twice, once
// restarting after every batch, and fails when the outputs differ.
//
// Keys are handled in the order their first row appears in the batch's
// input, timers in the order of their time, then key; both orders are a
// function of the batch.
type Processor interface {
	// Init declares the output type (Spec.Output) and the states
	// (NewValueState, NewListState, NewMapState). It is called once, when
	// the query is built.
	Init(s *ProcessorSpec) error
	// Handle processes the rows of one key in this batch.
	Handle(k *KeyContext, rows *Rows) error
	// OnTimer fires one timer of the key. The timer is deleted before the
	// call; OnTimer may register it again or others.
	OnTimer(k *KeyContext, t Timer) error
}

// InitialStater is implemented by a Processor that takes initial state
// from a table (WithInitialState): InitialState is called once per key of
// the table, before the query's first batch, with the key's rows.
type InitialStater interface {
	InitialState(k *KeyContext, rows *Rows) error
}

// ProcessOption configures GroupBy(...).Process.
type ProcessOption func(*processStep)

// WithInitialState gives the processor a table of initial state: records
// that carry the grouping key columns (same names and types as the
// stream's). Before the first batch of a new checkpoint each key's rows are
// passed to the processor's InitialState. The records must be the same on
// every start (they are read only while the state is empty).
func WithInitialState(recs ...arrow.RecordBatch) ProcessOption {
	return func(s *processStep) { s.initial = append(s.initial, recs...) }
}

type processStep struct {
	id      string
	keys    []string
	proc    Processor
	initial []arrow.RecordBatch
}

// Process completes the grouping with a user processor (see Processor):
// the output is the rows it emits, of the type it declares. ID names the
// operator (default "process-<key>-<key>…").
func (g *Grouped) Process(p Processor, opts ...ProcessOption) *Stream {
	id := g.id
	if id == "" {
		id = "process-" + strings.Join(g.keys, "-")
	}
	ps := &processStep{id: id, keys: append([]string(nil), g.keys...), proc: p}
	for _, o := range opts {
		o(ps)
	}
	return g.stream.with(step{kind: stepProcess, proc: ps})
}

// ProcessorSpec collects what a processor declares in Init.
type ProcessorSpec struct {
	out    *codec
	states []*stateDecl
	err    error
}

// Output declares the type of the rows the processor emits: a struct
// (fields as columns, renamed with an `onceflow:"name"` tag) or one
// supported scalar type (one column "value"). Supported field types: bool,
// integers, floats, string, []byte, time.Time (a timestamp in ms), and
// pointers to them (nullable).
func (s *ProcessorSpec) Output(zero any) {
	c, err := newCodec(reflect.TypeOf(zero))
	if err != nil {
		s.fail(fmt.Errorf("output type: %w", err))
		return
	}
	s.out = c
}

func (s *ProcessorSpec) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

type stateKind string

const (
	valueState stateKind = "value"
	listState  stateKind = "list"
	mapState   stateKind = "map"
)

// stateDecl is one declared state: its index in the processor's states,
// its store, its codecs and TTL.
type stateDecl struct {
	idx   int
	name  string
	kind  stateKind
	val   *codec
	key   *codec // map state
	ttlMs int64
}

// StateOption configures one declared state.
type StateOption func(*stateDecl)

// WithTTL expires the state's values ttl after they were last written,
// measured on the batch timestamp (BatchTime): an expired value reads as
// absent and is deleted at the end of the batch. Default: no expiry.
func WithTTL(ttl time.Duration) StateOption {
	return func(d *stateDecl) { d.ttlMs = ttl.Milliseconds() }
}

var stateNameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_-]*$`)

func (s *ProcessorSpec) declare(name string, kind stateKind, val, key reflect.Type, opts []StateOption) *stateDecl {
	d := &stateDecl{idx: len(s.states), name: name, kind: kind}
	for _, o := range opts {
		o(d)
	}
	if !stateNameRE.MatchString(name) {
		s.fail(fmt.Errorf("state name %q: use letters, digits, '_' and '-', starting with a letter or digit", name))
	}
	for _, o := range s.states {
		if o.name == name {
			s.fail(fmt.Errorf("state %q declared twice", name))
		}
	}
	var err error
	if d.val, err = newCodec(val); err != nil {
		s.fail(fmt.Errorf("state %q: %w", name, err))
	}
	if key != nil {
		if d.key, err = newCodec(key); err != nil {
			s.fail(fmt.Errorf("state %q map key: %w", name, err))
		}
	}
	if d.ttlMs < 0 {
		s.fail(fmt.Errorf("state %q: negative TTL", name))
	}
	s.states = append(s.states, d)
	return d
}

// ValueState is one value of type T per key.
type ValueState[T any] struct{ d *stateDecl }

// NewValueState declares a value state named name.
func NewValueState[T any](s *ProcessorSpec, name string, opts ...StateOption) *ValueState[T] {
	return &ValueState[T]{d: s.declare(name, valueState, reflect.TypeFor[T](), nil, opts)}
}

// Get returns the key's value and whether it has one.
func (v *ValueState[T]) Get(k *KeyContext) (T, bool) {
	var zero T
	rows := k.get(v.d, "")
	if len(rows) == 0 {
		return zero, false
	}
	out, err := v.d.val.value(rows[0])
	if err != nil {
		k.fail(fmt.Errorf("state %q: %w", v.d.name, err))
		return zero, false
	}
	return out.Interface().(T), true
}

// Set stores the key's value (and restarts its TTL).
func (v *ValueState[T]) Set(k *KeyContext, val T) {
	k.put(v.d, "", nil, [][]any{v.d.val.plain(reflect.ValueOf(&val).Elem())})
}

// Clear removes the key's value.
func (v *ValueState[T]) Clear(k *KeyContext) { k.remove(v.d, "") }

// ListState is a list of values of type T per key.
type ListState[T any] struct{ d *stateDecl }

// NewListState declares a list state named name.
func NewListState[T any](s *ProcessorSpec, name string, opts ...StateOption) *ListState[T] {
	return &ListState[T]{d: s.declare(name, listState, reflect.TypeFor[T](), nil, opts)}
}

// Get returns the key's list (nil when empty).
func (l *ListState[T]) Get(k *KeyContext) []T {
	rows := k.get(l.d, "")
	var out []T
	for _, r := range rows {
		v, err := l.d.val.value(r)
		if err != nil {
			k.fail(fmt.Errorf("state %q: %w", l.d.name, err))
			return nil
		}
		out = append(out, v.Interface().(T))
	}
	return out
}

// Append adds vals at the end of the key's list.
func (l *ListState[T]) Append(k *KeyContext, vals ...T) {
	l.Set(k, append(l.Get(k), vals...))
}

// Set replaces the key's list; an empty list removes it.
func (l *ListState[T]) Set(k *KeyContext, vals []T) {
	if len(vals) == 0 {
		k.remove(l.d, "")
		return
	}
	rows := make([][]any, len(vals))
	for i := range vals {
		rows[i] = l.d.val.plain(reflect.ValueOf(&vals[i]).Elem())
	}
	k.put(l.d, "", nil, rows)
}

// Clear removes the key's list.
func (l *ListState[T]) Clear(k *KeyContext) { k.remove(l.d, "") }

// MapState is a map from K to V per key. Each entry is a row of its own in
// the state store (and expires on its own under WithTTL).
type MapState[K, V any] struct{ d *stateDecl }

// NewMapState declares a map state named name.
func NewMapState[K, V any](s *ProcessorSpec, name string, opts ...StateOption) *MapState[K, V] {
	return &MapState[K, V]{d: s.declare(name, mapState, reflect.TypeFor[V](), reflect.TypeFor[K](), opts)}
}

func (m *MapState[K, V]) enc(mk K) ([]any, string) {
	p := m.d.key.plain(reflect.ValueOf(&mk).Elem())
	return p, string(appendRow(nil, p))
}

// Get returns the value under mk and whether there is one.
func (m *MapState[K, V]) Get(k *KeyContext, mk K) (V, bool) {
	var zero V
	_, e := m.enc(mk)
	rows := k.get(m.d, e)
	if len(rows) == 0 {
		return zero, false
	}
	v, err := m.d.val.value(rows[0])
	if err != nil {
		k.fail(fmt.Errorf("state %q: %w", m.d.name, err))
		return zero, false
	}
	return v.Interface().(V), true
}

// Put stores v under mk.
func (m *MapState[K, V]) Put(k *KeyContext, mk K, v V) {
	p, e := m.enc(mk)
	k.put(m.d, e, p, [][]any{m.d.val.plain(reflect.ValueOf(&v).Elem())})
}

// Remove deletes the entry under mk.
func (m *MapState[K, V]) Remove(k *KeyContext, mk K) {
	_, e := m.enc(mk)
	k.remove(m.d, e)
}

// Keys returns the map's keys in the order of their encoding (a function
// of the keys alone, never Go map order).
func (m *MapState[K, V]) Keys(k *KeyContext) []K {
	var out []K
	for _, c := range k.mapCells(m.d) {
		v, err := m.d.key.value(c.mkey)
		if err != nil {
			k.fail(fmt.Errorf("state %q map key: %w", m.d.name, err))
			return nil
		}
		out = append(out, v.Interface().(K))
	}
	return out
}

// Clear removes every entry of the key's map.
func (m *MapState[K, V]) Clear(k *KeyContext) {
	for _, c := range k.mapCells(m.d) {
		k.remove(m.d, string(appendRow(nil, c.mkey)))
	}
}

// TimerKind says what clock a timer follows.
type TimerKind int8

const (
	// EventTime timers fire in the first batch whose watermark is at or
	// past their time.
	EventTime TimerKind = 1
	// ProcessingTime timers fire in the first batch whose timestamp
	// (recorded in offsets/N, BatchTime) is at or past their time; a due
	// timer makes the engine plan a batch even without new input.
	ProcessingTime TimerKind = 2
)

func (t TimerKind) String() string {
	switch t {
	case EventTime:
		return "event"
	case ProcessingTime:
		return "processing"
	}
	return fmt.Sprintf("TimerKind(%d)", int8(t))
}

// Timer is one registered timer of a key, at millisecond precision.
type Timer struct {
	Kind TimerKind
	At   time.Time
}

// Key is the grouping key of a processor call.
type Key struct {
	vals []any
	enc  string
}

// Values are the key's columns, in GroupBy order, as Go values (int64,
// uint64, float64, string, []byte, bool, time.Time; nil for null).
func (k Key) Values() []any { return slices.Clone(k.vals) }

// String formats the key's values.
func (k Key) String() string {
	parts := make([]string, len(k.vals))
	for i, v := range k.vals {
		parts[i] = fmt.Sprint(v)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// KeyContext is what a processor call sees of its key and its batch. It is
// valid only during the call.
type KeyContext struct {
	part *procPart
	key  *procKey
	err  error
}

// Key is the grouping key.
func (k *KeyContext) Key() Key { return k.key.key }

// BatchID is the id of the batch running.
func (k *KeyContext) BatchID() int64 { return k.part.fc.batchID }

// BatchTime is the batch timestamp recorded in offsets/N: the same on a
// re-run. Use it where you would use time.Now.
func (k *KeyContext) BatchTime() time.Time { return time.UnixMilli(k.part.fc.timestampMs).UTC() }

// Watermark is the event-time watermark in force for this batch (the zero
// time without one).
func (k *KeyContext) Watermark() time.Time {
	if k.part.fc.watermark <= 0 {
		return time.Time{}
	}
	return time.UnixMilli(k.part.fc.watermark).UTC()
}

// Seed is a 64-bit value derived from the batch id and the key: the same
// on a re-run, different across keys and batches.
func (k *KeyContext) Seed() uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(k.part.fc.batchID))
	h.Write(b[:])
	h.Write([]byte(k.key.key.enc))
	return h.Sum64()
}

// Rand is a random source seeded by Seed.
func (k *KeyContext) Rand() *rand.Rand {
	s := k.Seed()
	return rand.New(rand.NewPCG(s, s^0x9e3779b97f4a7c15))
}

// Emit outputs one row, a value of the type declared with Output.
func (k *KeyContext) Emit(row any) {
	if k.err != nil {
		return
	}
	if err := k.part.emit(row); err != nil {
		k.fail(err)
	}
}

// RegisterTimer registers a timer of the key at t (millisecond
// precision); registering an existing timer is a no-op. An event-time
// timer needs a watermark on the stream.
func (k *KeyContext) RegisterTimer(kind TimerKind, t time.Time) {
	if kind != EventTime && kind != ProcessingTime {
		k.fail(fmt.Errorf("register timer: unknown kind %d", kind))
		return
	}
	if kind == EventTime && !k.part.op.watermarked {
		k.fail(fmt.Errorf("register timer: an event-time timer needs a watermark on the stream (WithWatermark before GroupBy)"))
		return
	}
	k.part.setTimer(k.key, timerID{kind: kind, ms: t.UnixMilli()}, true)
}

// DeleteTimer deletes the key's timer of kind at t, if there is one.
func (k *KeyContext) DeleteTimer(kind TimerKind, t time.Time) {
	k.part.setTimer(k.key, timerID{kind: kind, ms: t.UnixMilli()}, false)
}

// Timers lists the key's timers in order of time.
func (k *KeyContext) Timers() []Timer {
	ids := k.key.sortedTimers()
	out := make([]Timer, len(ids))
	for i, t := range ids {
		out[i] = Timer{Kind: t.kind, At: time.UnixMilli(t.ms).UTC()}
	}
	return out
}

func (k *KeyContext) fail(err error) {
	if k.err == nil {
		k.err = err
	}
}

func (k *KeyContext) get(d *stateDecl, mk string) [][]any {
	c := k.key.cell(d.idx, mk)
	if c == nil || c.expired(k.part.fc.timestampMs) {
		return nil
	}
	rows, err := c.decode()
	if err != nil {
		k.fail(fmt.Errorf("state %q of key %s: %w", d.name, k.key.key, err))
		return nil
	}
	return rows
}

func (k *KeyContext) put(d *stateDecl, mk string, mkey []any, rows [][]any) {
	var enc []byte
	for _, r := range rows {
		enc = appendRow(enc, r)
	}
	exp := int64(0)
	if d.ttlMs > 0 {
		exp = k.part.fc.timestampMs + d.ttlMs
	}
	k.part.setCell(k.key, d.idx, mk, &cell{enc: enc, mkey: mkey, expires: exp})
}

func (k *KeyContext) remove(d *stateDecl, mk string) {
	k.part.setCell(k.key, d.idx, mk, nil)
}

// mapCells are the live entries of the key's map state in encoding order.
func (k *KeyContext) mapCells(d *stateDecl) []*cell {
	m := k.key.cells[d.idx]
	keys := make([]string, 0, len(m))
	for mk, c := range m {
		if !c.expired(k.part.fc.timestampMs) {
			keys = append(keys, mk)
		}
	}
	slices.Sort(keys)
	out := make([]*cell, len(keys))
	for i, mk := range keys {
		out[i] = m[mk]
	}
	return out
}

// Rows are the input rows of one key in one batch.
type Rows struct {
	schema *arrow.Schema
	refs   []rowRef
	cache  *decoderCache
}

// decoderCache keeps, per partition, the codec and column positions of each
// type Rows.Decode fills, so reflection runs once per type, not per call.
type decoderCache struct {
	schema *arrow.Schema
	byType map[reflect.Type]*rowDecoder
}

type rowDecoder struct {
	c    *codec
	cols []int
}

func (dc *decoderCache) get(schema *arrow.Schema, t reflect.Type) (*rowDecoder, error) {
	if dc != nil && dc.schema == schema {
		if d, ok := dc.byType[t]; ok {
			return d, nil
		}
	}
	c, err := newCodec(t)
	if err != nil {
		return nil, err
	}
	d := &rowDecoder{c: c, cols: make([]int, len(c.fields))}
	for i, f := range c.fields {
		name := f.name
		if c.scalar {
			name = schema.Field(0).Name
		}
		if d.cols[i] = columnFor(schema, name); d.cols[i] < 0 {
			return nil, fmt.Errorf("field %s of %s has no column in %s", f.name, c.typ, schema)
		}
	}
	if dc != nil {
		if dc.schema != schema {
			dc.schema, dc.byType = schema, map[reflect.Type]*rowDecoder{}
		}
		dc.byType[t] = d
	}
	return d, nil
}

type rowRef struct {
	rec arrow.RecordBatch
	i   int
}

// Len is the number of rows.
func (r *Rows) Len() int { return len(r.refs) }

// Schema is the rows' schema (the stream's at the Process step).
func (r *Rows) Schema() *arrow.Schema { return r.schema }

// Value returns column col of row i as a Go value (int64, uint64, float64,
// string, []byte, bool, time.Time; nil for null).
func (r *Rows) Value(i int, col string) (any, error) {
	idx := r.schema.FieldIndices(col)
	if len(idx) != 1 {
		return nil, fmt.Errorf("engine: rows: no column %q in %s", col, r.schema)
	}
	ref := r.refs[i]
	return plainAt(ref.rec.Column(idx[0]), ref.i)
}

// Decode fills dst, a pointer to a slice of structs, with the rows: each
// exported field reads the column of its name (or `onceflow:"name"` tag;
// CardID also matches card_id). A field without a column is an error.
func (r *Rows) Decode(dst any) error {
	pv := reflect.ValueOf(dst)
	if pv.Kind() != reflect.Pointer || pv.Elem().Kind() != reflect.Slice {
		return fmt.Errorf("engine: rows: Decode needs a pointer to a slice, got %T", dst)
	}
	sv := pv.Elem()
	d, err := r.cache.get(r.schema, sv.Type().Elem())
	if err != nil {
		return fmt.Errorf("engine: rows: %w", err)
	}
	c, cols := d.c, d.cols
	out := reflect.MakeSlice(sv.Type(), len(r.refs), len(r.refs))
	vals := make([]any, len(c.fields))
	for j, ref := range r.refs {
		for i, col := range cols {
			if vals[i], err = plainAt(ref.rec.Column(col), ref.i); err != nil {
				return fmt.Errorf("engine: rows: column %q: %w", r.schema.Field(col).Name, err)
			}
		}
		v, err := c.value(vals)
		if err != nil {
			return fmt.Errorf("engine: rows: row %d: %w", j, err)
		}
		out.Index(j).Set(v)
	}
	sv.Set(out)
	return nil
}
