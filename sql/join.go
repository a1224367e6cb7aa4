package sql

import (
	"fmt"
	"slices"
	"strings"
	"time"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/onceflow/onceflow/batch"
	"github.com/onceflow/onceflow/engine"
)

// joinSpec is a join step: the right side is compiled on its own (its
// source, its watermark) and joined to the stream built so far.
type joinSpec struct {
	right *compiled
	build func(left, right *engine.Stream) *engine.Stream
}

// side is one input of a join while its ON condition is read.
type side struct {
	q    *compiled
	name string // "left" or "right"
}

// compileJoin compiles FROM a [INNER|LEFT|RIGHT|FULL] JOIN b ON … into a
// stream–stream join (b a CREATE SOURCE) or a stream–table join (b a
// CREATE TABLE … PRIMARY KEY).
func (c *compiler) compileJoin(je *pg.JoinExpr) (*compiled, error) {
	if je.IsNatural {
		return nil, c.errAt(fromLoc(je.Rarg), true, "NATURAL JOIN is not supported: write JOIN … ON a.k = b.k")
	}
	var left *compiled
	switch {
	case je.Larg.GetJoinExpr() != nil:
		l, err := c.compileJoin(je.Larg.GetJoinExpr())
		if err != nil {
			return nil, err
		}
		left = l
	case je.Larg.GetRangeVar() != nil:
		l, err := c.joinInput(je.Larg.GetRangeVar())
		if err != nil {
			return nil, err
		}
		if l.src.table {
			return nil, c.errAt(je.Larg.GetRangeVar().Location, true, "table %s is on the left of a join: a changelog table is joined by a stream, write FROM stream JOIN %s ON …", l.src.name, l.src.name)
		}
		left = l
	default:
		return nil, c.errAt(fromLoc(je.Larg), true, "the left side of a join is a source (or another join); subqueries and window functions there are not supported: join first, then aggregate in an enclosing SELECT")
	}
	rv := je.Rarg.GetRangeVar()
	if rv == nil {
		return nil, c.errAt(fromLoc(je.Rarg), true, "the right side of a join is a source or a table by name: a subquery or window function there is not supported (the engine joins a stream of stateless steps)")
	}
	right, err := c.joinInput(rv)
	if err != nil {
		return nil, err
	}
	if slices.ContainsFunc(left.srcs, func(s *sourceDef) bool { return s.name == right.src.name }) {
		return nil, c.errAt(rv.Location, true, "%s is joined with itself: a self-join is not supported; declare a second CREATE SOURCE over the same data and join the two", rv.Relname)
	}
	for a := range right.qual {
		if _, dup := left.qual[a]; dup {
			return nil, c.errAt(rv.Location, false, "%s appears twice in FROM: give one an alias (JOIN %s AS other)", a, rv.Relname)
		}
	}
	table := right.src.table
	var kind engine.JoinKind
	switch je.Jointype {
	case pg.JoinType_JOIN_INNER:
		kind = engine.Inner
	case pg.JoinType_JOIN_LEFT:
		kind = engine.LeftOuter
	case pg.JoinType_JOIN_RIGHT:
		kind = engine.RightOuter
	case pg.JoinType_JOIN_FULL:
		kind = engine.FullOuter
	case pg.JoinType_JOIN_SEMI:
		kind = engine.LeftSemi
		if table {
			return nil, c.errAt(rv.Location, true, "EXISTS over table %s: a stream–table join is INNER or LEFT; write JOIN %s ON …", rv.Relname, rv.Relname)
		}
	default:
		return nil, c.errAt(rv.Location, true, "this join type is not supported: INNER, LEFT, RIGHT and FULL [OUTER] JOIN are")
	}
	if table && kind != engine.Inner && kind != engine.LeftOuter {
		return nil, c.errAt(rv.Location, true, "%s JOIN with table %s: a stream–table join is INNER or LEFT (the table's rows are not a stream to keep)", strings.ToUpper(strings.TrimSuffix(kind.String(), "Outer")), rv.Relname)
	}
	if je.Quals == nil && len(je.UsingClause) == 0 {
		return nil, c.errAt(rv.Location, true, "a join needs ON a.k = b.k (a cross join is not supported)")
	}
	l, r := side{left, "left"}, side{right, "right"}
	var conds []engine.JoinCond
	var keys []string
	var within *engine.JoinCond
	var withinDesc string
	for _, u := range je.UsingClause {
		name := u.GetString_().GetSval()
		if !slices.Contains(left.cols, name) || !slices.Contains(right.cols, name) {
			return nil, c.errAt(rv.Location, false, "USING (%s): both sides need a column %s", name, name)
		}
		conds = append(conds, engine.On(name, name))
		keys = append(keys, name+" = "+name)
	}
	var conj []*pg.Node
	var flatten func(n *pg.Node) error
	flatten = func(n *pg.Node) error {
		if be := n.GetBoolExpr(); be != nil {
			if be.Boolop != pg.BoolExprType_AND_EXPR {
				return c.errAt(exprLoc(n), true, "OR and NOT in a join condition are not supported: the condition is equalities a.k = b.k and at most one b.ts BETWEEN a.ts AND a.ts + INTERVAL '…', joined by AND; filter other conditions in WHERE")
			}
			for _, a := range be.Args {
				if err := flatten(a); err != nil {
					return err
				}
			}
			return nil
		}
		conj = append(conj, n)
		return nil
	}
	if je.Quals != nil {
		if err := flatten(je.Quals); err != nil {
			return nil, err
		}
	}
	for _, n := range conj {
		ae := n.GetAExpr()
		switch {
		case ae != nil && ae.Kind == pg.A_Expr_Kind_AEXPR_OP && opName(ae) == "=":
			a, err := c.joinCol(ae.Lexpr, l, r)
			if err != nil {
				return nil, err
			}
			b, err := c.joinCol(ae.Rexpr, l, r)
			if err != nil {
				return nil, err
			}
			if a.s.name == b.s.name {
				return nil, c.errAt(exprLoc(n), true, "%s = %s compares two columns of one side: a join key is a left column equal to a right column; filter one side in WHERE", a.col, b.col)
			}
			if a.s.name == "right" {
				a, b = b, a
			}
			conds = append(conds, engine.On(a.col, b.col))
			keys = append(keys, a.disp+" = "+b.disp)
		case ae != nil && ae.Kind == pg.A_Expr_Kind_AEXPR_BETWEEN:
			if within != nil {
				return nil, c.errAt(exprLoc(n), true, "a second time range in a join condition: the engine joins on one event-time range (b.ts BETWEEN a.ts AND a.ts + INTERVAL '…')")
			}
			w, desc, err := c.joinRange(ae, l, r)
			if err != nil {
				return nil, err
			}
			within, withinDesc = &w, desc
		case ae != nil && ae.Kind == pg.A_Expr_Kind_AEXPR_OP:
			return nil, c.errAt(exprLoc(n), true, "%s in a join condition is not supported: the join keys are equalities a.k = b.k, and the time range is b.ts BETWEEN a.ts AND a.ts + INTERVAL '…'", opName(ae))
		default:
			return nil, c.errAt(exprLoc(n), true, "this join condition is not supported: the condition is equalities a.k = b.k and at most one b.ts BETWEEN a.ts AND a.ts + INTERVAL '…', joined by AND; filter other conditions in WHERE")
		}
	}
	if len(keys) == 0 {
		return nil, c.errAt(exprLoc(je.Quals), true, "a join needs at least one equality of a left and a right column (a.k = b.k): the engine partitions the join by its keys")
	}
	if within != nil {
		conds = append(conds, *within)
		keys = append(keys, withinDesc)
	}
	kindName := "join"
	if table {
		kindName = "jointable"
		if within != nil {
			return nil, c.errAt(exprLoc(je.Quals), true, "a time range in a join with table %s: a stream–table join matches the table's current row by key only", right.src.name)
		}
		var onRight []string
		for _, cd := range conds {
			_, rc, _ := strings.Cut(cd.String(), " = ")
			onRight = append(onRight, rc)
		}
		if !slices.Equal(sortedCopy(onRight), sortedCopy(right.src.keys)) {
			return nil, c.errAt(exprLoc(je.Quals), false, "the join with table %s must equal its primary key (%s), no more and no less; it names %s", right.src.name, strings.Join(right.src.keys, ", "), strings.Join(onRight, ", "))
		}
	}
	if kind == engine.LeftSemi {
		kindName = "semijoin"
	}
	// The operator id: a hint right after JOIN, or the naming rule.
	c.nState++
	id := fmt.Sprintf("%s-%s-%d", c.sink, kindName, c.nState)
	hinted := false
	if h, ok := c.r.hintBefore(c.userAt(rv.Location)); ok {
		if h == "" {
			return nil, c.errAt(rv.Location, false, "an empty operator id hint")
		}
		id, hinted = h, true
	}
	if err := c.claimID(id, rv.Location); err != nil {
		return nil, err
	}
	out := &compiled{src: left.src, ops: left.ops, srcs: append(slices.Clone(left.srcs), right.srcs...), qual: map[string]map[string]string{}}
	count := map[string]int{}
	for _, cc := range left.cols {
		count[cc]++
	}
	for _, cc := range right.cols {
		count[cc]++
	}
	rename := func(prefix string, q *compiled) map[string]string {
		m := map[string]string{}
		for _, cc := range q.cols {
			n := cc
			if count[cc] > 1 {
				n = prefix + "_" + cc
			}
			m[cc] = n
		}
		return m
	}
	lm, rm := rename("left", left), rename("right", right)
	for _, cc := range left.cols {
		out.cols = append(out.cols, lm[cc])
	}
	if kind == engine.LeftSemi {
		// the left columns only, under their own names
		lm = map[string]string{}
		for _, cc := range left.cols {
			lm[cc] = cc
		}
		out.cols = slices.Clone(left.cols)
	} else {
		for _, cc := range right.cols {
			out.cols = append(out.cols, rm[cc])
		}
		for a, m := range right.qual {
			out.qual[a] = mapThrough(m, rm)
		}
	}
	for a, m := range left.qual {
		out.qual[a] = mapThrough(m, lm)
	}
	js := &joinSpec{right: right}
	var desc string
	var opKeys []string
	if table {
		tk := slices.Clone(right.src.keys)
		del := right.src.deleteWhen
		js.build = func(ls, rs *engine.Stream) *engine.Stream {
			t := engine.ChangelogTable(rs, tk...)
			if del != nil {
				t = t.DeleteWhen(del)
			}
			return ls.JoinTable(t, kind, conds...).ID(id)
		}
		desc = fmt.Sprintf("join table [%s](%s, %s; table %s keyed by %s)", id, kind, strings.Join(keys, " and "), right.src.name, strings.Join(tk, ", "))
	} else {
		js.build = func(ls, rs *engine.Stream) *engine.Stream {
			return ls.Join(rs, kind, conds...).ID(id)
		}
		rdesc := "source " + right.src.name
		for _, o := range right.ops {
			rdesc += ", " + o.desc
		}
		desc = fmt.Sprintf("join [%s](%s, %s; right: %s)", id, kind, strings.Join(keys, " and "), rdesc)
	}
	opKeys = keys
	out.ops = append(slices.Clone(left.ops), op{
		desc: desc, at: c.userAt(rv.Location), join: js,
		stateful: &Operator{ID: id, Kind: kindName, Keys: opKeys, Hinted: hinted},
	})
	return out, nil
}

