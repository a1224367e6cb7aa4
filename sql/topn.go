package sql

import (
	"fmt"
	"slices"
	"strings"

	pg "github.com/pganalyze/pg_query_go/v6"

	"github.com/onceflow/onceflow/engine"
)

// Top-N in the Flink style compiles to the engine's Top:
//
//	SELECT … FROM (
//	  SELECT *, RANK() OVER (PARTITION BY k… ORDER BY c [DESC]) AS rk FROM …
//	) AS t WHERE rk <= N
//
// The inner block names the rank; the enclosing block's WHERE must be
// exactly rk <= N (or rk < N, rk = 1), which becomes
// GroupBy(k…).Top(N, c, order). RANK keeps the rows tied at the N-th place,
// as Top does; ROW_NUMBER, which would pick among them, is refused.

// pendingTop is a rank column waiting for its WHERE in the enclosing block.
type pendingTop struct {
	rank   string
	keys   []string
	by     string
	order  engine.Order
	at     int32
	id     string
	hinted bool
}

// rankTarget finds a RANK() / ROW_NUMBER() OVER in the select list.
func rankTarget(sel *pg.SelectStmt) (*pg.ResTarget, *pg.FuncCall) {
	for _, t := range sel.TargetList {
		rt := t.GetResTarget()
		if fc := rt.Val.GetFuncCall(); fc != nil && fc.Over != nil {
			return rt, fc
		}
	}
	return nil, nil
}

// compileRank compiles a block whose select list ranks rows: its other
// columns are a projection, and the rank waits for the enclosing WHERE.
func (c *compiler) compileRank(sel *pg.SelectStmt, q *compiled, at int32, rt *pg.ResTarget, fc *pg.FuncCall) (*compiled, error) {
	name := funcName(fc)
	if name == "row_number" {
		return nil, c.errAt(fc.Location, true, "ROW_NUMBER() OVER is not supported: for the top N rows per group use RANK() OVER (PARTITION BY … ORDER BY …) with WHERE rank <= N (ties are kept); to drop duplicates use SELECT DISTINCT")
	}
	if name != "rank" {
		return nil, c.errAt(fc.Location, true, "window function %s() OVER is not supported: RANK() OVER (PARTITION BY … ORDER BY …) with WHERE rank <= N gives the top N rows per group; for windows use TUMBLE, HOP or SESSION in FROM", name)
	}
	if len(sel.GroupClause) > 0 || sel.HavingClause != nil || len(sel.DistinctClause) > 0 {
		return nil, c.errAt(fc.Location, true, "RANK() OVER in a block with GROUP BY or DISTINCT is not supported: aggregate in a subquery and rank its rows")
	}
	if rt.Name == "" {
		return nil, c.errAt(fc.Location, false, "name the rank column (RANK() OVER (…) AS rk) so the enclosing query can filter on it")
	}
	w := fc.Over
	if len(w.PartitionClause) == 0 {
		return nil, c.errAt(fc.Location, true, "RANK() OVER needs PARTITION BY: the engine ranks within groups whose keys hold the event time (window_start, window_end)")
	}
	top := &pendingTop{rank: rt.Name, at: fc.Location, order: engine.Asc}
	for _, p := range w.PartitionClause {
		cr := p.GetColumnRef()
		if cr == nil || cr.Fields[len(cr.Fields)-1].GetString_() == nil {
			return nil, c.errAt(exprLoc(p), true, "PARTITION BY takes column names")
		}
		top.keys = append(top.keys, cr.Fields[len(cr.Fields)-1].GetString_().Sval)
	}
	if len(w.OrderClause) != 1 {
		return nil, c.errAt(fc.Location, true, "RANK() OVER needs ORDER BY one column")
	}
	sb := w.OrderClause[0].GetSortBy()
	cr := sb.Node.GetColumnRef()
	if cr == nil || cr.Fields[len(cr.Fields)-1].GetString_() == nil {
		return nil, c.errAt(exprLoc(sb.Node), true, "ORDER BY in RANK() OVER takes a column name: compute an expression in the subquery")
	}
	top.by = cr.Fields[len(cr.Fields)-1].GetString_().Sval
	switch sb.SortbyDir {
	case pg.SortByDir_SORTBY_DESC:
		top.order = engine.Desc
	case pg.SortByDir_SORTBY_USING:
		return nil, c.errAt(sb.Location, true, "ORDER BY … USING is not supported: use ASC or DESC")
	}
	// the other columns are a projection
	rest := &pg.SelectStmt{TargetList: slices.DeleteFunc(slices.Clone(sel.TargetList), func(n *pg.Node) bool { return n.GetResTarget() == rt })}
	if len(rest.TargetList) == 0 {
		return nil, c.errAt(fc.Location, false, "select the ranked rows' columns beside the rank (SELECT *, RANK() OVER …)")
	}
	sc := &scope{c: c, cols: q.cols}
	named, items, cols, err := c.targets(rest, sc, q.cols)
	if err != nil {
		return nil, err
	}
	if sc.batchID != "" {
		return nil, c.errAt(fc.Location, true, "batch_id() beside RANK() is not supported: select it in the enclosing query")
	}
	for _, k := range append(slices.Clone(top.keys), top.by) {
		if !slices.Contains(cols, k) {
			return nil, c.errAt(fc.Location, false, "RANK() OVER uses column %q, which this SELECT does not output (%s)", k, strings.Join(cols, ", "))
		}
	}
	if slices.Contains(cols, top.rank) {
		return nil, c.errAt(rt.Location, false, "column %q appears twice in the select list", top.rank)
	}
	if top.id, top.hinted, err = c.operatorID(sel, at, "top"); err != nil {
		return nil, err
	}
	if err := c.claimID(top.id, firstTargetLoc(sel, at)); err != nil {
		return nil, err
	}
	q.ops = append(q.ops, selectOp(named, items))
	q.cols = cols
	q.top = top
	return q, nil
}

