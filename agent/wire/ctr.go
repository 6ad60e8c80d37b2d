package wire

import (
	"crypto/cipher"
	"crypto/fips140"
	"encoding/binary"
	"sync"
)

// vaesCTR is AES in counter mode — the key stream cipher.NewCTR gives: the block cipher
// over a 16-byte big-endian counter that starts at the IV and steps by one per block —
// with VAES on ZMM registers: four blocks per instruction, sixteen in flight. Go's
// crypto/aes encrypts eight blocks at a time with AES-NI, one per instruction. The
// key stream is the same bytes either way (TestVAESCTRIsTheStandardCTR), so the two ends
// of a connection need not agree on which computes it.
type vaesCTR struct {
	// rk holds the round keys, FIPS 197's key expansion in its byte order (what AESENC
	// takes); rounds is 10, 12 or 14.
	rk     [15 * 16]byte
	rounds int
	// block is the standard library's cipher of the same key, for the rare call whose
	// counter would carry out of its low 64 bits (the routine adds in 64-bit lanes).
	block cipher.Block
}

// newVAESCTR returns nil where the CPU lacks VAES with AVX-512, or in FIPS 140-3 mode,
// where encryption stays with the validated module: the caller keeps the standard
// library's CTR.
func newVAESCTR(key []byte, block cipher.Block) *vaesCTR {
	if !haveVAES || fips140.Enabled() || (len(key) != 16 && len(key) != 24 && len(key) != 32) {
		return nil
	}
	c := &vaesCTR{block: block}
	c.rounds = expandKey(key, c.rk[:])
	return c
}

// xorKeyStream sets dst to src XORed with the key stream from counter block iv (dst and
// src may be the same slice; dst at least as long as src).
func (c *vaesCTR) xorKeyStream(dst, src []byte, iv *[16]byte) {
	if len(dst) < len(src) {
		panic("wire: output smaller than input")
	}
	if len(src) == 0 {
		return
	}
	hi, lo := binary.BigEndian.Uint64(iv[:8]), binary.BigEndian.Uint64(iv[8:])
	groups := len(src) / 64
	blocks := uint64(groups*4 + 4) // a partial group's key stream is made whole
	if lo+blocks < lo {
		cipher.NewCTR(c.block, iv[:]).XORKeyStream(dst, src)
		return
	}
	// the counter as the routine holds it: a block's bytes reversed, a little-endian
	// 128-bit number whose low half the lanes add to
	var ctr [16]byte
	binary.LittleEndian.PutUint64(ctr[:8], lo)
	binary.LittleEndian.PutUint64(ctr[8:], hi)
	if groups > 0 {
		ctrXORZMM(&c.rk, c.rounds, &ctr, &dst[0], &src[0], groups)
	}
	done := groups * 64
	if done == len(src) {
		return
	}
	var ks, zero [64]byte
	binary.LittleEndian.PutUint64(ctr[:8], lo+uint64(groups*4))
	ctrXORZMM(&c.rk, c.rounds, &ctr, &ks[0], &zero[0], 1)
	for i := done; i < len(src); i++ {
		dst[i] = src[i] ^ ks[i-done]
	}
}

// expandKey is FIPS 197's KeyExpansion (§5.2) of a 16-, 24- or 32-byte key into rk,
// the round keys in the standard's byte order; it returns the number of rounds.
func expandKey(key []byte, rk []byte) int {
	nk := len(key) / 4
	rounds := nk + 6
	words := 4 * (rounds + 1)
	w := make([]uint32, words)
	for i := range nk {
		w[i] = binary.BigEndian.Uint32(key[4*i:])
	}
	rcon := uint32(1)
	for i := nk; i < words; i++ {
		t := w[i-1]
		switch {
		case i%nk == 0:
			t = subWord(t<<8|t>>24) ^ rcon<<24
			rcon = uint32(xtime(byte(rcon)))
		case nk > 6 && i%nk == 4:
			t = subWord(t)
		}
		w[i] = w[i-nk] ^ t
	}
	for i, x := range w {
		binary.BigEndian.PutUint32(rk[4*i:], x)
	}
	return rounds
}

func subWord(w uint32) uint32 {
	s := sbox()
	return uint32(s[w>>24])<<24 | uint32(s[w>>16&0xff])<<16 | uint32(s[w>>8&0xff])<<8 | uint32(s[w&0xff])
}

// xtime multiplies by x in AES's field GF(2⁸) modulo x⁸ + x⁴ + x³ + x + 1.
func xtime(b byte) byte {
	if b&0x80 != 0 {
		return b<<1 ^ 0x1b
	}
	return b << 1
}

// gfMul8 multiplies in AES's field GF(2⁸).
func gfMul8(a, b byte) byte {
	var p byte
	for b != 0 {
		if b&1 != 0 {
			p ^= a
		}
		a, b = xtime(a), b>>1
	}
	return p
}

// sbox is AES's S-box (FIPS 197 §5.1.1), computed the first time a key is expanded:
// the multiplicative inverse in GF(2⁸) (0 for 0), then the affine map. TestSBox checks
// it against entries of the standard's table.
var sbox = sync.OnceValue(func() (s [256]byte) {
	rot := func(b byte, n uint) byte { return b<<n | b>>(8-n) }
	for x := range 256 {
		// x²⁵⁴ = x⁻¹ in a field of 256 elements (and 0 for 0), by squaring: 254 =
		// 11111110 in binary
		inv, sq := byte(1), byte(x)
		for e := 254; e > 0; e >>= 1 {
			if e&1 != 0 {
				inv = gfMul8(inv, sq)
			}
			sq = gfMul8(sq, sq)
		}
		s[x] = inv ^ rot(inv, 1) ^ rot(inv, 2) ^ rot(inv, 3) ^ rot(inv, 4) ^ 0x63
	}
	return s
})
