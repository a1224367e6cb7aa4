package kernel

import (
	"context"
	"fmt"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/onceflow/onceflow/batch"
)

// WindowAssigner assigns each row to its event-time windows: tumbling
// (slide == size) or sliding (slide < size, each row in ceil(size/slide)
// windows at most). It appends window_start and window_end columns of the
// event-time column's type; a row in several windows is repeated once per
// window, in window order. Windows are aligned to the Unix epoch, as in
// Spark: [k·slide, k·slide+size).
type WindowAssigner struct {
	mem         memory.Allocator
	col         string
	idx         int
	unit        arrow.TimeUnit
	size, slide int64 // in the column's unit
	out         *arrow.Schema
}

// NewWindowAssigner binds a window over column col of in, which must be a
// timestamp column.
func NewWindowAssigner(mem memory.Allocator, in *arrow.Schema, col string, size, slide time.Duration) (*WindowAssigner, error) {
	idx := in.FieldIndices(col)
	if len(idx) != 1 {
		return nil, fmt.Errorf("%w: window column %q is not a column of %s", batch.ErrWindow, col, in)
	}
	f := in.Field(idx[0])
	ts, ok := f.Type.(*arrow.TimestampType)
	if !ok {
		return nil, fmt.Errorf("%w: window column %q is %s, not a timestamp", batch.ErrWindow, col, f.Type)
	}
	if size <= 0 || slide <= 0 || slide > size {
		return nil, fmt.Errorf("%w: window over %q: size %s and slide %s must be positive with slide <= size", batch.ErrWindow, col, size, slide)
	}
	per := int64(ts.Unit.Multiplier())
	if size.Nanoseconds()%per != 0 || slide.Nanoseconds()%per != 0 {
		return nil, fmt.Errorf("%w: window over %q: size %s and slide %s are finer than the column's unit %s", batch.ErrWindow, col, size, slide, ts.Unit)
	}
	if len(in.FieldIndices(batch.WindowStart)) > 0 || len(in.FieldIndices(batch.WindowEnd)) > 0 {
		return nil, fmt.Errorf("%w: window over %q: the input already has a %s or %s column", batch.ErrWindow, col, batch.WindowStart, batch.WindowEnd)
	}
	fields := append(append([]arrow.Field(nil), in.Fields()...),
		arrow.Field{Name: batch.WindowStart, Type: ts}, arrow.Field{Name: batch.WindowEnd, Type: ts})
	return &WindowAssigner{
		mem: mem, col: col, idx: idx[0], unit: ts.Unit,
		size: size.Nanoseconds() / per, slide: slide.Nanoseconds() / per,
		out: arrow.NewSchema(fields, nil),
	}, nil
}

// Schema is the output schema: the input columns, window_start, window_end.
func (w *WindowAssigner) Schema() *arrow.Schema { return w.out }