func sortedCopy(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

func mapThrough(m, by map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = by[v]
	}
	return out
}

// joinInput starts a join's input: a source or a table, under its alias.
func (c *compiler) joinInput(rv *pg.RangeVar) (*compiled, error) {
	src, err := c.source(rv.Relname, rv.Location)
	if err != nil {
		return nil, err
	}
	q := c.start(src)
	alias := rv.Relname
	if rv.Alias != nil && rv.Alias.Aliasname != "" {
		alias = rv.Alias.Aliasname
		if len(rv.Alias.Colnames) > 0 {
			return nil, c.errAt(rv.Location, true, "column aliases after a FROM alias are not supported: rename in the select list")
		}
	}
	m := map[string]string{}
	for _, cc := range q.cols {
		m[cc] = cc
	}
	q.qual = map[string]map[string]string{alias: m}
	return q, nil
}

type sideCol struct {
	s    side
	col  string // the column's name in its side's output
	disp string // as written: alias.column
}

// joinCol resolves a column of a join condition to its side.
func (c *compiler) joinCol(n *pg.Node, l, r side) (sideCol, error) {
	cr := n.GetColumnRef()
	if cr == nil {
		return sideCol{}, c.errAt(exprLoc(n), true, "a join key is a column (a.k = b.k): compute an expression in a subquery of the left side, or in the right source's declaration")
	}
	var names []string
	for _, f := range cr.Fields {
		if f.GetString_() == nil {
			return sideCol{}, c.errAt(cr.Location, true, "* in a join condition")
		}
		names = append(names, f.GetString_().Sval)
	}
	switch len(names) {
	case 1:
		inL, inR := slices.Contains(l.q.cols, names[0]), slices.Contains(r.q.cols, names[0])
		switch {
		case inL && inR:
			return sideCol{}, c.errAt(cr.Location, false, "column %q is on both sides of the join: qualify it (a.%s or b.%s)", names[0], names[0], names[0])
		case inL:
			return sideCol{l, names[0], names[0]}, nil
		case inR:
			return sideCol{r, names[0], names[0]}, nil
		}
		return sideCol{}, c.errAt(cr.Location, false, "column %q is on neither side of the join", names[0])
	case 2:
		for _, s := range []side{l, r} {
			if m, ok := s.q.qual[names[0]]; ok {
				col, ok := m[names[1]]
				if !ok {
					return sideCol{}, c.errAt(cr.Location, false, "%s has no column %q", names[0], names[1])
				}
				return sideCol{s, col, names[0] + "." + names[1]}, nil
			}
		}
		return sideCol{}, c.errAt(cr.Location, false, "%s is not a source or alias of this join", names[0])
	}
	return sideCol{}, c.errAt(cr.Location, true, "qualified names beyond alias.column are not supported")
}

