package sql

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
)

// sourceDef is a CREATE SOURCE statement.
type sourceDef struct {
	name      string
	at        int // user offset of the name
	schema    *arrow.Schema
	wm        *wmDef
	connector string
	opts      *options
	// table is a CREATE TABLE … PRIMARY KEY: a changelog that a stream
	// joins (JoinTable), keyed by keys, deleteWhen its tombstone.
	table      bool
	keys       []string
	declared   []string
	deleteWhen batch.Expr
	tombstones bool
}

type wmDef struct {
	col   string
	delay time.Duration
}

// op is one step of a compiled query, applied to the stream in order.
type op struct {
	desc  string
	at    int // user offset the step came from
	apply func(*engine.Stream) *engine.Stream
	// items, for a projection: one apply per column, to find the one
	// the engine refuses.
	items    []item
	stateful *Operator
	// join, for a join step, builds the right side and joins it.
	join *joinSpec
	// watermark is set on the source's WithWatermark, which a query
	// without a stateful operator leaves out (it would only force the
	// time column to the output).
	watermark bool
}

type item struct {
	at    int
	apply func(*engine.Stream) *engine.Stream
}

// Operator is a stateful operator of a sink's query: its id (the name of
// its state folder), its kind and its keys.
type Operator struct {
	ID   string
	Kind string // "aggregate", "window", "session", "dedup"
	Keys []string
	// Hinted is true when the id comes from a /*+ id('…') */ hint, false
	// when it comes from the naming rule <sink>-<kind>-<n>.
	Hinted bool
}

// compiled is a query compiled so far: its source, its steps, and the
// names of the columns it outputs.
type compiled struct {
	src  *sourceDef
	srcs []*sourceDef // every source and table read, src first
	ops  []op
	cols []string
	// qual maps, after a join, each FROM alias's columns to their names in
	// cols (the engine's clash rule: left_x, right_x).
	qual map[string]map[string]string
	// top is a RANK() column of this block waiting for the enclosing
	// block's WHERE (see topn.go).
	top *pendingTop
}

type compiler struct {
	r       *rewritten
	file    string
	sources map[string]*sourceDef
	sink    string
	nState  int
	ids     map[string]int // operator id → user offset of the first use
}

func (c *compiler) errAt(loc int32, unsupported bool, format string, args ...any) error {
	l, col := c.r.pos(int(loc))
	if loc < 0 {
		l, col = 1, 1
	}
	return &Error{File: c.file, Line: l, Col: col, Msg: fmt.Sprintf(format, args...), unsupported: unsupported}
}

func (c *compiler) userAt(loc int32) int {
	if loc < 0 {
		return 0
	}
	return c.r.orig(int(loc))
}

