package mover

import (
	"bytes"
	"crypto/sha256"
	"testing"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// TestChunkDigestModes: read-back mode is the plain digest of the chunk's bytes; on
// arrival it is the digest of the blocks' digests, which the receiver can build from
// digests taken in any order (blocks arrive over several streams) plus blocks read back.
func TestChunkDigestModes(t *testing.T) {
	blocks := [][]byte{bytes.Repeat([]byte("a"), 100), bytes.Repeat([]byte("b"), 100), []byte("tail")}
	whole := newChunkHasher("SHA256", wire.VerifyReadBack)
	list := newChunkHasher("SHA256", wire.VerifyOnArrival)
	for _, b := range blocks {
		whole.Block(b)
		list.Block(b)
	}
	if want := sha256.Sum256(bytes.Join(blocks, nil)); !bytes.Equal(whole.Sum(), want[:]) {
		t.Errorf("read-back mode is not the chunk's SHA-256")
	}
	var ds []byte
	for _, b := range blocks {
		d := sha256.Sum256(b)
		ds = append(ds, d[:]...)
	}
	if want := sha256.Sum256(ds); !bytes.Equal(list.Sum(), want[:]) {
		t.Errorf("on-arrival mode is not the SHA-256 of the blocks' SHA-256s")
	}
	if bytes.Equal(whole.Sum(), list.Sum()) {
		t.Errorf("the two modes give the same digest: a job could not tell which it compares")
	}
	// The receiver's blockHasher gives the same block digests, whatever came before.
	bh := newBlockHasher("SHA256")
	bh.digest([]byte("something else first"))
	if d := sha256.Sum256(blocks[1]); !bytes.Equal(bh.digest(blocks[1]), d[:]) {
		t.Errorf("a block hasher carries state from one block to the next")
	}
}
