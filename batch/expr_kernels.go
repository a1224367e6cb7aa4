package batch

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
)

// Hand-written typed loops for what arrow-go's compute registry lacks
// (integer division with SQL errors, mod, if/coalesce, strings, calendar
// fields). They read the Arrow buffers directly, honour the array offset,
// and allocate their output from the evaluation's allocator.

// validBits is a validity bitmap from bit off on; a nil buf means all valid.
type validBits struct {
	buf []byte
	off int
}

func (b validBits) valid(i int) bool { return b.buf == nil || bitutil.BitIsSet(b.buf, b.off+i) }

func validity(a arrow.Array) validBits {
	if a.NullN() == 0 {
		return validBits{}
	}
	d := a.Data()
	return validBits{buf: d.Buffers()[0].Bytes(), off: d.Offset()}
}

// fixedValues is the value buffer of a fixed-width array as []T, offset
// applied.
func fixedValues[T arrow.FixedWidthType](a arrow.Array) []T {
	d := a.Data()
	if d.Len() == 0 || d.Buffers()[1] == nil {
		return nil
	}
	return arrow.GetData[T](d.Buffers()[1].Bytes())[d.Offset() : d.Offset()+d.Len()]
}

func newBuffer(mem memory.Allocator, size int) *memory.Buffer {
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(size)
	clear(buf.Bytes())
	return buf
}

func newFixed[T arrow.FixedWidthType](mem memory.Allocator, n int) (*memory.Buffer, []T) {
	var zero T
	buf := newBuffer(mem, n*int(unsafe.Sizeof(zero)))
	if n == 0 {
		return buf, nil
	}
	return buf, arrow.GetData[T](buf.Bytes())[:n]
}

// newFixedUninit is newFixed for loops that write every element.
func newFixedUninit[T arrow.FixedWidthType](mem memory.Allocator, n int) (*memory.Buffer, []T) {
	var zero T
	buf := memory.NewResizableBuffer(mem)
	buf.Resize(n * int(unsafe.Sizeof(zero)))
	if n == 0 {
		return buf, nil
	}
	return buf, arrow.GetData[T](buf.Bytes())[:n]
}

func newBitmap(mem memory.Allocator, n int) *memory.Buffer {
	return newBuffer(mem, int(bitutil.BytesForBits(int64(n))))
}

// makeArray wraps buffers into an array and drops the caller's references.
// A nil validity or a bitmap without nulls means all valid.
func makeArray(t arrow.DataType, n int, valid *memory.Buffer, bufs ...*memory.Buffer) arrow.Array {
	nulls := 0
	if valid != nil {
		nulls = n - bitutil.CountSetBits(valid.Bytes(), 0, n)
		if nulls == 0 {
			valid.Release()
			valid = nil
		}
	}
	d := array.NewData(t, n, append([]*memory.Buffer{valid}, bufs...), nil, nulls, 0)
	a := array.MakeFromData(d)
	d.Release()
	if valid != nil {
		valid.Release()
	}
	for _, b := range bufs {
		if b != nil {
			b.Release()
		}
	}
	return a
}

// andValidity is the validity of a row-wise operation over a and b: nil when
// neither has nulls.
func andValidity(mem memory.Allocator, n int, a, b validBits) *memory.Buffer {
	switch {
	case a.buf == nil && b.buf == nil:
		return nil
	case a.buf != nil && b.buf != nil:
		out := newBitmap(mem, n)
		bitutil.BitmapAnd(a.buf, b.buf, int64(a.off), int64(b.off), out.Bytes(), 0, int64(n))
		return out
	case a.buf == nil:
		a = b
	}
	out := newBitmap(mem, n)
	bitutil.CopyBitmap(a.buf, a.off, n, out.Bytes(), 0)
	return out
}

// copyValidity is a's validity as a new bitmap starting at bit 0, or nil.
func copyValidity(mem memory.Allocator, a arrow.Array) *memory.Buffer {
	return andValidity(mem, a.Len(), validity(a), validBits{})
}

// num is an int64 or float64 operand: a column or a constant.
type num[T int64 | float64] struct {
	vals []T
	c    T
	ok   validBits
}

func (v num[T]) at(i int) T {
	if v.vals != nil {
		return v.vals[i]
	}
	return v.c
}