// compileSelect compiles one SELECT block (with its FROM, recursively).
func (c *compiler) compileSelect(sel *pg.SelectStmt, at int32) (*compiled, error) {
	if sel.Op != pg.SetOperation_SETOP_NONE {
		return nil, c.errAt(at, true, "UNION, INTERSECT and EXCEPT are not supported: write one sink per query, or several sources of one schema in one query's FROM is not supported either")
	}
	if sel.WithClause != nil {
		return nil, c.errAt(at, true, "WITH (common table expressions) is not supported: use a subquery in FROM")
	}
	if len(sel.ValuesLists) > 0 {
		return nil, c.errAt(at, true, "VALUES is not supported: read rows from a CREATE SOURCE")
	}
	if len(sel.SortClause) > 0 {
		return nil, c.errAt(sortLoc(sel.SortClause[0]), true, "ORDER BY is not supported: a stream has no order; sort where the sink's output is read")
	}
	if sel.LimitCount != nil || sel.LimitOffset != nil {
		n := sel.LimitCount
		if n == nil {
			n = sel.LimitOffset
		}
		return nil, c.errAt(exprLoc(n), true, "LIMIT and OFFSET are not supported on a stream")
	}
	if len(sel.WindowClause) > 0 {
		return nil, c.errAt(at, true, "WINDOW clauses are not supported: use TUMBLE, HOP or SESSION in FROM")
	}
	if len(sel.FromClause) == 0 {
		return nil, c.errAt(firstTargetLoc(sel, at), true, "a query needs FROM with a source")
	}
	if len(sel.FromClause) > 1 {
		return nil, c.errAt(fromLoc(sel.FromClause[1]), true, "a second FROM item (a cross join) is not supported: write FROM a JOIN b ON a.k = b.k")
	}
	sel, err := c.existsToSemiJoin(sel)
	if err != nil {
		return nil, err
	}
	q, win, err := c.compileFrom(sel.FromClause[0])
	if err != nil {
		return nil, err
	}
	if q.top != nil {
		if err := c.applyTop(q, sel.WhereClause); err != nil {
			return nil, err
		}
		sel = shallowWithoutWhere(sel)
	}
	if rt, fc := rankTarget(sel); rt != nil {
		if win != nil {
			return nil, c.errAt(fc.Location, true, "RANK() OVER beside %s: aggregate the windows in a subquery, then rank its rows", strings.ToUpper(win.kind))
		}
		if sel.WhereClause != nil {
			sc := &scope{c: c, cols: q.cols, qual: q.qual}
			e, err := sc.expr(sel.WhereClause)
			if err != nil {
				return nil, err
			}
			q.ops = append(q.ops, op{desc: "where " + e.String(), at: c.userAt(exprLoc(sel.WhereClause)), apply: func(s *engine.Stream) *engine.Stream { return s.Where(e) }})
		}
		return c.compileRank(sel, q, at, rt, fc)
	}
	if sel.WhereClause != nil {
		sc := &scope{c: c, cols: q.cols, qual: q.qual}
		e, err := sc.expr(sel.WhereClause)
		if err != nil {
			return nil, err
		}
		q.ops = append(q.ops, op{desc: "where " + e.String(), at: c.userAt(exprLoc(sel.WhereClause)), apply: func(s *engine.Stream) *engine.Stream { return s.Where(e) }})
	}
	grouped := len(sel.GroupClause) > 0 || sel.HavingClause != nil || win != nil || hasAgg(sel.TargetList)
	if !grouped {
		return c.compileProjection(sel, q, at)
	}
	return c.compileAggregate(sel, q, win, at)
}

// window is a window table function in FROM.
type window struct {
	kind string // "tumble", "hop", "session"
	w    engine.Window
	at   int32
}

func (c *compiler) compileFrom(n *pg.Node) (*compiled, *window, error) {
	switch {
	case n.GetRangeVar() != nil:
		rv := n.GetRangeVar()
		src, err := c.source(rv.Relname, rv.Location)
		if err != nil {
			return nil, nil, err
		}
		if src.table {
			return nil, nil, c.errAt(rv.Location, true, "table %s is read by a stream–table join only: write FROM stream JOIN %s ON stream.k = %s.%s", src.name, src.name, src.name, strings.Join(src.keys, ""))
		}
		return c.start(src), nil, nil
	case n.GetRangeSubselect() != nil:
		rs := n.GetRangeSubselect()
		if rs.Lateral {
			return nil, nil, c.errAt(-1, true, "LATERAL is not supported")
		}
		inner := rs.Subquery.GetSelectStmt()
		q, err := c.compileSelect(inner, firstTargetLoc(inner, -1))
		return q, nil, err
	case n.GetRangeFunction() != nil:
		return c.compileWindowFunc(n.GetRangeFunction())
	case n.GetJoinExpr() != nil:
		q, err := c.compileJoin(n.GetJoinExpr())
		return q, nil, err
	}
	return nil, nil, c.errAt(-1, true, "unsupported FROM item %T", n.Node)
}

func (c *compiler) source(name string, loc int32) (*sourceDef, error) {
	src, ok := c.sources[name]
	if !ok {
		var names []string
		for k := range c.sources {
			names = append(names, k)
		}
		slices.Sort(names)
		return nil, c.errAt(loc, false, "unknown source %q: CREATE SOURCE it before the sink (sources: %s)", name, strings.Join(names, ", "))
	}
	return src, nil
}

