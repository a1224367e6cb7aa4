package batch

import (
	"bytes"
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// String functions: arrow-go registers none, so these are loops over the
// offsets and data buffers of utf8 columns (other string types are cast to
// utf8 at bind).

func (b *binder) bindString(c *callExpr, a node) (node, error) {
	args := []node{a}
	switch c.op {
	case opUpper, opLower:
		return &fnNode{typ: utf8T, args: args, run: stringMap(func(dst, s []byte) []byte {
			return appendCase(dst, s, c.op == opUpper)
		})}, nil
	case opSubstr:
		if c.n < 0 {
			return nil, bindErr(ErrType, c.String(), fmt.Sprintf("negative length %d", c.n))
		}
		from, to := substrRange(c.start, c.n)
		return &fnNode{typ: utf8T, args: args, run: stringMap(func(dst, s []byte) []byte {
			return append(dst, substr(s, from, to)...)
		})}, nil
	case opLength:
		return &fnNode{typ: int64T, args: args, run: lengthRun}, nil
	case opStartsWith:
		p := []byte(c.str)
		return &fnNode{typ: boolT, args: args, run: stringTest(func(s []byte) bool { return bytes.HasPrefix(s, p) })}, nil
	default: // opContains
		p := []byte(c.str)
		return &fnNode{typ: boolT, args: args, run: stringTest(func(s []byte) bool { return bytes.Contains(s, p) })}, nil
	}
}

// stringMap maps each non-null string through f, which appends the result
// to dst.
func stringMap(f func(dst, s []byte) []byte) func(*evalCtx, []value) (value, error) {
	return func(ec *evalCtx, args []value) (value, error) {
		arr, err := args[0].array(ec.mem, ec.n)
		if err != nil {
			return value{}, err
		}
		defer arr.Release()
		s := strsOf(arr)
		b := array.NewStringBuilder(ec.mem)
		defer b.Release()
		b.Reserve(ec.n)
		if ec.n > 0 {
			b.ReserveData(int(s.offs[ec.n] - s.offs[0]))
		}
		var scratch []byte
		for i := range ec.n {
			if !s.ok.valid(i) {
				b.AppendNull()
				continue
			}
			scratch = f(scratch[:0], s.at(i))
			b.BinaryBuilder.Append(scratch)
		}
		return value{arr: b.NewArray()}, nil
	}
}

// stringTest is a boolean predicate over each non-null string.
func stringTest(f func(s []byte) bool) func(*evalCtx, []value) (value, error) {
	return func(ec *evalCtx, args []value) (value, error) {
		arr, err := args[0].array(ec.mem, ec.n)
		if err != nil {
			return value{}, err
		}
		defer arr.Release()
		s := strsOf(arr)
		out := newBitmap(ec.mem, ec.n)
		ob := out.Bytes()
		for i := range ec.n {
			if s.ok.valid(i) && f(s.at(i)) {
				bitutil.SetBit(ob, i)
			}
		}
		return value{arr: makeArray(boolT, ec.n, copyValidity(ec.mem, arr), out)}, nil
	}
}

func lengthRun(ec *evalCtx, args []value) (value, error) {
	arr, err := args[0].array(ec.mem, ec.n)
	if err != nil {
		return value{}, err
	}
	defer arr.Release()
	s := strsOf(arr)
	buf, out := newFixed[int64](ec.mem, ec.n)
	for i := range ec.n {
		if s.ok.valid(i) {
			out[i] = int64(utf8.RuneCount(s.at(i)))
		}
	}
	return value{arr: makeArray(int64T, ec.n, copyValidity(ec.mem, arr), buf)}, nil
}

func concatRun(ec *evalCtx, args []value) (value, error) {
	views := make([]strs, len(args))
	for k, a := range args {
		arr, err := a.array(ec.mem, ec.n)
		if err != nil {
			return value{}, err
		}
		defer arr.Release()
		views[k] = strsOf(arr)
	}
	b := array.NewStringBuilder(ec.mem)
	defer b.Release()
	b.Reserve(ec.n)
	var scratch []byte
rows:
	for i := range ec.n {
		scratch = scratch[:0]
		for _, v := range views {
			if !v.ok.valid(i) {
				b.AppendNull()
				continue rows
			}
			scratch = append(scratch, v.at(i)...)
		}
		b.BinaryBuilder.Append(scratch)
	}
	return value{arr: b.NewArray()}, nil
}

// appendCase appends s upper- or lower-cased: bytewise for ASCII, through
// the unicode tables otherwise.
func appendCase(dst, s []byte, upper bool) []byte {
	start := len(dst)
	for _, c := range s {
		if c >= utf8.RuneSelf {
			dst = dst[:start]
			if upper {
				return append(dst, bytes.ToUpper(s)...)
			}
			return append(dst, bytes.ToLower(s)...)
		}
		if upper && 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		} else if !upper && 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// substrRange turns SQL SUBSTRING(s FROM start FOR n) into the 0-based
// character range [from, to).
func substrRange(start, n int) (from, to int) {
	end := start + n // exclusive, 1-based
	if n > 0 && end < start {
		end = int(^uint(0) >> 1) // overflow: to the end of the string
	}
	from = max(start, 1) - 1
	to = max(end-1, from)
	return from, to
}

// substr returns characters [from, to) of s.
func substr(s []byte, from, to int) []byte {
	ascii := true
	for _, c := range s {
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if ascii {
		from, to = min(from, len(s)), min(to, len(s))
		return s[from:to]
	}
	i, pos, bfrom := 0, 0, len(s)
	for pos < len(s) {
		if i == from {
			bfrom = pos
		}
		if i == to {
			return s[bfrom:pos]
		}
		_, size := utf8.DecodeRune(s[pos:])
		pos += size
		i++
	}
	if i == from {
		bfrom = pos
	}
	return s[bfrom:]
}
