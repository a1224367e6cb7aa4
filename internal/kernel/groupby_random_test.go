package kernel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// gbRandKey is the string of key number k: lengths 0 to 40 (around the 8
// and 16 byte word edges of the key table), from an alphabet with a zero
// byte, so keys share long prefixes and differ only in a trailing zero or
// their length.
func gbRandKey(k int) string {
	const alphabet = "ab\x00"
	n := k % 41
	b := make([]byte, n)
	x := k / 41
	for i := n - 1; i >= 0; i-- {
		b[i] = alphabet[x%3]
		x /= 3
	}
	return string(b)
}

// TestGroupByRandomAgainstMap merges many random batches (growing key
// domains so the table grows across and within batches, nulls, sliced
// records, strings of every length) with removals in between, and after
// each step compares the complete and the update output with a Go map.
func TestGroupByRandomAgainstMap(t *testing.T) {
	kinds := []struct {
		name    string
		types   []arrow.DataType
		chunked bool
		noNulls bool
		// setup, when set, replaces the chunked/direct choice.
		setup func(g *GroupBy)
	}{
		{"int64", []arrow.DataType{arrow.PrimitiveTypes.Int64}, false, false, nil},
		{"int64/chunked", []arrow.DataType{arrow.PrimitiveTypes.Int64}, true, false, nil},
		{"string/chunked", []arrow.DataType{arrow.BinaryTypes.String}, true, false, nil},
		{"string+int64/chunked", []arrow.DataType{arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64}, true, false, nil},
		{"int32", []arrow.DataType{arrow.PrimitiveTypes.Int32}, false, false, nil},
		{"string", []arrow.DataType{arrow.BinaryTypes.String}, false, false, nil},
		{"binary", []arrow.DataType{arrow.BinaryTypes.Binary}, false, false, nil},
		{"large_string", []arrow.DataType{arrow.BinaryTypes.LargeString}, false, false, nil},
		{"string+int64", []arrow.DataType{arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64}, false, false, nil},
		{"int16+bool+string", []arrow.DataType{arrow.PrimitiveTypes.Int16, arrow.FixedWidthTypes.Boolean, arrow.BinaryTypes.String}, false, false, nil},
		// Keys without nulls take u64FindGids (u64ProbeAsm on amd64 for
		// 8-byte keys); the knobs force each of the other loops on the
		// same data.
		{"int64/no-nulls", []arrow.DataType{arrow.PrimitiveTypes.Int64}, false, true, func(*GroupBy) {}},
		{"int64/no-nulls/chunked", []arrow.DataType{arrow.PrimitiveTypes.Int64}, false, true, func(g *GroupBy) { gbForceLarge(g, 700) }},
		{"int64/no-nulls/go-probe", []arrow.DataType{arrow.PrimitiveTypes.Int64}, false, true, func(g *GroupBy) { g.keys.(*u64Keys).probeGo = true }},
		{"int64/no-nulls/general", []arrow.DataType{arrow.PrimitiveTypes.Int64}, false, true, func(g *GroupBy) { g.keys.(*u64Keys).general = true }},
		{"int64/no-nulls/tracked", []arrow.DataType{arrow.PrimitiveTypes.Int64}, false, true, func(g *GroupBy) { g.track = true }},
		// String keys find without first-sight tracking unless an
		// accumulator needs it; the knob forces tracking on both loops.
		{"string/tracked", []arrow.DataType{arrow.BinaryTypes.String}, false, false, func(g *GroupBy) { g.track = true }},
		{"string/tracked/direct", []arrow.DataType{arrow.BinaryTypes.String}, false, false, func(g *GroupBy) { g.track = true; gbForceDirect(g) }},
		{"string+int64/tracked", []arrow.DataType{arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int64}, false, false, func(g *GroupBy) { g.track = true }},
		{"int32/no-nulls", []arrow.DataType{arrow.PrimitiveTypes.Int32}, false, true, func(*GroupBy) {}},
	}
	for _, kind := range kinds {
		t.Run(kind.name, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			rng := rand.New(rand.NewPCG(11, uint64(len(kind.name))))
			var keyNames []string
			for i := range kind.types {
				keyNames = append(keyNames, fmt.Sprintf("k%d", i))
			}
			names := append(slices.Clone(keyNames), "v")
			var sch *arrow.Schema
			var g *GroupBy
			type refGroup struct{ sum, count int64 }
			ref := map[string]*refGroup{}
			var order []string   // groups in insertion order
			var touched []string // groups touched since ClearChanges, first touch first
			isTouched := map[string]bool{}
			defer func() {
				if g != nil {
					g.Release()
				}
			}()
			for step := range 40 {
				domain := 20 + step*step*40
				n := rng.IntN(1500)
				cols := make([]arrow.Array, 0, len(names))
				for _, dt := range kind.types {
					b := array.NewBuilder(mem, dt)
					for range n {
						if rng.IntN(20) == 0 && !kind.noNulls {
							b.AppendNull()
							continue
						}
						k := rng.IntN(domain)
						switch bb := b.(type) {
						case *array.Int64Builder:
							bb.Append(int64(k) * 0x1_0000_0001)
						case *array.Int32Builder:
							bb.Append(int32(k) - 1000)
						case *array.Int16Builder:
							bb.Append(int16(k % 7))
						case *array.BooleanBuilder:
							bb.Append(k%2 == 0)
						case *array.StringBuilder:
							bb.Append(gbRandKey(k))
						case *array.LargeStringBuilder:
							bb.Append(gbRandKey(k))
						case *array.BinaryBuilder:
							bb.Append([]byte(gbRandKey(k)))
						}
					}
					cols = append(cols, b.NewArray())
					b.Release()
				}
				vb := array.NewInt64Builder(mem)
				for range n {
					vb.Append(int64(rng.IntN(1000)))
				}
				cols = append(cols, vb.NewArray())
				vb.Release()
				rec := gbRecord(names, cols...)
				if n > 10 && rng.IntN(2) == 0 {
					// A slice: arrays with an offset, data before and after.
					s := rec.NewSlice(int64(rng.IntN(n/2)), int64(n-rng.IntN(n/2)))
					rec.Release()
					rec = s
				}
				if g == nil {
					sch = rec.Schema()
					var err error
					if g, err = NewGroupBy(mem, sch, keyNames, []Agg{sumOf("v"), countOf("*")}); err != nil {
						t.Fatal(err)
					}
					if kind.setup != nil {
						kind.setup(g)
					} else if kind.chunked {
						gbForceLarge(g, 700) // chunked from 700 groups on, pipelined probes
					} else {
						gbForceDirect(g) // probes one row at a time
					}
				}
				if err := g.Merge(rec); err != nil {
					t.Fatal(err)
				}
				kc := rec.Columns()[:len(keyNames)]
				vals := rec.Column(len(keyNames)).(*array.Int64)
				for i := range int(rec.NumRows()) {
					ks := gbKeyString(kc, i)
					gr := ref[ks]
					if gr == nil {
						gr = &refGroup{}
						ref[ks] = gr
						order = append(order, ks)
					}
					gr.sum += vals.Value(i)
					gr.count++
					if !isTouched[ks] {
						isTouched[ks] = true
						touched = append(touched, ks)
					}
				}
				rec.Release()

				check := func(what string, out arrow.RecordBatch, want []string) {
					t.Helper()
					defer out.Release()
					if int(out.NumRows()) != len(want) {
						t.Fatalf("step %d %s: %d rows, want %d", step, what, out.NumRows(), len(want))
					}
					nk := len(keyNames)
					sums := out.Column(nk).(*array.Int64)
					counts := out.Column(nk + 1).(*array.Int64)
					for i, ks := range want {
						if got := gbKeyString(out.Columns()[:nk], i); got != ks {
							t.Fatalf("step %d %s: row %d key %q, want %q", step, what, i, got, ks)
						}
						if gr := ref[ks]; sums.Value(i) != gr.sum || counts.Value(i) != gr.count {
							t.Fatalf("step %d %s: key %q: sum %d count %d, want %d %d", step, what, ks, sums.Value(i), counts.Value(i), gr.sum, gr.count)
						}
					}
				}
				if g.Len() != len(order) {
					t.Fatalf("step %d: Len %d, want %d", step, g.Len(), len(order))
				}
				check("complete", g.Output(false), order)
				check("update", g.Output(true), touched)

				switch step % 7 {
				case 3:
					g.ClearChanges()
					touched, isTouched = nil, map[string]bool{}
				case 6:
					// Evict about a third of the groups, then keep merging.
					drop := func(ks string) bool { return len(ks)%3 == step%3 }
					removed, err := g.Remove(func(keys []arrow.Array, out []bool) {
						for i := range out {
							out[i] = !drop(gbKeyString(keys, i))
						}
					})
					if err != nil {
						t.Fatal(err)
					}
					var gone []string
					order = slices.DeleteFunc(order, func(ks string) bool {
						if drop(ks) {
							gone = append(gone, ks)
							delete(ref, ks)
							return true
						}
						return false
					})
					touched = slices.DeleteFunc(touched, func(ks string) bool {
						if drop(ks) {
							delete(isTouched, ks)
							return true
						}
						return false
					})
					if int(removed.NumRows()) != len(gone) {
						t.Fatalf("step %d: removed %d groups, want %d", step, removed.NumRows(), len(gone))
					}
					for i, ks := range gone {
						if got := gbKeyString(removed.Columns(), i); got != ks {
							t.Fatalf("step %d: removed row %d is %q, want %q", step, i, got, ks)
						}
					}
					removed.Release()
				}
			}
			if len(order) < 2000 {
				t.Fatalf("only %d groups at the end: the table did not grow enough", len(order))
			}
		})
	}
}
