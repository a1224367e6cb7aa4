package kernel

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestVec checks vec against a plain slice, flat and chunked and across
// the change and chunk edges: growth in small and large steps, push, at,
// gather, compact and the Arrow builder.
func TestVec(t *testing.T) {
	for _, flatMax := range []int{0, 1000, vecChunk, 3 * vecChunk} {
		t.Run(fmt.Sprint(flatMax), func(t *testing.T) { testVec(t, flatMax) })
	}
}

func testVec(t *testing.T, flatMax int) {
	rng := rand.New(rand.NewPCG(5, uint64(flatMax)))
	v := vec[int64]{flatMax: flatMax}
	var ref []int64
	check := func(what string) {
		t.Helper()
		if v.len() != len(ref) {
			t.Fatalf("%s: len %d, want %d", what, v.len(), len(ref))
		}
		if got := v.gather(nil); !slices.Equal(got, ref) {
			t.Fatalf("%s: gather(nil) differs", what)
		}
		idx := []uint32{}
		for range 100 {
			if len(ref) > 0 {
				idx = append(idx, uint32(rng.IntN(len(ref))))
			}
		}
		got := v.gather(idx)
		for j, g := range idx {
			if got[j] != ref[g] || *v.at(g) != ref[g] {
				t.Fatalf("%s: element %d is %d, want %d", what, g, got[j], ref[g])
			}
		}
		// Elements past len are zero: growing exposes zeros.
		n := len(ref)
		v.grow(n + 3)
		ref = append(ref, 0, 0, 0)
		for i := n; i < n+3; i++ {
			if *v.at(uint32(i)) != 0 {
				t.Fatalf("%s: element %d past the old length is %d", what, i, *v.at(uint32(i)))
			}
		}
	}
	for _, step := range []int{1, 7, 63, 64, 65, 1000, vecChunk - 1, 1, vecChunk, 2*vecChunk + 5} {
		for range step {
			x := rng.Int64()
			v.push(x)
			ref = append(ref, x)
		}
		check("push")
	}
	v.grow(len(ref) + vecChunk/2)
	ref = append(ref, make([]int64, vecChunk/2)...)
	check("grow")
	for i := range ref {
		ref[i] += int64(i)
		*v.at(uint32(i)) += int64(i)
	}
	check("at")

	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	for _, idx := range [][]uint32{nil, {0, uint32(len(ref) - 1), vecChunk, vecChunk - 1}} {
		arr := vecFixedArray(mem, arrow.PrimitiveTypes.Int64, &v, idx)
		vals := arr.(*array.Int64).Int64Values()
		for j := range vals {
			if want := ref[aggRow(idx, j)]; vals[j] != want {
				t.Fatalf("vecFixedArray(%v) row %d: %d, want %d", idx == nil, j, vals[j], want)
			}
		}
		arr.Release()
	}

	for _, keepEvery := range []int{3, 1, 2, 0} {
		keep := make([]bool, len(ref))
		for i := range keep {
			keep[i] = keepEvery > 0 && i%keepEvery != 0 || keepEvery == 1
		}
		v.compact(keep)
		ref = aggCompact(ref, keep)
		check("compact")
		if want := max(1, (len(ref)+vecMask)/vecChunk); v.chunked && len(v.chunks) != want {
			t.Fatalf("compact to %d elements keeps %d chunks, want %d", len(ref), len(v.chunks), want)
		}
	}
	for range 3*vecChunk + 1 {
		v.push(9)
		ref = append(ref, 9)
	}
	check("push after compact")
	if want := flatMax > 0 && len(ref) > flatMax; v.chunked != want {
		t.Fatalf("chunked %v with %d elements, flatMax %d", v.chunked, len(ref), flatMax)
	}
}

