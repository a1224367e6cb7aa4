package kernel

import (
	"math"
	"math/bits"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/cespare/xxhash/v2"
)

// hashGoldenInput is a fixed record: int64 id, string name, float64 x, with
// nulls, whose row hashes are pinned below. HashRows is part of the
// checkpoint format: if this test fails, the hash changed and every
// existing checkpoint would route keys to other partitions.
func hashGoldenInput(mem memory.Allocator) []arrow.Array {
	ib := array.NewInt64Builder(mem)
	defer ib.Release()
	ib.AppendValues([]int64{0, 1, -1, math.MaxInt64, 42}, nil)
	ib.AppendNull()
	sb := array.NewStringBuilder(mem)
	defer sb.Release()
	sb.AppendValues([]string{"", "acme", "ÿ", "merchant-0001", "x"}, nil)
	sb.AppendNull()
	fb := array.NewFloat64Builder(mem)
	defer fb.Release()
	fb.AppendValues([]float64{0, 1.5, math.NaN(), math.Inf(-1), math.Copysign(0, -1)}, nil)
	fb.AppendNull()
	return []arrow.Array{ib.NewArray(), sb.NewArray(), fb.NewArray()}
}

var hashGolden = map[string][]uint64{
	"int64":              {0x283d2c8b89f36147, 0x47f10b2f0d27f8ba, 0xcd9b78a555e13acc, 0x74f935294a848d9, 0xf4a92149ebfbf6fd, 0x2021a851a05182f4},
	"string":             {0x11d45e4c1a3b3384, 0x390e70799886cc50, 0x3ee5fc18be4b072f, 0x33fe559e5aedb04f, 0xf7d4488b3f765f54, 0x2021a851a05182f4},
	"int64,string,float": {0xc64abfe3c5f94d86, 0x1c4a5e0e4b54316, 0xe25b1aac8f456ad4, 0x8447971d8518c28b, 0x792558edc4628d69, 0x8d87a5fabd4c0a87},
}

func TestHashRowsGolden(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	cols := hashGoldenInput(mem)
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	for name, sel := range map[string][]arrow.Array{
		"int64":              cols[:1],
		"string":             cols[1:2],
		"int64,string,float": cols,
	} {
		out := make([]uint64, 6)
		if err := HashRows(sel, out); err != nil {
			t.Fatal(err)
		}
		want := hashGolden[name]
		for i := range out {
			if i >= len(want) || out[i] != want[i] {
				t.Errorf("%s: hashes %#x, want %#x", name, out, want)
				break
			}
		}
	}
}

// TestHashRowsDefinition recomputes hashes from the definition written in
// hash.go, so the documentation and the code agree.
func TestHashRowsDefinition(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	mix := func(x uint64) uint64 {
		x ^= x >> 33
		x *= 0xff51afd7ed558ccd
		x ^= x >> 33
		x *= 0xc4ceb9fe1a85ec53
		x ^= x >> 33
		return x
	}
	combine := func(h, v uint64) uint64 { return mix(bits.RotateLeft64(h, 27)*0x9e3779b97f4a7c15 ^ v) }
	const seed, null = 0x6f6e6365666c6f77, 0x9ae16a3b2f90404f
	cols := hashGoldenInput(mem)
	defer func() {
		for _, c := range cols {
			c.Release()
		}
	}()
	ints := []uint64{0, 1, math.MaxUint64, math.MaxInt64, 42, null}
	strs := []string{"", "acme", "ÿ", "merchant-0001", "x"}
	floats := []uint64{0, math.Float64bits(1.5), 0x7ff8000000000001, math.Float64bits(math.Inf(-1)), 0, null}
	out := make([]uint64, 6)
	if err := HashRows(cols, out); err != nil {
		t.Fatal(err)
	}
	for i := range out {
		sh := uint64(null)
		if i < len(strs) {
			sh = xxhash.Sum64String(strs[i])
		}
		want := combine(combine(combine(seed, ints[i]), sh), floats[i])
		if out[i] != want {
			t.Errorf("row %d: %#x, want %#x by the definition", i, out[i], want)
		}
	}
}

// TestHashRowsWidths checks that equal values of different widths, and a
// string and a binary of the same bytes, hash alike, and that nulls differ
// from zero.
func TestHashRowsWidths(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	i8 := array.NewInt8Builder(mem)
	i8.AppendValues([]int8{-5, 0, 7}, nil)
	i32 := array.NewInt32Builder(mem)
	i32.AppendValues([]int32{-5, 0, 7}, nil)
	f32 := array.NewFloat32Builder(mem)
	f32.AppendValues([]float32{-5, float32(math.Copysign(0, -1)), 7}, nil)
	f64 := array.NewFloat64Builder(mem)
	f64.AppendValues([]float64{-5, 0, 7}, nil)
	s := array.NewStringBuilder(mem)
	s.AppendValues([]string{"a", "", "bc"}, nil)
	b := array.NewBinaryBuilder(mem, arrow.BinaryTypes.Binary)
	b.AppendValues([][]byte{[]byte("a"), {}, []byte("bc")}, nil)
	n := array.NewInt64Builder(mem)
	n.AppendValues([]int64{-5, 0, 7}, []bool{true, false, true})
	var arrs []arrow.Array
	for _, bl := range []array.Builder{i8, i32, f32, f64, s, b, n} {
		arrs = append(arrs, bl.NewArray())
		bl.Release()
	}
	defer func() {
		for _, a := range arrs {
			a.Release()
		}
	}()
	hash := func(a arrow.Array) []uint64 {
		out := make([]uint64, 3)
		if err := HashRows([]arrow.Array{a}, out); err != nil {
			t.Fatal(err)
		}
		return out
	}
	eq := func(what string, x, y []uint64) {
		for i := range x {
			if x[i] != y[i] {
				t.Errorf("%s: row %d: %#x vs %#x", what, i, x[i], y[i])
			}
		}
	}
	eq("int8 vs int32", hash(arrs[0]), hash(arrs[1]))
	eq("float32 vs float64", hash(arrs[2]), hash(arrs[3]))
	eq("string vs binary", hash(arrs[4]), hash(arrs[5]))
	if hash(arrs[6])[1] == hash(arrs[1])[1] {
		t.Errorf("null hashes like 0")
	}
	if err := HashRows([]arrow.Array{arrs[0]}, make([]uint64, 2)); err == nil {
		t.Errorf("short out: no error")
	}
}
