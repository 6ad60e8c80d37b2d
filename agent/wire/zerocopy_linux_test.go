package wire

import (
	"bytes"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
)

// loopbackPair is a TCP connection over loopback: the dialed end and the accepted one.
func loopbackPair(t *testing.T) (dialed, accepted net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ch := make(chan net.Conn, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			close(ch)
			return
		}
		ch <- c
	}()
	dialed, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	accepted, ok := <-ch
	if !ok {
		t.Fatal("accept failed")
	}
	return dialed, accepted
}

// splicePair is a loopback TCP connection: raw is the sending end, written byte by byte
// as the test chooses, and conn the receiving end, keyed as the frames written by
// frames() expect.
func splicePair(t *testing.T) (raw *net.TCPConn, conn *Conn) {
	t.Helper()
	c, srv := loopbackPair(t)
	raw = c.(*net.TCPConn)
	raw.SetNoDelay(true) // each small write its own segment
	// Room for many small segments, so that they wait whole in the receiver's queue
	// (one pipe slot each) instead of being merged to save memory.
	srv.(*net.TCPConn).SetReadBuffer(4 << 20)
	key := bytes.Repeat([]byte{7}, 32) // pair's key
	conn = NewConn(srv, Keys{MAC: key}, Keys{MAC: key})
	t.Cleanup(func() { raw.Close(); conn.Close() })
	return raw, conn
}

// uncheckedBlocks is the bytes of one Block frame per element of sizes, with data
// outside the tag and unchecked (in-flight mode HeadersOnly), then a ChunkEnd; and the
// blocks' data, back to back.
func uncheckedBlocks(t *testing.T, rng *rand.Rand, sizes []int) (stream, data []byte) {
	t.Helper()
	var buf bytes.Buffer
	w, _ := pair(&buf, nil)
	off := 0
	for i, n := range sizes {
		d := make([]byte, n)
		for j := range d {
			d[j] = byte(rng.Uint32())
		}
		meta := BlockMeta{Chunk: 1, Offset: uint64(off)}.Put(make([]byte, blockMetaSize))
		if err := w.WriteFrameFlags(TypeBlock, FlagDataOutsideTag|FlagDataUnchecked, meta, d); err != nil {
			t.Fatalf("block %d: %v", i, err)
		}
		data = append(data, d...)
		off += n
	}
	if err := w.WriteJSON(TypeChunkEnd, ChunkEnd{ID: 1, Blocks: int64(len(sizes))}); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes(), data
}

// receiveBlocks splices every Block frame on conn into f at its offset, within gate,
// until the ChunkEnd.
func receiveBlocks(conn *Conn, f *os.File, gate Gate) error {
	r := conn.Reader(4096)
	for {
		h, meta, err := r.Next()
		if err != nil {
			return err
		}
		if h.Type == TypeChunkEnd {
			return nil
		}
		m, err := ParseBlockMeta(meta)
		if err != nil {
			return err
		}
		if err := r.SpliceData(f, int64(m.Offset), gate); err != nil {
			return err
		}
	}
}

// lockGate is a gate that takes turns at a lock: it never closes.
type lockGate struct{ sync.Locker }

func (g lockGate) Enter() bool { g.Lock(); return true }
func (g lockGate) Leave()      { g.Unlock() }

