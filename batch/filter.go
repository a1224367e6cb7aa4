package batch

import (
	"context"
	"fmt"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
)

// Filter keeps the rows of each record batch where a boolean predicate is
// true; a null predicate drops the row (SQL WHERE). Bound once by NewFilter,
// safe for concurrent Apply calls, no Release needed.
type Filter struct {
	mem  memory.Allocator
	in   *arrow.Schema
	pred node
}

// NewFilter binds pred to the input schema in; pred must be boolean. mem
// allocates the filtered columns.
func NewFilter(mem memory.Allocator, in *arrow.Schema, pred Expr) (*Filter, error) {
	if pred == nil {
		return nil, &ExprError{Row: -1, Err: ErrType, msg: "batch: filter has no predicate"}
	}
	n, err := pred.bind(newBinder(in))
	if err != nil {
		return nil, err
	}
	switch t := n.dtype(); {
	case isNull(t):
		n = &litNode{sc: scalar.MakeNullScalar(boolT)}
	case t.ID() != arrow.BOOL:
		return nil, bindErr(ErrType, pred.String(), fmt.Sprintf("filter predicate is %s, want bool", t))
	}
	return &Filter{mem: mem, in: in, pred: n}, nil
}

// Apply returns the rows of rec where the predicate is true, as a record the
// caller releases. When every row passes, rec itself is returned (retained);
// when none does, an empty slice of rec.
func (f *Filter) Apply(ctx context.Context, rec arrow.RecordBatch) (arrow.RecordBatch, error) {
	if err := checkSchema(f.in, rec); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ec := &evalCtx{ctx: withMem(ctx, f.mem), mem: f.mem, rec: rec, n: int(rec.NumRows())}
	v, err := f.pred.eval(ec)
	if err != nil {
		return nil, fmt.Errorf("filter: %w", err)
	}
	defer v.release()
	if v.arr == nil {
		if v.sc.IsValid() && v.sc.(*scalar.Boolean).Value {
			rec.Retain()
			return rec, nil
		}
		return rec.NewSlice(0, 0), nil
	}
	kept := trueCount(v.arr)
	switch kept {
	case ec.n:
		rec.Retain()
		return rec, nil
	case 0:
		return rec.NewSlice(0, 0), nil
	}
	buf, idx := newFixedUninit[int32](f.mem, kept)
	d := v.arr.Data()
	vals, off, ok := d.Buffers()[1].Bytes(), d.Offset(), validity(v.arr)
	k := 0
	for i := range ec.n {
		if ok.valid(i) && bitutil.BitIsSet(vals, off+i) {
			idx[k] = int32(i)
			k++
		}
	}
	idxArr := makeArray(arrow.PrimitiveTypes.Int32, kept, nil, buf)
	defer idxArr.Release()
	cols := make([]arrow.Array, 0, rec.NumCols())
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for i, c := range rec.Columns() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out, err := takeRows(ctx, f.mem, c, idx, idxArr)
		if err != nil {
			return nil, fmt.Errorf("filter column %s: %w", rec.ColumnName(i), err)
		}
		cols = append(cols, out)
	}
	return array.NewRecordBatch(rec.Schema(), cols, int64(kept)), nil
}

// trueCount counts the rows of a boolean column that are true and not null.
func trueCount(a arrow.Array) int {
	if a.Len() == 0 {
		return 0
	}
	d := a.Data()
	vals := d.Buffers()[1].Bytes()
	if a.NullN() == 0 {
		return bitutil.CountSetBits(vals, d.Offset(), d.Len())
	}
	both := make([]byte, bitutil.BytesForBits(int64(d.Len())))
	bitutil.BitmapAnd(vals, d.Buffers()[0].Bytes(), int64(d.Offset()), int64(d.Offset()), both, 0, int64(d.Len()))
	return bitutil.CountSetBits(both, 0, d.Len())
}
