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
)

// scope is what an expression may refer to: the columns, and in an
// aggregating query the group keys and the aggregates it collects.
type scope struct {
	c       *compiler
	cols    []string
	qual    map[string]map[string]string // after a join: alias → column → name
	grouped bool
	keys    []string // grouped: the columns allowed outside aggregates
	aggs    []batch.Agg
	// aggNames holds the output names taken so far in a grouped query.
	aggNames  map[string]bool
	preferred []preferredName
	inAgg     bool
	batchID   string // the batch id column's name, once batch_id() is used
}

type preferredName struct {
	loc  int32
	name string
}

var aggFuncs = map[string]batch.AggFunc{
	"count": batch.AggCount, "sum": batch.AggSum, "min": batch.AggMin, "max": batch.AggMax, "avg": batch.AggAvg,
}

// isAggName reports whether name is an aggregate: count, sum, min, max,
// avg, or one of them with the batch_ prefix (per micro-batch, reset every
// batch).
func isAggName(name string) bool {
	_, ok := aggFuncs[strings.TrimPrefix(name, "batch_")]
	return ok
}

const supportedFuncs = "upper, lower, concat, substr/substring, length, starts_with, contains, date_trunc, extract/date_part (year, month, day, hour), year, month, day, hour, to_char, coalesce, batch_id, and the aggregates count, sum, min, max, avg (count(DISTINCT x), and batch_… per-batch forms)"

func (sc *scope) errAt(loc int32, unsupported bool, format string, args ...any) error {
	return sc.c.errAt(loc, unsupported, format, args...)
}

func (sc *scope) expr(n *pg.Node) (batch.Expr, error) {
	switch {
	case n.GetColumnRef() != nil:
		return sc.column(n.GetColumnRef())
	case n.GetAConst() != nil:
		v, err := sc.constant(n.GetAConst())
		if err != nil {
			return nil, err
		}
		return batch.Lit(v), nil
	case n.GetAExpr() != nil:
		return sc.aexpr(n.GetAExpr())
	case n.GetBoolExpr() != nil:
		be := n.GetBoolExpr()
		args := make([]batch.Expr, len(be.Args))
		for i, a := range be.Args {
			e, err := sc.expr(a)
			if err != nil {
				return nil, err
			}
			args[i] = e
		}
		switch be.Boolop {
		case pg.BoolExprType_NOT_EXPR:
			return batch.Not(args[0]), nil
		case pg.BoolExprType_AND_EXPR:
			return fold(batch.And, args), nil
		default:
			return fold(batch.Or, args), nil
		}
	case n.GetNullTest() != nil:
		nt := n.GetNullTest()
		e, err := sc.expr(nt.Arg)
		if err != nil {
			return nil, err
		}
		if nt.Nulltesttype == pg.NullTestType_IS_NULL {
			return batch.IsNull(e), nil
		}
		return batch.IsNotNull(e), nil
	case n.GetCaseExpr() != nil:
		return sc.caseExpr(n.GetCaseExpr())
	case n.GetCoalesceExpr() != nil:
		var args []batch.Expr
		for _, a := range n.GetCoalesceExpr().Args {
			e, err := sc.expr(a)
			if err != nil {
				return nil, err
			}
			args = append(args, e)
		}
		return batch.Coalesce(args...), nil
	case n.GetTypeCast() != nil:
		return sc.cast(n.GetTypeCast())
	case n.GetFuncCall() != nil:
		return sc.call(n.GetFuncCall())
	case n.GetSubLink() != nil:
		return nil, sc.errAt(n.GetSubLink().Location, true, "subqueries in expressions are not supported: use a subquery in FROM")
	case n.GetMinMaxExpr() != nil:
		return nil, sc.errAt(n.GetMinMaxExpr().Location, true, "GREATEST and LEAST are not supported: use CASE WHEN a > b THEN a ELSE b END")
	case n.GetBooleanTest() != nil:
		return nil, sc.errAt(n.GetBooleanTest().Location, true, "IS TRUE / IS FALSE is not supported: use the condition itself, or COALESCE(cond, false)")
	case n.GetParamRef() != nil:
		return nil, sc.errAt(n.GetParamRef().Location, true, "parameters ($1) are not supported: write the value, or use ${ENV} in a WITH option")
	case n.GetSqlvalueFunction() != nil:
		return nil, sc.errAt(n.GetSqlvalueFunction().Location, true, "CURRENT_TIMESTAMP and the like read the wall clock, which a re-run batch must not: use batch_id() or the event time")
	}
	return nil, sc.errAt(exprLoc(n), true, "this expression (%T) is not supported; expressions are columns, constants, arithmetic, comparisons, AND/OR/NOT, IS [NOT] NULL, IN, BETWEEN, LIKE 'p%%', CASE, CAST and the functions %s", n.Node, supportedFuncs)
}