func numOf[T int64 | float64](v value) num[T] {
	if v.arr != nil {
		return num[T]{vals: fixedValues[T](v.arr), ok: validity(v.arr)}
	}
	var c T
	switch s := v.sc.(type) {
	case *scalar.Int64:
		c = T(s.Value)
	case *scalar.Float64:
		c = T(s.Value)
	case *scalar.Timestamp:
		c = T(s.Value)
	case *scalar.Duration:
		c = T(s.Value)
	}
	return num[T]{c: c}
}

// divModRun divides int64 or float64 operands with SQL errors: a zero
// divisor on a row where both operands are valid fails, MinInt64 / -1
// overflows.
func divModRun(label string, mod bool, t arrow.DataType) func(*evalCtx, []value) (value, error) {
	sym := "/"
	if mod {
		sym = "%"
	}
	return func(ec *evalCtx, args []value) (value, error) {
		l, r := args[0], args[1]
		if (l.arr == nil && !l.sc.IsValid()) || (r.arr == nil && !r.sc.IsValid()) {
			return value{sc: scalar.MakeNullScalar(t)}, nil
		}
		n := ec.n
		var lok, rok validBits
		if l.arr != nil {
			lok = validity(l.arr)
		}
		if r.arr != nil {
			rok = validity(r.arr)
		}
		valid := andValidity(ec.mem, n, lok, rok)
		var vb []byte
		if valid != nil {
			vb = valid.Bytes()
		}
		fail := func(kind error, what string, row int, buf *memory.Buffer) (value, error) {
			buf.Release()
			if valid != nil {
				valid.Release()
			}
			orig := ec.origRow(row)
			return value{}, rowErr(kind, label, orig,
				fmt.Sprintf("%s at row %d (%s %s %s)", what, orig, l.str(row), sym, r.str(row)))
		}
		if t.ID() == arrow.INT64 {
			lv, rv := numOf[int64](l), numOf[int64](r)
			buf, out := newFixed[int64](ec.mem, n)
			if c := rv.c; rv.vals == nil && lv.vals != nil && c != 0 && c != -1 {
				// A constant divisor other than 0 and -1: nothing to check.
				for i, a := range lv.vals[:n] {
					if mod {
						out[i] = a % c
					} else {
						out[i] = a / c
					}
				}
				return value{arr: makeArray(t, n, valid, buf)}, nil
			}
			for i := range n {
				if vb != nil && !bitutil.BitIsSet(vb, i) {
					continue
				}
				a, b := lv.at(i), rv.at(i)
				switch {
				case b == 0:
					return fail(ErrDivideByZero, "division by zero", i, buf)
				case mod:
					out[i] = a % b
				case b == -1 && a == math.MinInt64:
					return fail(ErrOverflow, "integer overflow", i, buf)
				default:
					out[i] = a / b
				}
			}
			return value{arr: makeArray(t, n, valid, buf)}, nil
		}
		lv, rv := numOf[float64](l), numOf[float64](r)
		buf, out := newFixed[float64](ec.mem, n)
		if rv.vals == nil && lv.vals != nil && rv.c != 0 && !mod {
			// Division by a non-zero constant: nothing to check per row.
			c := rv.c
			for i, a := range lv.vals[:n] {
				out[i] = a / c
			}
			return value{arr: makeArray(t, n, valid, buf)}, nil
		}
		for i := range n {
			if vb != nil && !bitutil.BitIsSet(vb, i) {
				continue
			}
			a, b := lv.at(i), rv.at(i)
			switch {
			case b == 0:
				return fail(ErrDivideByZero, "division by zero", i, buf)
			case mod:
				out[i] = math.Mod(a, b)
			default:
				out[i] = a / b
			}
		}
		return value{arr: makeArray(t, n, valid, buf)}, nil
	}
}

// gatherable reports whether If and Coalesce can produce type t.
func gatherable(t arrow.DataType) bool {
	if isNull(t) || t.ID() == arrow.STRING || t.ID() == arrow.BOOL {
		return true
	}
	fw, ok := t.(arrow.FixedWidthDataType)
	if !ok {
		return false
	}
	switch fw.BitWidth() {
	case 8, 16, 32, 64:
		return true
	}
	return false
}

