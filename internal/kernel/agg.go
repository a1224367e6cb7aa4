package kernel

import "github.com/onceflow/onceflow/batch"

// Agg is one aggregate as a GroupBy computes it: Func over the input
// column Column, written to the output (and state) column Name. The user's
// batch.Agg, whose input may be an expression, is compiled into it: the
// engine evaluates an expression input into a column of its own first.
type Agg struct {
	Func batch.AggFunc
	// Column is the input column; "" for count(*), which counts rows.
	Column string
	// Name is the output column and, unless PerBatch, the state column (or
	// the prefix of the state columns: avg keeps Name.sum and Name.count).
	Name string
	// PerBatch makes the aggregate cover only the rows merged since the
	// last ClearChanges (this batch). It is not kept in the state store,
	// so it has no column in StateSchema, and a group untouched in this
	// batch outputs 0 (counts) or null (the others).
	PerBatch bool
}

// FromAgg is the kernel form of a when its input is a bare column
// (batch.Col) or a is batch.CountRows: the column, the output name
// (batch.Agg.Name) and the per-batch flag. ok is false for an input that is
// another expression, which the caller evaluates into a column of its own
// first.
func FromAgg(a batch.Agg) (k Agg, ok bool) {
	k = Agg{Func: a.Func(), Name: a.Name(), PerBatch: a.IsPerBatch()}
	if in := a.Input(); in != nil {
		if k.Column, ok = batch.ColumnOf(in); !ok {
			return Agg{}, false
		}
	}
	return k, true
}

// countsRows reports whether a is count(*).
func (a Agg) countsRows() bool { return a.Func == batch.AggCount && a.Column == "" }
