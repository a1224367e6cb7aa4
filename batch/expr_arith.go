package batch

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/arrow/scalar"
)

// Add, Sub, Mul and Neg are typed loops rather than arrow-go's checked
// kernels: in v18.8.0 "subtract" misses the overflow of x - MinInt64, and
// money must not wrap. int64, timestamps and durations share the int64 loop
// (same 64-bit layout); float64 follows IEEE 754 (no overflow error).

// zeroOf is the constant 0 of a numeric or duration type; Neg(x) runs as
// 0 - x.
func zeroOf(t arrow.DataType) node {
	switch t.ID() {
	case arrow.FLOAT64:
		return &litNode{sc: scalar.NewFloat64Scalar(0)}
	case arrow.DURATION:
		return &litNode{sc: scalar.NewDurationScalar(0, t.(*arrow.DurationType))}
	}
	return &litNode{sc: scalar.NewInt64Scalar(0)}
}

func symOf(o op) string {
	switch o {
	case opAdd:
		return "+"
	case opMul:
		return "*"
	case opDiv:
		return "/"
	case opMod:
		return "%"
	}
	return "-"
}

// arithRun computes args[0] o args[1] into type t (o is opAdd, opSub, opMul,
// or opNeg with args[0] the zero).
func arithRun(label string, o op, t arrow.DataType) func(*evalCtx, []value) (value, error) {
	return func(ec *evalCtx, args []value) (value, error) {
		l, r := args[0], args[1]
		if (l.arr == nil && !l.sc.IsValid()) || (r.arr == nil && !r.sc.IsValid()) {
			return value{sc: scalar.MakeNullScalar(t)}, nil
		}
		var lok, rok validBits
		if l.arr != nil {
			lok = validity(l.arr)
		}
		if r.arr != nil {
			rok = validity(r.arr)
		}
		valid := andValidity(ec.mem, ec.n, lok, rok)
		var buf *memory.Buffer
		row := -1
		if t.ID() == arrow.FLOAT64 {
			buf = arithFloat(ec.mem, ec.n, o, numOf[float64](l), numOf[float64](r))
		} else {
			buf, row = arithInt(ec.mem, ec.n, o, numOf[int64](l), numOf[int64](r), valid)
		}
		if row >= 0 {
			buf.Release()
			if valid != nil {
				valid.Release()
			}
			operands := l.str(row) + " " + symOf(o) + " " + r.str(row)
			if o == opNeg {
				operands = "-(" + r.str(row) + ")"
			}
			orig := ec.origRow(row)
			return value{}, rowErr(ErrOverflow, label, orig, fmt.Sprintf("integer overflow at row %d (%s)", orig, operands))
		}
		return value{arr: makeArray(t, ec.n, valid, buf)}, nil
	}
}

// arithInt computes the int64 results and returns the first row (valid in
// valid) that overflows, or -1. The loops are specialised by operand shape
// (column or constant) and track overflow in a branch-free flag; only when
// it is raised are the rows checked one by one (garbage under nulls may
// raise it falsely).
func arithInt(mem memory.Allocator, n int, o op, lv, rv num[int64], valid *memory.Buffer) (*memory.Buffer, int) {
	buf, out := newFixedUninit[int64](mem, n)
	var flag int64 // sign bit set when some row may overflow
	a, b, x, y := lv.vals, rv.vals, lv.c, rv.c
	switch {
	case a == nil && b == nil:
		s, ok := arithOne(o, x, y)
		if !ok {
			flag = -1
		}
		for i := range out {
			out[i] = s
		}
	case o == opAdd && b == nil:
		for i, x := range a[:n] {
			s := x + y
			flag |= (x ^ s) & (y ^ s)
			out[i] = s
		}
	case o == opAdd && a == nil:
		for i, y := range b[:n] {
			s := x + y
			flag |= (x ^ s) & (y ^ s)
			out[i] = s
		}
	case o == opAdd:
		b = b[:n]
		for i, x := range a[:n] {
			y := b[i]
			s := x + y
			flag |= (x ^ s) & (y ^ s)
			out[i] = s
		}
	case o != opMul && b == nil:
		for i, x := range a[:n] {
			s := x - y
			flag |= (x ^ y) & (x ^ s)
			out[i] = s
		}
	case o != opMul && a == nil:
		for i, y := range b[:n] {
			s := x - y
			flag |= (x ^ y) & (x ^ s)
			out[i] = s
		}
	case o != opMul:
		b = b[:n]
		for i, x := range a[:n] {
			y := b[i]
			s := x - y
			flag |= (x ^ y) & (x ^ s)
			out[i] = s
		}
	case (b == nil && y > 0) || (a == nil && x > 0):
		// Multiplication by a positive constant: a range check.
		c, col := y, a
		if a == nil {
			c, col = x, b
		}
		hi, lo := math.MaxInt64/c, math.MinInt64/c
		for i, v := range col[:n] {
			if v > hi || v < lo {
				flag = -1
			}
			out[i] = v * c
		}
	default:
		for i := range out {
			s, ok := mulInt64(lv.at(i), rv.at(i))
			if !ok {
				flag = -1
			}
			out[i] = s
		}
	}
	if flag >= 0 {
		return buf, -1
	}
	var vb []byte
	if valid != nil {
		vb = valid.Bytes()
	}
	for i := range n {
		if vb != nil && !bitutil.BitIsSet(vb, i) {
			continue
		}
		if _, ok := arithOne(o, lv.at(i), rv.at(i)); !ok {
			return buf, i
		}
	}
	return buf, -1
}

