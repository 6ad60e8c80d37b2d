package wire

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"testing"

	"github.com/zeebo/blake3"
)

// BenchmarkPrimitives measures, on this machine's CPU, each per-byte primitive the data
// path may run over a 1 MiB block: the frame tag (GMAC with AES-NI and carry-less
// multiply), CRC32C (SSE4.2), AES-GCM encryption (what confidentiality would cost), and
// the end-to-end digests. `go test -run '^$' -bench Primitives ./agent/wire/`.
func BenchmarkPrimitives(b *testing.B) {
	block := bytes.Repeat([]byte{0xa5}, 1<<20)
	hdr, meta := make([]byte, HeaderSize), make([]byte, blockMetaSize)
	key := bytes.Repeat([]byte{1}, 32)
	run := func(name string, f func()) {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(block)))
			for b.Loop() {
				f()
			}
		})
	}
	mac := newFrameSealer(Keys{MAC: key, Enc: key})
	var tag [TagSize]byte
	run("frame-tag-GMAC", func() { mac.sum(tag[:0], hdr, meta, block, true, false) })
	if mac.wide != nil && mac.wide.zmm {
		ymm := newFrameSealer(Keys{MAC: key, Enc: key})
		ymm.wide.zmm = false
		run("frame-tag-GMAC-YMM", func() { ymm.sum(tag[:0], hdr, meta, block, true, false) })
	}
	if mac.wide != nil {
		narrow := newFrameSealer(Keys{MAC: key, Enc: key})
		narrow.wide = nil
		run("frame-tag-GMAC-stdlib-GCM", func() { narrow.sum(tag[:0], hdr, meta, block, true, false) })
	}
	ct := make([]byte, len(block))
	run("frame-encrypted-AES-CTR+GMAC", func() {
		mac.crypt(ct, block, ivData, mac.counter)
		mac.sum(tag[:0], hdr, meta, ct, true, false)
	})
	if mac.vctr != nil {
		std := newFrameSealer(Keys{MAC: key, Enc: key})
		std.vctr = nil
		run("frame-encrypted-AES-CTR+GMAC-stdlib-CTR", func() {
			std.crypt(ct, block, ivData, std.counter)
			std.sum(tag[:0], hdr, meta, ct, true, false)
		})
	}
	run("CRC32C", func() { CRC32C(block) })
	blk, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(blk)
	nonce, out := make([]byte, 12), make([]byte, 0, len(block)+TagSize)
	run("AES-256-GCM-encrypt", func() { gcm.Seal(out[:0], nonce, block, hdr) })
	run("BLAKE3", func() { blake3.Sum256(block) })
	run("SHA-256", func() { sha256.Sum256(block) })
	run("SHA-512", func() { sha512.Sum512(block) })
	run("MD5", func() { md5.Sum(block) })
}

// BenchmarkLargeFrames writes and reads 1 MiB frames with their data in the tag (mode
// Authenticated), through memory: what the frame layer costs per byte at each end.
func BenchmarkLargeFrames(b *testing.B) {
	keys := Keys{MAC: bytes.Repeat([]byte{7}, 32)}
	data := make([]byte, 1<<20)
	meta := BlockMeta{Chunk: 1}.Put(make([]byte, 32))
	var stream bytes.Buffer
	w := newWriter(&stream, newFrameSealer(keys))
	for range 16 {
		w.WriteFrame(TypeBlock, meta, data)
	}
	frames := stream.Bytes()
	b.Run("write", func(b *testing.B) {
		// Into a buffer, as a socket copies what it is given.
		var out bytes.Buffer
		out.Grow(len(frames))
		w := newWriter(&out, newFrameSealer(keys))
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if out.Len() >= len(frames) {
				out.Reset()
			}
			w.WriteFrame(TypeBlock, meta, data)
		}
	})
	b.Run("read", func(b *testing.B) {
		dst := make([]byte, len(data))
		b.SetBytes(int64(len(data)) * 16)
		for b.Loop() {
			// At most 128 KiB a read, as a socket on loopback gives it.
			r := newReader(&cappedReader{bytes.NewReader(frames)}, newFrameSealer(keys))
			for range 16 {
				if _, _, err := r.Next(); err != nil {
					b.Fatal(err)
				}
				if err := r.ReadData(dst); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}

type cappedReader struct{ r *bytes.Reader }

func (c *cappedReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), 128<<10)]) }
