#include "textflag.h"

// Reverses the bytes of a 128-bit lane: the counter is kept as a little-endian number
// (its low 64 bits added to lane by lane) and encrypted as the big-endian block it is.
DATA ctrReverse<>+0x00(SB)/8, $0x08090a0b0c0d0e0f
DATA ctrReverse<>+0x08(SB)/8, $0x0001020304050607
GLOBL ctrReverse<>(SB), (NOPTR+RODATA), $16

// What each of a ZMM register's four lanes adds to the counter: its place.
DATA ctrLanes<>+0x00(SB)/8, $0
DATA ctrLanes<>+0x08(SB)/8, $0
DATA ctrLanes<>+0x10(SB)/8, $1
DATA ctrLanes<>+0x18(SB)/8, $0
DATA ctrLanes<>+0x20(SB)/8, $2
DATA ctrLanes<>+0x28(SB)/8, $0
DATA ctrLanes<>+0x30(SB)/8, $3
DATA ctrLanes<>+0x38(SB)/8, $0
GLOBL ctrLanes<>(SB), (NOPTR+RODATA), $64

// Four blocks on, in every lane.
DATA ctrFour<>+0x00(SB)/8, $4
DATA ctrFour<>+0x08(SB)/8, $0
GLOBL ctrFour<>(SB), (NOPTR+RODATA), $16

// One AES round of the sixteen blocks in Z0–Z3 under round key K.
#define ROUND4(K) \
	VAESENC K, Z0, Z0; \
	VAESENC K, Z1, Z1; \
	VAESENC K, Z2, Z2; \
	VAESENC K, Z3, Z3

// func ctrXORZMM(rk *[15 * 16]byte, rounds int, ctr *[16]byte, dst, src *byte, groups int)
TEXT ·ctrXORZMM(SB), NOSPLIT, $0-48
	MOVQ rk+0(FP), AX
	MOVQ rounds+8(FP), BX
	MOVQ ctr+16(FP), DX
	MOVQ dst+24(FP), DI
	MOVQ src+32(FP), SI
	MOVQ groups+40(FP), CX

	VBROADCASTI32X4 ctrReverse<>(SB), Z15
	VBROADCASTI32X4 ctrFour<>(SB), Z14
	VBROADCASTI32X4 (DX), Z8
	VMOVDQU64       ctrLanes<>(SB), Z13
	VPADDQ          Z13, Z8, Z8 // the four lanes' counters

	// round keys 0–13 in Z16–Z29 (those past the last round unused), the last in Z30
	VBROADCASTI32X4 0(AX), Z16
	VBROADCASTI32X4 16(AX), Z17
	VBROADCASTI32X4 32(AX), Z18
	VBROADCASTI32X4 48(AX), Z19
	VBROADCASTI32X4 64(AX), Z20
	VBROADCASTI32X4 80(AX), Z21
	VBROADCASTI32X4 96(AX), Z22
	VBROADCASTI32X4 112(AX), Z23
	VBROADCASTI32X4 128(AX), Z24
	VBROADCASTI32X4 144(AX), Z25
	VBROADCASTI32X4 160(AX), Z26
	VBROADCASTI32X4 176(AX), Z27
	VBROADCASTI32X4 192(AX), Z28
	VBROADCASTI32X4 208(AX), Z29
	MOVQ            BX, R8
	SHLQ            $4, R8
	VBROADCASTI32X4 (AX)(R8*1), Z30

sixteen:
	CMPQ    CX, $4
	JB      four
	VPADDQ  Z14, Z8, Z9
	VPADDQ  Z14, Z9, Z10
	VPADDQ  Z14, Z10, Z11
	VPSHUFB Z15, Z8, Z0
	VPSHUFB Z15, Z9, Z1
	VPSHUFB Z15, Z10, Z2
	VPSHUFB Z15, Z11, Z3
	VPADDQ  Z14, Z11, Z8
	VPXORQ  Z16, Z0, Z0
	VPXORQ  Z16, Z1, Z1
	VPXORQ  Z16, Z2, Z2
	VPXORQ  Z16, Z3, Z3
	ROUND4(Z17)
	ROUND4(Z18)
	ROUND4(Z19)
	ROUND4(Z20)
	ROUND4(Z21)
	ROUND4(Z22)
	ROUND4(Z23)
	ROUND4(Z24)
	ROUND4(Z25)
	CMPQ    BX, $10
	JE      last16
	ROUND4(Z26)
	ROUND4(Z27)
	CMPQ    BX, $12
	JE      last16
	ROUND4(Z28)
	ROUND4(Z29)

last16:
	VAESENCLAST Z30, Z0, Z0
	VAESENCLAST Z30, Z1, Z1
	VAESENCLAST Z30, Z2, Z2
	VAESENCLAST Z30, Z3, Z3
	VPXORQ      (SI), Z0, Z0
	VPXORQ      64(SI), Z1, Z1
	VPXORQ      128(SI), Z2, Z2
	VPXORQ      192(SI), Z3, Z3
	VMOVDQU64   Z0, (DI)
	VMOVDQU64   Z1, 64(DI)
	VMOVDQU64   Z2, 128(DI)
	VMOVDQU64   Z3, 192(DI)
	ADDQ        $256, SI
	ADDQ        $256, DI
	SUBQ        $4, CX
	JMP         sixteen

four:
	TESTQ   CX, CX
	JZ      done
	VPSHUFB Z15, Z8, Z0
	VPADDQ  Z14, Z8, Z8
	VPXORQ  Z16, Z0, Z0
	VAESENC Z17, Z0, Z0
	VAESENC Z18, Z0, Z0
	VAESENC Z19, Z0, Z0
	VAESENC Z20, Z0, Z0
	VAESENC Z21, Z0, Z0
	VAESENC Z22, Z0, Z0
	VAESENC Z23, Z0, Z0
	VAESENC Z24, Z0, Z0
	VAESENC Z25, Z0, Z0
	CMPQ    BX, $10
	JE      last4
	VAESENC Z26, Z0, Z0
	VAESENC Z27, Z0, Z0
	CMPQ    BX, $12
	JE      last4
	VAESENC Z28, Z0, Z0
	VAESENC Z29, Z0, Z0

last4:
	VAESENCLAST Z30, Z0, Z0
	VPXORQ      (SI), Z0, Z0
	VMOVDQU64   Z0, (DI)
	ADDQ        $64, SI
	ADDQ        $64, DI
	DECQ        CX
	JMP         four

done:
	VZEROUPPER
	RET
