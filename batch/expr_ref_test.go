package batch

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

var refIterations = flag.Int("ref-iterations", 400, "random expressions TestExprReference compares")

// A reference evaluator: walks the expression tree row by row over plain Go
// values, with the SQL semantics the package documents. The random tests
// below compare it with the columnar evaluation.

type refTS int64  // timestamp, microseconds since the epoch, UTC
type refDur int64 // duration, microseconds

var errRef = errors.New("reference: row error")

var refSchema = arrow.NewSchema([]arrow.Field{
	{Name: "id", Type: arrow.PrimitiveTypes.Int64},
	{Name: "i", Type: arrow.PrimitiveTypes.Int64, Nullable: true},
	{Name: "j", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "f", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "t", Type: exprTSUS, Nullable: true},
	{Name: "d", Type: &arrow.DurationType{Unit: arrow.Microsecond}, Nullable: true},
}, nil)

// refRow reads row i of rec as Go values.
func refRow(rec arrow.RecordBatch, i int) map[string]any {
	row := map[string]any{}
	for c, f := range rec.Schema().Fields() {
		row[f.Name] = refValue(rec.Column(c), i)
	}
	return row
}

func refValue(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Int64:
		return a.Value(i)
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.Boolean:
		return a.Value(i)
	case *array.Timestamp:
		return refTS(a.Value(i))
	case *array.Duration:
		return refDur(a.Value(i))
	case *array.Null:
		return nil
	}
	panic(fmt.Sprintf("refValue: %T", a))
}

func refTime(v refTS) time.Time { return time.UnixMicro(int64(v)).UTC() }

func refLit(v any) any {
	switch v := v.(type) {
	case int:
		return int64(v)
	case int32:
		return int64(v)
	case time.Time:
		return refTS(v.UnixMicro())
	case time.Duration:
		return refDur(v.Microseconds())
	}
	return v
}

func refFloat(v any) float64 {
	switch v := v.(type) {
	case int64:
		return float64(v)
	case float64:
		return v
	}
	panic(fmt.Sprintf("refFloat %T", v))
}

