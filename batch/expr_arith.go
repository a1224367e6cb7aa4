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
			return value{}, rowErr(ErrOverflow, label, row, fmt.Sprintf("integer overflow at row %d (%s)", row, operands))
		}
		return value{arr: makeArray(t, ec.n, valid, buf)}, nil
	}
}

// arithInt computes the int64 results and returns the first row (valid in
// valid) that overflows, or -1. Overflow is tracked with a branch-free flag
// over all rows; only when it is raised are the rows checked one by one
// (garbage under nulls may raise it falsely).
func arithInt(mem memory.Allocator, n int, o op, lv, rv num[int64], valid *memory.Buffer) (*memory.Buffer, int) {
	buf, out := newFixed[int64](mem, n)
	var flag int64
	var bad bool
	switch o {
	case opAdd:
		for i := range out {
			a, b := lv.at(i), rv.at(i)
			s := a + b
			flag |= (a ^ s) & (b ^ s)
			out[i] = s
		}
	case opSub, opNeg:
		for i := range out {
			a, b := lv.at(i), rv.at(i)
			s := a - b
			flag |= (a ^ b) & (a ^ s)
			out[i] = s
		}
	case opMul:
		for i := range out {
			s, ok := mulInt64(lv.at(i), rv.at(i))
			bad = bad || !ok
			out[i] = s
		}
	}
	if flag >= 0 && !bad {
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
		a, b := lv.at(i), rv.at(i)
		var ok bool
		switch o {
		case opAdd:
			s := a + b
			ok = (a^s)&(b^s) >= 0
		case opSub, opNeg:
			s := a - b
			ok = (a^b)&(a^s) >= 0
		case opMul:
			_, ok = mulInt64(a, b)
		}
		if !ok {
			return buf, i
		}
	}
	return buf, -1
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
	buf, out := newFixed[float64](mem, n)
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
