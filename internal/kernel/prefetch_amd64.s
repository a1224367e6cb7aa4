#include "textflag.h"

// func prefetchSlots(slots *u64Slot, pos *uint64, n int)
// PREFETCHT0 of slots[pos[0]], …, slots[pos[n-1]] (16-byte slots).
TEXT ·prefetchSlots(SB), NOSPLIT, $0-24
	MOVQ slots+0(FP), AX
	MOVQ pos+8(FP), BX
	MOVQ n+16(FP), CX
	TESTQ CX, CX
	JLE done
loop:
	MOVQ (BX), DX
	SHLQ $4, DX
	PREFETCHT0 (AX)(DX*1)
	ADDQ $8, BX
	DECQ CX
	JNZ loop
done:
	RET
