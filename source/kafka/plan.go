package kafka

import (
	"math/bits"
	"sort"
)

// spread divides limit offsets among partitions with the given lags (in
// partition order), in proportion to lag, deterministically:
//
//   - if the total lag fits in limit, every partition gets its whole lag;
//   - otherwise, when limit allows, every lagging partition first gets one
//     offset (no partition is starved by a large neighbour), and the rest is
//     shared in proportion to the remaining lag, rounding down, the leftover
//     going one by one to the largest remainders (ties: partition order);
//   - when limit is smaller than the number of lagging partitions, the
//     partitions with the largest lag get one each (ties: partition order);
//     they are the ones left furthest behind, so every partition is served
//     within a bounded number of batches.
func spread(limit int64, lags []int64) []int64 {
	out := make([]int64, len(lags))
	var total uint64 // offsets are below 2^63, so a few partitions' sum fits
	var lagging []int
	for i, l := range lags {
		if l > 0 {
			total += uint64(l)
			lagging = append(lagging, i)
		}
	}
	if limit <= 0 || total <= uint64(limit) {
		for _, i := range lagging {
			out[i] = lags[i]
		}
		return out
	}
	if limit < int64(len(lagging)) {
		order := append([]int(nil), lagging...)
		sort.SliceStable(order, func(a, b int) bool { return lags[order[a]] > lags[order[b]] })
		for _, i := range order[:limit] {
			out[i] = 1
		}
		return out
	}
	// One each, then the rest in proportion to lag-1.
	rest := limit - int64(len(lagging))
	var restTotal uint64
	for _, i := range lagging {
		out[i] = 1
		restTotal += uint64(lags[i] - 1)
	}
	type rem struct {
		i int
		r uint64
	}
	rems := make([]rem, 0, len(lagging))
	var given int64
	for _, i := range lagging {
		if restTotal == 0 {
			break
		}
		hi, lo := bits.Mul64(uint64(rest), uint64(lags[i]-1))
		q, r := bits.Div64(hi, lo, restTotal) // rest*(lag-1) < 2^64*restTotal since rest < restTotal
		out[i] += int64(q)
		given += int64(q)
		rems = append(rems, rem{i, r})
	}
	sort.SliceStable(rems, func(a, b int) bool { return rems[a].r > rems[b].r })
	for k := 0; given < rest && k < len(rems); k++ {
		out[rems[k].i]++
		given++
	}
	return out
}