// joinRange reads x.ts BETWEEN y.ts [± INTERVAL] AND y.ts [± INTERVAL]
// into a Within condition, x and y on different sides.
func (c *compiler) joinRange(ae *pg.A_Expr, l, r side) (engine.JoinCond, string, error) {
	hint := "the time range is b.ts BETWEEN a.ts [- INTERVAL '…'] AND a.ts + INTERVAL '…', one column of each side"
	x, err := c.joinCol(ae.Lexpr, l, r)
	if err != nil {
		return engine.JoinCond{}, "", err
	}
	bounds := ae.Rexpr.GetList().GetItems()
	if len(bounds) != 2 {
		return engine.JoinCond{}, "", c.errAt(exprLoc(ae.Rexpr), true, "%s", hint)
	}
	var y []sideCol
	var off []time.Duration
	for _, b := range bounds {
		var d time.Duration
		n := b
		if be := b.GetAExpr(); be != nil && be.Kind == pg.A_Expr_Kind_AEXPR_OP && (opName(be) == "+" || opName(be) == "-") {
			iv, err := c.interval(be.Rexpr)
			if err != nil {
				return engine.JoinCond{}, "", err
			}
			d = iv
			if opName(be) == "-" {
				d = -d
			}
			n = be.Lexpr
		}
		sc, err := c.joinCol(n, l, r)
		if err != nil {
			return engine.JoinCond{}, "", c.errAt(exprLoc(b), true, "%s", hint)
		}
		y = append(y, sc)
		off = append(off, d)
	}
	if y[0].s.name != y[1].s.name || y[0].col != y[1].col || y[0].s.name == x.s.name {
		return engine.JoinCond{}, "", c.errAt(exprLoc(ae.Rexpr), true, "%s", hint)
	}
	if off[0] > off[1] {
		return engine.JoinCond{}, "", c.errAt(exprLoc(ae.Rexpr), false, "the range's lower bound is above its upper bound")
	}
	desc := fmt.Sprintf("%s between %s and %s", x.disp, offset(y[0].disp, off[0]), offset(y[0].disp, off[1]))
	if x.s.name == "right" {
		// right ∈ [left+lo, left+hi]
		return engine.Within(y[0].col, x.col, off[0], off[1]), desc, nil
	}
	// left ∈ [right+lo, right+hi]  ⇔  right ∈ [left-hi, left-lo]
	return engine.Within(x.col, y[0].col, -off[1], -off[0]), desc, nil
}