// ifNode is CASE WHEN cond THEN then ELSE els END. Each branch is evaluated
// only on the rows that take it (all of them when every row takes the same
// branch), so If(Eq(qty, 0), Lit(0), Div(amount, qty)) never divides by
// zero.
type ifNode struct {
	typ             arrow.DataType
	cond, then, els node
}

func (f *ifNode) dtype() arrow.DataType { return f.typ }

func (f *ifNode) eval(ec *evalCtx) (value, error) {
	cond, err := f.cond.eval(ec)
	if err != nil {
		return value{}, err
	}
	defer cond.release()
	if cond.arr == nil {
		if cond.sc.IsValid() && cond.sc.(*scalar.Boolean).Value {
			return f.then.eval(ec)
		}
		return f.els.eval(ec)
	}
	d := cond.arr.Data()
	ok := validity(cond.arr)
	pick := make([]int8, ec.n)
	taken := 0 // rows that take then
	if ec.n > 0 {
		vals := d.Buffers()[1].Bytes()
		for i := range pick {
			if ok.valid(i) && bitutil.BitIsSet(vals, d.Offset()+i) {
				taken++
			} else {
				pick[i] = 1
			}
		}
	}
	switch taken {
	case ec.n:
		return f.then.eval(ec)
	case 0:
		return f.els.eval(ec)
	}
	return evalSplit(ec, f.typ, pick, []node{f.then, f.els}, []int{taken, ec.n - taken})
}

// evalSplit evaluates nodes[k] on the rows where pick is k (counts[k] of
// them) and merges the results in row order.
func evalSplit(ec *evalCtx, t arrow.DataType, pick []int8, nodes []node, counts []int) (value, error) {
	vals := make([]value, 0, len(nodes))
	defer func() {
		for _, v := range vals {
			v.release()
		}
	}()
	for k, n := range nodes {
		sub := ec.subset(pick, int8(k), counts[k])
		v, err := n.eval(sub)
		sub.release()
		if err != nil {
			return value{}, err
		}
		vals = append(vals, v)
	}
	pos := make([]int32, len(pick))
	next := make([]int32, len(nodes))
	for i, p := range pick {
		pos[i] = next[p]
		next[p]++
	}
	return gather(ec, t, vals, pick, pos)
}

// coalesceNode is the first non-null of args on each row. An argument is
// evaluated only on the rows that all earlier arguments left null.
type coalesceNode struct {
	typ  arrow.DataType
	args []node
}

func (c *coalesceNode) dtype() arrow.DataType { return c.typ }

func (c *coalesceNode) eval(ec *evalCtx) (value, error) { return c.evalFrom(ec, 0) }

func (c *coalesceNode) evalFrom(ec *evalCtx, k int) (value, error) {
	v, err := c.args[k].eval(ec)
	if err != nil || k == len(c.args)-1 {
		return v, err
	}
	if v.arr == nil {
		if v.sc.IsValid() {
			return v, nil
		}
		return c.evalFrom(ec, k+1)
	}
	nulls := v.arr.NullN()
	switch nulls {
	case 0:
		return v, nil
	case ec.n:
		v.release()
		return c.evalFrom(ec, k+1)
	}
	defer v.release()
	ok := validity(v.arr)
	pick := make([]int8, ec.n)
	pos := make([]int32, ec.n)
	var next int32
	for i := range pick {
		if ok.valid(i) {
			pos[i] = int32(i)
		} else {
			pick[i], pos[i] = 1, next
			next++
		}
	}
	sub := ec.subset(pick, 1, nulls)
	rest, err := c.evalFrom(sub, k+1)
	sub.release()
	if err != nil {
		return value{}, err
	}
	defer rest.release()
	return gather(ec, c.typ, []value{v, rest}, pick, pos)
}

// gsrc is one source of gather: a column, or a constant as a one-row array
// read at row 0.
type gsrc struct {
	arr    arrow.Array
	stride int32
}

