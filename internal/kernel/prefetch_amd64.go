package kernel

// prefetchSlots asks the CPU to bring slots[pos[i]] into the cache for
// i < n, without waiting for them (PREFETCHT0): unlike a load, a prefetch
// retires at once, so a block of misses overlaps without filling the
// reorder buffer. Every pos[i] must index slots.
//
//go:noescape
func prefetchSlots(slots *u64Slot, pos *uint64, n int)

// prefetchStrSlots is prefetchSlots for the 24-byte slots of bytesKeys:
// it asks for both cache lines a slot may straddle. Every pos[i] must
// index slots.
//
//go:noescape
func prefetchStrSlots(slots *strSlot, pos *uint64, n int)

// u64ProbeAsm is u64ProbeGo for 8-byte keys (vals and gids of n rows; slots
// of mask+1 entries, a key's first slot its u64Slot0 with shift), which
// also prefetches, as it probes row r, the slot of row r+u64Ahead; the
// slots of rows [i, i+ahead) are prefetched at the start.
//
//go:noescape
func u64ProbeAsm(slots *u64Slot, mask, shift uint64, vals *uint64, gids *uint32, n, i, ahead int) (row int, slot uint64)

// hasPrefetch: prefetchSlots issues real prefetches on this architecture.
const hasPrefetch = true
