package wire

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"testing"
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
	run("frame-tag-GMAC", func() { mac.sum(tag[:0], hdr, meta, block, true) })
	if mac.wide != nil && mac.wide.zmm {
		ymm := newFrameSealer(Keys{MAC: key, Enc: key})
		ymm.wide.zmm = false
		run("frame-tag-GMAC-YMM", func() { ymm.sum(tag[:0], hdr, meta, block, true) })
	}
	if mac.wide != nil {
		narrow := newFrameSealer(Keys{MAC: key, Enc: key})
		narrow.wide = nil
		run("frame-tag-GMAC-stdlib-GCM", func() { narrow.sum(tag[:0], hdr, meta, block, true) })
	}
	ct := make([]byte, len(block))
	run("frame-encrypted-AES-CTR+GMAC", func() {
		mac.crypt(ct, block, ivData, mac.counter)
		mac.sum(tag[:0], hdr, meta, ct, true)
	})
	if mac.vctr != nil {
		std := newFrameSealer(Keys{MAC: key, Enc: key})
		std.vctr = nil
		run("frame-encrypted-AES-CTR+GMAC-stdlib-CTR", func() {
			std.crypt(ct, block, ivData, std.counter)
			std.sum(tag[:0], hdr, meta, ct, true)
		})
	}
	run("CRC32C", func() { CRC32C(block) })
	blk, _ := aes.NewCipher(key)
	gcm, _ := cipher.NewGCM(blk)
	nonce, out := make([]byte, 12), make([]byte, 0, len(block)+TagSize)
	run("AES-256-GCM-encrypt", func() { gcm.Seal(out[:0], nonce, block, hdr) })
	run("SHA-256", func() { sha256.Sum256(block) })
	run("SHA-512", func() { sha512.Sum512(block) })
	run("MD5", func() { md5.Sum(block) })
}