func fold(f func(a, b batch.Expr) batch.Expr, args []batch.Expr) batch.Expr {
	e := args[0]
	for _, a := range args[1:] {
		e = f(e, a)
	}
	return e
}

func (sc *scope) column(cr *pg.ColumnRef) (batch.Expr, error) {
	last := cr.Fields[len(cr.Fields)-1]
	if last.GetAStar() != nil {
		return nil, sc.errAt(cr.Location, true, "* is allowed only alone in the select list (and count(*))")
	}
	if len(cr.Fields) > 2 {
		return nil, sc.errAt(cr.Location, true, "qualified names beyond alias.column are not supported")
	}
	name := last.GetString_().GetSval()
	if len(cr.Fields) == 2 && sc.qual != nil {
		alias := cr.Fields[0].GetString_().GetSval()
		m, ok := sc.qual[alias]
		if !ok {
			return nil, sc.errAt(cr.Location, false, "%s is not a source or alias in FROM", alias)
		}
		n, ok := m[name]
		if !ok {
			return nil, sc.errAt(cr.Location, false, "%s has no column %q", alias, name)
		}
		name = n
	} else if len(cr.Fields) == 1 && sc.qual != nil && !slices.Contains(sc.cols, name) {
		var owners []string
		for a, m := range sc.qual {
			if _, ok := m[name]; ok {
				owners = append(owners, a)
			}
		}
		if len(owners) > 1 {
			slices.Sort(owners)
			return nil, sc.errAt(cr.Location, false, "column %q is on both sides of the join: write %s.%s (output names left_%s and right_%s)", name, owners[0], name, name, name)
		}
	}
	if sc.grouped && !sc.inAgg {
		if !slices.Contains(sc.keys, name) {
			if slices.Contains(sc.cols, name) {
				return nil, sc.errAt(cr.Location, false, "column %q must appear in GROUP BY or be used in an aggregate", name)
			}
			return nil, sc.errAt(cr.Location, false, "column %q does not exist here (group keys: %s)", name, strings.Join(sc.keys, ", "))
		}
		return batch.Col(name), nil
	}
	if !slices.Contains(sc.cols, name) {
		return nil, sc.errAt(cr.Location, false, "column %q does not exist (columns: %s)", name, strings.Join(sc.cols, ", "))
	}
	return batch.Col(name), nil
}

func (sc *scope) constant(ac *pg.A_Const) (any, error) {
	switch {
	case ac.Isnull:
		return nil, nil
	case ac.GetIval() != nil:
		return int64(ac.GetIval().Ival), nil
	case ac.GetFval() != nil:
		s := ac.GetFval().Fval
		if i, err := strconv.ParseInt(s, 10, 64); err == nil {
			return i, nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, sc.errAt(ac.Location, false, "number %s is out of range", s)
		}
		return f, nil
	case ac.GetSval() != nil:
		return ac.GetSval().Sval, nil
	case ac.GetBoolval() != nil:
		return ac.GetBoolval().Boolval, nil
	}
	return nil, sc.errAt(ac.Location, true, "bit-string constants are not supported")
}

func (sc *scope) opName(ae *pg.A_Expr) string {
	if len(ae.Name) == 0 {
		return ""
	}
	return ae.Name[len(ae.Name)-1].GetString_().GetSval()
}

