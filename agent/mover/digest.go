package mover

import (
	"hash"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// chunkHasher digests a chunk as its blocks go by, the way the job's verification mode
// compares it: the chunk's bytes themselves (wire.VerifyReadBack: the receiver reads the
// chunk back and digests it the same way), or the digest of the list of its blocks'
// digests (wire.VerifyOnArrival: the receiver digests each block as it arrives, on the
// stream that carried it, and never reads back what it saw arrive).
type chunkHasher struct {
	whole, list hash.Hash
	block       *blockHasher
}

func newChunkHasher(checksum, mode string) *chunkHasher {
	h, _ := NewDigest(checksum)
	if mode == wire.VerifyOnArrival {
		return &chunkHasher{list: h, block: newBlockHasher(checksum)}
	}
	return &chunkHasher{whole: h}
}

// Block adds the chunk's next block.
func (c *chunkHasher) Block(data []byte) {
	if c.whole != nil {
		c.whole.Write(data)
		return
	}
	c.list.Write(c.block.digest(data))
}

// Sum is the chunk's digest.
func (c *chunkHasher) Sum() []byte {
	if c.whole != nil {
		return c.whole.Sum(nil)
	}
	return c.list.Sum(nil)
}

// blockHasher digests blocks one at a time (one per data stream at the receiver, so
// blocks are digested in parallel, where they arrive).
type blockHasher struct {
	h hash.Hash
}

func newBlockHasher(checksum string) *blockHasher {
	h, _ := NewDigest(checksum)
	return &blockHasher{h: h}
}

// digest returns a fresh copy of data's digest.
func (b *blockHasher) digest(data []byte) []byte {
	b.h.Reset()
	b.h.Write(data)
	return b.h.Sum(nil)
}
