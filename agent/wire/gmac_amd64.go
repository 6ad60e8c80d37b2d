package wire

import "golang.org/x/sys/cpu"

// haveWideGHASH: AVX2 with the OS saving YMM registers, and VPCLMULQDQ.
var haveWideGHASH = cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && cpuidVPCLMULQDQ()

// haveZMMGHASH: AVX-512 (the OS saving ZMM registers) with byte shuffles (BW) and
// VPCLMULQDQ on ZMM registers, four blocks per instruction.
var haveZMMGHASH = haveWideGHASH && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VL && cpu.X86.HasAVX512VPCLMULQDQ

// cpuidVPCLMULQDQ reports CPUID leaf 7's VPCLMULQDQ bit (x/sys/cpu reports it only
// with AVX-512, which the YMM form does not need).
func cpuidVPCLMULQDQ() bool

// ghashBlocks folds the n bytes at p (n a multiple of 16) into the hash state acc
// (byte-reversed), with the powers of the hash key in tbl.
//
//go:noescape
func ghashBlocks(tbl *ghashTable, acc *[16]byte, p *byte, n int)

// ghashBlocksZMM is ghashBlocks on ZMM registers, sixty-four blocks per round, for n
// a multiple of 1024.
//
//go:noescape
func ghashBlocksZMM(tbl *ghashTable64, acc *[16]byte, p *byte, n int)

// ghash folds the bytes of p (a multiple of 16) into acc: whole rounds of sixty-four
// blocks on ZMM registers where the CPU has them (tbl64 non-nil), the rest on YMM.
func ghash(tbl *ghashTable, tbl64 *ghashTable64, acc *[16]byte, p []byte) {
	if tbl64 != nil && len(p) >= 1024 {
		whole := len(p) &^ 1023
		ghashBlocksZMM(tbl64, acc, &p[0], whole)
		p = p[whole:]
	}
	if len(p) > 0 {
		ghashBlocks(tbl, acc, &p[0], len(p))
	}
}