func (sc *scope) aexpr(ae *pg.A_Expr) (batch.Expr, error) {
	switch ae.Kind {
	case pg.A_Expr_Kind_AEXPR_OP:
	case pg.A_Expr_Kind_AEXPR_IN:
		l, err := sc.expr(ae.Lexpr)
		if err != nil {
			return nil, err
		}
		var vals []any
		for _, it := range ae.Rexpr.GetList().GetItems() {
			ac := it.GetAConst()
			if ac == nil {
				return nil, sc.errAt(exprLoc(it), true, "IN takes a list of constants")
			}
			v, err := sc.constant(ac)
			if err != nil {
				return nil, err
			}
			vals = append(vals, v)
		}
		in := batch.In(l, vals...)
		if sc.opName(ae) == "<>" {
			return batch.Not(in), nil
		}
		return in, nil
	case pg.A_Expr_Kind_AEXPR_BETWEEN, pg.A_Expr_Kind_AEXPR_NOT_BETWEEN:
		l, err := sc.expr(ae.Lexpr)
		if err != nil {
			return nil, err
		}
		bounds := ae.Rexpr.GetList().GetItems()
		lo, err := sc.expr(bounds[0])
		if err != nil {
			return nil, err
		}
		hi, err := sc.expr(bounds[1])
		if err != nil {
			return nil, err
		}
		e := batch.And(batch.Ge(l, lo), batch.Le(l, hi))
		if ae.Kind == pg.A_Expr_Kind_AEXPR_NOT_BETWEEN {
			e = batch.Not(e)
		}
		return e, nil
	case pg.A_Expr_Kind_AEXPR_LIKE:
		return sc.like(ae)
	default:
		return nil, sc.errAt(ae.Location, true, "this operator is not supported; operators are + - * / %% || = <> < <= > >= AND OR NOT, IN (…), BETWEEN, LIKE 'p%%' and IS [NOT] NULL")
	}
	var l batch.Expr
	if ae.Lexpr != nil {
		var err error
		if l, err = sc.expr(ae.Lexpr); err != nil {
			return nil, err
		}
	}
	r, err := sc.expr(ae.Rexpr)
	if err != nil {
		return nil, err
	}
	name := sc.opName(ae)
	if l == nil {
		switch name {
		case "-":
			return batch.Neg(r), nil
		case "+":
			return r, nil
		}
		return nil, sc.errAt(ae.Location, true, "prefix operator %s is not supported", name)
	}
	switch name {
	case "+":
		return batch.Add(l, r), nil
	case "-":
		return batch.Sub(l, r), nil
	case "*":
		return batch.Mul(l, r), nil
	case "/":
		return batch.Div(l, r), nil
	case "%":
		return batch.Mod(l, r), nil
	case "=":
		return batch.Eq(l, r), nil
	case "<>":
		return batch.Ne(l, r), nil
	case "<":
		return batch.Lt(l, r), nil
	case "<=":
		return batch.Le(l, r), nil
	case ">":
		return batch.Gt(l, r), nil
	case ">=":
		return batch.Ge(l, r), nil
	case "||":
		return batch.Concat(l, r), nil
	}
	return nil, sc.errAt(ae.Location, true, "operator %s is not supported; operators are + - * / %% || = <> < <= > >=", name)
}

// like compiles LIKE with the patterns the batch package has kernels for:
// 'abc' (equality), 'abc%' (starts_with) and '%abc%' (contains).
func (sc *scope) like(ae *pg.A_Expr) (batch.Expr, error) {
	l, err := sc.expr(ae.Lexpr)
	if err != nil {
		return nil, err
	}
	ac := ae.Rexpr.GetAConst()
	if ac == nil || ac.GetSval() == nil {
		return nil, sc.errAt(exprLoc(ae.Rexpr), true, "LIKE takes a constant pattern")
	}
	p := ac.GetSval().Sval
	inner := strings.Trim(p, "%")
	if strings.ContainsAny(inner, "%_\\") {
		return nil, sc.errAt(ac.Location, true, "LIKE pattern %q: the supported patterns are 'abc', 'abc%%' and '%%abc%%' (no _ or inner %%)", p)
	}
	var e batch.Expr
	switch {
	case p == inner:
		e = batch.Eq(l, batch.Lit(p))
	case p == inner+"%":
		e = batch.StartsWith(l, inner)
	case p == "%"+inner+"%":
		e = batch.Contains(l, inner)
	default:
		return nil, sc.errAt(ac.Location, true, "LIKE pattern %q: the supported patterns are 'abc', 'abc%%' and '%%abc%%'", p)
	}
	if sc.opName(ae) == "!~~" {
		e = batch.Not(e)
	}
	return e, nil
}

