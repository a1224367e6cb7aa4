package batch

import "fmt"

// AggFunc is an aggregate function of a GroupBy. The constants are named
// AggCount, AggSum, … because Count, Sum, … are the constructors of Agg.
type AggFunc int

// The aggregate functions. Every one skips null values (SQL semantics); a
// group with no non-null value has a null Sum, Min, Max, Avg, First and Last
// and a zero Count and CountDistinct.
const (
	// AggCount counts the non-null values of Column; Column "" or "*" counts rows.
	AggCount AggFunc = iota + 1
	// AggSum adds integers as int64 (an overflow fails the merge) and floats as float64.
	AggSum
	// AggMin is the smallest value (NaN above every number), of the column's type.
	AggMin
	// AggMax is the largest value (NaN above every number), of the column's type.
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

// Agg is one aggregate of a GroupBy: Func over Column, output as As.
type Agg struct {
	Func   AggFunc
	Column string
	// As is the output column name; "" means Func(Column), e.g. "sum(amount)"
	// or "count(*)".
	As string
	// PerBatch makes the aggregate cover only the rows merged since the last
	// ClearChanges (this batch). It is not kept in the state store, so it
	// has no column in StateSchema, and a group untouched in this batch
	// outputs 0 (counts) or null (the others).
	PerBatch bool
}

// Count is the number of non-null values of col; "" or "*" counts rows.
func Count(col string) Agg { return Agg{Func: AggCount, Column: col} }

// Sum of col: int64 for integer columns (overflow fails the merge), float64 for floats.
func Sum(col string) Agg { return Agg{Func: AggSum, Column: col} }

// Min of col, of col's type.
func Min(col string) Agg { return Agg{Func: AggMin, Column: col} }

// Max of col, of col's type.
func Max(col string) Agg { return Agg{Func: AggMax, Column: col} }

// Avg of col as float64.
func Avg(col string) Agg { return Agg{Func: AggAvg, Column: col} }

// First non-null value of col, in event order across batches.
func First(col string) Agg { return Agg{Func: AggFirst, Column: col} }

// Last non-null value of col, in event order across batches.
func Last(col string) Agg { return Agg{Func: AggLast, Column: col} }

// CountDistinct is the number of distinct non-null values of col.
func CountDistinct(col string) Agg { return Agg{Func: AggCountDistinct, Column: col} }

// Named returns a copy of a whose output column is name.
func (a Agg) Named(name string) Agg { a.As = name; return a }

// ThisBatch returns a copy of a that covers only this batch (see PerBatch).
func (a Agg) ThisBatch() Agg { a.PerBatch = true; return a }

// Name is the output column name: As, or Func(Column) by default.
func (a Agg) Name() string {
	if a.As != "" {
		return a.As
	}
	col := a.Column
	if a.Func == AggCount && (col == "" || col == "*") {
		col = "*"
	}
	return a.Func.String() + "(" + col + ")"
}