func (c *compiler) start(src *sourceDef) *compiled {
	q := &compiled{src: src, srcs: []*sourceDef{src}}
	for _, f := range src.schema.Fields() {
		q.cols = append(q.cols, f.Name)
	}
	if src.table {
		// A table keeps its declared columns (a kafka table drops the
		// record's metadata); with tombstones its one key comes from the
		// record key when the value is null.
		if src.tombstones && len(src.keys) == 1 {
			k := src.keys[0]
			q.ops = append(q.ops, op{desc: fmt.Sprintf("%s from the record key when null (tombstones)", k), at: src.at, apply: func(s *engine.Stream) *engine.Stream {
				return s.WithColumn(k, batch.Coalesce(batch.Col(k), batch.Cast(batch.Col("key"), arrow.BinaryTypes.String)))
			}})
		}
		var named []batch.Named
		for _, d := range src.declared {
			named = append(named, batch.As(batch.Col(d), d))
		}
		q.ops = append(q.ops, op{desc: "select " + strings.Join(src.declared, ", "), at: src.at, apply: func(s *engine.Stream) *engine.Stream { return s.Select(named...) }})
		q.cols = slices.Clone(src.declared)
	}
	if src.wm != nil {
		wm := *src.wm
		q.ops = append(q.ops, op{watermark: true, desc: fmt.Sprintf("watermark %s - %s", wm.col, wm.delay), at: src.at, apply: func(s *engine.Stream) *engine.Stream { return s.WithWatermark(wm.col, wm.delay) }})
	}
	return q
}

func (c *compiler) compileWindowFunc(rf *pg.RangeFunction) (*compiled, *window, error) {
	if len(rf.Functions) != 1 {
		return nil, nil, c.errAt(-1, true, "ROWS FROM is not supported")
	}
	items := rf.Functions[0].GetList().GetItems()
	fc := items[0].GetFuncCall()
	if fc == nil {
		return nil, nil, c.errAt(-1, true, "FROM takes a source, a subquery or TUMBLE/HOP/SESSION")
	}
	name := funcName(fc)
	want := map[string]int{"tumble": 3, "hop": 4, "session": 3}
	nargs, ok := want[name]
	if !ok {
		return nil, nil, c.errAt(fc.Location, true, "table function %s is not supported: FROM takes TUMBLE(src, ts, size), HOP(src, ts, slide, size) or SESSION(src, ts, gap)", name)
	}
	if len(fc.Args) != nargs {
		return nil, nil, c.errAt(fc.Location, false, "%s takes %d arguments: %s", strings.ToUpper(name), nargs, map[string]string{"tumble": "TUMBLE(source, time_column, INTERVAL size)", "hop": "HOP(source, time_column, INTERVAL slide, INTERVAL size)", "session": "SESSION(source, time_column, INTERVAL gap)"}[name])
	}
	srcRef := fc.Args[0].GetColumnRef()
	if srcRef == nil || len(srcRef.Fields) != 1 || srcRef.Fields[0].GetString_() == nil {
		return nil, nil, c.errAt(exprLoc(fc.Args[0]), true, "the first argument of %s names a source (subqueries are not supported there)", strings.ToUpper(name))
	}
	src, err := c.source(srcRef.Fields[0].GetString_().Sval, srcRef.Location)
	if err != nil {
		return nil, nil, err
	}
	q := c.start(src)
	tsRef := fc.Args[1].GetColumnRef()
	if tsRef == nil || len(tsRef.Fields) != 1 || tsRef.Fields[0].GetString_() == nil {
		return nil, nil, c.errAt(exprLoc(fc.Args[1]), false, "the second argument of %s names the time column", strings.ToUpper(name))
	}
	ts := tsRef.Fields[0].GetString_().Sval
	if !slices.Contains(q.cols, ts) {
		return nil, nil, c.errAt(tsRef.Location, false, "column %q is not a column of source %s (%s)", ts, src.name, strings.Join(q.cols, ", "))
	}
	var ds []time.Duration
	for _, a := range fc.Args[2:] {
		d, err := c.interval(a)
		if err != nil {
			return nil, nil, err
		}
		ds = append(ds, d)
	}
	w := &window{kind: name, at: fc.Location}
	switch name {
	case "tumble":
		w.w = engine.TumblingWindow(ts, ds[0])
	case "hop":
		w.w = engine.SlidingWindow(ts, ds[1], ds[0])
	case "session":
		w.w = engine.SessionWindow(ts, ds[0])
	}
	return q, w, nil
}

