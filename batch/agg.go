package batch

import "fmt"

// AggFunc is the function of an Agg. The constants are named AggCount,
// AggSum, … because Count, Sum, … are the constructors of Agg.
type AggFunc int

// The aggregate functions. Every one skips null values (SQL semantics); a
// group with no non-null value has a null Sum, Min, Max, Avg, First and Last
// and a zero Count and CountDistinct.
const (
	// AggCount counts the non-null values of the input; CountRows counts rows.
	AggCount AggFunc = iota + 1
	// AggSum adds integers as int64 (an overflow fails the merge) and floats as float64.
	AggSum
	// AggMin is the smallest value (NaN above every number), of the input's type.
	AggMin
	// AggMax is the largest value (NaN above every number), of the input's type.
	AggMax
	// AggAvg is the float64 sum/count of the non-null values.
	AggAvg
	// AggFirst is the first non-null value ever merged for the group.
	AggFirst
	// AggLast is the last non-null value merged for the group.
	AggLast
	// AggCountDistinct counts the distinct non-null values (floats: -0 = +0, all NaN equal).
	AggCountDistinct
)

// String is the function's lower-case name, as used in default output names.
func (f AggFunc) String() string {
	switch f {
	case AggCount:
		return "count"
	case AggSum:
		return "sum"
	case AggMin:
		return "min"
	case AggMax:
		return "max"
	case AggAvg:
		return "avg"
	case AggFirst:
		return "first"
	case AggLast:
		return "last"
	case AggCountDistinct:
		return "count_distinct"
	}
	return fmt.Sprintf("AggFunc(%d)", int(f))
}

// Agg is one aggregate as the user names it: a function (AggFunc) over an
// input expression, and the name of its output column. Build one with
// Count, CountRows, Sum, Min, Max, Avg, First, Last or CountDistinct; As
// names its output and PerBatch limits it to one batch's rows:
//
//	batch.Sum(batch.Col("amount_cents")).As("total_cents")
//	batch.Sum(batch.Mul(batch.Col("price"), batch.Col("qty"))).As("revenue")
//	batch.CountRows().PerBatch().As("payments")
//
// The input is evaluated on every row that reaches the aggregate, with the
// semantics of Expr (an integer overflow in it fails the batch, naming the
// expression and the row); the aggregate then skips the rows where it is
// null. An Agg is an immutable value.
type Agg struct {
	fn       AggFunc
	input    Expr // nil: count(*)
	name     string
	perBatch bool
}

// Count is the number of rows where e is not null.
func Count(e Expr) Agg { return Agg{fn: AggCount, input: e} }

// CountRows is count(*): the number of rows.
func CountRows() Agg { return Agg{fn: AggCount} }

// Sum of e: int64 for integers (an overflow fails the batch with
// ErrSumOverflow), float64 for floats.
func Sum(e Expr) Agg { return Agg{fn: AggSum, input: e} }

// Min of e, of e's type.
func Min(e Expr) Agg { return Agg{fn: AggMin, input: e} }

// Max of e, of e's type.
func Max(e Expr) Agg { return Agg{fn: AggMax, input: e} }

// Avg of e as float64.
func Avg(e Expr) Agg { return Agg{fn: AggAvg, input: e} }

// First non-null value of e, in event order across batches.
func First(e Expr) Agg { return Agg{fn: AggFirst, input: e} }

// Last non-null value of e, in event order across batches.
func Last(e Expr) Agg { return Agg{fn: AggLast, input: e} }

// CountDistinct is the number of distinct non-null values of e.
func CountDistinct(e Expr) Agg { return Agg{fn: AggCountDistinct, input: e} }

// As returns a copy of a whose output column is name, as As(e, name) names
// an expression's.
func (a Agg) As(name string) Agg { a.name = name; return a }

// PerBatch returns a copy of a that covers only the rows of the batch
// being processed. It keeps nothing in the state store (no state column),
// and a group untouched in the batch outputs 0 (counts) or null (the
// others).
func (a Agg) PerBatch() Agg { a.perBatch = true; return a }

// Func is the aggregate function.
func (a Agg) Func() AggFunc { return a.fn }

// Input is the aggregated expression, nil for CountRows.
func (a Agg) Input() Expr { return a.input }

// IsPerBatch reports whether a covers only the batch being processed (see
// PerBatch).
func (a Agg) IsPerBatch() bool { return a.perBatch }

// Name is the output column name: the one given to As, or Func(input) by
// default: "sum(amount)", "sum(Mul(price, qty))", "count(*)". Unless
// PerBatch, it also names the aggregate's column in the state store, so it
// is part of a query's checkpoint: a restart under another name is refused.
func (a Agg) Name() string {
	if a.name != "" {
		return a.name
	}
	in := "*"
	if a.input != nil {
		in = a.input.String()
	}
	return a.fn.String() + "(" + in + ")"
}

// ColumnOf reports whether e is a bare column reference, Col(name), and
// which column.
func ColumnOf(e Expr) (name string, ok bool) {
	c, ok := e.(colExpr)
	return c.name, ok
}
