package wire

import "golang.org/x/sys/cpu"

// haveVAES: AES-NI, and VAES on ZMM registers with AVX-512 (the OS saving ZMM state)
// and its byte shuffles (BW).
var haveVAES = cpu.X86.HasAES && cpu.X86.HasAVX512F && cpu.X86.HasAVX512BW && cpu.X86.HasAVX512VAES

// ctrXORZMM XORs groups × 64 bytes of src with the key stream of the counter ctr (a
// block's bytes reversed: the low 64 bits first, which must not carry for
// groups × 4 blocks) into dst, under the round keys rk of rounds rounds.
//
//go:noescape
func ctrXORZMM(rk *[15 * 16]byte, rounds int, ctr *[16]byte, dst, src *byte, groups int)