func opName(ae *pg.A_Expr) string {
	if len(ae.Name) == 0 {
		return ""
	}
	return ae.Name[len(ae.Name)-1].GetString_().GetSval()
}

// tableDelete is the delete predicate of a kafka table read with
// tombstones: every declared column besides the keys is null.
func tableDelete(cols []string, keys []string) batch.Expr {
	var e batch.Expr
	for _, cc := range cols {
		if slices.Contains(keys, cc) {
			continue
		}
		p := batch.IsNull(batch.Col(cc))
		if e == nil {
			e = p
		} else {
			e = batch.And(e, p)
		}
	}
	return e
}

func offset(col string, d time.Duration) string {
	switch {
	case d > 0:
		return col + " + " + d.String()
	case d < 0:
		return col + " - " + (-d).String()
	}
	return col
}

// existsToSemiJoin turns WHERE … EXISTS (SELECT … FROM b WHERE cond) AND …
// into FROM a LEFT SEMI JOIN b ON cond (engine.LeftSemi): each row of a
// with a match, once.
func (c *compiler) existsToSemiJoin(sel *pg.SelectStmt) (*pg.SelectStmt, error) {
	if sel.WhereClause == nil {
		return sel, nil
	}
	var conj []*pg.Node
	if be := sel.WhereClause.GetBoolExpr(); be != nil && be.Boolop == pg.BoolExprType_AND_EXPR {
		conj = be.Args
	} else {
		conj = []*pg.Node{sel.WhereClause}
	}
	var exists *pg.SubLink
	var rest []*pg.Node
	for _, n := range conj {
		if sl := n.GetSubLink(); sl != nil && sl.SubLinkType == pg.SubLinkType_EXISTS_SUBLINK && exists == nil {
			exists = sl
			continue
		}
		rest = append(rest, n)
	}
	if exists == nil {
		return sel, nil
	}
	sub := exists.Subselect.GetSelectStmt()
	from := sel.FromClause[0]
	if from.GetRangeVar() == nil && from.GetJoinExpr() == nil {
		return nil, c.errAt(exists.Location, true, "EXISTS (a semi join) needs a source or a join in FROM, not a subquery or window function")
	}
	if sub == nil || len(sub.FromClause) != 1 || sub.FromClause[0].GetRangeVar() == nil || sub.WhereClause == nil ||
		len(sub.GroupClause) > 0 || sub.HavingClause != nil || len(sub.DistinctClause) > 0 || sub.LimitCount != nil || len(sub.SortClause) > 0 {
		return nil, c.errAt(exists.Location, true, "EXISTS compiles to a semi join when it is EXISTS (SELECT 1 FROM source WHERE b.k = a.k [AND b.ts BETWEEN a.ts AND a.ts + INTERVAL '…'])")
	}
	je := &pg.JoinExpr{Jointype: pg.JoinType_JOIN_SEMI, Larg: from, Rarg: sub.FromClause[0], Quals: sub.WhereClause}
	n := &pg.SelectStmt{}
	n.DistinctClause, n.TargetList, n.GroupClause, n.HavingClause, n.Op = sel.DistinctClause, sel.TargetList, sel.GroupClause, sel.HavingClause, sel.Op
	n.FromClause = []*pg.Node{{Node: &pg.Node_JoinExpr{JoinExpr: je}}}
	switch len(rest) {
	case 0:
	case 1:
		n.WhereClause = rest[0]
	default:
		n.WhereClause = &pg.Node{Node: &pg.Node_BoolExpr{BoolExpr: &pg.BoolExpr{Boolop: pg.BoolExprType_AND_EXPR, Args: rest}}}
	}
	return n, nil
}
