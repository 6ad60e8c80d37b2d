package wire

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"
)

// Entries of FIPS 197's S-box table (Figure 7), and every byte once.
func TestSBox(t *testing.T) {
	s := sbox()
	for x, want := range map[byte]byte{0x00: 0x63, 0x01: 0x7c, 0x10: 0xca, 0x53: 0xed, 0x9a: 0xb8, 0xc9: 0xdd, 0xff: 0x16} {
		if s[x] != want {
			t.Errorf("S(%#02x) = %#02x, want %#02x", x, s[x], want)
		}
	}
	var seen [256]bool
	for _, y := range s {
		if seen[y] {
			t.Fatalf("%#02x appears twice: not a permutation", y)
		}
		seen[y] = true
	}
}

// The last round-key word of FIPS 197's key expansion examples (Appendix A.1–A.3).
func TestExpandKey(t *testing.T) {
	for _, c := range []struct {
		key, last string
		rounds    int
	}{
		{"2b7e151628aed2a6abf7158809cf4f3c", "b6630ca6", 10},
		{"8e73b0f7da0e6452c810f32b809079e562f8ead2522c6b7b", "01002202", 12},
		{"603deb1015ca71be2b73aef0857d77811f352c073b6108d72d9810a30914dff4", "706c631e", 14},
	} {
		key, _ := hex.DecodeString(c.key)
		var rk [15 * 16]byte
		rounds := expandKey(key, rk[:])
		if rounds != c.rounds {
			t.Fatalf("%d-byte key: %d rounds, want %d", len(key), rounds, c.rounds)
		}
		end := 16 * (rounds + 1)
		if got := hex.EncodeToString(rk[end-4 : end]); got != c.last {
			t.Errorf("%d-byte key: last word %s, want %s", len(key), got, c.last)
		}
	}
}

func stdCTR(t testing.TB, key []byte, iv *[16]byte, src []byte) []byte {
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]byte, len(src))
	cipher.NewCTR(block, iv[:]).XORKeyStream(out, src)
	return out
}

func vaesFor(t testing.TB, key []byte) *vaesCTR {
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	c := newVAESCTR(key, block)
	if c == nil {
		t.Skip("this CPU has no VAES with AVX-512: the standard library's CTR encrypts")
	}
	return c
}

// Every length from 0 to 600 bytes (whole and partial groups of four blocks, below and
// above one round of sixteen), longer ones around a frame's 1 MiB, at odd offsets, in
// place and not, under random keys of each AES size, from random counters and from
// counters whose low 64 bits carry within the call (the standard library's path): the
// standard library's key stream.
func TestVAESCTRIsTheStandardCTR(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	data := make([]byte, 1<<20+320)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	lengths := []int{}
	for n := 0; n <= 600; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 1023, 1024, 1025, 4095, 4096, 4097, 65536+17, 1<<20-1, 1<<20, 1<<20+255)
	for i, n := range lengths {
		key := make([]byte, []int{16, 24, 32}[i%3])
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		var iv [16]byte
		for j := range iv {
			iv[j] = byte(rng.Uint32())
		}
		switch i % 5 {
		case 0: // the frames' own: part, frame number, zeros
			iv = [16]byte{0: ivData}
			binary.BigEndian.PutUint64(iv[1:], rng.Uint64())
		case 1: // the low half carries somewhere within the call (or just after it)
			binary.BigEndian.PutUint64(iv[8:], math.MaxUint64-uint64(rng.IntN(n/16+8)))
		}
		off := int(rng.Uint32() % 64)
		src := data[off : off+n]
		want := stdCTR(t, key, &iv, src)
		c := vaesFor(t, key)
		got := make([]byte, n)
		c.xorKeyStream(got, src, &iv)
		if !bytes.Equal(got, want) {
			t.Fatalf("%d bytes at offset %d, %d-byte key, counter %x: the key stream differs from the standard library's", n, off, len(key), iv)
		}
		inPlace := append([]byte(nil), src...)
		c.xorKeyStream(inPlace, inPlace, &iv)
		if !bytes.Equal(inPlace, want) {
			t.Fatalf("%d bytes in place, %d-byte key: the key stream differs from the standard library's", n, len(key))
		}
	}
}

func FuzzVAESCTR(f *testing.F) {
	f.Add(bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{0xff}, 16), []byte("frame data"))
	f.Add(make([]byte, 16), make([]byte, 16), make([]byte, 1000))
	f.Fuzz(func(t *testing.T, key, ivBytes, src []byte) {
		if len(key) != 16 && len(key) != 24 && len(key) != 32 || len(ivBytes) < 16 {
			return
		}
		iv := [16]byte(ivBytes[:16])
		got := make([]byte, len(src))
		vaesFor(t, key).xorKeyStream(got, src, &iv)
		if want := stdCTR(t, key, &iv, src); !bytes.Equal(got, want) {
			t.Fatalf("%d bytes, counter %x: the key stream differs from the standard library's", len(src), iv)
		}
	})
}

// A frame's meta and data encrypted with VAES decrypt with the standard library's CTR,
// frame number after frame number: the two ends of a connection need not run on the
// same CPU.
func TestEncryptionAgreesAcrossImplementations(t *testing.T) {
	key := bytes.Repeat([]byte{3}, 32)
	fast := newFrameSealer(Keys{MAC: key, Enc: key})
	if fast.vctr == nil {
		t.Skip("this CPU has no VAES with AVX-512")
	}
	std := newFrameSealer(Keys{MAC: key, Enc: key})
	std.vctr = nil
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{0, 1, 15, 16, 63, 64, 65, 255, 256, 257, 4096 + 5, 1 << 20} {
		clear := make([]byte, n)
		for i := range clear {
			clear[i] = byte(rng.Uint32())
		}
		frame := rng.Uint64()
		for _, part := range []byte{ivMeta, ivData} {
			sealed := make([]byte, n)
			fast.crypt(sealed, clear, part, frame)
			opened := make([]byte, n)
			std.crypt(opened, sealed, part, frame)
			if !bytes.Equal(opened, clear) {
				t.Fatalf("%d bytes, part %d of frame %d: encrypted with VAES, the standard library does not decrypt it", n, part, frame)
			}
		}
	}
}
