package kernel

import (
	"math/rand/v2"
	"testing"
)

// TestU64ProbeAsmMatchesGo runs the probe loops of u64FindGids side by
// side on one table (keys clustered into runs of colliding slots, some rows
// missing): from every start row and prefetch state, u64Probe (u64ProbeAsm
// on amd64) and u64ProbeGo stop at the same row and slot and write the
// same gids.
func TestU64ProbeAsmMatchesGo(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, slots := range []int{minTableSlots, 1 << 12} {
		tb := &u64Keys{width: 8, nullGid: -1}
		tb.resize(slots)
		mask := uint64(slots - 1)
		// Fill the table to its limit with keys whose first slots fall in
		// a few places, so probes wrap and run long.
		var present []uint64
		for len(present) < u64Limit(slots) {
			k := rng.Uint64()
			if u64Slot0(k, tb.shift)%64 > 4 {
				continue
			}
			p := u64Slot0(k, tb.shift)
			for tb.slots[p].gid != 0 {
				p = (p + 1) & mask
			}
			g := uint32(tb.keys.len())
			tb.keys.push(k)
			tb.slots[p] = u64Slot{key: k, gid: g + 1}
			present = append(present, k)
		}
		vals := make([]uint64, 3000)
		for i := range vals {
			if rng.IntN(50) == 0 {
				vals[i] = rng.Uint64() // absent (almost surely)
			} else {
				vals[i] = present[rng.IntN(len(present))]
			}
		}
		for i := 0; i < len(vals); i += 1 + rng.IntN(40) {
			for _, ahead := range []int{0, 1, u64Ahead} {
				got, want := make([]uint32, len(vals)), make([]uint32, len(vals))
				r, p := u64Probe(tb, vals, got, i, ahead)
				wr, wp := u64ProbeGo(tb.slots, tb.shift, vals, want, i)
				if r != wr || p != wp {
					t.Fatalf("%d slots, from row %d, ahead %d: stopped at row %d slot %d, Go at row %d slot %d", slots, i, ahead, r, p, wr, wp)
				}
				for j := i; j < r; j++ {
					if got[j] != want[j] || *tb.keys.at(got[j]) != vals[j] {
						t.Fatalf("%d slots, row %d: gid %d, Go %d", slots, j, got[j], want[j])
					}
				}
				if r < len(vals) && tb.slots[p].gid != 0 {
					t.Fatalf("%d slots: stopped at row %d on a full slot %d", slots, r, p)
				}
			}
		}
	}
}