// interval reads INTERVAL 'n unit [n unit…]' into a duration.
func (c *compiler) interval(n *pg.Node) (time.Duration, error) {
	tc := n.GetTypeCast()
	if tc == nil || typeName(tc.TypeName) != "interval" || tc.Arg.GetAConst() == nil || tc.Arg.GetAConst().GetSval() == nil {
		return 0, c.errAt(exprLoc(n), false, "expected an interval literal such as INTERVAL '10 seconds'")
	}
	if len(tc.TypeName.Typmods) > 0 {
		return 0, c.errAt(tc.Location, true, "INTERVAL '…' with a field (SECOND, MINUTE…) after it is not supported: write the unit inside the quotes, INTERVAL '10 seconds'")
	}
	d, err := parseInterval(tc.Arg.GetAConst().GetSval().Sval)
	if err != nil {
		return 0, c.errAt(tc.Arg.GetAConst().Location, false, "%v", err)
	}
	return d, nil
}

var intervalUnits = map[string]time.Duration{
	"microsecond": time.Microsecond, "microseconds": time.Microsecond, "us": time.Microsecond,
	"millisecond": time.Millisecond, "milliseconds": time.Millisecond, "ms": time.Millisecond,
	"second": time.Second, "seconds": time.Second, "sec": time.Second, "secs": time.Second, "s": time.Second,
	"minute": time.Minute, "minutes": time.Minute, "min": time.Minute, "mins": time.Minute, "m": time.Minute,
	"hour": time.Hour, "hours": time.Hour, "h": time.Hour,
	"day": 24 * time.Hour, "days": 24 * time.Hour, "d": 24 * time.Hour,
	"week": 7 * 24 * time.Hour, "weeks": 7 * 24 * time.Hour,
}

func parseInterval(s string) (time.Duration, error) {
	f := strings.Fields(strings.ToLower(s))
	if len(f) == 0 || len(f)%2 != 0 {
		return 0, fmt.Errorf("interval %q: write pairs of a number and a unit (microseconds, milliseconds, seconds, minutes, hours, days, weeks), e.g. '1 minute 30 seconds'", s)
	}
	var d time.Duration
	for i := 0; i < len(f); i += 2 {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("interval %q: %q is not a whole number", s, f[i])
		}
		u, ok := intervalUnits[f[i+1]]
		if !ok {
			return 0, fmt.Errorf("interval %q: unknown unit %q (microseconds, milliseconds, seconds, minutes, hours, days, weeks; months and years have no fixed length)", s, f[i+1])
		}
		d += time.Duration(n) * u
	}
	if d <= 0 {
		return 0, fmt.Errorf("interval %q must be positive", s)
	}
	return d, nil
}

// operatorID is the id of the next stateful operator: the hint right after
// this SELECT's keyword, or the naming rule <sink>-<kind>-<n>, where n
// counts the stateful operators from the source, so editing stateless steps
// keeps the ids.
func (c *compiler) operatorID(sel *pg.SelectStmt, at int32, kind string) (string, bool, error) {
	c.nState++
	first := firstTargetLoc(sel, at)
	if first >= 0 {
		if id, ok := c.r.hintBefore(c.r.orig(int(first)), "SELECT", "DISTINCT", "ALL"); ok {
			if id == "" {
				return "", false, c.errAt(first, false, "an empty operator id hint")
			}
			return id, true, nil
		}
	}
	return fmt.Sprintf("%s-%s-%d", c.sink, kind, c.nState), false, nil
}

func (c *compiler) claimID(id string, loc int32) error {
	if prev, ok := c.ids[id]; ok {
		l, col := c.r.lineCol(prev)
		return c.errAt(loc, false, "operator id %q is used at line %d:%d too; give each stateful step its own id", id, l, col)
	}
	c.ids[id] = c.userAt(loc)
	return nil
}