// applyTop consumes a pending rank with the enclosing block's WHERE, which
// must be rank <= N, rank < N or rank = 1.
func (c *compiler) applyTop(q *compiled, where *pg.Node) error {
	top := q.top
	q.top = nil
	bad := func(loc int32) error {
		return c.errAt(loc, true, "the rank %s is used only as WHERE %s <= N (or < N, = 1): the top N rows per group; other conditions go in another enclosing SELECT", top.rank, top.rank)
	}
	if where == nil {
		return bad(top.at)
	}
	ae := where.GetAExpr()
	if ae == nil || ae.Kind != pg.A_Expr_Kind_AEXPR_OP || ae.Lexpr.GetColumnRef() == nil || ae.Rexpr.GetAConst() == nil || ae.Rexpr.GetAConst().GetIval() == nil {
		return bad(exprLoc(where))
	}
	lc := ae.Lexpr.GetColumnRef()
	if lc.Fields[len(lc.Fields)-1].GetString_().GetSval() != top.rank {
		return bad(exprLoc(where))
	}
	n := int(ae.Rexpr.GetAConst().GetIval().Ival)
	switch op := ae.Name[len(ae.Name)-1].GetString_().GetSval(); {
	case op == "<=":
	case op == "<":
		n--
	case op == "=" && n == 1:
	default:
		return bad(exprLoc(where))
	}
	if n < 1 {
		return c.errAt(exprLoc(where), false, "WHERE %s keeps no row", top.rank)
	}
	t := *top
	q.ops = append(q.ops, op{
		desc: fmt.Sprintf("top[%s](%d by %s %s per %s)", t.id, n, t.by, t.order, strings.Join(t.keys, ", ")), at: c.userAt(t.at),
		apply:    func(s *engine.Stream) *engine.Stream { return s.GroupBy(t.keys...).ID(t.id).Top(n, t.by, t.order) },
		stateful: &Operator{ID: t.id, Kind: "top", Keys: slices.Clone(t.keys), Hinted: t.hinted},
	})
	return nil
}
