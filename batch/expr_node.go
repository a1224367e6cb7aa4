package batch

import (
	"context"
	"fmt"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
)

// node is a bound, type-checked expression.
type node interface {
	dtype() arrow.DataType
	// eval computes the node over ec.rec. The caller releases the value.
	eval(ec *evalCtx) (value, error)
}

// evalCtx is what one Apply call evaluates against: the record batch, or
// (inside If and Coalesce) the subset of a parent context's rows that a
// branch is evaluated on, so that a branch a row does not take cannot fail
// on that row.
type evalCtx struct {
	ctx context.Context // carries mem for the compute kernels
	mem memory.Allocator
	rec arrow.RecordBatch // nil in a subset
	n   int

	parent *evalCtx
	take   arrow.Array         // int32 indices of the subset's rows in the parent
	idx    []int32             // take's values
	rows   []int32             // row of the record batch of each subset row
	cols   map[int]arrow.Array // the parent's columns filtered by mask
}

// column returns column i of the record batch, restricted to ec's rows. The
// reference is borrowed: ec owns it.
func (ec *evalCtx) column(i int) (arrow.Array, error) {
	if ec.parent == nil {
		return ec.rec.Column(i), nil
	}
	if a, ok := ec.cols[i]; ok {
		return a, nil
	}
	pa, err := ec.parent.column(i)
	if err != nil {
		return nil, err
	}
	// Take, not arrow's filter: arrow-go v18.8.0's filter of a sliced
	// boolean array reads the wrong bits.
	a, err := takeRows(ec.ctx, ec.mem, pa, ec.idx, ec.take)
	if err != nil {
		return nil, fmt.Errorf("batch: select rows of column %d: %w", i, err)
	}
	ec.cols[i] = a
	return a, nil
}

// origRow is the row of the record batch that row i of ec is.
func (ec *evalCtx) origRow(i int) int {
	if ec.rows == nil {
		return i
	}
	return int(ec.rows[i])
}

// subset is the context of the rows i of ec where pick[i] == want (count of
// them); release it.
func (ec *evalCtx) subset(pick []int8, want int8, count int) *evalCtx {
	buf, idx := newFixed[int32](ec.mem, count)
	rows := make([]int32, 0, count)
	for i, p := range pick {
		if p == want {
			idx[len(rows)] = int32(i)
			rows = append(rows, int32(ec.origRow(i)))
		}
	}
	return &evalCtx{
		ctx: ec.ctx, mem: ec.mem, n: count,
		parent: ec, take: makeArray(arrow.PrimitiveTypes.Int32, count, nil, buf), idx: idx, rows: rows, cols: map[int]arrow.Array{},
	}
}

func (ec *evalCtx) release() {
	if ec.parent == nil {
		return
	}
	ec.take.Release()
	for _, a := range ec.cols {
		a.Release()
	}
}

// value is a whole column or a constant: exactly one of arr and sc is set.
// arr is an owned reference; sc is never released (constants are built on
// the Go heap at bind time, and kernel results holding buffers are turned
// into arrays by fromDatum).
type value struct {
	arr arrow.Array
	sc  scalar.Scalar
}

func (v value) release() {
	if v.arr != nil {
		v.arr.Release()
	}
}

func (v value) datum() compute.Datum {
	if v.arr != nil {
		return compute.NewDatumWithoutOwning(v.arr)
	}
	return &compute.ScalarDatum{Value: v.sc}
}

// slice returns rows [i, j) of v (a constant stays itself); release it.
func (v value) slice(i, j int) value {
	if v.arr == nil {
		return v
	}
	return value{arr: array.NewSlice(v.arr, int64(i), int64(j))}
}

// array returns v as an array of n rows, repeating a constant; release it.
func (v value) array(mem memory.Allocator, n int) (arrow.Array, error) {
	if v.arr != nil {
		v.arr.Retain()
		return v.arr, nil
	}
	return scalar.MakeArrayFromScalar(v.sc, n, mem)
}