func (c *compiler) compileProjection(sel *pg.SelectStmt, q *compiled, at int32) (*compiled, error) {
	sc := &scope{c: c, cols: q.cols, qual: q.qual}
	named, items, cols, err := c.targets(sel, sc, q.cols)
	if err != nil {
		return nil, err
	}
	if sc.batchID != "" {
		name := sc.batchID
		q.ops = append(q.ops, op{desc: "batch id as " + name, at: c.userAt(at), apply: func(s *engine.Stream) *engine.Stream { return s.WithBatchIDColumn(name) }})
	}
	q.ops = append(q.ops, selectOp(named, items))
	q.cols, q.qual = cols, nil
	if len(sel.DistinctClause) > 0 {
		if sel.DistinctClause[0] != nil && sel.DistinctClause[0].Node != nil {
			return nil, c.errAt(exprLoc(sel.DistinctClause[0]), true, "DISTINCT ON is not supported: use SELECT DISTINCT over the key columns")
		}
		id, hinted, err := c.operatorID(sel, at, "dedup")
		if err != nil {
			return nil, err
		}
		if err := c.claimID(id, firstTargetLoc(sel, at)); err != nil {
			return nil, err
		}
		keys := slices.Clone(cols)
		q.ops = append(q.ops, op{
			desc: fmt.Sprintf("distinct[%s](%s)", id, strings.Join(keys, ", ")), at: c.userAt(firstTargetLoc(sel, at)),
			apply:    func(s *engine.Stream) *engine.Stream { return s.DropDuplicates(keys...).ID(id) },
			stateful: &Operator{ID: id, Kind: "dedup", Keys: keys, Hinted: hinted},
		})
	}
	return q, nil
}

func selectOp(named []batch.Named, items []item) op {
	names := make([]string, len(named))
	for i, n := range named {
		if ref, ok := batch.ColumnOf(n.Expr); ok && ref == n.Name {
			names[i] = n.Name
		} else {
			names[i] = fmt.Sprintf("%s AS %s", n.Expr, n.Name)
		}
	}
	at := 0
	if len(items) > 0 {
		at = items[0].at
	}
	return op{desc: "select " + strings.Join(names, ", "), at: at, items: items, apply: func(s *engine.Stream) *engine.Stream { return s.Select(named...) }}
}

// targets compiles the select list into named expressions, expanding *.
func (c *compiler) targets(sel *pg.SelectStmt, sc *scope, in []string) ([]batch.Named, []item, []string, error) {
	var named []batch.Named
	var items []item
	var cols []string
	add := func(n batch.Named, loc int32) error {
		if slices.Contains(cols, n.Name) {
			return c.errAt(loc, false, "column %q appears twice in the select list: give one an alias (AS name)", n.Name)
		}
		named = append(named, n)
		cols = append(cols, n.Name)
		items = append(items, item{at: c.userAt(loc), apply: func(s *engine.Stream) *engine.Stream { return s.Select(n) }})
		return nil
	}
	for _, t := range sel.TargetList {
		rt := t.GetResTarget()
		if cr := rt.Val.GetColumnRef(); cr != nil && cr.Fields[len(cr.Fields)-1].GetAStar() != nil {
			if sc.grouped {
				return nil, nil, nil, c.errAt(rt.Location, true, "* in an aggregating query: list the GROUP BY columns and aggregates")
			}
			for _, col := range in {
				if err := add(batch.As(batch.Col(col), col), rt.Location); err != nil {
					return nil, nil, nil, err
				}
			}
			continue
		}
		e, err := sc.expr(rt.Val)
		if err != nil {
			return nil, nil, nil, err
		}
		name := rt.Name
		if name == "" {
			name = defaultName(rt.Val)
		}
		if err := add(batch.As(e, name), rt.Location); err != nil {
			return nil, nil, nil, err
		}
	}
	return named, items, cols, nil
}

