package engine

// QueryPlan is what a query is made of, for people: a status page or a
// log line. It is told to listeners in QueryInfo; nothing reads it back.
type QueryPlan struct {
	// Sources are the sources' descriptions, in order.
	Sources []string `json:"sources"`
	// Steps is the chain of steps, as the driver's "starting" log line
	// prints it ("where(…) → groupBy[totals](key)").
	Steps string `json:"steps"`
	// Operators are the stateful operators, in order.
	Operators []PlanOperator `json:"operators,omitempty"`
	// Sinks are the sinks with the guarantee each runs under.
	Sinks []PlanSink `json:"sinks"`
}

// PlanOperator is a stateful operator of a QueryPlan.
type PlanOperator struct {
	// ID names the operator's state folder (Grouped.ID).
	ID string `json:"id"`
	// Kind is the operator's name in progress records (OperatorName).
	Kind string `json:"kind"`
}

// PlanSink is a sink of a QueryPlan.
type PlanSink struct {
	Description string    `json:"description"`
	Guarantee   Guarantee `json:"guarantee"`
}

// plan describes the query q with its configuration cfg.
func (q *Query) plan(cfg *config) QueryPlan {
	p := QueryPlan{Steps: q.stream.describe()}
	for _, s := range q.stream.sources {
		p.Sources = append(p.Sources, describe(s))
	}
	for _, st := range q.stream.steps {
		if st.agg == nil || (st.kind != stepAggregate && st.kind != stepDedup) {
			continue
		}
		p.Operators = append(p.Operators, PlanOperator{ID: st.agg.id, Kind: st.agg.kind()})
	}
	for _, s := range cfg.sinks {
		p.Sinks = append(p.Sinks, PlanSink{Description: describe(s), Guarantee: guarantee(s)})
	}
	return p
}

// kind is the operator's name, as aggOperator.kind reports it once bound.
func (a *aggregateStep) kind() string {
	switch {
	case a.dedup == dedupAll:
		return "dropDuplicates"
	case a.dedup == dedupWithinWatermark:
		return "dropDuplicatesWithinWatermark"
	case a.window != nil && a.window.gap > 0:
		return "sessionWindowAggregate"
	case a.window != nil:
		return "windowAggregate"
	}
	return "groupBy"
}
