package engine

import (
	"fmt"
	"strings"

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
)

type step struct {
	kind stepKind
	cols []batch.Named
	pred batch.Expr
	agg  *aggregateStep
}

type aggregateStep struct {
	id   string
	keys []string
	aggs []batch.Agg
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

// Where keeps the rows for which pred is true (null counts as false).
func (s *Stream) Where(pred batch.Expr) *Stream {
	return s.with(step{kind: stepWhere, pred: pred})
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
// and one column per aggregate.
func (g *Grouped) Agg(aggs ...batch.Agg) *Stream {
	id := g.id
	if id == "" {
		id = "groupby-" + strings.Join(g.keys, "-")
	}
	return g.stream.with(step{kind: stepAggregate, agg: &aggregateStep{id: id, keys: g.keys, aggs: append([]batch.Agg(nil), aggs...)}})
}

func (s *Stream) describe() string {
	var b strings.Builder
	for i, st := range s.steps {
		if i > 0 {
			b.WriteString(" → ")
		}
		switch st.kind {
		case stepSelect:
			names := make([]string, len(st.cols))
			for j, c := range st.cols {
				names[j] = c.Name
			}
			fmt.Fprintf(&b, "select(%s)", strings.Join(names, ", "))
		case stepWhere:
			fmt.Fprintf(&b, "where(%s)", st.pred)
		case stepAggregate:
			fmt.Fprintf(&b, "groupBy[%s](%s)", st.agg.id, strings.Join(st.agg.keys, ", "))
		}
	}
	return b.String()
}
