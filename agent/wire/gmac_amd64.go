package wire

import "golang.org/x/sys/cpu"

// haveWideGHASH: AVX2 with the OS saving YMM registers, and VPCLMULQDQ.
var haveWideGHASH = cpu.X86.HasAVX2 && cpu.X86.HasPCLMULQDQ && cpuidVPCLMULQDQ()

// cpuidVPCLMULQDQ reports CPUID leaf 7's VPCLMULQDQ bit (x/sys/cpu reports it only
// with AVX-512, which the YMM form does not need).
func cpuidVPCLMULQDQ() bool

// ghashBlocks folds the n bytes at p (n a multiple of 16) into the hash state acc
// (byte-reversed), with the powers of the hash key in tbl.
//
//go:noescape
func ghashBlocks(tbl *ghashTable, acc *[16]byte, p *byte, n int)