// TestSpliceDataTakesWhatArrives: blocks spliced into a file arrive whole at their
// offsets however the stream is cut — in one write, in thousands of segments of a few
// bytes queued before the reader looks (each takes a slot of the pipe, which runs out
// of slots long before it runs out of bytes), or in pieces of random sizes — and the
// frame after them is read where it starts.
func TestSpliceDataTakesWhatArrives(t *testing.T) {
	sizes := []int{1 << 20, 777_777, 1<<20 + 4097, 3, 2 << 20}
	whole := func(_ *rand.Rand, n int) int { return n }
	tiny := func(rng *rand.Rand, _ int) int { return 1 + rng.IntN(40) }
	random := func(rng *rand.Rand, _ int) int { return 1 + rng.IntN(300_000) }
	// How the stream is cut before the reader starts, and after.
	cuts := map[string][2]func(rng *rand.Rand, n int) int{
		"whole":           {whole, whole},
		"tiny segments":   {tiny, random},
		"random segments": {random, random},
	}
	for name, cut := range cuts {
		t.Run(name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(len(name))))
			stream, data := uncheckedBlocks(t, rng, sizes)
			raw, conn := splicePair(t)
			f, err := os.Create(filepath.Join(t.TempDir(), "dst"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			// The first 3000 pieces are written before the reader starts, so that
			// they wait in the socket's queue as separate segments.
			rest := stream
			for i := 0; i < 3000 && len(rest) > 0; i++ {
				n := min(cut[0](rng, len(rest)), len(rest))
				if _, err := raw.Write(rest[:n]); err != nil {
					t.Fatal(err)
				}
				rest = rest[n:]
			}
			done := make(chan error, 1)
			go func() { done <- receiveBlocks(conn, f, lockGate{&sync.Mutex{}}) }()
			for len(rest) > 0 {
				n := min(cut[1](rng, len(rest)), len(rest))
				if _, err := raw.Write(rest[:n]); err != nil {
					t.Fatal(err)
				}
				rest = rest[n:]
			}
			select {
			case err := <-done:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(time.Minute):
				t.Fatal("the reader did not reach the ChunkEnd")
			}
			got, err := os.ReadFile(f.Name())
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, data) {
				t.Fatalf("file holds %d bytes, %d differ from the blocks' %d", len(got), countDiff(got, data), len(data))
			}
		})
	}
}

// TestSpliceDataWritesBeforeItWaits: nothing goes into the file while another writer
// holds the write lock; what has arrived of a block (more than the socket's low-water
// mark) is in the file while the reader waits for the rest, and the write lock is free
// meanwhile (it is held to write, never to wait on the socket).
func TestSpliceDataWritesBeforeItWaits(t *testing.T) {
	g := NewWithT(t)
	rng := rand.New(rand.NewPCG(7, 7))
	stream, data := uncheckedBlocks(t, rng, []int{2 * maxLowWater})
	raw, conn := splicePair(t)
	f, err := os.Create(filepath.Join(t.TempDir(), "dst"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var lock sync.Mutex
	lock.Lock() // another writer of the file
	done := make(chan error, 1)
	go func() { done <- receiveBlocks(conn, f, lockGate{&lock}) }()

	// The frame's header first, read before any data comes, so that the data goes
	// through the pipe, not the reader's buffer.
	if _, err := raw.Write(stream[:HeaderSize+blockMetaSize]); err != nil {
		t.Fatal(err)
	}
	g.Eventually(func() int { return unread(t, conn) }).WithTimeout(10*time.Second).WithPolling(time.Millisecond).Should(BeZero(), "the header read")
	// More than the reader's low-water mark ever holds back, so that the socket wakes
	// the reader for it.
	arrived := maxLowWater + 64<<10
	headerAndArrived := HeaderSize + blockMetaSize + arrived
	if _, err := raw.Write(stream[HeaderSize+blockMetaSize : headerAndArrived]); err != nil {
		t.Fatal(err)
	}
	size := func() int64 {
		fi, err := f.Stat()
		if err != nil {
			return -1
		}
		return fi.Size()
	}
	g.Consistently(size).WithTimeout(100*time.Millisecond).Should(BeZero(), "nothing written while the lock is held")
	lock.Unlock()
	firstPart := data[:arrived]
	g.Eventually(func() []byte {
		b := make([]byte, len(firstPart))
		n, _ := f.ReadAt(b, 0)
		return b[:n]
	}).WithTimeout(10*time.Second).WithPolling(time.Millisecond).Should(Equal(firstPart), "what arrived, in the file before the rest comes")
	g.Eventually(lock.TryLock).WithTimeout(10*time.Second).WithPolling(time.Millisecond).Should(BeTrue(), "the write lock, free while the reader waits")
	lock.Unlock()
	g.Consistently(done).WithTimeout(50 * time.Millisecond).ShouldNot(Receive())

	if _, err := raw.Write(stream[headerAndArrived:]); err != nil {
		t.Fatal(err)
	}
	g.Eventually(done).WithTimeout(time.Minute).Should(Receive(BeNil()))
	got, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	g.Expect(bytes.Equal(got, data)).To(BeTrue(), "the whole block at its offset")
}

// unread is how many bytes wait in conn's socket, not yet read.
func unread(t *testing.T, conn *Conn) int {
	sc, err := conn.NetConn().(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	n := -1
	sc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
	return n
}

func countDiff(a, b []byte) int {
	n := max(len(a), len(b)) - min(len(a), len(b))
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// TestSpliceDataCutShort: a peer that closes in the middle of a block's data gets an
// error, never a block taken for whole — whether the cut comes with bytes held in the
// pipe or on an empty one.
func TestSpliceDataCutShort(t *testing.T) {
	for _, cut := range []int{1, 4096, 1 << 19, 1<<20 - 1} {
		rng := rand.New(rand.NewPCG(3, uint64(cut)))
		stream, _ := uncheckedBlocks(t, rng, []int{1 << 20})
		raw, conn := splicePair(t)
		f, err := os.Create(filepath.Join(t.TempDir(), "dst"))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- receiveBlocks(conn, f, nil) }()
		if _, err := raw.Write(stream[:HeaderSize+blockMetaSize+cut]); err != nil {
			t.Fatal(err)
		}
		raw.Close()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("cut after %d bytes of the block's data: no error", cut)
			}
		case <-time.After(time.Minute):
			t.Fatalf("cut after %d bytes of the block's data: the reader never returned", cut)
		}
		f.Close()
	}
}

// closingGate is a destination's gate as a receiver keeps it: Close refuses every piece
// after it, waiting for the one being written.
type closingGate struct {
	mu      sync.Mutex
	idle    sync.Cond
	closed  bool
	writing int
}

func (g *closingGate) Enter() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false
	}
	g.writing++
	return true
}

