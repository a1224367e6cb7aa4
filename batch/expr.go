package batch

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
)

// Expr is an expression over the columns of a record batch. Build one with
// Col, Lit and the functions of this package, then bind it to a schema with
// NewProjection or NewFilter, which type-check it once. An Expr is an
// immutable value: it may be shared between projections and goroutines.
//
// Evaluation is columnar: each node computes a whole column (or a constant)
// with an arrow compute kernel or a typed loop over the Arrow buffers; no
// row is ever evaluated through an interface. The semantics are SQL's:
//   - a null operand gives null, except in And/Or (three-valued), IsNull,
//     IsNotNull, In, If (a null condition takes the else branch) and
//     Coalesce;
//   - If evaluates each branch only on the rows that take it, and Coalesce
//     an argument only on the rows all earlier ones left null, so
//     If(Eq(qty, 0), Lit(0), Div(amount, qty)) never divides by zero; every
//     other function evaluates all its arguments on all rows;
//   - a data error never yields a partial result: Apply fails with an
//     *ExprError naming the expression, the first bad row of the record
//     batch and its value(s).
//
// Dictionary-encoded columns are decoded inside functions (a bare Col passes
// them through). Decimal, list and struct columns pass through bare Col and
// Cast but no function takes them.
type Expr interface {
	// String prints the expression as its constructor calls, with column
	// names bare and strings single-quoted: Add(amount, Mul(fee, 2)).
	String() string

	bind(b *binder) (node, error)
}

// Named is an expression with the name of the column it produces.
type Named struct {
	Name string
	Expr Expr
}

// As names the column that e produces in a projection.
func As(e Expr, name string) Named { return Named{Name: name, Expr: e} }

type colExpr struct{ name string }

// Col refers to the input column called name. Binding fails when the input
// schema has no such column.
func Col(name string) Expr { return colExpr{name: name} }

func (c colExpr) String() string { return c.name }

type litExpr struct{ v any }

// Lit is a constant. v is one of nil (a null that takes the type of the other
// operand), bool, int, int32, int64, float64, string, time.Time (a
// timestamp[us, UTC]) or time.Duration (a duration[us]); any other type fails
// at bind. Constants are not materialised per row: kernels receive them as
// Arrow scalars.
func Lit(v any) Expr {
	if i, ok := v.(int); ok {
		v = int64(i)
	}
	return litExpr{v: v}
}