// refEval evaluates e on one row. Every argument is evaluated (as the
// columnar evaluation does), so an error in any argument is an error,
// except in If and Coalesce, which evaluate an argument only where needed.
func refEval(e Expr, row map[string]any) (any, error) {
	switch e := e.(type) {
	case colExpr:
		return row[e.name], nil
	case litExpr:
		return refLit(e.v), nil
	}
	c := e.(*callExpr)
	switch c.op {
	case opIf:
		// Only the branch a row takes is evaluated.
		cond, err := refEval(c.args[0], row)
		if err != nil {
			return nil, err
		}
		if cond == true {
			return refEval(c.args[1], row)
		}
		return refEval(c.args[2], row)
	case opCoalesce:
		// Arguments are evaluated until one is not null.
		for _, a := range c.args {
			v, err := refEval(a, row)
			if v != nil || err != nil {
				return v, err
			}
		}
		return nil, nil
	}
	args := make([]any, len(c.args))
	for i, a := range c.args {
		v, err := refEval(a, row)
		if err != nil {
			return nil, err
		}
		args[i] = v
	}
	anyNull := false
	for _, a := range args {
		anyNull = anyNull || a == nil
	}
	switch c.op {
	case opAnd, opOr:
		l, r := args[0], args[1]
		if c.op == opAnd {
			if l == false || r == false {
				return false, nil
			}
			if anyNull {
				return nil, nil
			}
			return true, nil
		}
		if l == true || r == true {
			return true, nil
		}
		if anyNull {
			return nil, nil
		}
		return false, nil
	case opIsNull:
		return args[0] == nil, nil
	case opIsNotNull:
		return args[0] != nil, nil
	case opIf:
		if args[0] == true {
			return args[1], nil
		}
		return args[2], nil
	case opCoalesce:
		for _, a := range args {
			if a != nil {
				return a, nil
			}
		}
		return nil, nil
	case opIn:
		if args[0] == nil {
			return nil, nil
		}
		sawNull := false
		for _, v := range c.vals {
			v = refLit(v)
			if v == nil {
				sawNull = true
			} else if refCompare(args[0], v) == 0 {
				return true, nil
			}
		}
		if sawNull {
			return nil, nil
		}
		return false, nil
	}
	if anyNull {
		return nil, nil
	}
	switch c.op {
	case opAdd, opSub, opMul, opDiv, opMod:
		return refArith(c.op, args[0], args[1])
	case opNeg:
		switch v := args[0].(type) {
		case int64:
			if v == math.MinInt64 {
				return nil, errRef
			}
			return -v, nil
		case float64:
			return -v, nil
		case refDur:
			return -v, nil
		}
	case opEq, opNe, opLt, opLe, opGt, opGe:
		k := refCompare(args[0], args[1])
		return map[op]bool{opEq: k == 0, opNe: k != 0, opLt: k < 0, opLe: k <= 0, opGt: k > 0, opGe: k >= 0}[c.op], nil
	case opNot:
		return !args[0].(bool), nil
	case opCast:
		switch c.to.ID() {
		case arrow.STRING:
			return strconv.FormatInt(args[0].(int64), 10), nil
		case arrow.FLOAT64:
			return refFloat(args[0]), nil
		}
	case opUpper:
		return strings.ToUpper(args[0].(string)), nil
	case opLower:
		return strings.ToLower(args[0].(string)), nil
	case opConcat:
		var sb strings.Builder
		for _, a := range args {
			sb.WriteString(a.(string))
		}
		return sb.String(), nil
	case opSubstr:
		var out []rune
		for p, r := range []rune(args[0].(string)) {
			if pos := p + 1; pos >= c.start && pos < c.start+c.n {
				out = append(out, r)
			}
		}
		return string(out), nil
	case opLength:
		return int64(utf8.RuneCountInString(args[0].(string))), nil
	case opStartsWith:
		return strings.HasPrefix(args[0].(string), c.str), nil
	case opContains:
		return strings.Contains(args[0].(string), c.str), nil
	case opDateTrunc:
		t := refTime(args[0].(refTS))
		switch c.str {
		case "second":
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), t.Second(), 0, time.UTC)
		case "minute":
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), t.Minute(), 0, 0, time.UTC)
		case "hour":
			t = time.Date(t.Year(), t.Month(), t.Day(), t.Hour(), 0, 0, 0, time.UTC)
		case "day":
			t = time.Date(t.Year(), t.Month(), t.Day(), 0, 0, 0, 0, time.UTC)
		case "month":
			t = time.Date(t.Year(), t.Month(), 1, 0, 0, 0, 0, time.UTC)
		case "year":
			t = time.Date(t.Year(), 1, 1, 0, 0, 0, 0, time.UTC)
		}
		return refTS(t.UnixMicro()), nil
	case opYear:
		return int64(refTime(args[0].(refTS)).Year()), nil
	case opMonth:
		return int64(refTime(args[0].(refTS)).Month()), nil
	case opDay:
		return int64(refTime(args[0].(refTS)).Day()), nil
	case opHour:
		return int64(refTime(args[0].(refTS)).Hour()), nil
	case opFormatTime:
		return refTime(args[0].(refTS)).Format(c.str), nil
	case opParseTime:
		t, err := time.Parse(c.str, args[0].(string))
		if err != nil {
			return nil, errRef
		}
		return refTS(t.UnixMicro()), nil
	}
	panic(fmt.Sprintf("refEval: %s", e))
}

func refArith(o op, a, b any) (any, error) {
	switch a := a.(type) {
	case refTS:
		switch b := b.(type) {
		case refDur:
			r, err := refArith(o, int64(a), int64(b))
			if err != nil {
				return nil, err
			}
			return refTS(r.(int64)), nil
		case refTS:
			r, err := refArith(o, int64(a), int64(b))
			if err != nil {
				return nil, err
			}
			return refDur(r.(int64)), nil
		}
	case refDur:
		switch b := b.(type) {
		case refTS:
			r, err := refArith(o, int64(a), int64(b))
			if err != nil {
				return nil, err
			}
			return refTS(r.(int64)), nil
		case refDur:
			r, err := refArith(o, int64(a), int64(b))
			if err != nil {
				return nil, err
			}
			return refDur(r.(int64)), nil
		}
	}
	x, xok := a.(int64)
	y, yok := b.(int64)
	if xok && yok {
		// Overflow checked in big arithmetic: the result must fit.
		r, bx, by := new(big.Int), big.NewInt(x), big.NewInt(y)
		switch o {
		case opAdd:
			r.Add(bx, by)
		case opSub:
			r.Sub(bx, by)
		case opMul:
			r.Mul(bx, by)
		case opDiv, opMod:
			if y == 0 {
				return nil, errRef
			}
			if o == opMod {
				return x % y, nil
			}
			if x == math.MinInt64 && y == -1 {
				return nil, errRef
			}
			return x / y, nil
		}
		if !r.IsInt64() {
			return nil, errRef
		}
		return r.Int64(), nil
	}
	fx, fy := refFloat(a), refFloat(b)
	switch o {
	case opAdd:
		return fx + fy, nil
	case opSub:
		return fx - fy, nil
	case opMul:
		return fx * fy, nil
	}
	if fy == 0 {
		return nil, errRef
	}
	if o == opMod {
		return math.Mod(fx, fy), nil
	}
	return fx / fy, nil
}