// defaultName is PostgreSQL's name for an unnamed select-list column.
func defaultName(n *pg.Node) string {
	switch {
	case n.GetColumnRef() != nil:
		f := n.GetColumnRef().Fields
		if s := f[len(f)-1].GetString_(); s != nil {
			return s.Sval
		}
	case n.GetFuncCall() != nil:
		return funcName(n.GetFuncCall())
	case n.GetTypeCast() != nil:
		if inner := defaultName(n.GetTypeCast().Arg); inner != "?column?" {
			return inner
		}
		return typeName(n.GetTypeCast().TypeName)
	case n.GetCaseExpr() != nil:
		return "case"
	case n.GetCoalesceExpr() != nil:
		return "coalesce"
	}
	return "?column?"
}

func (c *compiler) compileAggregate(sel *pg.SelectStmt, q *compiled, win *window, at int32) (*compiled, error) {
	if len(sel.DistinctClause) > 0 {
		return nil, c.errAt(firstTargetLoc(sel, at), true, "SELECT DISTINCT with GROUP BY or aggregates is not supported: the groups are distinct already")
	}
	var keys []string
	hasStart, hasEnd := false, false
	for _, g := range sel.GroupClause {
		cr := g.GetColumnRef()
		if cr == nil || len(cr.Fields) == 0 || cr.Fields[len(cr.Fields)-1].GetString_() == nil {
			return nil, c.errAt(exprLoc(g), true, "GROUP BY takes column names: compute an expression in a subquery in FROM and group by its alias")
		}
		name := cr.Fields[len(cr.Fields)-1].GetString_().Sval
		if len(cr.Fields) == 2 && q.qual != nil {
			if m, ok := q.qual[cr.Fields[0].GetString_().GetSval()]; ok && m[name] != "" {
				name = m[name]
			}
		}
		if win != nil && name == "window_start" {
			hasStart = true
			continue
		}
		if win != nil && name == "window_end" {
			hasEnd = true
			continue
		}
		if !slices.Contains(q.cols, name) {
			return nil, c.errAt(cr.Location, false, "GROUP BY column %q is not a column here (%s)", name, strings.Join(q.cols, ", "))
		}
		if slices.Contains(keys, name) {
			return nil, c.errAt(cr.Location, false, "GROUP BY column %q is listed twice", name)
		}
		keys = append(keys, name)
	}
	if win != nil && (!hasStart || !hasEnd) {
		return nil, c.errAt(win.at, true, "%s in FROM needs GROUP BY window_start, window_end (and any keys): a window function feeds an aggregation", strings.ToUpper(win.kind))
	}
	kind := "aggregate"
	if win != nil {
		kind = "window"
		if win.kind == "session" {
			kind = "session"
		}
	}
	id, hinted, err := c.operatorID(sel, at, kind)
	if err != nil {
		return nil, err
	}
	if err := c.claimID(id, firstTargetLoc(sel, at)); err != nil {
		return nil, err
	}
	outCols := []string{}
	if win != nil {
		outCols = append(outCols, "window_start", "window_end")
	}
	outCols = append(outCols, keys...)
	sc := &scope{c: c, cols: q.cols, qual: q.qual, grouped: true, keys: outCols, aggNames: map[string]bool{}}
	for _, k := range outCols {
		sc.aggNames[k] = true
	}
	// Name the aggregates that stand alone in the select list after their
	// column, so the output needs no renaming.
	for _, t := range sel.TargetList {
		rt := t.GetResTarget()
		if fc := rt.Val.GetFuncCall(); fc != nil && isAggName(funcName(fc)) && fc.Over == nil {
			name := rt.Name
			if name == "" {
				name = funcName(fc)
			}
			sc.preferred = append(sc.preferred, preferredName{loc: fc.Location, name: name})
		}
	}
	named, items, cols, err := c.targets(sel, sc, nil)
	if err != nil {
		return nil, err
	}
	var having batch.Expr
	if sel.HavingClause != nil {
		if having, err = sc.expr(sel.HavingClause); err != nil {
			return nil, err
		}
	}
	if len(sc.aggs) == 0 {
		return nil, c.errAt(firstTargetLoc(sel, at), false, "GROUP BY without an aggregate: add one such as count(*), or use SELECT DISTINCT")
	}
	aggs := sc.aggs
	var aggNames []string
	for _, a := range aggs {
		aggNames = append(aggNames, a.Name())
	}
	desc := fmt.Sprintf("group by [%s](%s) agg(%s)", id, strings.Join(keys, ", "), strings.Join(aggNames, ", "))
	var apply func(s *engine.Stream) *engine.Stream
	keysCopy := slices.Clone(keys)
	if win != nil {
		w := win.w
		desc = fmt.Sprintf("group by [%s](%s, %s) agg(%s)", id, w, strings.Join(keys, ", "), strings.Join(aggNames, ", "))
		apply = func(s *engine.Stream) *engine.Stream { return s.GroupByWindow(w, keysCopy...).ID(id).Agg(aggs...) }
	} else {
		apply = func(s *engine.Stream) *engine.Stream { return s.GroupBy(keysCopy...).ID(id).Agg(aggs...) }
	}
	if len(keysCopy) == 0 && (win == nil || win.kind == "session") {
		// The engine groups by at least one key column: a global
		// aggregate groups by a constant. (Over no input at all it
		// outputs no row, where a batch SQL engine outputs one.)
		name := "_all"
		for slices.Contains(q.cols, name) {
			name = "_" + name
		}
		keysCopy = []string{name}
		q.ops = append(q.ops, op{desc: "constant group key " + name, at: c.userAt(firstTargetLoc(sel, at)), apply: func(s *engine.Stream) *engine.Stream { return s.WithColumn(name, batch.Lit(true)) }})
	}
	opKeys := slices.Clone(keys)
	if win != nil {
		opKeys = append([]string{win.w.String()}, opKeys...)
	}
	q.ops = append(q.ops, op{desc: desc, at: c.userAt(firstTargetLoc(sel, at)), apply: apply, stateful: &Operator{ID: id, Kind: kind, Keys: opKeys, Hinted: hinted}})
	if having != nil {
		h := having
		q.ops = append(q.ops, op{desc: "having " + h.String(), at: c.userAt(exprLoc(sel.HavingClause)), apply: func(s *engine.Stream) *engine.Stream { return s.Where(h) }})
	}
	if sc.batchID != "" {
		name := sc.batchID
		q.ops = append(q.ops, op{desc: "batch id as " + name, at: c.userAt(at), apply: func(s *engine.Stream) *engine.Stream { return s.WithBatchIDColumn(name) }})
	}
	q.ops = append(q.ops, selectOp(named, items))
	q.cols, q.qual = cols, nil
	return q, nil
}