// Apply assigns rec's rows to windows. A null event time fails naming the
// column and row: a row with no time belongs to no window, and dropping it
// silently would lose it.
func (w *WindowAssigner) Apply(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	col := rec.Column(w.idx).(*array.Timestamp)
	n := col.Len()
	vals := col.TimestampValues()
	if col.NullN() > 0 {
		for i := 0; i < n; i++ {
			if col.IsNull(i) {
				return nil, fmt.Errorf("batch: window over %q: row %d has no event time (null)", w.col, i)
			}
		}
	}
	k := (w.size + w.slide - 1) / w.slide
	starts := make([]int64, 0, n*int(k))
	var take []int32
	if k > 1 {
		take = make([]int32, 0, n*int(k))
	}
	for i := 0; i < n; i++ {
		t := int64(vals[i])
		last := floorDiv(t, w.slide) * w.slide
		if k == 1 {
			starts = append(starts, last)
			continue
		}
		// Oldest window first.
		for j := k - 1; j >= 0; j-- {
			s := last - j*w.slide
			if s+w.size > t {
				starts = append(starts, s)
				take = append(take, int32(i))
			}
		}
	}
	sb := array.NewTimestampBuilder(w.mem, w.out.Field(w.out.NumFields()-2).Type.(*arrow.TimestampType))
	eb := array.NewTimestampBuilder(w.mem, w.out.Field(w.out.NumFields()-1).Type.(*arrow.TimestampType))
	defer sb.Release()
	defer eb.Release()
	sb.Reserve(len(starts))
	eb.Reserve(len(starts))
	for _, s := range starts {
		sb.UnsafeAppend(arrow.Timestamp(s))
		eb.UnsafeAppend(arrow.Timestamp(s + w.size))
	}
	startArr, endArr := sb.NewArray(), eb.NewArray()
	defer startArr.Release()
	defer endArr.Release()
	cols := make([]arrow.Array, 0, rec.NumCols()+2)
	if take == nil {
		for _, c := range rec.Columns() {
			c.Retain()
			cols = append(cols, c)
		}
	} else {
		ib := array.NewInt32Builder(w.mem)
		ib.AppendValues(take, nil)
		idx := ib.NewArray()
		ib.Release()
		defer idx.Release()
		cctx := compute.WithAllocator(ctx, w.mem)
		for _, c := range rec.Columns() {
			t, err := compute.TakeArray(cctx, c, idx)
			if err != nil {
				for _, done := range cols {
					done.Release()
				}
				return nil, fmt.Errorf("batch: window over %q: %w", w.col, err)
			}
			cols = append(cols, t)
		}
	}
	startArr.Retain()
	endArr.Retain()
	cols = append(cols, startArr, endArr)
	out := array.NewRecordBatch(w.out, cols, int64(len(starts)))
	for _, c := range cols {
		c.Release()
	}
	return out, nil
}

// EventTimesMillis returns column idx of rec (a timestamp column) as Unix
// milliseconds, floor-rounded; nulls are reported as ok=false entries.
func EventTimesMillis(rec arrow.RecordBatch, idx int) (ms []int64, valid []bool, err error) {
	col, ok := rec.Column(idx).(*array.Timestamp)
	if !ok {
		return nil, nil, fmt.Errorf("batch: event-time column %q is %s, not a timestamp", rec.ColumnName(idx), rec.Column(idx).DataType())
	}
	unit := col.DataType().(*arrow.TimestampType).Unit
	vals := col.TimestampValues()
	ms = make([]int64, len(vals))
	valid = make([]bool, len(vals))
	for i, v := range vals {
		valid[i] = col.IsValid(i)
		ms[i] = TimestampMillis(int64(v), unit)
	}
	return ms, valid, nil
}

// TimestampMillis converts a timestamp value of unit to Unix milliseconds,
// rounding down (so a time before 1970 stays before its millisecond).
func TimestampMillis(v int64, unit arrow.TimeUnit) int64 {
	switch unit {
	case arrow.Second:
		return v * 1000
	case arrow.Millisecond:
		return v
	}
	return floorDiv(v, int64(time.Millisecond)/int64(unit.Multiplier()))
}

// FilterRows returns the rows of rec whose keep entry is true.
func FilterRows(ctx context.Context, mem memory.Allocator, rec arrow.RecordBatch, keep []bool) (arrow.RecordBatch, error) {
	all := true
	for _, k := range keep {
		if !k {
			all = false
			break
		}
	}
	if all {
		rec.Retain()
		return rec, nil
	}
	bb := array.NewBooleanBuilder(mem)
	bb.AppendValues(keep, nil)
	mask := bb.NewArray()
	bb.Release()
	defer mask.Release()
	return compute.FilterRecordBatch(compute.WithAllocator(ctx, mem), rec, mask, compute.DefaultFilterOptions())
}

// floorDiv is a / b rounded toward negative infinity (b > 0), so a time
// before 1970 falls in the window, or millisecond, that holds it.
func floorDiv(a, b int64) int64 {
	q := a / b
	if (a%b != 0) && ((a < 0) != (b < 0)) {
		q--
	}
	return q
}
