package wire

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
)

// lowWaterOf is the receiving socket's SO_RCVLOWAT and SO_RCVBUF as the kernel has them.
func lowWaterOf(t *testing.T, conn *Conn) (mark, rcvbuf int) {
	t.Helper()
	sc, err := conn.NetConn().(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	sc.Control(func(fd uintptr) {
		mark, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT)
		rcvbuf, _ = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
	})
	return mark, rcvbuf
}

// TestReaderWakesForWhatTheFrameOwes: while a frame's data is on its way the socket
// wakes the reader only once more than a segment of it is there (its low-water mark is
// up, never past what the frame still owes nor a quarter of the receive buffer), and
// while the reader waits for the next frame's header the mark is back at one byte.
func TestReaderWakesForWhatTheFrameOwes(t *testing.T) {
	g := NewWithT(t)
	raw, conn := splicePair(t)
	// A receive buffer smaller than the frame, so that the buffer bounds the mark.
	if err := conn.NetConn().(*net.TCPConn).SetReadBuffer(256 << 10); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, _ := pair(&buf, nil)
	data := bytes.Repeat([]byte{0x5a}, 1<<20)
	meta := BlockMeta{Chunk: 1}.Put(make([]byte, blockMetaSize))
	if err := w.WriteFrame(TypeBlock, meta, data); err != nil {
		t.Fatal(err)
	}
	frame := bytes.Clone(buf.Bytes())
	sent := HeaderSize + blockMetaSize + 100
	if _, err := raw.Write(frame[:sent]); err != nil {
		t.Fatal(err)
	}

	r := conn.Reader(4096)
	got := make(chan error, 2)
	go func() {
		if _, _, err := r.Next(); err != nil {
			got <- err
			return
		}
		dst := make([]byte, len(data))
		err := r.ReadData(dst)
		if err == nil && !bytes.Equal(dst, data) {
			err = errors.New("the data read differs from the data sent")
		}
		got <- err
		_, _, err = r.Next() // waits for a header that does not come yet
		got <- err
	}()
	owed := len(frame) - sent
	g.Eventually(func(g Gomega) {
		mark, rcvbuf := lowWaterOf(t, conn)
		g.Expect(mark).To(BeNumerically(">", 1), "a mark above one byte while the data is owed")
		g.Expect(mark).To(BeNumerically("<=", owed), "never past what the frame owes")
		g.Expect(mark).To(BeNumerically("<=", rcvbuf/4), "never past a quarter of the receive buffer")
	}).WithTimeout(10 * time.Second).WithPolling(time.Millisecond).Should(Succeed())
	g.Consistently(got).WithTimeout(20 * time.Millisecond).ShouldNot(Receive())

	if _, err := raw.Write(frame[sent:]); err != nil {
		t.Fatal(err)
	}
	g.Eventually(got).WithTimeout(time.Minute).Should(Receive(BeNil()))
	g.Eventually(func() int { mark, _ := lowWaterOf(t, conn); return mark }).
		WithTimeout(10*time.Second).WithPolling(time.Millisecond).Should(Equal(1), "the mark while a header is awaited")
	raw.Close()
	g.Eventually(got).WithTimeout(time.Minute).Should(Receive(HaveOccurred()), "the end of the stream")
}

