//go:build !amd64

package kernel

// prefetchSlots does nothing where no prefetch instruction is wired up;
// the probe then relies on its loads alone.
func prefetchSlots(slots *u64Slot, pos *uint64, n int) {}

// prefetchStrSlots does nothing where no prefetch instruction is wired up.
func prefetchStrSlots(slots *strSlot, pos *uint64, n int) {}

// hasPrefetch: prefetchSlots issues real prefetches on this architecture.
const hasPrefetch = false

// u64ProbeAsm is never called where hasPrefetch is false.
func u64ProbeAsm(slots *u64Slot, mask, shift uint64, vals *uint64, gids *uint32, n, i, ahead int) (row int, slot uint64) {
	panic("kernel: u64ProbeAsm without prefetch")
}
