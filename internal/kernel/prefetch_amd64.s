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

// func u64ProbeAsm(slots *u64Slot, mask, shift uint64, vals *uint64, gids *uint32, n, i, ahead int) (row int, slot uint64)
// Probes rows i, i+1, … (see keytable_u64.go, u64ProbeGo): a row's first
// slot is ((k ^ k>>29) * 0x9e3779b97f4a7c15) >> shift (u64Slot0); a slot is
// key at 0, gid+1 at 8 (0: empty), 16 bytes. At row r it prefetches the
// slot of row r+16 (u64Ahead).
TEXT ·u64ProbeAsm(SB), NOSPLIT, $0-80
	MOVQ slots+0(FP), AX
	MOVQ mask+8(FP), BX
	MOVQ shift+16(FP), CX
	MOVQ vals+24(FP), SI
	MOVQ gids+32(FP), DI
	MOVQ n+40(FP), R8
	MOVQ i+48(FP), R9
	MOVQ $0x9e3779b97f4a7c15, R10
	// Prefetch rows [i+ahead, min(i+16, n)).
	MOVQ ahead+56(FP), R12
	ADDQ R9, R12
	LEAQ 16(R9), R13
	CMPQ R13, R8
	CMOVQGT R8, R13
warm:
	CMPQ R12, R13
	JGE loop
	MOVQ (SI)(R12*8), R11
	MOVQ R11, DX
	SHRQ $29, DX
	XORQ R11, DX
	IMULQ R10, DX
	SHRQ CX, DX
	SHLQ $4, DX
	PREFETCHT0 (AX)(DX*1)
	INCQ R12
	JMP warm
loop:
	CMPQ R9, R8
	JGE end
	// Prefetch the slot of row i+16.
	LEAQ 16(R9), R12
	CMPQ R12, R8
	JGE probe0
	MOVQ (SI)(R12*8), DX
	MOVQ DX, R13
	SHRQ $29, R13
	XORQ DX, R13
	IMULQ R10, R13
	SHRQ CX, R13
	SHLQ $4, R13
	PREFETCHT0 (AX)(R13*1)
probe0:
	MOVQ (SI)(R9*8), R11
	MOVQ R11, R12
	SHRQ $29, R12
	XORQ R11, R12
	IMULQ R10, R12
	SHRQ CX, R12
probe:
	MOVQ R12, R13
	SHLQ $4, R13
	MOVL 8(AX)(R13*1), DX
	TESTL DX, DX
	JEQ miss
	CMPQ R11, (AX)(R13*1)
	JNE next
	DECL DX
	MOVL DX, (DI)(R9*4)
	INCQ R9
	JMP loop
next:
	INCQ R12
	ANDQ BX, R12
	JMP probe
miss:
	MOVQ R9, row+64(FP)
	MOVQ R12, slot+72(FP)
	RET
end:
	MOVQ R8, row+64(FP)
	MOVQ $0, slot+72(FP)
	RET

// func prefetchStrSlots(slots *strSlot, pos *uint64, n int)
// PREFETCHT0 of the first and the last byte of slots[pos[0]], …,
// slots[pos[n-1]] (24-byte slots, which may straddle two cache lines).
TEXT ·prefetchStrSlots(SB), NOSPLIT, $0-24
	MOVQ slots+0(FP), AX
	MOVQ pos+8(FP), BX
	MOVQ n+16(FP), CX
	TESTQ CX, CX
	JLE sdone
sloop:
	MOVQ (BX), DX
	LEAQ (DX)(DX*2), DX
	SHLQ $3, DX
	PREFETCHT0 (AX)(DX*1)
	PREFETCHT0 23(AX)(DX*1)
	ADDQ $8, BX
	DECQ CX
	JNZ sloop
sdone:
	RET
