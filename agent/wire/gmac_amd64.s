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

// MULSTART and MULADD multiply block register B (one block in an X register, two in a
// Y register, lane by lane) by the powers in H, whose Karatsuba halves are in K: the
// low, high and middle products start (MULSTART) or are XORed into (MULADD) LO, HI and
// MID. T is scratch.
#define MULSTART(B, H, K, T, LO, HI, MID) \
	VPCLMULQDQ $0x00, H, B, LO; \
	VPCLMULQDQ $0x11, H, B, HI; \
	VPSHUFD    $78, B, T; \
	VPXOR      B, T, T; \
	VPCLMULQDQ $0x00, K, T, MID

#define MULADD(B, H, K, T, LO, HI, MID) \
	VPCLMULQDQ $0x00, H, B, T; \
	VPXOR      T, LO, LO; \
	VPCLMULQDQ $0x11, H, B, T; \
	VPXOR      T, HI, HI; \
	VPSHUFD    $78, B, T; \
	VPXOR      B, T, T; \
	VPCLMULQDQ $0x00, K, T, T; \
	VPXOR      T, MID, MID

// One pair of blocks at offset off of the data against the pair of powers at the same
// offset of the table, into the sums in Y10, Y11 and Y12.
#define PAIR(off) \
	VMOVDQU off(SI), Y0; \
	VPSHUFB Y15, Y0, Y0; \
	VMOVDQU off(DI), Y1; \
	VMOVDQU (256+off)(DI), Y2; \
	MULADD(Y0, Y1, Y2, Y3, Y10, Y11, Y12)

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
	MULSTART(Y0, Y1, Y2, Y5, Y10, Y11, Y12)
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
	MULSTART(X0, X1, X2, X5, X10, X11, X12)
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
	MULADD(X0, X1, X2, X3, X10, X11, X12)
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

// One quad of blocks at offset off of the data against the quad of powers at the same
// offset of the table (ZMM: four blocks per instruction), into the sums in Z10, Z11
// and Z12. The ZMM table holds 64 powers, their Karatsuba halves 1024 bytes on.
#define QUAD(off) \
	VMOVDQU64  off(SI), Z0; \
	VPSHUFB    Z15, Z0, Z0; \
	VMOVDQU64  off(DI), Z1; \
	VMOVDQU64  (1024+off)(DI), Z2; \
	VPCLMULQDQ $0x00, Z1, Z0, Z3; \
	VPXORQ     Z3, Z10, Z10; \
	VPCLMULQDQ $0x11, Z1, Z0, Z4; \
	VPXORQ     Z4, Z11, Z11; \
	VPSHUFD    $78, Z0, Z5; \
	VPXORQ     Z0, Z5, Z5; \
	VPCLMULQDQ $0x00, Z2, Z5, Z5; \
	VPXORQ     Z5, Z12, Z12

// The four lanes of Z into the low one (X): the sum of the quad's products.
#define FOLD4(Z, Y, X) \
	VEXTRACTI64X4 $1, Z, Y3; \
	VPXOR         Y3, Y, Y; \
	VEXTRACTI128  $1, Y, X3; \
	VPXOR         X3, X, X

// func ghashBlocksZMM(tbl *ghashTable64, acc *[16]byte, p *byte, n int)
//
// As ghashBlocks, sixty-four blocks per round on 512-bit registers, for n a multiple
// of 1024 (the caller hashes the rest with ghashBlocks). Sixteen blocks per round ran
// no faster than the YMM routine: a round waits for the last one's reduction (about
// 30 cycles of dependent multiplies and shuffles), so each reduction must cover more
// blocks.
TEXT ·ghashBlocksZMM(SB), NOSPLIT, $0-32
	MOVQ            tbl+0(FP), DI
	MOVQ            acc+8(FP), DX
	MOVQ            p+16(FP), SI
	MOVQ            n+24(FP), CX
	VBROADCASTI32X4 ghashReverse<>(SB), Z15
	VMOVDQU         ghashPoly<>(SB), X13
	VMOVDQU         (DX), X14 // a VEX.128 load: the upper lanes of Z14 are zero

round:
	CMPQ       CX, $1024
	JB         roundsDone
	// the first quad carries the hash state into its first block
	VMOVDQU64  (SI), Z0
	VPSHUFB    Z15, Z0, Z0
	VPXORQ     Z14, Z0, Z0
	VMOVDQU64  (DI), Z1
	VMOVDQU64  1024(DI), Z2
	VPCLMULQDQ $0x00, Z1, Z0, Z10
	VPCLMULQDQ $0x11, Z1, Z0, Z11
	VPSHUFD    $78, Z0, Z5
	VPXORQ     Z0, Z5, Z5
	VPCLMULQDQ $0x00, Z2, Z5, Z12
	QUAD(64)
	QUAD(128)
	QUAD(192)
	QUAD(256)
	QUAD(320)
	QUAD(384)
	QUAD(448)
	QUAD(512)
	QUAD(576)
	QUAD(640)
	QUAD(704)
	QUAD(768)
	QUAD(832)
	QUAD(896)
	QUAD(960)
	FOLD4(Z10, Y10, X10)
	FOLD4(Z11, Y11, X11)
	FOLD4(Z12, Y12, X12)
	REDUCE
	ADDQ       $1024, SI
	SUBQ       $1024, CX
	JMP        round

roundsDone:
	VMOVDQU    X14, (DX)
	VZEROUPPER
	RET