// gather builds a column of ec.n rows taking row i from row pos[i] of
// srcs[pick[i]] (null where that is null).
func gather(ec *evalCtx, t arrow.DataType, vals []value, pick []int8, pos []int32) (value, error) {
	n := ec.n
	if isNull(t) {
		return value{arr: array.NewNull(n)}, nil
	}
	srcs := make([]gsrc, len(vals))
	defer func() {
		for _, s := range srcs {
			if s.arr != nil {
				s.arr.Release()
			}
		}
	}()
	for k, v := range vals {
		if v.arr != nil {
			v.arr.Retain()
			srcs[k] = gsrc{arr: v.arr, stride: 1}
			continue
		}
		a, err := scalar.MakeArrayFromScalar(v.sc, 1, ec.mem)
		if err != nil {
			return value{}, err
		}
		srcs[k] = gsrc{arr: a}
	}
	if t.ID() == arrow.STRING {
		return gatherString(ec, srcs, pick, pos)
	}
	valid := newBitmap(ec.mem, n)
	vb := valid.Bytes()
	if t.ID() == arrow.BOOL {
		out := newBitmap(ec.mem, n)
		ob := out.Bytes()
		ok, data, offs := make([]validBits, len(srcs)), make([][]byte, len(srcs)), make([]int, len(srcs))
		for k, s := range srcs {
			ok[k] = validity(s.arr)
			if s.arr.Len() > 0 {
				data[k], offs[k] = s.arr.Data().Buffers()[1].Bytes(), s.arr.Data().Offset()
			}
		}
		for i, p := range pick {
			j := int(pos[i] * srcs[p].stride)
			if !ok[p].valid(j) {
				continue
			}
			bitutil.SetBit(vb, i)
			if bitutil.BitIsSet(data[p], offs[p]+j) {
				bitutil.SetBit(ob, i)
			}
		}
		return value{arr: makeArray(t, n, valid, out)}, nil
	}
	var out *memory.Buffer
	switch t.(arrow.FixedWidthDataType).BitWidth() {
	case 8:
		out = gatherFixed[int8](ec.mem, srcs, pick, pos, vb)
	case 16:
		out = gatherFixed[int16](ec.mem, srcs, pick, pos, vb)
	case 32:
		out = gatherFixed[int32](ec.mem, srcs, pick, pos, vb)
	default:
		out = gatherFixed[int64](ec.mem, srcs, pick, pos, vb)
	}
	return value{arr: makeArray(t, n, valid, out)}, nil
}

func gatherFixed[T int8 | int16 | int32 | int64](mem memory.Allocator, srcs []gsrc, pick []int8, pos []int32, vb []byte) *memory.Buffer {
	vals, ok := make([][]T, len(srcs)), make([]validBits, len(srcs))
	for k, s := range srcs {
		vals[k], ok[k] = fixedValues[T](s.arr), validity(s.arr)
	}
	buf, out := newFixed[T](mem, len(pick))
	for i, p := range pick {
		j := int(pos[i] * srcs[p].stride)
		if !ok[p].valid(j) {
			continue
		}
		bitutil.SetBit(vb, i)
		out[i] = vals[p][j]
	}
	return buf
}

func gatherString(ec *evalCtx, srcs []gsrc, pick []int8, pos []int32) (value, error) {
	views := make([]strs, len(srcs))
	for k, s := range srcs {
		views[k] = strsOf(s.arr)
	}
	valid := newBitmap(ec.mem, len(pick))
	vb := valid.Bytes()
	w := newStrOut(ec.mem, len(pick), 0)
	for i, p := range pick {
		j := int(pos[i] * srcs[p].stride)
		if views[p].ok.valid(j) {
			bitutil.SetBit(vb, i)
			w.data = append(w.data, views[p].at(j)...)
		}
		w.end(i)
	}
	return w.finish(ec.mem, len(pick), valid)
}

// strs reads a utf8 column over its offsets and data buffers.
type strs struct {
	offs []int32
	data []byte
	ok   validBits
}

func strsOf(a arrow.Array) strs {
	d := a.Data()
	s := strs{ok: validity(a)}
	if d.Len() == 0 {
		return s
	}
	s.offs = arrow.GetData[int32](d.Buffers()[1].Bytes())[d.Offset() : d.Offset()+d.Len()+1]
	if d.Buffers()[2] != nil {
		s.data = d.Buffers()[2].Bytes()
	}
	return s
}

func (s strs) at(i int) []byte { return s.data[s.offs[i]:s.offs[i+1]] }
