package engine

import (
	"fmt"
	"strings"
)

// Plan describes a query as it will run: its sources, every step in order,
// the stateful operators with their ids (the names of their state folders),
// the output mode and the sinks with their delivery guarantees. It is what
// `onceflow explain` and the status page print; it holds no secret (sources
// and sinks are described by their Description, which redacts credentials).
type Plan struct {
	Name       string         `json:"name,omitempty"`
	Sources    []string       `json:"sources"`
	Watermark  string         `json:"watermark,omitempty"` // "ts - 10s"
	Steps      []string       `json:"steps"`
	Operators  []OperatorPlan `json:"operators,omitempty"`
	OutputMode string         `json:"outputMode"`
	Partitions int            `json:"statePartitions,omitempty"`
	Sinks      []SinkPlan     `json:"sinks,omitempty"`
	LateRows   *SinkPlan      `json:"lateRows,omitempty"`
	// Warnings name what will hurt at run time, such as state that grows
	// without bound.
	Warnings []string `json:"warnings,omitempty"`
}

// OperatorPlan is one stateful operator of a plan.
type OperatorPlan struct {
	ID   string   `json:"id"`
	Kind string   `json:"kind"`
	Keys []string `json:"keys,omitempty"`
	// Emits says when the operator's rows leave it: "append" (once, when
	// final), "update" (changed groups every batch) or "complete".
	Emits string `json:"emits"`
	// EventTime names the output column that carries the event time to the
	// next operator, with its offset ("window_end - 1ms"), or "" for none.
	EventTime string   `json:"eventTime,omitempty"`
	Stores    []string `json:"stores,omitempty"`
	Params    string   `json:"params,omitempty"`
	// Broadcast is the size of a stream-static join's table at its newest
	// version, when the table tells it (StaticSizer).
	Broadcast string `json:"broadcast,omitempty"`
	// Backend names the state backend that keeps the operator's state:
	// "memory" or a disk-backed one ("pebble"; WithStateStore,
	// WithOperatorStateStore).
	Backend string `json:"backend"`
}

// SinkPlan is one sink of a plan.
type SinkPlan struct {
	Description string    `json:"description"`
	Guarantee   Guarantee `json:"guarantee"`
}

// Describe returns the query's plan. It binds the query's stream the way
// Run does, without opening its checkpoint.
func (q *Query) Describe() (Plan, error) {
	cfg := q.cfg
	ex, err := bindStream(q.stream, &cfg)
	if err != nil {
		return Plan{}, err
	}
	defer ex.release()
	return describePlan(q.stream, &cfg, ex), nil
}

func describePlan(s *Stream, cfg *config, ex *executor) Plan {
	p := Plan{Name: cfg.name, OutputMode: ex.mode.String()}
	for _, src := range s.sources {
		p.Sources = append(p.Sources, describe(src))
	}
	if ex.wm != nil {
		p.Watermark = fmt.Sprintf("%s - %s", ex.wm.col, ex.wm.delay)
	}
	for _, st := range s.steps {
		p.Steps = append(p.Steps, st.describe())
	}
	if len(ex.ops) > 0 {
		p.Partitions = cfg.partitions
	}
	for i, c := range ex.ops {
		oc := c.conf()
		op := OperatorPlan{ID: oc.ID, Kind: oc.Kind, Keys: oc.Keys, Stores: oc.Stores, Params: oc.Params, Emits: Append.String(), Backend: cfg.backendName(oc.ID)}
		if i == len(ex.ops)-1 && c.op.aggregates() {
			op.Emits = ex.mode.String()
		}
		if i == len(ex.ops)-1 && ex.mode == Complete && cfg.backendFor(oc.ID) != nil {
			p.Warnings = append(p.Warnings, fmt.Sprintf("operator %s emits every group every batch (complete mode): each batch reads its whole state from the %s backend into memory, so memory follows the state's size", oc.ID, op.Backend))
		}
		if et := c.op.eventTime(); et.col >= 0 {
			op.EventTime = c.op.outputSchema().Field(et.col).Name
			if et.offsetMs != 0 {
				op.EventTime += fmt.Sprintf(" %+dms", et.offsetMs)
			}
		}
		if b, ok := c.op.(planBroadcaster); ok {
			op.Broadcast = b.planBroadcast()
		}
		if w, ok := c.op.(planWarner); ok {
			p.Warnings = append(p.Warnings, w.planWarnings()...)
		}
		p.Operators = append(p.Operators, op)
	}
	for _, sk := range cfg.sinks {
		p.Sinks = append(p.Sinks, SinkPlan{Description: describe(sk), Guarantee: guarantee(sk)})
	}
	if cfg.lateRows != nil {
		p.LateRows = &SinkPlan{Description: describe(cfg.lateRows), Guarantee: guarantee(cfg.lateRows)}
	}
	return p
}

// planWarner is an operator with something to say in the plan (a join
// whose state grows without bound).
type planWarner interface {
	planWarnings() []string
}

// planBroadcaster is an operator that broadcasts a table (a stream-static
// join) and can tell its size.
type planBroadcaster interface {
	planBroadcast() string
}

// String prints the plan for people, one item a line.
func (p Plan) String() string {
	var b strings.Builder
	if p.Name != "" {
		fmt.Fprintf(&b, "query %s\n", p.Name)
	}
	for i, s := range p.Sources {
		fmt.Fprintf(&b, "source %d: %s\n", i, s)
	}
	if p.Watermark != "" {
		fmt.Fprintf(&b, "watermark: %s\n", p.Watermark)
	}
	for i, s := range p.Steps {
		fmt.Fprintf(&b, "step %d: %s\n", i+1, s)
	}
	for _, o := range p.Operators {
		fmt.Fprintf(&b, "operator %s: %s", o.ID, o.Kind)
		if len(o.Keys) > 0 {
			fmt.Fprintf(&b, " by (%s)", strings.Join(o.Keys, ", "))
		}
		fmt.Fprintf(&b, ", emits %s", o.Emits)
		if o.EventTime != "" {
			fmt.Fprintf(&b, ", event time %s", o.EventTime)
		}
		if len(o.Stores) > 0 {
			fmt.Fprintf(&b, ", stores %s", strings.Join(o.Stores, ", "))
		}
		if o.Params != "" {
			fmt.Fprintf(&b, " [%s]", o.Params)
		}
		if o.Broadcast != "" {
			fmt.Fprintf(&b, ", broadcasts %s", o.Broadcast)
		}
		if o.Backend != "" && o.Backend != "memory" {
			fmt.Fprintf(&b, ", state on %s", o.Backend)
		}
		b.WriteString("\n")
	}
	if p.Partitions > 0 {
		fmt.Fprintf(&b, "state partitions: %d\n", p.Partitions)
	}
	fmt.Fprintf(&b, "output mode: %s\n", p.OutputMode)
	for i, s := range p.Sinks {
		fmt.Fprintf(&b, "sink %d: %s (%s)\n", i, s.Description, s.Guarantee)
	}
	if p.LateRows != nil {
		fmt.Fprintf(&b, "late rows: %s (%s)\n", p.LateRows.Description, p.LateRows.Guarantee)
	}
	for _, w := range p.Warnings {
		fmt.Fprintf(&b, "warning: %s\n", w)
	}
	return b.String()
}
