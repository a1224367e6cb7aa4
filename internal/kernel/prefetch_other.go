//go:build !amd64

package kernel

// prefetchSlots does nothing where no prefetch instruction is wired up;
// the probe then relies on its loads alone.
func prefetchSlots(slots *u64Slot, pos *uint64, n int) {}

// hasPrefetch: prefetchSlots issues real prefetches on this architecture.
const hasPrefetch = false
