package kernel

import "github.com/onceflow/onceflow/batch"

// aggOf is the kernel form of batch's aggregate f over column col ("" or
// "*": count(*)), named as batch names it by default: f(col).
func aggOf(f batch.AggFunc, col string) Agg {
	if col == "*" {
		col = ""
	}
	name := col
	if name == "" {
		name = "*"
	}
	return Agg{Func: f, Column: col, Name: f.String() + "(" + name + ")"}
}

func sumOf(col string) Agg      { return aggOf(batch.AggSum, col) }
func countOf(col string) Agg    { return aggOf(batch.AggCount, col) }
func minOf(col string) Agg      { return aggOf(batch.AggMin, col) }
func maxOf(col string) Agg      { return aggOf(batch.AggMax, col) }
func avgOf(col string) Agg      { return aggOf(batch.AggAvg, col) }
func firstOf(col string) Agg    { return aggOf(batch.AggFirst, col) }
func lastOf(col string) Agg     { return aggOf(batch.AggLast, col) }
func distinctOf(col string) Agg { return aggOf(batch.AggCountDistinct, col) }

// as returns a copy of a whose output column is name.
func (a Agg) as(name string) Agg { a.Name = name; return a }

// perBatch returns a copy of a that covers only this batch.
func (a Agg) perBatch() Agg { a.PerBatch = true; return a }
