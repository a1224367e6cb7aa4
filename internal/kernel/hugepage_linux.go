package kernel

import (
	"syscall"
	"unsafe"
)

// Transparent huge pages for the hash tables' slots. A table of 100k
// groups is 4-6 MiB of slots probed at random: in 4 KiB pages that is
// 1-1.5k pages, more than the data TLB holds, so on top of a cache miss
// most probes also walked the page table. Backed by 2 MiB pages, the same
// table takes 2-3 TLB entries (measured: the string-key group-by at 100k
// groups +25-45% rows per CPU-second; README performance item 12).
//
// Many Linux machines set transparent_hugepage to madvise, where only
// memory advised with MADV_HUGEPAGE gets huge pages. The slots are
// ordinary Go memory: advising it changes no byte and no ownership, only
// how the kernel maps it; the runtime may still return it to the OS. A
// kernel without the advice (or without MADV_COLLAPSE, Linux < 6.1)
// answers with an error that is ignored: the table works as before.

const (
	hugePageBytes = 2 << 20
	madvHugepage  = 14 // MADV_HUGEPAGE
	madvCollapse  = 25 // MADV_COLLAPSE
)

// hugeSlotBytes is the smallest table adviseHuge advises: below it the
// slots fit the TLB's reach anyway.
const hugeSlotBytes = 2 * hugePageBytes

// adviseHuge advises the 2 MiB-aligned pages inside [p, p+size), the
// freshly made slots of a table: MADV_HUGEPAGE, so that pages not yet
// touched are faulted in huge, then MADV_COLLAPSE, for those the runtime
// already zeroed in small pages.
func adviseHuge(p unsafe.Pointer, size int) {
	if size < hugeSlotBytes {
		return
	}
	base := uintptr(p)
	start := (base + hugePageBytes - 1) &^ (hugePageBytes - 1)
	end := (base + uintptr(size)) &^ (hugePageBytes - 1)
	if end <= start {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(p, start-base)), end-start)
	_ = syscall.Madvise(b, madvHugepage)
	_ = syscall.Madvise(b, madvCollapse)
}