func refCompare(a, b any) int {
	switch a := a.(type) {
	case string:
		return strings.Compare(a, b.(string))
	case bool:
		x, y := 0, 0
		if a {
			x = 1
		}
		if b.(bool) {
			y = 1
		}
		return x - y
	case refTS:
		return refCmpInt(int64(a), int64(b.(refTS)))
	case refDur:
		return refCmpInt(int64(a), int64(b.(refDur)))
	case int64:
		if y, ok := b.(int64); ok {
			return refCmpInt(a, y)
		}
	}
	x, y := refFloat(a), refFloat(b)
	switch {
	case x < y:
		return -1
	case x > y:
		return 1
	}
	return 0
}

func refCmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// exprGen builds random well-typed expressions over refSchema.
type exprGen struct{ r *rand.Rand }

func (g exprGen) pick(n int) int { return g.r.IntN(n) }

func (g exprGen) intE(d int) Expr {
	if d <= 0 {
		switch g.pick(4) {
		case 0:
			return Col("i")
		case 1:
			return Col("j")
		case 2:
			return Lit(g.r.IntN(11) - 5)
		}
		return Lit(int32(g.r.IntN(7) - 3))
	}
	switch g.pick(13) {
	case 0:
		return Add(g.intE(d-1), g.intE(d-1))
	case 1:
		return Sub(g.intE(d-1), g.intE(d-1))
	case 2:
		return Mul(g.intE(d-1), g.intE(d-1))
	case 3:
		return Div(g.intE(d-1), g.intE(d-1))
	case 4:
		return Mod(g.intE(d-1), g.intE(d-1))
	case 5:
		return Neg(g.intE(d - 1))
	case 6:
		return If(g.boolE(d-1), g.intE(d-1), g.intE(d-1))
	case 7:
		return Coalesce(g.intE(d-1), g.intE(d-1), g.intE(d-1))
	case 8:
		return Length(g.strE(d - 1))
	case 9:
		return []func(Expr) Expr{Year, Month, Day, Hour}[g.pick(4)](g.tsE(d - 1))
	case 10:
		return Mul(g.intE(d-1), Lit(int64(math.MaxInt64/3)))
	}
	return g.intE(0)
}

func (g exprGen) floatE(d int) Expr {
	if d <= 0 {
		if g.pick(2) == 0 {
			return Col("f")
		}
		return Lit(float64(g.r.IntN(9)-4) / 4)
	}
	switch g.pick(8) {
	case 0:
		return Add(g.intE(d-1), g.floatE(d-1))
	case 1:
		return Sub(g.floatE(d-1), g.intE(d-1))
	case 2:
		return Mul(g.floatE(d-1), g.floatE(d-1))
	case 3:
		return Div(g.floatE(d-1), g.floatE(d-1))
	case 4:
		return Mod(g.floatE(d-1), g.intE(d-1))
	case 5:
		return Neg(g.floatE(d - 1))
	case 6:
		return If(g.boolE(d-1), g.floatE(d-1), Cast(g.intE(d-1), arrow.PrimitiveTypes.Float64))
	}
	return Coalesce(g.floatE(d-1), g.floatE(d-1))
}

func (g exprGen) boolE(d int) Expr {
	if d <= 0 {
		switch g.pick(4) {
		case 0, 1:
			return Col("b")
		case 2:
			return Lit(g.pick(2) == 0)
		}
		return Lit(nil)
	}
	cmp := []func(a, b Expr) Expr{Eq, Ne, Lt, Le, Gt, Ge}[g.pick(6)]
	switch g.pick(14) {
	case 0:
		return cmp(g.intE(d-1), g.intE(d-1))
	case 1:
		return cmp(g.floatE(d-1), g.intE(d-1))
	case 2:
		return cmp(g.strE(d-1), g.strE(d-1))
	case 3:
		return cmp(g.tsE(d-1), g.tsE(d-1))
	case 4:
		return []func(a, b Expr) Expr{Eq, Ne}[g.pick(2)](g.boolE(d-1), g.boolE(d-1))
	case 5:
		return And(g.boolE(d-1), g.boolE(d-1))
	case 6:
		return Or(g.boolE(d-1), g.boolE(d-1))
	case 7:
		return Not(g.boolE(d - 1))
	case 8:
		return IsNull(g.anyE(d - 1))
	case 9:
		return IsNotNull(g.anyE(d - 1))
	case 10:
		vals := []any{1, -2, 3}
		if g.pick(3) == 0 {
			vals = append(vals, nil)
		}
		return In(g.intE(d-1), vals...)
	case 11:
		return StartsWith(g.strE(d-1), "a")
	case 12:
		return Contains(g.strE(d-1), "ö")
	}
	return cmp(g.durE(d-1), g.durE(d-1))
}

