package engine

import (
	"fmt"
	"strings"
	"time"
)

// JoinKind is the kind of a join: which rows without a match are kept.
type JoinKind int

const (
	// Inner keeps the pairs of rows that match.
	Inner JoinKind = iota + 1
	// LeftOuter keeps the matching pairs and, once no match can still
	// arrive, every left row that had none, with nulls on the right.
	LeftOuter
	// RightOuter is LeftOuter with the sides swapped.
	RightOuter
	// FullOuter is LeftOuter and RightOuter together.
	FullOuter
	// LeftSemi keeps each left row that has a match, once, with the left
	// columns only.
	LeftSemi
)

func (k JoinKind) String() string {
	switch k {
	case Inner:
		return "inner"
	case LeftOuter:
		return "leftOuter"
	case RightOuter:
		return "rightOuter"
	case FullOuter:
		return "fullOuter"
	case LeftSemi:
		return "leftSemi"
	}
	return fmt.Sprintf("JoinKind(%d)", int(k))
}

// outer reports whether side's unmatched rows are emitted with nulls.
func (k JoinKind) outer(side int) bool {
	switch k {
	case FullOuter:
		return true
	case LeftOuter:
		return side == 0
	case RightOuter:
		return side == 1
	}
	return false
}

// JoinCond is one condition of a join: an equality of a left and a right
// column (On), or an event-time range (Within).
type JoinCond struct {
	left, right  string
	within       bool
	lower, upper time.Duration
}

// On matches rows whose left column left equals the right column right
// (both of one type; null equals nothing).
func On(left, right string) JoinCond { return JoinCond{left: left, right: right} }

// Within matches rows whose right timestamp rightTime lies in
// [leftTime+lower, leftTime+upper] (both bounds included), for example
// Within("auction_ts", "bid_ts", 0, 10*time.Minute). With a watermark on
// both sides, over these very columns, it bounds the join's state: a row
// is evicted once the watermark proves that no row of the other side can
// still match it, and an outer row is emitted then.
func Within(leftTime, rightTime string, lower, upper time.Duration) JoinCond {
	return JoinCond{left: leftTime, right: rightTime, within: true, lower: lower, upper: upper}
}

func (c JoinCond) String() string {
	if c.within {
		return fmt.Sprintf("%s between %s%+v and %s%+v", c.right, c.left, c.lower, c.left, c.upper)
	}
	return c.left + " = " + c.right
}

type joinStep struct {
	id     string
	kind   JoinKind
	right  *Stream
	first  int // index of the right side's first source in the query's sources
	conds  []JoinCond
	table  *Table      // JoinTable: the right side is a changelog table
	static *staticSpec // JoinStatic: the right side is a static table's versions
}

// Join joins the stream (the left side) with right, a stream of other
// sources with stateless steps and, for a bounded state, its own
// watermark. Both sides are buffered in the join's state (named stores
// left/ and right/ of each partition), partitioned by the equality keys.
// The output holds the left columns then the right ones (LeftSemi: the
// left ones only); a name on both sides becomes left_<name> and
// right_<name>. Each output row is emitted once (append).
//
// Outer joins need a Within condition and a watermark on both sides over
// the Within columns, so that a row without a match can be emitted when
// the watermark passes; Inner and LeftSemi run without them, with a
// warning in the plan, and their state then grows forever (Spark's
// rules). ID on the result names the operator; the default is
// "join-<left key>-<right key>…".
func (s *Stream) Join(right *Stream, kind JoinKind, conds ...JoinCond) *Joined {
	id := "join"
	for _, c := range conds {
		if !c.within {
			id += "-" + c.left + "-" + c.right
		}
	}
	js := &joinStep{id: id, kind: kind, right: right, first: len(s.sources), conds: append([]JoinCond(nil), conds...)}
	n := s.with(step{kind: stepJoin, join: js})
	if right != nil {
		n.sources = append(append([]Source(nil), s.sources...), right.sources...)
	}
	return &Joined{Stream: n}
}

// Joined is a stream whose last step is a join: every method of Stream
// goes on from it, and its Stream field is the stream itself. ID names the
// join operator.
type Joined struct {
	*Stream
}

// ID names the join operator explicitly, like Grouped.ID: the id names the
// operator's state folder state/<id>/.
func (j *Joined) ID(id string) *Stream {
	n := &Stream{sources: j.sources, steps: append([]step(nil), j.steps...)}
	last := *n.steps[len(n.steps)-1].join
	last.id = id
	n.steps[len(n.steps)-1].join = &last
	return n
}

// describeJoin is the plan's text for a join step.
func describeJoin(j *joinStep) string {
	conds := make([]string, len(j.conds))
	for i, c := range j.conds {
		conds[i] = c.String()
	}
	right := ""
	if j.right != nil {
		right = j.right.describe()
	}
	if j.static != nil && j.static.table != nil {
		return fmt.Sprintf("joinStatic[%s](%s, %s; broadcast static table %s, %s)", j.id, j.kind, strings.Join(conds, " and "), j.static.table.Description(), j.static.refresh)
	}
	if j.table != nil {
		return fmt.Sprintf("joinTable[%s](%s, %s; table keyed by %s: %s)", j.id, j.kind, strings.Join(conds, " and "), strings.Join(j.table.keys, ", "), right)
	}
	return fmt.Sprintf("join[%s](%s, %s; right: %s)", j.id, j.kind, strings.Join(conds, " and "), right)
}