// TestGroupByMoreGroupsThanAChunk crosses several vec chunks with int64 and
// string keys, removes groups across chunk edges and merges again.
func TestGroupByMoreGroupsThanAChunk(t *testing.T) {
	for _, kind := range []string{"int64", "string"} {
		t.Run(kind, func(t *testing.T) {
			mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
			defer mem.AssertSize(t, 0)
			const groups = 2*vecChunk + 17
			var batches []arrow.RecordBatch
			for b := range 2 {
				n := groups
				ib := array.NewInt64Builder(mem)
				sb := array.NewStringBuilder(mem)
				vb := array.NewInt64Builder(mem)
				for i := range n {
					k := (i*11 + b) % groups // 11 and groups are coprime: every key once a batch
					ib.Append(int64(k) * 1_000_003)
					sb.Append(strings.Repeat("x", k%31) + strconv.Itoa(k)) // 1 to 36 bytes
					vb.Append(int64(i % 1000))
				}
				ki, ks, kv := ib.NewArray(), sb.NewArray(), vb.NewArray()
				ib.Release()
				sb.Release()
				vb.Release()
				batches = append(batches, gbRecord([]string{"ki", "ks", "v"}, ki, ks, kv))
			}
			defer func() {
				for _, b := range batches {
					b.Release()
				}
			}()
			keys := map[string][]string{"int64": {"ki"}, "string": {"ks"}}[kind]
			aggs := []Agg{sumOf("v"), countOf("*"), minOf("v")}
			g, err := NewGroupBy(mem, batches[0].Schema(), keys, aggs)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Release()
			gbForceLarge(g, vecChunk/2)
			gbCheck(t, g, batches[:1], keys, aggs)
			if g.Len() != groups {
				t.Fatalf("%d groups, want %d", g.Len(), groups)
			}
			// Keep every other group, then merge everything again: the
			// removed ones come back at the end with fresh state.
			removed, err := g.Remove(func(_ []arrow.Array, out []bool) {
				for i := range out {
					out[i] = i%2 == 0
				}
			})
			if err != nil {
				t.Fatal(err)
			}
			if int(removed.NumRows()) != groups/2 {
				t.Fatalf("removed %d, want %d", removed.NumRows(), groups/2)
			}
			removed.Release()
			if err := g.Merge(batches[1]); err != nil {
				t.Fatal(err)
			}
			out := g.Output(false)
			defer out.Release()
			if g.Len() != groups || int(out.NumRows()) != groups {
				t.Fatalf("%d groups after re-merge, want %d", g.Len(), groups)
			}
			// Surviving groups first (old order, counts 2), then the re-added
			// ones (count 1).
			counts := out.Column(len(keys) + 1).(*array.Int64)
			for i := range groups {
				want := int64(1)
				if i < (groups+1)/2 {
					want = 2
				}
				if counts.Value(i) != want {
					t.Fatalf("row %d: count %d, want %d", i, counts.Value(i), want)
				}
			}
		})
	}
}

// gbForceLarge makes g take the paths of large states with few groups:
// the vecs of int64 keys, counts and int64 sums turn chunked past n
// elements, and keys are probed through the load-ahead pipeline whatever
// the table size.
func gbForceLarge(g *GroupBy, n int) {
	switch k := g.keys.(type) {
	case *u64Keys:
		k.keys.flatMax = n
		k.pipelined = true
	case *bytesKeys:
		k.pipelined = true
	}
	forceVecs(g, n)
}

// gbForceDirect makes g probe its keys one row at a time, without the
// pipeline, whatever the table size and architecture.
func gbForceDirect(g *GroupBy) {
	switch k := g.keys.(type) {
	case *u64Keys:
		k.direct = true
	case *bytesKeys:
		k.direct = true
	}
}

func forceVecs(g *GroupBy, n int) {
	for _, acc := range g.accs {
		switch a := acc.(type) {
		case *countAcc:
			a.counts.flatMax = n
		case *sumIntAcc[int64]:
			a.sc.flatMax = n
		}
	}
}
