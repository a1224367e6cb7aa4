package batch

import (
	"bytes"
	"fmt"
	"math"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"
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

// strOut writes a utf8 column: offsets straight into an allocator buffer,
// bytes into a Go slice copied into one at the end (a single memmove, instead
// of a builder call per row).
type strOut struct {
	offBuf *memory.Buffer
	offs   []int32
	data   []byte
}

func newStrOut(mem memory.Allocator, n, hint int) *strOut {
	buf, offs := newFixedUninit[int32](mem, n+1)
	offs[0] = 0
	return &strOut{offBuf: buf, offs: offs, data: make([]byte, 0, hint)}
}

// end closes row i (null rows append no bytes).
func (w *strOut) end(i int) { w.offs[i+1] = int32(len(w.data)) }

func (w *strOut) finish(mem memory.Allocator, n int, valid *memory.Buffer) (value, error) {
	if len(w.data) > math.MaxInt32 {
		w.offBuf.Release()
		if valid != nil {
			valid.Release()
		}
		return value{}, fmt.Errorf("batch: string column of %d bytes is over the 2 GiB of utf8", len(w.data))
	}
	data := memory.NewResizableBuffer(mem)
	data.Resize(len(w.data))
	copy(data.Bytes(), w.data)
	return value{arr: makeArray(utf8T, n, valid, w.offBuf, data)}, nil
}

// andAll is the validity of a row-wise function of arrs, or nil.
func andAll(mem memory.Allocator, n int, arrs []arrow.Array) *memory.Buffer {
	var valid *memory.Buffer
	for _, a := range arrs {
		if a.NullN() == 0 {
			continue
		}
		var cur validBits
		if valid != nil {
			cur = validBits{buf: valid.Bytes()}
		}
		next := andValidity(mem, n, cur, validity(a))
		if valid != nil {
			valid.Release()
		}
		valid = next
	}
	return valid
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
		hint := 0
		if ec.n > 0 {
			hint = int(s.offs[ec.n] - s.offs[0])
		}
		w := newStrOut(ec.mem, ec.n, hint)
		for i := range ec.n {
			if s.ok.valid(i) {
				w.data = f(w.data, s.at(i))
			}
			w.end(i)
		}
		return w.finish(ec.mem, ec.n, copyValidity(ec.mem, arr))
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
	arrs := make([]arrow.Array, 0, len(args))
	defer func() {
		for _, a := range arrs {
			a.Release()
		}
	}()
	hint := 0
	for k, a := range args {
		arr, err := a.array(ec.mem, ec.n)
		if err != nil {
			return value{}, err
		}
		arrs = append(arrs, arr)
		views[k] = strsOf(arr)
		if ec.n > 0 {
			hint += int(views[k].offs[ec.n] - views[k].offs[0])
		}
	}
	valid := andAll(ec.mem, ec.n, arrs)
	var vb []byte
	if valid != nil {
		vb = valid.Bytes()
	}
	w := newStrOut(ec.mem, ec.n, hint)
	for i := range ec.n {
		if vb == nil || bitutil.BitIsSet(vb, i) {
			for _, v := range views {
				w.data = append(w.data, v.at(i)...)
			}
		}
		w.end(i)
	}
	return w.finish(ec.mem, ec.n, valid)
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