// str prints row i of v for an error message.
func (v value) str(i int) string {
	if v.arr == nil {
		if v.sc.IsValid() && isString(v.sc.DataType()) {
			return quote(v.sc.String())
		}
		return v.sc.String()
	}
	if v.arr.IsNull(i) {
		return "null"
	}
	s := v.arr.ValueStr(i)
	if isString(v.arr.DataType()) {
		return quote(s)
	}
	return s
}

// fromDatum turns a kernel result into a value, releasing d.
func fromDatum(ec *evalCtx, d compute.Datum) (value, error) {
	switch d := d.(type) {
	case *compute.ArrayDatum:
		arr := d.MakeArray()
		d.Release()
		return value{arr: arr}, nil
	case *compute.ScalarDatum:
		if r, ok := d.Value.(scalar.Releasable); ok {
			// A constant holding allocator memory: make it a column so that
			// it is released like one.
			arr, err := scalar.MakeArrayFromScalar(d.Value, ec.n, ec.mem)
			r.Release()
			return value{arr: arr}, err
		}
		return value{sc: d.Value}, nil
	default:
		d.Release()
		return value{}, fmt.Errorf("batch: unexpected kernel result %s", d.Kind())
	}
}

// colNode is a column of the input, passed on without a copy.
type colNode struct {
	idx int
	typ arrow.DataType
}

func (c *colNode) dtype() arrow.DataType { return c.typ }

func (c *colNode) eval(ec *evalCtx) (value, error) {
	a, err := ec.column(c.idx)
	if err != nil {
		return value{}, err
	}
	a.Retain()
	return value{arr: a}, nil
}

// litNode is a constant.
type litNode struct{ sc scalar.Scalar }

func (l *litNode) dtype() arrow.DataType { return l.sc.DataType() }

func (l *litNode) eval(*evalCtx) (value, error) { return value{sc: l.sc}, nil }

// fnNode evaluates its arguments and runs a kernel over them.
type fnNode struct {
	typ  arrow.DataType
	args []node
	run  func(ec *evalCtx, args []value) (value, error)
}

func (f *fnNode) dtype() arrow.DataType { return f.typ }

func (f *fnNode) eval(ec *evalCtx) (value, error) {
	var buf [3]value
	args := buf[:0]
	defer func() {
		for _, a := range args {
			a.release()
		}
	}()
	for _, a := range f.args {
		v, err := a.eval(ec)
		if err != nil {
			return value{}, err
		}
		args = append(args, v)
	}
	return f.run(ec, args)
}

// binder binds expressions to one input schema.
type binder struct {
	schema *arrow.Schema
	// ctx carries a Go-heap allocator for constants made at bind time
	// (value sets of In, folded casts): a Projection has no Release, so
	// nothing it keeps may come from the caller's allocator.
	ctx context.Context
	mem memory.Allocator
}

func newBinder(in *arrow.Schema) *binder {
	mem := memory.NewGoAllocator()
	return &binder{schema: in, ctx: withMem(context.Background(), mem), mem: mem}
}

func (c colExpr) bind(b *binder) (node, error) {
	idx := b.schema.FieldIndices(c.name)
	switch len(idx) {
	case 1:
		return &colNode{idx: idx[0], typ: b.schema.Field(idx[0]).Type}, nil
	case 0:
		names := make([]string, b.schema.NumFields())
		for i, f := range b.schema.Fields() {
			names[i] = f.Name
		}
		return nil, &ExprError{Expr: c.name, Row: -1, Err: ErrUnknownColumn,
			msg: fmt.Sprintf("batch: unknown column %q; the input has %s", c.name, strings.Join(names, ", "))}
	default:
		return nil, &ExprError{Expr: c.name, Row: -1, Err: ErrUnknownColumn,
			msg: fmt.Sprintf("batch: column %q is ambiguous: the input has it %d times", c.name, len(idx))}
	}
}

func (l litExpr) bind(*binder) (node, error) {
	sc, err := litScalar(l.v)
	if err != nil {
		return nil, bindErr(ErrType, "Lit("+fmt.Sprintf("%v", l.v)+")", err.Error())
	}
	return &litNode{sc: sc}, nil
}