func hasAgg(targets []*pg.Node) bool {
	found := false
	var walk func(n *pg.Node)
	walk = func(n *pg.Node) {
		if n == nil || found {
			return
		}
		if fc := n.GetFuncCall(); fc != nil {
			if isAggName(funcName(fc)) && fc.Over == nil {
				found = true
				return
			}
			for _, a := range fc.Args {
				walk(a)
			}
			return
		}
		switch {
		case n.GetResTarget() != nil:
			walk(n.GetResTarget().Val)
		case n.GetAExpr() != nil:
			walk(n.GetAExpr().Lexpr)
			walk(n.GetAExpr().Rexpr)
		case n.GetBoolExpr() != nil:
			for _, a := range n.GetBoolExpr().Args {
				walk(a)
			}
		case n.GetTypeCast() != nil:
			walk(n.GetTypeCast().Arg)
		case n.GetCoalesceExpr() != nil:
			for _, a := range n.GetCoalesceExpr().Args {
				walk(a)
			}
		case n.GetCaseExpr() != nil:
			ce := n.GetCaseExpr()
			walk(ce.Arg)
			walk(ce.Defresult)
			for _, w := range ce.Args {
				walk(w.GetCaseWhen().Expr)
				walk(w.GetCaseWhen().Result)
			}
		case n.GetNullTest() != nil:
			walk(n.GetNullTest().Arg)
		case n.GetList() != nil:
			for _, a := range n.GetList().Items {
				walk(a)
			}
		}
	}
	for _, t := range targets {
		walk(t)
	}
	return found
}