func (g exprGen) strE(d int) Expr {
	if d <= 0 {
		switch g.pick(3) {
		case 0, 1:
			return Col("s")
		}
		return Lit([]string{"", "a", "Öx"}[g.pick(3)])
	}
	switch g.pick(9) {
	case 0:
		return Upper(g.strE(d - 1))
	case 1:
		return Lower(g.strE(d - 1))
	case 2:
		return Concat(g.strE(d-1), g.strE(d-1))
	case 3:
		return Substr(g.strE(d-1), g.r.IntN(6)-1, g.r.IntN(5))
	case 4:
		return If(g.boolE(d-1), g.strE(d-1), g.strE(d-1))
	case 5:
		return Coalesce(g.strE(d-1), g.strE(d-1))
	case 6:
		return FormatTime(g.tsE(d-1), "2006-01-02 15h")
	case 7:
		return Cast(g.intE(d-1), arrow.BinaryTypes.String)
	}
	return g.strE(0)
}

func (g exprGen) tsE(d int) Expr {
	if d <= 0 {
		if g.pick(3) > 0 {
			return Col("t")
		}
		return Lit(time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC))
	}
	switch g.pick(6) {
	case 0:
		return Add(g.tsE(d-1), g.durE(d-1))
	case 1:
		return Sub(g.tsE(d-1), g.durE(d-1))
	case 2:
		return DateTrunc([]string{"second", "minute", "hour", "day", "month", "year"}[g.pick(6)], g.tsE(d-1))
	case 3:
		return ParseTime(FormatTime(g.tsE(d-1), time.RFC3339Nano), time.RFC3339Nano)
	case 4:
		return If(g.boolE(d-1), g.tsE(d-1), g.tsE(d-1))
	}
	return Coalesce(g.tsE(d-1), g.tsE(d-1))
}

func (g exprGen) durE(d int) Expr {
	if d <= 0 {
		if g.pick(2) == 0 {
			return Col("d")
		}
		return Lit(time.Duration(g.r.IntN(100)) * time.Minute)
	}
	switch g.pick(4) {
	case 0:
		return Sub(g.tsE(d-1), g.tsE(d-1))
	case 1:
		return Add(g.durE(d-1), g.durE(d-1))
	case 2:
		return Neg(g.durE(d - 1))
	}
	return g.durE(0)
}

func (g exprGen) anyE(d int) Expr {
	switch g.pick(5) {
	case 0:
		return g.intE(d)
	case 1:
		return g.floatE(d)
	case 2:
		return g.strE(d)
	case 3:
		return g.tsE(d)
	}
	return g.boolE(d)
}

