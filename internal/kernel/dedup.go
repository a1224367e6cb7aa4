package kernel

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
)

// The running and this-batch counts of a deduplication's keys: columns of
// its GroupBy's output and, the running one, of its state (part of the
// checkpoint format).
const (
	dedupCountCol      = "__onceflow_n"
	dedupBatchCountCol = "__onceflow_batch_n"
)

// Dedup runs a deduplication as a GroupBy over its key columns: per key a
// running count, this batch's count and the first value of every other
// column. A key is new in a batch when its two counts are equal; its row
// is then the first row seen with it, in the input's columns.
//
// Lifecycle: NewDedup gives the GroupBy's aggregates; build the GroupBy
// with them, hand its output schema to Bind, then per batch FirstSeen
// turns the GroupBy's Output(true) into the rows to emit.
type Dedup struct {
	in    *arrow.Schema
	aggs  []Agg
	cols  []int // output column of each input column
	total int   // output column of the running count
	batch int   // output column of this batch's count
}

// NewDedup is the deduplication of records of schema in by the key columns
// keys (at least one).
func NewDedup(in *arrow.Schema, keys []string) (*Dedup, error) {
	if len(keys) == 0 {
		return nil, fmt.Errorf("deduplication needs at least one key column")
	}
	isKey := map[string]bool{}
	for _, k := range keys {
		isKey[k] = true
	}
	d := &Dedup{in: in, aggs: []Agg{
		{Func: batch.AggCount, Name: dedupCountCol},
		{Func: batch.AggCount, Name: dedupBatchCountCol, PerBatch: true},
	}}
	for _, f := range in.Fields() {
		if !isKey[f.Name] {
			d.aggs = append(d.aggs, Agg{Func: batch.AggFirst, Column: f.Name, Name: f.Name})
		}
	}
	return d, nil
}

// Aggs are the aggregates of the deduplication's GroupBy.
func (d *Dedup) Aggs() []Agg { return d.aggs }

// Bind finds the input's columns in out, the output schema of the GroupBy
// built with Aggs. A column that cannot pass through the GroupBy as it is
// (a type first() does not keep) fails naming it.
func (d *Dedup) Bind(out *arrow.Schema) error {
	d.cols = d.cols[:0]
	for _, f := range d.in.Fields() {
		idx := out.FieldIndices(f.Name)
		if len(idx) != 1 || !arrow.TypeEqual(out.Field(idx[0]).Type, f.Type) {
			return fmt.Errorf("column %q of type %s cannot be carried through deduplication", f.Name, f.Type)
		}
		d.cols = append(d.cols, idx[0])
	}
	d.total, d.batch = out.FieldIndices(dedupCountCol)[0], out.FieldIndices(dedupBatchCountCol)[0]
	return nil
}

// FirstSeen returns the rows of o (the GroupBy's Output(true)) whose keys
// the batch saw first, as rows of the input schema. The caller releases
// the result.
func (d *Dedup) FirstSeen(ctx context.Context, mem memory.Allocator, o arrow.RecordBatch) (arrow.RecordBatch, error) {
	total := o.Column(d.total).(*array.Int64)
	inBatch := o.Column(d.batch).(*array.Int64)
	keep := make([]bool, o.NumRows())
	for i := range keep {
		keep[i] = total.Value(i) == inBatch.Value(i)
	}
	f, err := FilterRows(ctx, mem, o, keep)
	if err != nil {
		return nil, err
	}
	defer f.Release()
	cols := make([]arrow.Array, len(d.cols))
	for i, c := range d.cols {
		cols[i] = f.Column(c)
	}
	return array.NewRecordBatch(d.in, cols, f.NumRows()), nil
}
