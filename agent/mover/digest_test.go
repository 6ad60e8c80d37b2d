package mover

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"testing"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// TestChunkDigestModes: read-back mode is the plain digest of the chunk's bytes; on
// arrival it is the digest of the blocks' digests, which the receiver can build from
// digests taken in any order (blocks arrive over several streams) plus blocks read back.
// For every checksum the API offers.
func TestChunkDigestModes(t *testing.T) {
	sums := map[string]func([]byte) []byte{
		"BLAKE3": blake3Sum,
		"SHA256": func(b []byte) []byte { d := sha256.Sum256(b); return d[:] },
		"SHA512": func(b []byte) []byte { d := sha512.Sum512(b); return d[:] },
		"MD5":    func(b []byte) []byte { d := md5.Sum(b); return d[:] },
	}
	blocks := [][]byte{bytes.Repeat([]byte("a"), 100), bytes.Repeat([]byte("b"), 3000), []byte("tail")}
	for name, sum := range sums {
		t.Run(name, func(t *testing.T) {
			whole := newChunkHasher(name, wire.VerifyReadBack)
			list := newChunkHasher(name, wire.VerifyOnArrival)
			for _, b := range blocks {
				whole.Block(b)
				list.Block(b)
			}
			if want := sum(bytes.Join(blocks, nil)); !bytes.Equal(whole.Sum(), want) {
				t.Errorf("read-back mode is not the chunk's %s", name)
			}
			var ds []byte
			for _, b := range blocks {
				ds = append(ds, sum(b)...)
			}
			if want := sum(ds); !bytes.Equal(list.Sum(), want) {
				t.Errorf("on-arrival mode is not the %s of the blocks' digests", name)
			}
			if bytes.Equal(whole.Sum(), list.Sum()) {
				t.Errorf("the two modes give the same digest: a job could not tell which it compares")
			}
			// The receiver's blockHasher gives the same block digests, whatever came before.
			bh := newBlockHasher(name)
			bh.digest([]byte("something else first"))
			if !bytes.Equal(bh.digest(blocks[1]), sum(blocks[1])) {
				t.Errorf("a block hasher carries state from one block to the next")
			}
		})
	}
}

// blake3Vectors are the first 32 bytes of the hashes in the BLAKE3 team's
// test_vectors.json (input byte i is i mod 251): lengths around the 64-byte block
// and the 1024-byte chunk, and trees of several levels.
var blake3Vectors = []struct {
	length int
	hash   string
}{
	{0, "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"},
	{1, "2d3adedff11b61f14c886e35afa036736dcd87a74d27b5c1510225d0f592e213"},
	{1023, "10108970eeda3eb932baac1428c7a2163b0e924c9a9e25b35bba72b28f70bd11"},
	{1024, "42214739f095a406f3fc83deb889744ac00df831c10daa55189b5d121c855af7"},
	{1025, "d00278ae47eb27b34faecf67b4fe263f82d5412916c1ffd97c8cb7fb814b8444"},
	{2048, "e776b6028c7cd22a4d0ba182a8bf62205d2ef576467e838ed6f2529b85fba24a"},
	{2049, "5f4d72f40d7a5f82b15ca2b2e44b1de3c2ef86c426c95c1af0b6879522563030"},
	{8193, "bab6c09cb8ce8cf459261398d2e7aef35700bf488116ceb94a36d0f5f1b7bc3b"},
	{16384, "f875d6646de28985646f34ee13be9a576fd515f76b5b0a26bb324735041ddde4"},
	{31744, "62b6960e1a44bcc1eb1a611a8d6235b6b4b78f32e7abc4fb4c6cdcce94895c47"},
}

func blake3Input(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

func blake3Sum(b []byte) []byte {
	h, _ := NewDigest("BLAKE3")
	h.Write(b)
	return h.Sum(nil)
}

// TestBLAKE3IsTheSpecsHash checks the digest the API calls BLAKE3 against the
// published test vectors, written at once and in pieces that cut its 64-byte blocks
// and 1024-byte chunks anywhere (a receiver writes a file's blocks as they come).
func TestBLAKE3IsTheSpecsHash(t *testing.T) {
	for _, v := range blake3Vectors {
		in := blake3Input(v.length)
		if got := hex.EncodeToString(blake3Sum(in)); got != v.hash {
			t.Errorf("BLAKE3 of %d bytes: %s, want %s", v.length, got, v.hash)
		}
		for _, piece := range []int{1, 63, 65, 1000, 1025} {
			h, _ := NewDigest("blake3") // names are matched without regard to case
			for off := 0; off < len(in); off += piece {
				h.Write(in[off:min(off+piece, len(in))])
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != v.hash {
				t.Errorf("BLAKE3 of %d bytes written %d at a time: %s, want %s", v.length, piece, got, v.hash)
			}
		}
	}
	if h, _ := NewDigest("BLAKE3"); h.Size() != 32 {
		t.Errorf("BLAKE3 digest of %d bytes, want 32", h.Size())
	}
}
