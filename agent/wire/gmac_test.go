package wire

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/fips140"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"
)

// gcmTag is the standard library's GMAC: GCM's tag over aad with no plaintext.
func gcmTag(t testing.TB, key []byte, nonce *[12]byte, aad []byte) []byte {
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	gcm, err := cipher.NewGCM(block)
	if err != nil {
		t.Fatal(err)
	}
	return gcm.Seal(nil, nonce[:], nil, aad)
}

func wideTag(t testing.TB, key []byte, nonce *[12]byte, aad []byte) []byte {
	return wideTags(t, key, nonce, aad)[0].tag
}

// routineTag is the frame tag as one GHASH routine computes it.
type routineTag struct {
	routine string
	tag     []byte
}

// wideTags is the tag from each GHASH routine this CPU has: the YMM routine alone, and
// with AVX-512 the ZMM routine for rounds of sixty-four blocks (what sum uses there)
// — so that both stay tested on a CPU that would use only the second.
func wideTags(t testing.TB, key []byte, nonce *[12]byte, aad []byte) []routineTag {
	block, err := aes.NewCipher(key)
	if err != nil {
		t.Fatal(err)
	}
	g := newWideGMAC(block)
	if g == nil {
		t.Skip("this CPU has no VPCLMULQDQ with AVX2: the frame tag uses the standard library's GCM")
	}
	var out []routineTag
	if g.zmm {
		out = append(out, routineTag{"ZMM, 64 blocks a round", g.sum(nil, nonce, aad)})
	}
	g.zmm = false
	return append(out, routineTag{"YMM, 16 blocks a round", g.sum(nil, nonce, aad)})
}

// Every length from 0 to 1100 bytes (each count of whole blocks below and above one
// sixteen-block round, and every tail), lengths around two and three sixty-four-block
// rounds, longer ones around a frame's 1 MiB, at odd offsets, under random keys of each
// AES size and random nonces: the same tag as GCM's, from each GHASH routine.
func TestWideGMACIsGCMsTag(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 1<<20+320)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	lengths := []int{}
	for n := 0; n <= 1100; n++ {
		lengths = append(lengths, n)
	}
	lengths = append(lengths, 2047, 2048, 2049, 2048+256, 3072+16*17+5, 4095, 4096, 4097, 65535, 65536, 65536+17, 1<<20-1, 1<<20, 1<<20+255)
	for i, n := range lengths {
		key := make([]byte, []int{16, 24, 32}[i%3])
		var nonce [12]byte
		for j := range key {
			key[j] = byte(rng.Uint32())
		}
		for j := range nonce {
			nonce[j] = byte(rng.Uint32())
		}
		off := int(rng.Uint32() % 64)
		aad := data[off : off+n]
		want := gcmTag(t, key, &nonce, aad)
		for _, got := range wideTags(t, key, &nonce, aad) {
			if !bytes.Equal(got.tag, want) {
				t.Fatalf("%d bytes at offset %d, %d-byte key, %s: tag %x, GCM's %x", n, off, len(key), got.routine, got.tag, want)
			}
		}
	}
}

// The table's powers are those of the key: a changed bit anywhere in the data (a
// sixty-four-block round and a sixteen-block one, then single blocks), or in the nonce,
// changes the tag, whichever routine computes it.
func TestWideGMACTagChangesWithEveryBit(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	var nonce [12]byte
	data := make([]byte, 1024+256+44)
	base := wideTags(t, key, &nonce, data)
	for bit := range len(data) * 8 {
		data[bit/8] ^= 1 << (bit % 8)
		for i, got := range wideTags(t, key, &nonce, data) {
			if bytes.Equal(got.tag, base[i].tag) {
				t.Fatalf("%s: flipping bit %d left the tag unchanged", got.routine, bit)
			}
		}
		data[bit/8] ^= 1 << (bit % 8)
	}
	nonce[11] ^= 1
	if bytes.Equal(wideTag(t, key, &nonce, data), base[0].tag) {
		t.Fatal("another nonce gave the same tag")
	}
}

