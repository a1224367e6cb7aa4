package kernel

import (
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestU64KeysLoad checks the load u64Limit promises: a directly probed
// table at most half full, a larger one at most 7/8, after merges (the
// table growing within a record) and after a removal (compact rebuilds
// it), with every key still found.
func TestU64KeysLoad(t *testing.T) {
	for _, n := range []int{100, 3000, 140_000} {
		mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
		b := array.NewInt64Builder(mem)
		for i := range n {
			b.Append(int64(splitmixTest(uint64(i))))
		}
		kc := b.NewArray()
		b.Release()
		vb := array.NewInt64Builder(mem)
		for range n {
			vb.Append(1)
		}
		vc := vb.NewArray()
		vb.Release()
		rec := gbRecord([]string{"k", "v"}, kc, vc)
		g, err := NewGroupBy(mem, rec.Schema(), []string{"k"}, []Agg{sumOf("v")})
		if err != nil {
			t.Fatal(err)
		}
		tab := g.keys.(*u64Keys)
		check := func(what string, groups int) {
			t.Helper()
			slots := len(tab.slots)
			maxLoad := tableLimit(slots)
			if slots <= u64DirectSlots {
				maxLoad = slots / 2
			}
			if g.Len() != groups || g.Len() > maxLoad {
				t.Fatalf("n=%d %s: %d groups (want %d) in %d slots, at most %d allowed", n, what, g.Len(), groups, slots, maxLoad)
			}
		}
		for range 2 {
			if err := g.Merge(rec); err != nil {
				t.Fatal(err)
			}
		}
		check("merged", n)
		removed, err := g.Remove(func(_ []arrow.Array, out []bool) {
			for i := range out {
				out[i] = i%3 != 0
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		removed.Release()
		kept := n - (n+2)/3
		check("removed", kept)
		out := g.Output(false)
		sums := out.Column(1).(*array.Int64)
		for i := range int(out.NumRows()) {
			if sums.Value(i) != 2 {
				t.Fatalf("n=%d: group %d sum %d, want 2", n, i, sums.Value(i))
			}
		}
		out.Release()
		rec.Release()
		g.Release()
		mem.AssertSize(t, 0)
	}
}

func splitmixTest(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}