// refRecord builds n rows of refSchema, ~25% nulls, sliced at a random
// offset.
func refRecord(r *rand.Rand, mem memory.Allocator, n int) arrow.RecordBatch {
	off := r.IntN(9)
	b := array.NewRecordBuilder(mem, refSchema)
	defer b.Release()
	null := func() bool { return r.IntN(4) == 0 }
	strs := []string{"", "a", "ab", "Abc", "öl", "ÉTÉ", "straße", "a-b c"}
	for k := range off + n {
		b.Field(0).(*array.Int64Builder).Append(int64(k - off))
		if null() {
			b.Field(1).AppendNull()
		} else {
			v := int64(r.IntN(41) - 20)
			if r.IntN(30) == 0 {
				v = []int64{math.MaxInt64, math.MinInt64, math.MaxInt64 / 2, 1 << 40}[r.IntN(4)]
			}
			b.Field(1).(*array.Int64Builder).Append(v)
		}
		if null() {
			b.Field(2).AppendNull()
		} else {
			b.Field(2).(*array.Int32Builder).Append(int32(r.IntN(21) - 10))
		}
		if null() {
			b.Field(3).AppendNull()
		} else {
			b.Field(3).(*array.Float64Builder).Append(float64(r.IntN(41)-20) / 8)
		}
		if null() {
			b.Field(4).AppendNull()
		} else {
			b.Field(4).(*array.StringBuilder).Append(strs[r.IntN(len(strs))])
		}
		if null() {
			b.Field(5).AppendNull()
		} else {
			b.Field(5).(*array.BooleanBuilder).Append(r.IntN(2) == 0)
		}
		if null() {
			b.Field(6).AppendNull()
		} else {
			// 1950..2050, microsecond precision
			t := r.Int64N(100*365*86400*1_000_000) - 20*365*86400*1_000_000
			b.Field(6).(*array.TimestampBuilder).Append(arrow.Timestamp(t))
		}
		if null() {
			b.Field(7).AppendNull()
		} else {
			b.Field(7).(*array.DurationBuilder).Append(arrow.Duration(r.Int64N(2*86400*1_000_000) - 86400*1_000_000))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	return rec.NewSlice(int64(off), int64(off+n))
}

func refEqual(want, got any) bool {
	if w, ok := want.(float64); ok {
		g, ok := got.(float64)
		return ok && (w == g || (math.IsNaN(w) && math.IsNaN(g)))
	}
	return want == got
}

func TestExprReference(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	r := rand.New(rand.NewPCG(1, 2))
	g := exprGen{r: r}
	var errs, rows int
	for it := range *refIterations {
		n := []int{0, 1, 7, 64, 100}[r.IntN(5)]
		rec := refRecord(r, mem, n)
		e := g.anyE(1 + r.IntN(3))
		p, err := NewProjection(mem, refSchema, []Named{As(e, "out")})
		if err != nil {
			rec.Release()
			t.Fatalf("iteration %d: %s: bind: %v", it, e, err)
		}
		out, err := p.Apply(context.Background(), rec)
		var refErrRow = -1
		wants := make([]any, n)
		for i := range n {
			w, rerr := refEval(e, refRow(rec, i))
			if rerr != nil && refErrRow < 0 {
				refErrRow = i
			}
			wants[i] = w
		}
		switch {
		case err != nil && refErrRow < 0:
			t.Errorf("iteration %d: %s: error %v, the reference has none", it, e, err)
		case err == nil && refErrRow >= 0:
			t.Errorf("iteration %d: %s: no error, the reference fails at row %d: %v", it, e, refErrRow, refRow(rec, refErrRow))
		case err != nil:
			errs++
		default:
			col := out.Column(0)
			for i := range n {
				if got := refValue(col, i); !refEqual(wants[i], got) {
					t.Errorf("iteration %d: %s row %d %v: got %v (%T), want %v (%T)", it, e, i, refRow(rec, i), got, got, wants[i], wants[i])
					break
				}
			}
			rows += n
		}
		if out != nil {
			out.Release()
		}
		rec.Release()
	}
	t.Logf("%d expressions, %d rows compared, %d failed as the reference did", *refIterations, rows, errs)
}

func TestFilterReference(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	r := rand.New(rand.NewPCG(3, 4))
	g := exprGen{r: r}
	for it := range *refIterations / 2 {
		n := []int{0, 1, 7, 64, 100}[r.IntN(5)]
		rec := refRecord(r, mem, n)
		e := g.boolE(1 + r.IntN(2))
		f, err := NewFilter(mem, refSchema, e)
		if err != nil {
			rec.Release()
			t.Fatalf("%s: %v", e, err)
		}
		out, err := f.Apply(context.Background(), rec)
		var want []int64
		refFailed := false
		for i := range n {
			row := refRow(rec, i)
			v, rerr := refEval(e, row)
			refFailed = refFailed || rerr != nil
			if v == true {
				want = append(want, row["id"].(int64))
			}
		}
		if (err != nil) != refFailed {
			t.Errorf("iteration %d: %s: error %v, reference failed: %v", it, e, err, refFailed)
		}
		if err == nil {
			ids := out.Column(0).(*array.Int64)
			if ids.Len() != len(want) {
				t.Errorf("iteration %d: %s: kept %d rows, want %d", it, e, ids.Len(), len(want))
			} else {
				for k := range want {
					if ids.Value(k) != want[k] {
						t.Errorf("iteration %d: %s: row %d is id %d, want %d", it, e, k, ids.Value(k), want[k])
						break
					}
					// Every column is filtered alike.
					got, in := refRow(out, k), refRow(rec, int(want[k]))
					for name, v := range in {
						if !refEqual(v, got[name]) {
							t.Errorf("iteration %d: %s: kept row %d column %s is %v, want %v", it, e, k, name, got[name], v)
						}
					}
				}
			}
			if !out.Schema().Equal(rec.Schema()) {
				t.Errorf("filter changed the schema")
			}
			out.Release()
		}
		rec.Release()
	}
}