func (sc *scope) caseExpr(ce *pg.CaseExpr) (batch.Expr, error) {
	var subject batch.Expr
	if ce.Arg != nil {
		var err error
		if subject, err = sc.expr(ce.Arg); err != nil {
			return nil, err
		}
	}
	els := batch.Lit(nil)
	if ce.Defresult != nil {
		var err error
		if els, err = sc.expr(ce.Defresult); err != nil {
			return nil, err
		}
	}
	for i := len(ce.Args) - 1; i >= 0; i-- {
		w := ce.Args[i].GetCaseWhen()
		cond, err := sc.expr(w.Expr)
		if err != nil {
			return nil, err
		}
		if subject != nil {
			cond = batch.Eq(subject, cond)
		}
		then, err := sc.expr(w.Result)
		if err != nil {
			return nil, err
		}
		els = batch.If(cond, then, els)
	}
	return els, nil
}

// sqlType maps a SQL type name to the Arrow type it is in the engine.
func sqlType(tn *pg.TypeName) (arrow.DataType, bool) {
	switch typeName(tn) {
	case "int8", "bigint":
		return arrow.PrimitiveTypes.Int64, true
	case "int4", "integer", "int":
		return arrow.PrimitiveTypes.Int32, true
	case "float8", "double":
		return arrow.PrimitiveTypes.Float64, true
	case "text", "varchar", "string":
		return arrow.BinaryTypes.String, true
	case "bool", "boolean":
		return arrow.FixedWidthTypes.Boolean, true
	case "timestamp", "timestamptz":
		return &arrow.TimestampType{Unit: arrow.Microsecond, TimeZone: "UTC"}, true
	}
	return nil, false
}

const supportedTypes = "bigint, integer, double precision, text (varchar), boolean and timestamp (timestamptz)"

var timestampLayouts = []string{time.RFC3339Nano, "2006-01-02 15:04:05.999999999Z07:00", "2006-01-02 15:04:05.999999999", "2006-01-02T15:04:05.999999999", "2006-01-02"}

func (sc *scope) cast(tc *pg.TypeCast) (batch.Expr, error) {
	tname := typeName(tc.TypeName)
	if ac := tc.Arg.GetAConst(); ac != nil && ac.GetSval() != nil {
		s := ac.GetSval().Sval
		switch tname {
		case "interval":
			d, err := sc.c.interval(&pg.Node{Node: &pg.Node_TypeCast{TypeCast: tc}})
			if err != nil {
				return nil, err
			}
			return batch.Lit(d), nil
		case "timestamp", "timestamptz":
			for _, l := range timestampLayouts {
				if t, err := time.Parse(l, s); err == nil {
					return batch.Lit(t.UTC()), nil
				}
			}
			return nil, sc.errAt(ac.Location, false, "timestamp %q: write 2006-01-02 15:04:05[.999999][+00:00] or RFC 3339", s)
		}
	}
	t, ok := sqlType(tc.TypeName)
	if !ok {
		return nil, sc.errAt(tc.Location, true, "CAST to %s is not supported: the types are %s", tname, supportedTypes)
	}
	e, err := sc.expr(tc.Arg)
	if err != nil {
		return nil, err
	}
	return batch.Cast(e, t), nil
}

