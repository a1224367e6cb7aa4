package kernel

// prefetchSlots asks the CPU to bring slots[pos[i]] into the cache for
// i < n, without waiting for them (PREFETCHT0): unlike a load, a prefetch
// retires at once, so a block of misses overlaps without filling the
// reorder buffer. Every pos[i] must index slots.
//
//go:noescape
func prefetchSlots(slots *u64Slot, pos *uint64, n int)

// hasPrefetch: prefetchSlots issues real prefetches on this architecture.
const hasPrefetch = true
