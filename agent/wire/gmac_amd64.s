#include "textflag.h"

// Reverses the bytes of each 128-bit lane (VPSHUFB): GCM's blocks are big-endian,
// the carry-less multiply works on little-endian registers.
DATA ghashReverse<>+0x00(SB)/8, $0x08090a0b0c0d0e0f
DATA ghashReverse<>+0x08(SB)/8, $0x0001020304050607
DATA ghashReverse<>+0x10(SB)/8, $0x08090a0b0c0d0e0f
DATA ghashReverse<>+0x18(SB)/8, $0x0001020304050607
GLOBL ghashReverse<>(SB), (NOPTR+RODATA), $32

// x⁻¹ bit-reflected: the constant of the reduction modulo x¹²⁸ + x⁷ + x² + x + 1.
DATA ghashPoly<>+0x00(SB)/8, $0x0000000000000001
DATA ghashPoly<>+0x08(SB)/8, $0xc200000000000000
GLOBL ghashPoly<>(SB), (NOPTR+RODATA), $16

// func cpuidVPCLMULQDQ() bool
TEXT ·cpuidVPCLMULQDQ(SB), NOSPLIT, $0-1
	MOVL $7, AX
	MOVL $0, CX
	CPUID
	SHRL $10, CX
	ANDL $1, CX
	MOVB CX, ret+0(FP)
	RET

// One pair of blocks (a YMM register) at offset off of the data, against the pair of
// powers at the same offset of the table: the low, high and middle (Karatsuba)
// products are XORed into Y10, Y11 and Y12.
#define PAIR(off) \
	VMOVDQU    off(SI), Y0; \
	VPSHUFB    Y15, Y0, Y0; \
	VMOVDQU    off(DI), Y1; \
	VMOVDQU    (256+off)(DI), Y2; \
	VPCLMULQDQ $0x00, Y1, Y0, Y3; \
	VPXOR      Y3, Y10, Y10; \
	VPCLMULQDQ $0x11, Y1, Y0, Y4; \
	VPXOR      Y4, Y11, Y11; \
	VPSHUFD    $78, Y0, Y5; \
	VPXOR      Y0, Y5, Y5; \
	VPCLMULQDQ $0x00, Y2, Y5, Y5; \
	VPXOR      Y5, Y12, Y12

// Karatsuba's middle term into the 256-bit product X11:X10, then the reduction of its
// low half (the coefficients of x¹²⁸ and up, bit-reflected) by two multiplies with the
// polynomial's constant: the new hash state in X14 (a VEX.128 write: its upper lane is
// zero, as the next block's XOR with it needs).
#define REDUCE \
	VPXOR      X10, X12, X12; \
	VPXOR      X11, X12, X12; \
	VPSLLDQ    $8, X12, X3; \
	VPSRLDQ    $8, X12, X12; \
	VPXOR      X3, X10, X10; \
	VPXOR      X12, X11, X11; \
	VPCLMULQDQ $0x01, X10, X13, X3; \
	VPSHUFD    $78, X10, X10; \
	VPXOR      X3, X10, X10; \
	VPCLMULQDQ $0x01, X10, X13, X3; \
	VPSHUFD    $78, X10, X10; \
	VPXOR      X3, X10, X10; \
	VPXOR      X11, X10, X14

// func ghashBlocks(tbl *ghashTable, acc *[16]byte, p *byte, n int)
TEXT ·ghashBlocks(SB), NOSPLIT, $0-32
	MOVQ    tbl+0(FP), DI
	MOVQ    acc+8(FP), DX
	MOVQ    p+16(FP), SI
	MOVQ    n+24(FP), CX
	VMOVDQU ghashReverse<>(SB), Y15
	VMOVDQU ghashPoly<>(SB), X13
	VMOVDQU (DX), X14

sixteen:
	CMPQ       CX, $256
	JB         tail
	// the first pair carries the hash state into its first block
	VMOVDQU    (SI), Y0
	VPSHUFB    Y15, Y0, Y0
	VPXOR      Y14, Y0, Y0
	VMOVDQU    (DI), Y1
	VMOVDQU    256(DI), Y2
	VPCLMULQDQ $0x00, Y1, Y0, Y10
	VPCLMULQDQ $0x11, Y1, Y0, Y11
	VPSHUFD    $78, Y0, Y5
	VPXOR      Y0, Y5, Y5
	VPCLMULQDQ $0x00, Y2, Y5, Y12
	PAIR(32)
	PAIR(64)
	PAIR(96)
	PAIR(128)
	PAIR(160)
	PAIR(192)
	PAIR(224)
	// the two lanes' sums into one
	VEXTRACTI128 $1, Y10, X3
	VPXOR        X3, X10, X10
	VEXTRACTI128 $1, Y11, X3
	VPXOR        X3, X11, X11
	VEXTRACTI128 $1, Y12, X3
	VPXOR        X3, X12, X12
	REDUCE
	ADDQ         $256, SI
	SUBQ         $256, CX
	JMP          sixteen

tail:
	// r = CX/16 blocks left (0 to 15), one at a time against H^r … H¹: the table's
	// entries from 16−r on, which start 256−CX bytes in.
	TESTQ      CX, CX
	JZ         done
	LEAQ       256(DI), BX
	SUBQ       CX, BX
	VMOVDQU    (SI), X0
	VPSHUFB    X15, X0, X0
	VPXOR      X14, X0, X0
	VMOVDQU    (BX), X1
	VMOVDQU    256(BX), X2
	VPCLMULQDQ $0x00, X1, X0, X10
	VPCLMULQDQ $0x11, X1, X0, X11
	VPSHUFD    $78, X0, X5
	VPXOR      X0, X5, X5
	VPCLMULQDQ $0x00, X2, X5, X12
	ADDQ       $16, SI
	ADDQ       $16, BX
	SUBQ       $16, CX

tailBlock:
	TESTQ      CX, CX
	JZ         tailDone
	VMOVDQU    (SI), X0
	VPSHUFB    X15, X0, X0
	VMOVDQU    (BX), X1
	VMOVDQU    256(BX), X2
	VPCLMULQDQ $0x00, X1, X0, X3
	VPXOR      X3, X10, X10
	VPCLMULQDQ $0x11, X1, X0, X4
	VPXOR      X4, X11, X11
	VPSHUFD    $78, X0, X5
	VPXOR      X0, X5, X5
	VPCLMULQDQ $0x00, X2, X5, X5
	VPXOR      X5, X12, X12
	ADDQ       $16, SI
	ADDQ       $16, BX
	SUBQ       $16, CX
	JMP        tailBlock

tailDone:
	REDUCE

done:
	VMOVDQU    X14, (DX)
	VZEROUPPER
	RET