func (sc *scope) call(fc *pg.FuncCall) (batch.Expr, error) {
	name := funcName(fc)
	if fc.Over != nil {
		return nil, sc.errAt(fc.Location, true, "window function %s() OVER is not supported: for deduplication use SELECT DISTINCT; for windows use TUMBLE, HOP or SESSION in FROM", name)
	}
	if fc.AggFilter != nil || len(fc.AggOrder) > 0 || fc.AggWithinGroup || fc.FuncVariadic {
		return nil, sc.errAt(fc.Location, true, "FILTER, ORDER BY and WITHIN GROUP in an aggregate are not supported: filter with WHERE or CASE")
	}
	if isAggName(name) {
		return sc.aggregate(fc, name)
	}
	if fc.AggStar || fc.AggDistinct {
		return nil, sc.errAt(fc.Location, true, "%s is not an aggregate: * and DISTINCT go in count, sum, min, max and avg", name)
	}
	if name == "batch_id" {
		if len(fc.Args) != 0 {
			return nil, sc.errAt(fc.Location, false, "batch_id() takes no arguments")
		}
		if sc.inAgg {
			return nil, sc.errAt(fc.Location, true, "batch_id() inside an aggregate is not supported")
		}
		if sc.batchID == "" {
			sc.batchID = "batch_id"
			for slices.Contains(sc.cols, sc.batchID) || slices.Contains(sc.keys, sc.batchID) || sc.aggNames[sc.batchID] {
				sc.batchID = "_" + sc.batchID
			}
		}
		return batch.Col(sc.batchID), nil
	}
	args := make([]batch.Expr, len(fc.Args))
	for i, a := range fc.Args {
		if (name == "date_trunc" || name == "extract" || name == "date_part") && i == 0 {
			continue
		}
		if (name == "to_char" || name == "starts_with" || name == "contains") && i == 1 {
			continue
		}
		if (name == "substr" || name == "substring") && i > 0 {
			continue
		}
		e, err := sc.expr(a)
		if err != nil {
			return nil, err
		}
		args[i] = e
	}
	nargs := func(n ...int) error {
		if slices.Contains(n, len(args)) {
			return nil
		}
		return sc.errAt(fc.Location, false, "%s takes %v arguments, not %d", name, n, len(args))
	}
	str := func(i int) (string, error) {
		ac := fc.Args[i].GetAConst()
		if ac == nil || ac.GetSval() == nil {
			return "", sc.errAt(exprLoc(fc.Args[i]), true, "argument %d of %s must be a string constant", i+1, name)
		}
		return ac.GetSval().Sval, nil
	}
	integer := func(i int) (int, error) {
		ac := fc.Args[i].GetAConst()
		if ac == nil || ac.GetIval() == nil {
			return 0, sc.errAt(exprLoc(fc.Args[i]), true, "argument %d of %s must be an integer constant", i+1, name)
		}
		return int(ac.GetIval().Ival), nil
	}
	switch name {
	case "upper", "lower", "length", "char_length", "year", "month", "day", "hour":
		if err := nargs(1); err != nil {
			return nil, err
		}
		return map[string]func(batch.Expr) batch.Expr{"upper": batch.Upper, "lower": batch.Lower, "length": batch.Length, "char_length": batch.Length,
			"year": batch.Year, "month": batch.Month, "day": batch.Day, "hour": batch.Hour}[name](args[0]), nil
	case "concat":
		if len(args) == 0 {
			return nil, sc.errAt(fc.Location, false, "concat takes at least one argument")
		}
		return batch.Concat(args...), nil
	case "substr", "substring":
		if err := nargs(3); err != nil {
			return nil, sc.errAt(fc.Location, true, "%s takes (string, start, length) with constant start and length", name)
		}
		start, err := integer(1)
		if err != nil {
			return nil, err
		}
		n, err := integer(2)
		if err != nil {
			return nil, err
		}
		return batch.Substr(args[0], start, n), nil
	case "starts_with", "contains":
		if err := nargs(2); err != nil {
			return nil, err
		}
		s, err := str(1)
		if err != nil {
			return nil, err
		}
		if name == "contains" {
			return batch.Contains(args[0], s), nil
		}
		return batch.StartsWith(args[0], s), nil
	case "date_trunc":
		if err := nargs(2); err != nil {
			return nil, err
		}
		u, err := str(0)
		if err != nil {
			return nil, err
		}
		u = strings.ToLower(u)
		if !slices.Contains([]string{"second", "minute", "hour", "day", "month", "year"}, u) {
			return nil, sc.errAt(exprLoc(fc.Args[0]), true, "date_trunc unit %q: the units are second, minute, hour, day, month, year", u)
		}
		return batch.DateTrunc(u, args[1]), nil
	case "extract", "date_part":
		if err := nargs(2); err != nil {
			return nil, err
		}
		f, err := str(0)
		if err != nil {
			return nil, err
		}
		fn, ok := map[string]func(batch.Expr) batch.Expr{"year": batch.Year, "month": batch.Month, "day": batch.Day, "hour": batch.Hour}[strings.ToLower(f)]
		if !ok {
			return nil, sc.errAt(exprLoc(fc.Args[0]), true, "EXTRACT(%s …): the fields are year, month, day, hour", f)
		}
		return fn(args[1]), nil
	case "to_char":
		if err := nargs(2); err != nil {
			return nil, err
		}
		f, err := str(1)
		if err != nil {
			return nil, err
		}
		layout, err := goLayout(f)
		if err != nil {
			return nil, sc.errAt(exprLoc(fc.Args[1]), true, "%v", err)
		}
		return batch.FormatTime(args[0], layout), nil
	}
	return nil, sc.errAt(fc.Location, true, "function %s is not supported; the functions are %s", name, supportedFuncs)
}

