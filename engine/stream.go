package engine

import (
	"fmt"
	"strings"
	"time"

	"github.com/onceflow/onceflow/batch"
)

// Stream is the definition of a streaming computation: one or more sources
// (their rows unioned; they must share a schema) followed by steps. A Stream
// is immutable: each method returns a new Stream, so a base can be shared.
// Errors in the definition surface when the query is built.
type Stream struct {
	sources []Source
	steps   []step
}

type stepKind int

const (
	stepSelect stepKind = iota
	stepWhere
	stepAggregate
	stepWatermark
	stepDedup
	stepBatchID
	stepWithColumn
	stepDrop
	stepTop
	stepJoin
	stepProcess
)

type step struct {
	kind  stepKind
	cols  []batch.Named
	pred  batch.Expr // stepWhere: the predicate; stepWithColumn: the column's expression
	agg   *aggregateStep
	top   *topStep
	wm    *watermarkStep
	name  string   // stepBatchID, stepWithColumn: the column
	names []string // stepDrop: the columns
	join  *joinStep
	proc  *processStep
}

// opID is the id of a stateful step's operator.
func (st step) opID() string {
	switch {
	case st.agg != nil:
		return st.agg.id
	case st.top != nil:
		return st.top.id
	case st.proc != nil:
		return st.proc.id
	}
	if st.join != nil {
		return st.join.id
	}
	return ""
}

type aggregateStep struct {
	id     string
	keys   []string
	aggs   []batch.Agg
	window *Window
	dedup  dedupKind
}

type dedupKind int

const (
	notDedup dedupKind = iota
	dedupAll
	dedupWithinWatermark
)

type watermarkStep struct {
	col   string
	delay time.Duration
}

// Window is an event-time window used as a grouping key (GroupByWindow).
type Window struct {
	col         string
	size, slide time.Duration
	gap         time.Duration // session windows
}

// TumblingWindow groups rows by fixed, non-overlapping windows of size over
// the timestamp column col, aligned to the Unix epoch.
func TumblingWindow(col string, size time.Duration) Window {
	return Window{col: col, size: size, slide: size}
}

// SlidingWindow groups rows by windows of size starting every slide; a row
// belongs to every window that covers it.
func SlidingWindow(col string, size, slide time.Duration) Window {
	return Window{col: col, size: size, slide: slide}
}

func (w Window) String() string {
	if w.gap > 0 {
		return fmt.Sprintf("session(%s, %s)", w.col, w.gap)
	}
	if w.slide == w.size {
		return fmt.Sprintf("tumbling(%s, %s)", w.col, w.size)
	}
	return fmt.Sprintf("sliding(%s, %s, %s)", w.col, w.size, w.slide)
}

// ReadStream starts a stream from sources. Several sources are unioned and
// must have the same schema.
func ReadStream(sources ...Source) *Stream {
	return &Stream{sources: append([]Source(nil), sources...)}
}

func (s *Stream) with(st step) *Stream {
	n := &Stream{sources: s.sources, steps: make([]step, len(s.steps), len(s.steps)+1)}
	copy(n.steps, s.steps)
	n.steps = append(n.steps, st)
	return n
}

// Select replaces the columns with the named expressions (a projection).
func (s *Stream) Select(cols ...batch.Named) *Stream {
	return s.with(step{kind: stepSelect, cols: cols})
}

// WithColumn sets the column name to e on every row: it replaces the
// column of that name where it stands, or appends a new column after the
// others. The other columns are kept, in order, so a step that computes one
// column need not restate the rest.
func (s *Stream) WithColumn(name string, e batch.Expr) *Stream {
	return s.with(step{kind: stepWithColumn, name: name, pred: e})
}

// Drop removes the named columns and keeps the others in order. A name
// that is not a column of the stream at that step fails the query when it
// is built.
func (s *Stream) Drop(cols ...string) *Stream {
	return s.with(step{kind: stepDrop, names: append([]string(nil), cols...)})
}

// Where keeps the rows for which pred is true (null counts as false).
func (s *Stream) Where(pred batch.Expr) *Stream {
	return s.with(step{kind: stepWhere, pred: pred})
}

// WithWatermark declares col (a timestamp column) as the event time and
// delay as how late a row may arrive. At the end of each batch the
// watermark becomes max(event time seen so far) − delay; it is recorded in
// the next batch's write-ahead entry, so a re-run uses the same one.
// Stateful steps after it drop rows older than the watermark (counted in
// progress as numRowsDroppedByWatermark, or sent to WithLateRows) and evict
// state the watermark has passed.
func (s *Stream) WithWatermark(col string, delay time.Duration) *Stream {
	return s.with(step{kind: stepWatermark, wm: &watermarkStep{col: col, delay: delay}})
}

// GroupByWindow starts a stateful aggregation keyed by an event-time
// window and the named columns. The output has window_start and
// window_end columns before the keys. With a watermark, append mode emits
// each window once, when the watermark passes its end, and state of closed
// windows is evicted in every mode but complete.
func (s *Stream) GroupByWindow(w Window, keys ...string) *Grouped {
	return &Grouped{stream: s, keys: append([]string(nil), keys...), window: &w}
}

// DropDuplicates keeps the first row of each distinct combination of the
// key columns, across batches. With a watermark whose column is among the
// keys, state older than the watermark is evicted (a duplicate that
// arrives later than that is dropped as late); otherwise the state keeps
// every key forever. ID on the result names the operator.
func (s *Stream) DropDuplicates(keys ...string) *Deduplicated {
	return s.dedup(keys, dedupAll)
}