func FuzzWideGMAC(f *testing.F) {
	f.Add(bytes.Repeat([]byte{1}, 32), []byte("nonce-nonce!"), []byte("header and meta"))
	f.Add(make([]byte, 16), make([]byte, 12), make([]byte, 257))
	f.Fuzz(func(t *testing.T, key, nonceBytes, aad []byte) {
		if len(key) != 16 && len(key) != 24 && len(key) != 32 || len(nonceBytes) < 12 {
			return
		}
		nonce := [12]byte(nonceBytes[:12])
		want := gcmTag(t, key, &nonce, aad)
		for _, got := range wideTags(t, key, &nonce, aad) {
			if !bytes.Equal(got.tag, want) {
				t.Fatalf("%d bytes, %s: tag %x, GCM's %x", len(aad), got.routine, got.tag, want)
			}
		}
	})
}

// gfMul is SP 800-38D's multiply: x·1 = x, and the test vector's H·H = H² of the
// standard's test case 2 (key 0¹²⁸, H = 66e94bd4ef8a2c3b884cfa59ca342b2e).
func TestGFMul(t *testing.T) {
	h := gfElement{0x66e94bd4ef8a2c3b, 0x884cfa59ca342b2e}
	one := gfElement{hi: 1 << 63}
	if gfMul(h, one) != h || gfMul(one, h) != h {
		t.Fatalf("H·1 = %x", gfMul(h, one))
	}
	xInverse := gfElement{hi: 0xc200000000000000, lo: 1}
	x := gfElement{hi: 1 << 62}
	if got := gfMul(x, xInverse); got != one {
		t.Fatalf("x·x⁻¹ = %x, want 1", got)
	}
	if gfMul(h, gfMul(h, h)) != gfMul(gfMul(h, h), h) {
		t.Fatal("not associative")
	}
}

// Frames tagged with the wide GHASH check at a peer that tags with the standard
// library's GCM, frame after frame (the numbering stays in step): the two ends of a
// connection need not run on the same CPU.
func TestFrameTagsAgreeAcrossImplementations(t *testing.T) {
	key := bytes.Repeat([]byte{9}, 32)
	wide := newFrameSealer(Keys{MAC: key})
	if wide.wide == nil {
		t.Skip("this CPU has no VPCLMULQDQ with AVX2")
	}
	narrow := newFrameSealer(Keys{MAC: key})
	narrow.wide = nil
	rng := rand.New(rand.NewPCG(3, 4))
	random := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(rng.Uint32())
		}
		return b
	}
	for _, n := range []int{0, 1, 15, 16, 17, 255, 256, 257, 4096, 65536 + 3} {
		hdr, meta, data := random(HeaderSize), random(n%40), random(n)
		for _, withData := range []bool{true, false} {
			if tag := wide.sum(nil, hdr, meta, data, withData, false); !narrow.check(tag, hdr, meta, data, withData) {
				t.Fatalf("%d bytes (data tagged: %v): the wide tag fails the standard library's check", n, withData)
			}
			if tag := narrow.sum(nil, hdr, meta, data, withData, false); !wide.check(tag, hdr, meta, data, withData) {
				t.Fatalf("%d bytes (data tagged: %v): the standard library's tag fails the wide check", n, withData)
			}
		}
	}
}

// In FIPS 140-3 mode (GODEBUG=fips140=on, read at start: the test runs itself again
// with it) the frame tag stays with the standard library's validated GCM, and the
// encryption with its AES.
func TestWideGMACStepsAsideInFIPSMode(t *testing.T) {
	if os.Getenv("DTNFLOW_WIRE_FIPS_CHILD") == "1" {
		block, err := aes.NewCipher(make([]byte, 32))
		if err != nil {
			t.Fatal(err)
		}
		if !fips140.Enabled() {
			t.Fatal("GODEBUG=fips140=on did not enable FIPS 140-3 mode")
		}
		if newWideGMAC(block) != nil {
			t.Fatal("the wide GHASH tags in FIPS 140-3 mode")
		}
		if newVAESCTR(make([]byte, 32), block) != nil {
			t.Fatal("VAES encrypts in FIPS 140-3 mode")
		}
		return
	}
	if !haveWideGHASH {
		t.Skip("this CPU has no VPCLMULQDQ with AVX2: nothing to step aside")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestWideGMACStepsAsideInFIPSMode$", "-test.count=1")
	cmd.Env = append(os.Environ(), "DTNFLOW_WIRE_FIPS_CHILD=1", "GODEBUG=fips140=on")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("in FIPS 140-3 mode: %v\n%s", err, out)
	}
}