// goLayout turns a to_char pattern made of YYYY MM DD HH24 MI SS MS US and
// separators into a Go time layout.
func goLayout(p string) (string, error) {
	repl := []struct{ from, to string }{{"YYYY", "2006"}, {"HH24", "15"}, {"MM", "01"}, {"DD", "02"}, {"MI", "04"}, {"SS", "05"}, {"MS", "000"}, {"US", "000000"}}
	var b strings.Builder
	for i := 0; i < len(p); {
		matched := false
		for _, r := range repl {
			if strings.HasPrefix(p[i:], r.from) {
				b.WriteString(r.to)
				i += len(r.from)
				matched = true
				break
			}
		}
		if matched {
			continue
		}
		ch := p[i]
		if (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') {
			return "", fmt.Errorf("to_char pattern %q: only YYYY, MM, DD, HH24, MI, SS, MS, US and separators are supported", p)
		}
		b.WriteByte(ch)
		i++
	}
	return b.String(), nil
}

func (sc *scope) aggregate(fc *pg.FuncCall, name string) (batch.Expr, error) {
	if !sc.grouped {
		return nil, sc.errAt(fc.Location, false, "aggregate %s is not allowed here (WHERE, or a query without GROUP BY is compiled row by row)", name)
	}
	if sc.inAgg {
		return nil, sc.errAt(fc.Location, false, "aggregates cannot be nested")
	}
	perBatch := strings.HasPrefix(name, "batch_")
	fn := aggFuncs[strings.TrimPrefix(name, "batch_")]
	var a batch.Agg
	switch {
	case fc.AggStar:
		if fn != batch.AggCount {
			return nil, sc.errAt(fc.Location, false, "%s(*) is not an aggregate; only count(*)", name)
		}
		a = batch.CountRows()
	default:
		if len(fc.Args) != 1 {
			return nil, sc.errAt(fc.Location, false, "%s takes one argument", name)
		}
		sc.inAgg = true
		saved := sc.grouped
		sc.grouped = false
		in, err := sc.expr(fc.Args[0])
		sc.grouped = saved
		sc.inAgg = false
		if err != nil {
			return nil, err
		}
		switch {
		case fc.AggDistinct && fn == batch.AggCount:
			a = batch.CountDistinct(in)
		case fc.AggDistinct:
			return nil, sc.errAt(fc.Location, true, "%s(DISTINCT …) is not supported; DISTINCT goes in count", name)
		default:
			a = map[batch.AggFunc]func(batch.Expr) batch.Agg{batch.AggCount: batch.Count, batch.AggSum: batch.Sum, batch.AggMin: batch.Min, batch.AggMax: batch.Max, batch.AggAvg: batch.Avg}[fn](in)
		}
	}
	if perBatch {
		if fc.AggDistinct {
			return nil, sc.errAt(fc.Location, true, "%s(DISTINCT …) is not supported", name)
		}
		a = a.PerBatch()
	}
	out := ""
	for _, p := range sc.preferred {
		if p.loc == fc.Location && !sc.aggNames[p.name] {
			out = p.name
		}
	}
	if out == "" {
		for i := 1; ; i++ {
			out = fmt.Sprintf("_agg%d", i)
			if !sc.aggNames[out] {
				break
			}
		}
	}
	sc.aggNames[out] = true
	sc.aggs = append(sc.aggs, a.As(out))
	return batch.Col(out), nil
}
