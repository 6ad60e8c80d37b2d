package wire

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fileFramePair is a Conn whose writer sends over a kernel TCP socket (so that its
// file-backed frames go by sendfile) and the raw socket at the other end.
func fileFramePair(t *testing.T) (conn *Conn, far net.Conn) {
	t.Helper()
	c, far := loopbackPair(t)
	key := bytes.Repeat([]byte{7}, 32) // pair's key
	conn = NewConn(c, Keys{MAC: key}, Keys{MAC: key})
	if conn.zc == nil {
		t.Fatal("a TCP connection without its zero-copy paths")
	}
	t.Cleanup(func() { conn.Close(); far.Close() })
	return conn, far
}

// sourceFile is a file of content, open for reading until the test ends.
func sourceFile(t *testing.T, content []byte) *os.File {
	t.Helper()
	path := filepath.Join(t.TempDir(), "src")
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// TestFileFrameIsTheBufferedFrame: a frame written from a file is byte for byte the
// frame written from the same bytes in a buffer — data under the tag (read by the
// writer into its own buffer), checked in flight by a CRC32C in its meta or not at all
// (sent by sendfile), of sizes around the page and the block, at offsets that are not
// a page's, the modes interleaved on one connection.
func TestFileFrameIsTheBufferedFrame(t *testing.T) {
	rng := rand.New(rand.NewPCG(26, 11))
	content := make([]byte, 5<<20)
	for i := range content {
		content[i] = byte(rng.Uint32())
	}
	f := sourceFile(t, content)
	conn, far := fileFramePair(t)
	var want bytes.Buffer
	ref, _ := pair(&want, nil)
	type frame struct {
		flags Flags
		off   int64
		n     int
	}
	var frames []frame
	sizes := []int{0, 1, 4095, 4096, 4097, 65_536, 1 << 20, 1<<20 + 13}
	for range 8 {
		sizes = append(sizes, 1+rng.IntN(2<<20))
	}
	for i, n := range sizes {
		for _, flags := range []Flags{0, FlagDataOutsideTag, FlagDataOutsideTag | FlagDataUnchecked} {
			off := int64(0)
			switch i % 3 {
			case 1:
				off = 4096 * int64(rng.IntN(256))
			case 2:
				off = int64(rng.IntN(len(content) - n + 1))
			}
			frames = append(frames, frame{flags, off, n})
		}
	}
	got := make(chan []byte, 1)
	go func() {
		b, _ := io.ReadAll(far)
		got <- b
	}()
	for i, fr := range frames {
		meta := BlockMeta{Chunk: 3, Offset: uint64(fr.off)}.Put(make([]byte, blockMetaSize))
		if err := conn.Writer().WriteFrameFile(TypeBlock, fr.flags, meta, f, fr.off, fr.n); err != nil {
			t.Fatalf("frame %d (%d bytes at %d, flags %#x) from the file: %v", i, fr.n, fr.off, fr.flags, err)
		}
		if err := ref.WriteFrameFlags(TypeBlock, fr.flags, meta, content[fr.off:fr.off+int64(fr.n)]); err != nil {
			t.Fatalf("frame %d from a buffer: %v", i, err)
		}
	}
	conn.Close()
	stream := <-got
	if !bytes.Equal(stream, want.Bytes()) {
		at := 0
		for at < min(len(stream), want.Len()) && stream[at] == want.Bytes()[at] {
			at++
		}
		t.Fatalf("the file-backed frames differ from the buffered ones at byte %d of %d (%d sent)", at, want.Len(), len(stream))
	}
}

// TestFileFrameOfAFileCutShort: a file shorter than the frame it was listed for is an
// error, and the frame's tag never goes out: the reader cannot take what came of the
// frame for a whole one. Data under the tag is read before anything is written, so
// there nothing of the frame goes out at all, the error is the source's
// (SourceReadError), and the connection carries the next frame.
func TestFileFrameOfAFileCutShort(t *testing.T) {
	for _, flags := range []Flags{FlagDataOutsideTag | FlagDataUnchecked, 0} {
		t.Run(fmt.Sprintf("flags %#x", flags), func(t *testing.T) { testFileFrameOfAFileCutShort(t, flags) })
	}
}

func testFileFrameOfAFileCutShort(t *testing.T, flags Flags) {
	for _, tc := range []struct {
		name      string
		size      int64 // what the file holds when the frame is written
		off       int64
		n         int
		wantError bool
	}{
		{"cut inside the frame", 1<<20 + 100, 1 << 20, 1 << 20, true},
		{"cut at the frame's start", 1 << 20, 1 << 20, 1 << 20, true},
		{"cut before the frame", 4096, 1 << 20, 65_536, true},
		{"cut inside the frame's last page", 2<<20 - 1, 1 << 20, 1 << 20, true},
		{"whole", 2 << 20, 1 << 20, 1 << 20, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := sourceFile(t, bytes.Repeat([]byte{0xa5}, int(tc.size)))
			conn, far := fileFramePair(t)
			got := make(chan []byte, 1)
			go func() {
				b, _ := io.ReadAll(far)
				got <- b
			}()
			meta := BlockMeta{Chunk: 1, Offset: uint64(tc.off)}.Put(make([]byte, blockMetaSize))
			err := conn.Writer().WriteFrameFile(TypeBlock, flags, meta, f, tc.off, tc.n)
			next := []byte("the frame after")
			if flags == 0 && tc.wantError {
				if werr := conn.Writer().WriteFrame(TypeBlock, meta, next); werr != nil {
					t.Fatalf("the frame after a source's failed read: %v", werr)
				}
			}
			conn.Close()
			sent := <-got
			whole := HeaderSize + blockMetaSize + tc.n + TagSize
			if !tc.wantError {
				if err != nil || len(sent) != whole {
					t.Fatalf("a whole file's frame: %v, %d bytes sent of %d", err, len(sent), whole)
				}
				return
			}
			if !errors.Is(err, io.ErrUnexpectedEOF) {
				t.Fatalf("a frame past the file's end: %v, want io.ErrUnexpectedEOF", err)
			}
			if len(sent) >= whole-TagSize {
				t.Fatalf("%d bytes of a %d-byte frame cut short went out", len(sent), whole)
			}
			if flags != 0 {
				return
			}
			var unread *SourceReadError
			if !errors.As(err, &unread) || !strings.Contains(err.Error(), fmt.Sprintf("at byte %d", tc.off)) {
				t.Fatalf("got %v, want a SourceReadError naming byte %d", err, tc.off)
			}
			// Only the next frame went out, and it reads as the connection's first.
			_, r := pair(nil, bytes.NewReader(sent))
			if _, _, err := r.Next(); err != nil {
				t.Fatalf("the frame after the failed read: %v", err)
			}
			data := make([]byte, len(next))
			if err := r.ReadData(data); err != nil || !bytes.Equal(data, next) {
				t.Fatalf("the frame after the failed read: %v, data %q", err, data)
			}
			if _, _, err := r.Next(); err != io.EOF {
				t.Fatalf("more than the next frame went out: %v", err)
			}
		})
	}
}
