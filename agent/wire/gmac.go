package wire

import (
	"crypto/cipher"
	"crypto/fips140"
	"encoding/binary"
)

// wideGMAC computes AES-GMAC (AES-GCM's tag over additional data alone, as the frame
// tag uses it) with GHASH on wide carry-less multiplies: VPCLMULQDQ on YMM registers,
// two blocks per instruction and sixteen per reduction, and where the CPU has AVX-512,
// on ZMM registers, four blocks per instruction and sixty-four per reduction for the
// whole kilobytes of a frame's data. The standard library's GCM multiplies one block per
// instruction (BenchmarkPrimitives has the three side by side: on the AMD EPYC of
// 2026-11-27 the YMM routine ran at twice the standard library's speed; on the Intel
// Xeon of 2026-11-29, the standard library 13.7 GB/s, YMM 24.5, ZMM 41). The tags are
// the same bytes either way (TestWideGMACIsGCMsTag), so either end may use either.
type wideGMAC struct {
	block cipher.Block
	tbl   ghashTable
	// zmm says the routine on ZMM registers is used (the CPU has AVX-512); tbl64 holds
	// H¹…H⁶⁴ for it, built when a first input long enough for it comes (a control
	// connection's frames may never be).
	zmm   bool
	h     [16]byte
	tbl64 *ghashTable64
}

// ghashTable holds H¹…H¹⁶ as the multiply routine takes them: entry e (bytes 16e to
// 16e+16) is H^(16−e)·x⁻¹ with its bytes reversed (a little-endian 128-bit register
// holding the field element bit-reflected: the multiply then needs no shift), and
// entry 16+e is that entry's two 64-bit halves XORed (Karatsuba's middle product).
// Sixteen blocks X₁…X₁₆ after a hash state Y hash to (Y⊕X₁)·H¹⁶ ⊕ X₂·H¹⁵ ⊕ … ⊕ X₁₆·H¹,
// each product taken against its power and one reduction for all sixteen.
type ghashTable [32 * 16]byte

// ghashTable64 is ghashTable for rounds of sixty-four blocks: entry e is H^(64−e)·x⁻¹,
// byte-reversed, and entry 64+e its Karatsuba half.
type ghashTable64 [128 * 16]byte

// newWideGMAC returns nil where the CPU lacks the instructions, or in FIPS 140-3 mode,
// where the tag stays with the validated module's GCM: the caller keeps the standard
// library's.
func newWideGMAC(block cipher.Block) *wideGMAC {
	if !haveWideGHASH || fips140.Enabled() || block.BlockSize() != 16 {
		return nil
	}
	var h [16]byte
	block.Encrypt(h[:], h[:])
	g := &wideGMAC{block: block, zmm: haveZMMGHASH, h: h}
	fillPowers(g.tbl[:], h)
	return g
}

// sum appends GMAC(key, nonce, aad) to dst: GHASH over aad, zero-padded to a block,
// and the block of bit lengths (aad's, and 0 for the absent ciphertext), XORed with the
// encrypted counter block nonce‖1 — GCM's tag for an empty plaintext.
func (g *wideGMAC) sum(dst []byte, nonce *[12]byte, aad []byte) []byte {
	acc := g.hash(aad)
	return g.finish(dst, nonce, &acc)
}

// hash is the GHASH of aad and its lengths block, held byte-reversed: the part of
// GMAC(key, nonce, aad) that does not depend on the nonce, the same for the same aad.
func (g *wideGMAC) hash(aad []byte) [16]byte {
	var acc [16]byte
	whole := len(aad) &^ 15
	var tbl64 *ghashTable64
	if g.zmm && whole >= 1024 {
		if g.tbl64 == nil {
			g.tbl64 = new(ghashTable64)
			fillPowers(g.tbl64[:], g.h)
		}
		tbl64 = g.tbl64
	}
	if whole > 0 {
		ghash(&g.tbl, tbl64, &acc, aad[:whole])
	}
	var last [32]byte
	n := 16
	if copy(last[:16], aad[whole:]) > 0 {
		n = 32
	}
	binary.BigEndian.PutUint64(last[n-16:], uint64(len(aad))*8)
	ghash(&g.tbl, nil, &acc, last[:n])
	return acc
}

// finish appends the tag of hash acc under nonce to dst.
func (g *wideGMAC) finish(dst []byte, nonce *[12]byte, acc *[16]byte) []byte {
	var j0 [16]byte
	copy(j0[:], nonce[:])
	j0[15] = 1
	g.block.Encrypt(j0[:], j0[:])
	for i := range j0 {
		j0[i] ^= acc[15-i] // the hash state is held byte-reversed
	}
	return append(dst, j0[:]...)
}

// gfElement is an element of GCM's field GF(2¹²⁸) in the standard's bit order: hi
// holds bytes 0–7 of the block big-endian, lo bytes 8–15; the first bit of byte 0 is
// the coefficient of x⁰.
type gfElement struct{ hi, lo uint64 }

// gfMul multiplies in GCM's field, bit by bit as SP 800-38D's Algorithm 1 states it:
// slow, and run only to build a key's table.
func gfMul(x, y gfElement) gfElement {
	var z gfElement
	v := y
	for i := range 128 {
		var bit uint64
		if i < 64 {
			bit = x.hi >> (63 - i) & 1
		} else {
			bit = x.lo >> (127 - i) & 1
		}
		if bit == 1 {
			z.hi ^= v.hi
			z.lo ^= v.lo
		}
		carry := v.lo & 1
		v.lo = v.lo>>1 | v.hi<<63
		v.hi >>= 1
		if carry == 1 {
			v.hi ^= 0xe100000000000000 // R = 11100001‖0¹²⁰
		}
	}
	return z
}

// fillPowers fills a table of hash key h (the encryption of the zero block): t holds
// n = len(t)/32 powers H^n…H¹, then their Karatsuba halves (ghashTable's layout).
func fillPowers(t []byte, h [16]byte) {
	n := len(t) / 32
	key := gfElement{binary.BigEndian.Uint64(h[:8]), binary.BigEndian.Uint64(h[8:])}
	// x⁻¹ = x¹²⁷ + x⁶ + x + 1 (x·x⁻¹ = x¹²⁸ + x⁷ + x² + x ≡ 1 modulo GCM's polynomial)
	xInverse := gfElement{hi: 0xc200000000000000, lo: 1}
	power := key
	for k := 1; k <= n; k++ {
		e := n - k
		p := gfMul(power, xInverse)
		// Reversing the block's bytes puts lo in the register's low half.
		binary.LittleEndian.PutUint64(t[16*e:], p.lo)
		binary.LittleEndian.PutUint64(t[16*e+8:], p.hi)
		binary.LittleEndian.PutUint64(t[16*n+16*e:], p.lo^p.hi)
		binary.LittleEndian.PutUint64(t[16*n+16*e+8:], p.lo^p.hi)
		power = gfMul(power, key)
	}
}
