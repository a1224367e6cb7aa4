package statestore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
)

// TestKeyTableSorted checks the overlay's table: it keeps the first change
// per key and returns the keys in bytes.Compare order, for sets below and
// above the radix threshold whose keys tie on their first 8 and 16 bytes,
// hold zero bytes, and are longer than 16 bytes.
func TestKeyTableSorted(t *testing.T) {
	mem := newMem(t)
	for _, n := range []int{1, 10, radixMin - 1, radixMin, 5000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(n), 1))
			prefixes := []string{"", "k-", "merchant-000000", "merchant-000000-long-prefix-", "\x00\x00"}
			users := make([]string, n)
			for i := range users {
				users[i] = prefixes[rng.IntN(len(prefixes))] + fmt.Sprint(rng.IntN(3*n))
				if rng.IntN(10) == 0 {
					users[i] += "\x00" + strings.Repeat("z", rng.IntN(20))
				}
			}
			b := array.NewRecordBuilder(mem, testKey)
			defer b.Release()
			for i, u := range users {
				b.Field(0).(*array.StringBuilder).Append(u)
				b.Field(1).(*array.Int64Builder).Append(int64(i % 3))
			}
			rec := b.NewRecordBatch()
			defer rec.Release()
			enc := newKeyEncoder(rec, 2)
			tbl := newKeyTable(n / 4) // grows
			tbl.recs = []arrow.RecordBatch{rec}
			first := map[string]int{}
			var want [][]byte
			for i := range users {
				k := enc.encode(nil, i)
				tbl.insert(k, 0, int32(i))
				if _, ok := first[string(k)]; !ok {
					first[string(k)] = i
					want = append(want, k)
				}
			}
			slices.SortFunc(want, bytes.Compare)
			got := tbl.sorted()
			if len(got) != len(want) {
				t.Fatalf("%d keys, want %d", len(got), len(want))
			}
			for i, c := range got {
				if !bytes.Equal(c.key, want[i]) {
					t.Fatalf("key %d is %q, want %q", i, c.key, want[i])
				}
				if c.rec != rec || c.row != first[string(c.key)] {
					t.Fatalf("key %q keeps row %d, want the first, %d", c.key, c.row, first[string(c.key)])
				}
			}
		})
	}
}