// arithOne is one checked operation.
func arithOne(o op, a, b int64) (int64, bool) {
	switch o {
	case opAdd:
		s := a + b
		return s, (a^s)&(b^s) >= 0
	case opMul:
		return mulInt64(a, b)
	}
	s := a - b
	return s, (a^b)&(a^s) >= 0
}

// mulInt64 multiplies with an overflow check through the 128-bit product.
func mulInt64(a, b int64) (int64, bool) {
	neg := (a < 0) != (b < 0)
	hi, lo := bits.Mul64(uabs(a), uabs(b))
	if hi != 0 {
		return 0, false
	}
	if neg {
		if lo > 1<<63 {
			return 0, false
		}
		return int64(-lo), true
	}
	if lo > math.MaxInt64 {
		return 0, false
	}
	return int64(lo), true
}

func uabs(a int64) uint64 {
	if a < 0 {
		return uint64(-a)
	}
	return uint64(a)
}

func arithFloat(mem memory.Allocator, n int, o op, lv, rv num[float64]) *memory.Buffer {
	buf, out := newFixedUninit[float64](mem, n)
	switch o {
	case opAdd:
		for i := range out {
			out[i] = lv.at(i) + rv.at(i)
		}
	case opSub:
		for i := range out {
			out[i] = lv.at(i) - rv.at(i)
		}
	case opNeg:
		for i := range out {
			out[i] = -rv.at(i)
		}
	case opMul:
		for i := range out {
			out[i] = lv.at(i) * rv.at(i)
		}
	}
	return buf
}

// notRun is NOT over a boolean column (arrow-go v18.8.0's "not" ignores the
// array offset).
func notRun(ec *evalCtx, args []value) (value, error) {
	a := args[0]
	if a.arr == nil {
		if !a.sc.IsValid() {
			return a, nil
		}
		return value{sc: scalar.NewBooleanScalar(!a.sc.(*scalar.Boolean).Value)}, nil
	}
	out := newBitmap(ec.mem, ec.n)
	ob := out.Bytes()
	if ec.n > 0 {
		d := a.arr.Data()
		bitutil.CopyBitmap(d.Buffers()[1].Bytes(), d.Offset(), ec.n, ob, 0)
		for i := range ob {
			ob[i] = ^ob[i]
		}
	}
	return value{arr: makeArray(boolT, ec.n, copyValidity(ec.mem, a.arr), out)}, nil
}

// isNullRun is IS NULL / IS NOT NULL over the validity bitmap (arrow-go
// v18.8.0's is_not_null ignores the array offset).
func isNullRun(null bool) func(*evalCtx, []value) (value, error) {
	return func(ec *evalCtx, args []value) (value, error) {
		a := args[0]
		if a.arr == nil {
			return value{sc: scalar.NewBooleanScalar(a.sc.IsValid() != null)}, nil
		}
		out := newBitmap(ec.mem, ec.n)
		ob := out.Bytes()
		switch {
		case isNull(a.arr.DataType()):
			if null {
				bitutil.SetBitsTo(ob, 0, int64(ec.n), true)
			}
		case a.arr.NullN() == 0:
			if !null {
				bitutil.SetBitsTo(ob, 0, int64(ec.n), true)
			}
		default:
			d := a.arr.Data()
			bitutil.CopyBitmap(d.Buffers()[0].Bytes(), d.Offset(), ec.n, ob, 0)
			if null {
				for i := range ob {
					ob[i] = ^ob[i]
				}
			}
		}
		return value{arr: makeArray(boolT, ec.n, nil, out)}, nil
	}
}