// TestReaderNeverWaitsPastTheFrame: a peer that sends one frame and then waits for an
// answer gets it, whatever the frame's size, however the frame is cut into writes and
// however much of it the reader's buffer took before the data is read: a low-water mark
// past the frame's end would leave the reader asleep (until the peer closed). Each
// frame's data goes by each of the reader's paths: read, spliced, skipped.
func TestReaderNeverWaitsPastTheFrame(t *testing.T) {
	g := NewWithT(t)
	sizes := []int{0, 1, TagSize - 1, TagSize, TagSize + 1, 4095, 4096, 65_536,
		maxLowWater - 1, maxLowWater, maxLowWater + 1, 3*maxLowWater + 7}
	rng := rand.New(rand.NewPCG(12, 30))
	for range 12 {
		sizes = append(sizes, 1+rng.IntN(4*maxLowWater))
	}
	for _, bufSize := range []int{4096, 1 << 20, 4 << 20} {
		raw, conn := splicePair(t)
		f, err := os.Create(filepath.Join(t.TempDir(), "dst"))
		if err != nil {
			t.Fatal(err)
		}
		r := conn.Reader(bufSize)
		var buf bytes.Buffer
		w, _ := pair(&buf, nil)
		for i, n := range sizes {
			data := make([]byte, n)
			for j := range data {
				data[j] = byte(rng.Uint32())
			}
			path := []string{"read", "splice", "skip"}[i%3]
			flags := Flags(0)
			if path == "splice" {
				flags = FlagDataOutsideTag | FlagDataUnchecked
			}
			buf.Reset()
			meta := BlockMeta{Chunk: 1, Offset: uint64(i)}.Put(make([]byte, blockMetaSize))
			if err := w.WriteFrameFlags(TypeBlock, flags, meta, data); err != nil {
				t.Fatal(err)
			}
			if i%3 == 2 { // a frame the reader skips is followed by one it reads
				if err := w.WriteJSON(TypeChunkEnd, ChunkEnd{ID: uint64(i)}); err != nil {
					t.Fatal(err)
				}
			}
			stream := buf.Bytes()
			done := make(chan error, 1)
			go func() {
				h, _, err := r.Next()
				if err == nil && h.DataLen != uint32(n) {
					err = fmt.Errorf("a frame of %d bytes of data, want %d", h.DataLen, n)
				}
				if err != nil {
					done <- err
					return
				}
				switch path {
				case "read":
					dst := make([]byte, n)
					if err = r.ReadData(dst); err == nil && !bytes.Equal(dst, data) {
						err = errors.New("the data read differs from the data sent")
					}
				case "splice":
					if err = f.Truncate(0); err == nil {
						err = r.SpliceData(f, 0, nil)
					}
					if got, rerr := os.ReadFile(f.Name()); err == nil && (rerr != nil || !bytes.Equal(got, data)) {
						err = errors.New("the spliced file differs from the data sent")
					}
				case "skip":
					if h, _, err = r.Next(); err == nil && h.Type != TypeChunkEnd {
						err = fmt.Errorf("frame type %d after the skipped frame, want its ChunkEnd", h.Type)
					}
				}
				done <- err
			}()
			// The frame in pieces of random sizes, written back to back but for its last
			// few bytes, which come once the reader has had time to wait for them.
			tail := stream[len(stream)-1-rng.IntN(min(len(stream), 40)):]
			stream = stream[:len(stream)-len(tail)]
			for len(stream) > 0 {
				k := min(len(stream), 1+rng.IntN(len(stream)))
				if _, err := raw.Write(stream[:k]); err != nil {
					t.Fatal(err)
				}
				stream = stream[k:]
			}
			g.Consistently(done).WithTimeout(5*time.Millisecond).ShouldNot(Receive(), "frame %d done before its last bytes came", i)
			if _, err := raw.Write(tail); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("buffer %d, frame %d (%d bytes, %s): %v", bufSize, i, n, path, err)
				}
			case <-time.After(time.Minute):
				t.Fatalf("buffer %d, frame %d (%d bytes, %s): the reader still waits for a frame the peer has sent whole", bufSize, i, n, path)
			}
		}
		f.Close()
	}
}

// TestReaderThatNeedNotWaitSetsNoMark: frames already whole in the socket are read
// without touching its low-water mark — the mark matters only to a reader that waits,
// and setting it at every read cost a small file four system calls at the receiver.
func TestReaderThatNeedNotWaitSetsNoMark(t *testing.T) {
	g := NewWithT(t)
	raw, conn := splicePair(t)
	if err := conn.NetConn().(*net.TCPConn).SetReadBuffer(4 << 20); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	w, _ := pair(&buf, nil)
	var frames [][]byte
	for i, n := range []int{64 << 10, 100_000, 256 << 10} {
		data := bytes.Repeat([]byte{byte(i + 1)}, n)
		frames = append(frames, data)
		meta := BlockMeta{Chunk: 1, Offset: uint64(i)}.Put(make([]byte, blockMetaSize))
		if err := w.WriteFrame(TypeBlock, meta, data); err != nil {
			t.Fatal(err)
		}
	}
	whole := buf.Len()
	if _, err := raw.Write(buf.Bytes()); err != nil {
		t.Fatal(err)
	}
	sc, err := conn.NetConn().(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() (queued int) {
		sc.Control(func(fd uintptr) { queued, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
		return queued
	}).WithTimeout(10*time.Second).WithPolling(time.Millisecond).Should(Equal(whole), "every frame in the socket before the reader starts")

	untouched, _ := lowWaterOf(t, conn) // the kernel's default (0 on some kernels: one byte)
	r := conn.Reader(4096)
	for i, data := range frames {
		h, _, err := r.Next()
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		dst := make([]byte, h.DataLen)
		if err := r.ReadData(dst); err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		if !bytes.Equal(dst, data) {
			t.Fatalf("frame %d: the data read differs from the data sent", i)
		}
		mark, _ := lowWaterOf(t, conn)
		g.Expect(mark).To(Equal(untouched), "the mark after frame %d, read without waiting", i)
	}
}

// TestReaderErrorNamesTheConnection: the reader reads the socket itself, and a failed
// read still says which connection failed and why, as a net.Conn's would.
func TestReaderErrorNamesTheConnection(t *testing.T) {
	raw, conn := splicePair(t)
	if err := raw.SetLinger(0); err != nil { // closing resets the connection
		t.Fatal(err)
	}
	raw.Close()
	_, _, err := conn.Reader(4096).Next()
	if !errors.Is(err, unix.ECONNRESET) {
		t.Fatalf("reading a reset connection: %v, want ECONNRESET", err)
	}
	var op *net.OpError
	if !errors.As(err, &op) || op.Addr.String() != conn.RemoteAddr().String() || op.Source.String() != conn.LocalAddr().String() {
		t.Fatalf("%q does not name the connection %s -> %s", err, conn.LocalAddr(), conn.RemoteAddr())
	}
}