// DropDuplicatesWithinWatermark keeps the first row of each key and drops
// repeats that arrive while the first one's event time plus the watermark
// delay is above the watermark (Spark 3.5 semantics): the tool for turning
// an at-least-once upstream into exactly-once input by event id. It needs
// a watermark. ID on the result names the operator.
func (s *Stream) DropDuplicatesWithinWatermark(keys ...string) *Deduplicated {
	return s.dedup(keys, dedupWithinWatermark)
}

func (s *Stream) dedup(keys []string, kind dedupKind) *Deduplicated {
	st := &aggregateStep{id: "dedup-" + strings.Join(keys, "-"), keys: append([]string(nil), keys...), dedup: kind}
	return &Deduplicated{Stream: s.with(step{kind: stepDedup, agg: st})}
}

// Deduplicated is a stream whose last step is a deduplication: every
// method of Stream goes on from it, and its Stream field is the stream
// itself, for NewQuery or a variable of type *Stream. ID names the
// deduplication operator.
type Deduplicated struct {
	*Stream
}

// ID names the deduplication operator explicitly, like Grouped.ID. The id
// names the operator's state folder, so keeping it stable lets a query
// change its stateless steps without orphaning state. The default is
// derived from the keys: "dedup-<key>-<key>…".
func (d *Deduplicated) ID(id string) *Stream {
	n := &Stream{sources: d.sources, steps: append([]step(nil), d.steps...)}
	last := *n.steps[len(n.steps)-1].agg
	last.id = id
	n.steps[len(n.steps)-1].agg = &last
	return n
}

// WithBatchIDColumn appends an int64 column holding the id of the batch the
// row is processed in. The id is stable across re-runs of a batch, so it
// can key output that must be idempotent (a settlement record per
// merchant per batch).
func (s *Stream) WithBatchIDColumn(name string) *Stream {
	return s.with(step{kind: stepBatchID, name: name})
}

// GroupBy starts a stateful aggregation keyed by the named columns.
func (s *Stream) GroupBy(keys ...string) *Grouped {
	return &Grouped{stream: s, keys: append([]string(nil), keys...)}
}

// Grouped is a stream waiting for its aggregates.
type Grouped struct {
	stream *Stream
	keys   []string
	id     string
	window *Window
}

// ID names the stateful operator explicitly (like Flink's uid). The id
// names the operator's state folder, so keeping it stable lets a query
// change its stateless steps without orphaning state. The default is
// derived from the keys: "groupby-<key>-<key>…".
func (g *Grouped) ID(id string) *Grouped {
	n := *g
	n.id = id
	return &n
}

// Agg completes the aggregation: one output row per group with the keys
// and one column per aggregate, named by batch.Agg.Name. An aggregate's
// input is any expression over the stream's columns at this step
// (batch.Sum(batch.Mul(batch.Col("price"), batch.Col("qty")))), evaluated
// on the rows that reach the aggregation.
func (g *Grouped) Agg(aggs ...batch.Agg) *Stream {
	id := g.id
	if id == "" {
		id = "groupby-" + strings.Join(g.keys, "-")
		if g.window != nil {
			id = "window-" + strings.Join(append([]string{g.window.col}, g.keys...), "-")
		}
	}
	return g.stream.with(step{kind: stepAggregate, agg: &aggregateStep{id: id, keys: g.keys, aggs: append([]batch.Agg(nil), aggs...), window: g.window}})
}

func (s *Stream) describe() string {
	parts := make([]string, len(s.steps))
	for i, st := range s.steps {
		parts[i] = st.describe()
	}
	return strings.Join(parts, " → ")
}

// describe spells one step for plans and logs.
func (st step) describe() string {
	switch st.kind {
	case stepSelect:
		names := make([]string, len(st.cols))
		for j, c := range st.cols {
			names[j] = c.Name
		}
		return fmt.Sprintf("select(%s)", strings.Join(names, ", "))
	case stepWhere:
		return fmt.Sprintf("where(%s)", st.pred)
	case stepAggregate:
		if st.agg.window != nil {
			return fmt.Sprintf("groupBy[%s](%s, %s)", st.agg.id, st.agg.window, strings.Join(st.agg.keys, ", "))
		}
		return fmt.Sprintf("groupBy[%s](%s)", st.agg.id, strings.Join(st.agg.keys, ", "))
	case stepWatermark:
		return fmt.Sprintf("watermark(%s, %s)", st.wm.col, st.wm.delay)
	case stepDedup:
		return fmt.Sprintf("dropDuplicates[%s](%s)", st.agg.id, strings.Join(st.agg.keys, ", "))
	case stepBatchID:
		return fmt.Sprintf("batchId(%s)", st.name)
	case stepWithColumn:
		return fmt.Sprintf("withColumn(%s, %s)", st.name, st.pred)
	case stepDrop:
		return fmt.Sprintf("drop(%s)", strings.Join(st.names, ", "))
	case stepJoin:
		return describeJoin(st.join)
	case stepTop:
		return fmt.Sprintf("top[%s](%d by %s %s per %s)", st.top.id, st.top.n, st.top.by, st.top.order, strings.Join(st.top.keys, ", "))
	case stepProcess:
		return fmt.Sprintf("process[%s](%s)", st.proc.id, strings.Join(st.proc.keys, ", "))
	}
	return fmt.Sprintf("step(%d)", st.kind)
}
