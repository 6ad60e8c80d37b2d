package mover

import (
	"fmt"
	"strings"

	"github.com/dtnflow/dtnflow/agent/fsname"
	"github.com/dtnflow/dtnflow/agent/fsroot"
	"github.com/dtnflow/dtnflow/agent/journal"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// DefaultMaxFileSize is the largest file a receiver accepts unless told otherwise
// (ext4's limit with 4 KiB blocks): a sane bound on what a peer may announce, so that
// a chunk far out cannot make a sparse temporary file of any apparent size.
const DefaultMaxFileSize = 16 << 40

// wirePath checks a destination path from the wire: relative, no '..', and not inside
// the journal directory, which only the receiver writes.
func wirePath(p fsname.Path) (string, error) {
	c, err := fsroot.Clean(string(p), false)
	if err != nil {
		return "", err
	}
	if c == journal.Dir || strings.HasPrefix(c, journal.Dir+"/") {
		return "", fmt.Errorf("path %s refused: %s/ holds the receivers' journals", fsname.Show(c), journal.Dir)
	}
	return c, nil
}

// destinationPath is a path a sender names, cleaned and checked: under the root, not in
// the journals' folder, and under Confine when the receiver is confined.
func (r *Receiver) destinationPath(p fsname.Path) (string, error) {
	c, err := wirePath(p)
	if err != nil || r.Confine == "" {
		return c, err
	}
	if c != r.Confine && !strings.HasPrefix(c, r.Confine+"/") {
		return "", fmt.Errorf("path %s refused: this receiver writes only under %s", fsname.Show(c), fsname.Show(r.Confine))
	}
	return c, nil
}

// chunking is how a file of size bytes is cut: chunks of chunkSize (a multiple of
// blockSize, the last one shorter), every figure checked against the session's and
// without overflow.
func checkChunking(size, chunkSize, blockSize, chunks int64, sessionChunk, maxFile int64) error {
	switch {
	case size <= 0 || size > maxFile:
		return fmt.Errorf("file size %d outside (0, %d]", size, maxFile)
	case blockSize <= 0 || chunkSize < blockSize || chunkSize%blockSize != 0:
		return fmt.Errorf("chunk size %d is not a positive multiple of block size %d", chunkSize, blockSize)
	case sessionChunk > 0 && chunkSize != sessionChunk:
		return fmt.Errorf("chunk size %d, the session's is %d", chunkSize, sessionChunk)
	}
	// (size-1)/chunkSize+1 cannot overflow, unlike (size+chunkSize-1)/chunkSize.
	if want := (size-1)/chunkSize + 1; chunks != want {
		return fmt.Errorf("%d chunks of %d bytes for a file of %d bytes (want %d)", chunks, chunkSize, size, want)
	}
	return nil
}

// checkChunkOpen checks every figure of a ChunkOpen against the others, the session's
// block and chunk sizes and the largest file accepted: the chunk must be exactly the
// Index-th piece of the file as the session cuts it.
func checkChunkOpen(m wire.ChunkOpen, sessionBlock, sessionChunk, maxFile int64) error {
	if m.BlockSize > sessionBlock {
		return fmt.Errorf("block size %d over the session's %d", m.BlockSize, sessionBlock)
	}
	if err := checkChunking(m.FileSize, m.ChunkSize, m.BlockSize, int64(m.Chunks), sessionChunk, maxFile); err != nil {
		return err
	}
	if m.Index < 0 || m.Index >= m.Chunks {
		return fmt.Errorf("chunk %d of %d", m.Index, m.Chunks)
	}
	off := int64(m.Index) * m.ChunkSize // < size ≤ maxFile: no overflow
	if m.Offset != off || m.Length != min(m.ChunkSize, m.FileSize-off) {
		return fmt.Errorf("chunk %d at [%d, +%d), want [%d, +%d)", m.Index, m.Offset, m.Length, off, min(m.ChunkSize, m.FileSize-off))
	}
	return nil
}

// checkFinalize checks a Finalize's figures as checkChunkOpen does.
func checkFinalize(m wire.Finalize, sessionBlock, sessionChunk, maxFile int64) error {
	return checkChunking(m.FileSize, m.ChunkSize, sessionBlock, int64(m.Chunks), sessionChunk, maxFile)
}