func (l litExpr) String() string {
	switch v := l.v.(type) {
	case nil:
		return "null"
	case string:
		return quote(v)
	case time.Time:
		return "timestamp " + quote(v.UTC().Format(time.RFC3339Nano))
	case time.Duration:
		return "duration " + quote(v.String())
	case float64:
		return strconv.FormatFloat(v, 'g', -1, 64)
	default:
		return fmt.Sprint(v)
	}
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

type op int

const (
	opAdd op = iota
	opSub
	opMul
	opDiv
	opMod
	opNeg
	opEq
	opNe
	opLt
	opLe
	opGt
	opGe
	opAnd
	opOr
	opNot
	opIsNull
	opIsNotNull
	opIn
	opCast
	opIf
	opCoalesce
	opUpper
	opLower
	opConcat
	opSubstr
	opLength
	opStartsWith
	opContains
	opDateTrunc
	opYear
	opMonth
	opDay
	opHour
	opFormatTime
	opParseTime
)

// String is the constructor's name.
func (o op) String() string {
	switch o {
	case opAdd:
		return "Add"
	case opSub:
		return "Sub"
	case opMul:
		return "Mul"
	case opDiv:
		return "Div"
	case opMod:
		return "Mod"
	case opNeg:
		return "Neg"
	case opEq:
		return "Eq"
	case opNe:
		return "Ne"
	case opLt:
		return "Lt"
	case opLe:
		return "Le"
	case opGt:
		return "Gt"
	case opGe:
		return "Ge"
	case opAnd:
		return "And"
	case opOr:
		return "Or"
	case opNot:
		return "Not"
	case opIsNull:
		return "IsNull"
	case opIsNotNull:
		return "IsNotNull"
	case opIn:
		return "In"
	case opCast:
		return "Cast"
	case opIf:
		return "If"
	case opCoalesce:
		return "Coalesce"
	case opUpper:
		return "Upper"
	case opLower:
		return "Lower"
	case opConcat:
		return "Concat"
	case opSubstr:
		return "Substr"
	case opLength:
		return "Length"
	case opStartsWith:
		return "StartsWith"
	case opContains:
		return "Contains"
	case opDateTrunc:
		return "DateTrunc"
	case opYear:
		return "Year"
	case opMonth:
		return "Month"
	case opDay:
		return "Day"
	case opHour:
		return "Hour"
	case opFormatTime:
		return "FormatTime"
	case opParseTime:
		return "ParseTime"
	}
	return "op(" + strconv.Itoa(int(o)) + ")"
}

// callExpr is every expression but a column or a constant.
type callExpr struct {
	op   op
	args []Expr

	to    arrow.DataType // Cast
	str   string         // StartsWith, Contains prefix; DateTrunc unit; FormatTime, ParseTime layout
	start int            // Substr
	n     int            // Substr length
	vals  []any          // In
}

func (c *callExpr) String() string {
	var sb strings.Builder
	name := c.op.String()
	sb.WriteString(name)
	sb.WriteByte('(')
	sep := func() {
		if sb.Len() > len(name)+1 {
			sb.WriteString(", ")
		}
	}
	if c.op == opDateTrunc {
		sb.WriteString(quote(c.str))
	}
	for _, a := range c.args {
		sep()
		sb.WriteString(a.String())
	}
	switch c.op {
	case opCast:
		sep()
		sb.WriteString(c.to.String())
	case opSubstr:
		sep()
		fmt.Fprintf(&sb, "%d, %d", c.start, c.n)
	case opStartsWith, opContains, opFormatTime, opParseTime:
		sep()
		sb.WriteString(quote(c.str))
	case opIn:
		for _, v := range c.vals {
			sep()
			sb.WriteString(Lit(v).String())
		}
	}
	sb.WriteByte(')')
	return sb.String()
}

func call(o op, args ...Expr) *callExpr { return &callExpr{op: o, args: args} }

// Add is a + b. Integers of any width add as int64 and an overflow is an
// error (ErrOverflow), never a wrap; with a float operand the result is
// float64; timestamp + duration (either order) is a timestamp, duration +
// duration a duration.
func Add(a, b Expr) Expr { return call(opAdd, a, b) }

// Sub is a - b, typed like Add; timestamp - duration is a timestamp and
// timestamp - timestamp a duration.
func Sub(a, b Expr) Expr { return call(opSub, a, b) }

// Mul is a * b: int64 with overflow check, or float64.
func Mul(a, b Expr) Expr { return call(opMul, a, b) }

// Div is a / b. Integers divide as int64 truncating toward zero (SQL);
// with a float operand the result is float64. A zero divisor on a row where
// both operands are non-null fails with ErrDivideByZero (SQL standard; the
// result is never a silent null or infinity), and MinInt64 / -1 fails with
// ErrOverflow.
func Div(a, b Expr) Expr { return call(opDiv, a, b) }

// Mod is the remainder of a / b with the sign of a (SQL and Go %); int64 for
// integers, float64 (math.Mod) with a float operand. A zero divisor fails like
// Div.
func Mod(a, b Expr) Expr { return call(opMod, a, b) }

// Neg is -a, for numbers (int64 with overflow check, float64) and durations.
func Neg(a Expr) Expr { return call(opNeg, a) }

// Eq is a = b. Comparisons accept two numbers of any widths (compared as
// int64, or float64 when one is a float), two strings, two booleans, two
// timestamps (of any units; a timestamp without a time zone is taken as UTC),
// two durations. A null operand gives null.
func Eq(a, b Expr) Expr { return call(opEq, a, b) }

// Ne is a <> b, typed like Eq.
func Ne(a, b Expr) Expr { return call(opNe, a, b) }

// Lt is a < b, typed like Eq.
func Lt(a, b Expr) Expr { return call(opLt, a, b) }

// Le is a <= b, typed like Eq.
func Le(a, b Expr) Expr { return call(opLe, a, b) }

// Gt is a > b, typed like Eq.
func Gt(a, b Expr) Expr { return call(opGt, a, b) }

// Ge is a >= b, typed like Eq.
func Ge(a, b Expr) Expr { return call(opGe, a, b) }

// And is the SQL three-valued a AND b: false if either is false, else null
// if either is null, else true.
func And(a, b Expr) Expr { return call(opAnd, a, b) }

// Or is the SQL three-valued a OR b: true if either is true, else null if
// either is null, else false.
func Or(a, b Expr) Expr { return call(opOr, a, b) }

// Not is NOT a; null stays null.
func Not(a Expr) Expr { return call(opNot, a) }

// IsNull is true where a is null; never null itself.
func IsNull(a Expr) Expr { return call(opIsNull, a) }

// IsNotNull is true where a is not null; never null itself.
func IsNotNull(a Expr) Expr { return call(opIsNotNull, a) }

// In is a IN (vals...) with SQL semantics: true on a match; otherwise null if
// a is null or vals holds a nil, else false. vals are literals as Lit takes
// them and must convert to the type of a.
func In(a Expr, vals ...any) Expr {
	c := call(opIn, a)
	c.vals = append([]any(nil), vals...)
	return c
}

// Cast converts a to type to with arrow's safe cast: no integer overflow, no
// float or time truncation, strings must parse. A value that does not convert
// fails with ErrConvert naming the expression, the first bad row and its
// value.
func Cast(a Expr, to arrow.DataType) Expr {
	c := call(opCast, a)
	c.to = to
	return c
}

// If is CASE WHEN cond THEN then ELSE els END: a null cond takes els. then
// and els must have a common type (numbers widen as in Add, a nil literal
// takes the other's type). Each branch is evaluated only on the rows that
// take it, so it may guard a division or a cast.
func If(cond, then, els Expr) Expr { return call(opIf, cond, then, els) }

// Coalesce is the first non-null of es on each row, or null. The arguments
// must have a common type; an argument is evaluated only on the rows that
// all earlier ones left null.
func Coalesce(es ...Expr) Expr { return call(opCoalesce, es...) }

// Upper upper-cases a string (Unicode; ASCII strings take a fast path).
func Upper(a Expr) Expr { return call(opUpper, a) }

// Lower lower-cases a string.
func Lower(a Expr) Expr { return call(opLower, a) }

// Concat joins strings; the result is null where any argument is null (the
// SQL || operator). Arguments must be strings: Cast others first.
func Concat(es ...Expr) Expr { return call(opConcat, es...) }

// Substr is SQL SUBSTRING(a FROM start FOR length): characters (not bytes)
// at 1-based positions p with start <= p < start+length. A start below 1
// shortens the result as in SQL; length must not be negative.
func Substr(a Expr, start, length int) Expr {
	c := call(opSubstr, a)
	c.start, c.n = start, length
	return c
}

// Length is the number of characters (Unicode code points) of a string, as
// int64.
func Length(a Expr) Expr { return call(opLength, a) }

// StartsWith is true where string a begins with prefix.
func StartsWith(a Expr, prefix string) Expr {
	c := call(opStartsWith, a)
	c.str = prefix
	return c
}

// Contains is true where string a contains sub.
func Contains(a Expr, sub string) Expr {
	c := call(opContains, a)
	c.str = sub
	return c
}

// DateTrunc truncates a timestamp down to the start of its "second",
// "minute", "hour", "day", "month" or "year" (in UTC). Time functions accept
// timestamps of any unit whose time zone is empty (taken as UTC) or UTC.
func DateTrunc(unit string, a Expr) Expr {
	c := call(opDateTrunc, a)
	c.str = unit
	return c
}

// Year is the year of a timestamp, as int64.
func Year(a Expr) Expr { return call(opYear, a) }

// Month is the month (1-12) of a timestamp, as int64.
func Month(a Expr) Expr { return call(opMonth, a) }

// Day is the day of the month (1-31) of a timestamp, as int64.
func Day(a Expr) Expr { return call(opDay, a) }

// Hour is the hour (0-23) of a timestamp, as int64.
func Hour(a Expr) Expr { return call(opHour, a) }

// FormatTime formats a timestamp as a string with a Go time layout, in UTC:
// FormatTime(Col("ts"), "2006-01-02") gives the value of a Hive partition
// column day=2026-11-30.
func FormatTime(a Expr, layout string) Expr {
	c := call(opFormatTime, a)
	c.str = layout
	return c
}

// ParseTime parses strings with a Go time layout into timestamp[us, UTC]
// (a layout without a zone reads UTC). A value that does not parse fails with
// ErrConvert naming the row and the value.
func ParseTime(a Expr, layout string) Expr {
	c := call(opParseTime, a)
	c.str = layout
	return c
}