func (g *closingGate) Leave() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.writing--
	if g.idle.L != nil {
		g.idle.Broadcast()
	}
}

func (g *closingGate) Close() {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.closed = true
	if g.idle.L == nil {
		g.idle.L = &g.mu
	}
	for g.writing > 0 {
		g.idle.Wait()
	}
}

// feed writes b to c in the background (a net.Pipe's write waits for the reader).
func feed(c net.Conn, b []byte) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := c.Write(b)
		done <- err
	}()
	return done
}

// TestSpliceDataStopsAtAClosedDestination: a destination closed while the reader waits
// in the middle of a block's data (a path stalled with its connections open) is closed
// at once — closing waits for a piece's write, never for the peer — and takes nothing
// more when the rest arrives: the reader ends with ErrDestinationClosed. Over a kernel
// socket (spliced) and over a connection that is not one (copied through user space).
func TestSpliceDataStopsAtAClosedDestination(t *testing.T) {
	transports := map[string]func(t *testing.T) (net.Conn, *Conn){
		"splice": func(t *testing.T) (net.Conn, *Conn) { return splicePair(t) },
		"copy": func(t *testing.T) (net.Conn, *Conn) {
			raw, srv := net.Pipe()
			key := bytes.Repeat([]byte{7}, 32)
			conn := NewConn(srv, Keys{MAC: key}, Keys{MAC: key})
			t.Cleanup(func() { raw.Close(); conn.Close() })
			return raw, conn
		},
	}
	for name, connect := range transports {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			rng := rand.New(rand.NewPCG(11, uint64(len(name))))
			stream, data := uncheckedBlocks(t, rng, []int{2 << 20})
			raw, conn := connect(t)
			f, err := os.Create(filepath.Join(t.TempDir(), "dst"))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			gate := &closingGate{}
			done := make(chan error, 1)
			go func() { done <- receiveBlocks(conn, f, gate) }()

			// The header and a part of the data that fills whole pieces; the rest of
			// the block is held back.
			part := HeaderSize + blockMetaSize + maxLowWater + 64<<10
			g.Eventually(feed(raw, stream[:part])).WithTimeout(10 * time.Second).Should(Receive(BeNil()))
			inFile := func() []byte {
				b := make([]byte, len(data))
				n, _ := f.ReadAt(b, 0)
				return b[:n]
			}
			g.Eventually(func() int { return len(inFile()) }).WithTimeout(10*time.Second).WithPolling(time.Millisecond).Should(BeNumerically(">=", copyPieceSize), "what arrived, in the file")
			closed := make(chan struct{})
			go func() { gate.Close(); close(closed) }()
			g.Eventually(closed).WithTimeout(10*time.Second).Should(BeClosed(), "closing waits for no peer")
			written := inFile()
			g.Expect(bytes.Equal(written, data[:len(written)])).To(BeTrue(), "what was written is the block's start")

			feed(raw, stream[part:])
			g.Eventually(done).WithTimeout(time.Minute).Should(Receive(MatchError(ErrDestinationClosed)))
			g.Expect(len(inFile())).To(Equal(len(written)), "nothing written after the close")
		})
	}
}
