package kernel

import (
	"fmt"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestGroupByBigTables merges enough groups that the slots leave the
// cache and the half-full sizing (string keys: 12 MiB of slots at 200k
// groups; int64: 8 MiB), in records that revisit every group, and checks
// every group's sum and count against the input, through each probe loop.
func TestGroupByBigTables(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	const groups, rows, recs = 200_000, 100_000, 5
	mem := memory.NewGoAllocator()
	for _, typ := range []string{"string", "int64"} {
		for _, loop := range []string{"default", "direct"} {
			t.Run(typ+"/"+loop, func(t *testing.T) {
				var sch *arrow.Schema
				var g *GroupBy
				sum := make([]int64, groups)
				cnt := make([]int64, groups)
				for r := range recs {
					var kc arrow.Array
					keys := make([]int, rows)
					for i := range keys {
						keys[i] = (r*rows + i*7919) % groups
					}
					if typ == "string" {
						b := array.NewStringBuilder(mem)
						for _, k := range keys {
							b.Append(fmt.Sprintf("k-%d", k))
						}
						kc = b.NewArray()
						b.Release()
					} else {
						b := array.NewInt64Builder(mem)
						for _, k := range keys {
							b.Append(int64(k) * 1_000_003)
						}
						kc = b.NewArray()
						b.Release()
					}
					vb := array.NewInt64Builder(mem)
					for i, k := range keys {
						v := int64(i%13 - 6)
						vb.Append(v)
						sum[k] += v
						cnt[k]++
					}
					vc := vb.NewArray()
					vb.Release()
					rec := gbRecord([]string{"k", "v"}, kc, vc)
					if g == nil {
						sch = rec.Schema()
						var err error
						if g, err = NewGroupBy(mem, sch, []string{"k"}, []Agg{sumOf("v"), countOf("*")}); err != nil {
							t.Fatal(err)
						}
						if loop == "direct" {
							gbForceDirect(g)
						}
					}
					if err := g.Merge(rec); err != nil {
						t.Fatal(err)
					}
					rec.Release()
				}
				defer g.Release()
				seen := 0
				for k := range groups {
					if cnt[k] > 0 {
						seen++
					}
				}
				if g.Len() != seen {
					t.Fatalf("%d groups, want %d", g.Len(), seen)
				}
				out := g.Output(false)
				defer out.Release()
				for i := range int(out.NumRows()) {
					var k int
					switch c := out.Column(0).(type) {
					case *array.String:
						if _, err := fmt.Sscanf(c.Value(i), "k-%d", &k); err != nil {
							t.Fatal(err)
						}
					case *array.Int64:
						k = int(c.Value(i) / 1_000_003)
					}
					s := out.Column(1).(*array.Int64).Value(i)
					n := out.Column(2).(*array.Int64).Value(i)
					if s != sum[k] || n != cnt[k] {
						t.Fatalf("group %d: sum %d count %d, want %d %d", k, s, n, sum[k], cnt[k])
					}
				}
			})
		}
	}
}