func funcName(fc *pg.FuncCall) string {
	if len(fc.Funcname) == 0 {
		return ""
	}
	return strings.ToLower(fc.Funcname[len(fc.Funcname)-1].GetString_().GetSval())
}

func typeName(tn *pg.TypeName) string {
	if tn == nil || len(tn.Names) == 0 {
		return ""
	}
	return strings.ToLower(tn.Names[len(tn.Names)-1].GetString_().GetSval())
}

func firstTargetLoc(sel *pg.SelectStmt, fallback int32) int32 {
	if sel != nil && len(sel.TargetList) > 0 {
		return sel.TargetList[0].GetResTarget().Location
	}
	return fallback
}

func sortLoc(n *pg.Node) int32 {
	if sb := n.GetSortBy(); sb != nil {
		if l := exprLoc(sb.Node); l >= 0 {
			return l
		}
		return sb.Location
	}
	return -1
}

func fromLoc(n *pg.Node) int32 {
	switch {
	case n.GetRangeVar() != nil:
		return n.GetRangeVar().Location
	case n.GetJoinExpr() != nil:
		return fromLoc(n.GetJoinExpr().Larg)
	case n.GetRangeFunction() != nil:
		if items := n.GetRangeFunction().Functions; len(items) > 0 {
			if l := items[0].GetList(); l != nil && len(l.Items) > 0 {
				return exprLoc(l.Items[0])
			}
		}
	case n.GetRangeSubselect() != nil:
		if s := n.GetRangeSubselect().Subquery.GetSelectStmt(); s != nil {
			return firstTargetLoc(s, -1)
		}
	}
	return -1
}

// exprLoc is the location of an expression node, or -1.
func exprLoc(n *pg.Node) int32 {
	if n == nil {
		return -1
	}
	switch {
	case n.GetColumnRef() != nil:
		return n.GetColumnRef().Location
	case n.GetAConst() != nil:
		return n.GetAConst().Location
	case n.GetAExpr() != nil:
		if l := exprLoc(n.GetAExpr().Lexpr); l >= 0 && l < n.GetAExpr().Location {
			return l
		}
		return n.GetAExpr().Location
	case n.GetBoolExpr() != nil:
		if a := n.GetBoolExpr().Args; len(a) > 0 && n.GetBoolExpr().Boolop != pg.BoolExprType_NOT_EXPR {
			return exprLoc(a[0])
		}
		return n.GetBoolExpr().Location
	case n.GetFuncCall() != nil:
		return n.GetFuncCall().Location
	case n.GetTypeCast() != nil:
		if l := exprLoc(n.GetTypeCast().Arg); l >= 0 && l < n.GetTypeCast().Location {
			return l
		}
		return n.GetTypeCast().Location
	case n.GetNullTest() != nil:
		return exprLoc(n.GetNullTest().Arg)
	case n.GetCaseExpr() != nil:
		return n.GetCaseExpr().Location
	case n.GetCoalesceExpr() != nil:
		return n.GetCoalesceExpr().Location
	case n.GetSubLink() != nil:
		return n.GetSubLink().Location
	case n.GetResTarget() != nil:
		return n.GetResTarget().Location
	case n.GetMinMaxExpr() != nil:
		return n.GetMinMaxExpr().Location
	case n.GetBooleanTest() != nil:
		return n.GetBooleanTest().Location
	case n.GetParamRef() != nil:
		return n.GetParamRef().Location
	case n.GetSqlvalueFunction() != nil:
		return n.GetSqlvalueFunction().Location
	}
	return -1
}

// shallowWithoutWhere is sel without its WHERE (consumed by a top-N).
func shallowWithoutWhere(sel *pg.SelectStmt) *pg.SelectStmt {
	n := &pg.SelectStmt{}
	n.DistinctClause, n.TargetList, n.FromClause, n.GroupClause, n.HavingClause = sel.DistinctClause, sel.TargetList, sel.FromClause, sel.GroupClause, sel.HavingClause
	n.Op = sel.Op
	return n
}
