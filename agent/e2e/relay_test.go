package e2e

import (
	"encoding/binary"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"testing"
)

// Handshake sizes (package auth): the client sends magic, version, nonce and its proof;
// the server its magic, version, nonce, proof and verdict. Offsets past these are
// frames.
const (
	clientHandshake = 4 + 1 + 32 + 32
	serverHandshake = 4 + 1 + 32 + 32 + 1
)

// relay is an on-path relay on loopback between senders and a receiver: it forwards
// every connection, passing each direction's bytes through damage first. It knows the
// protocol's framing but not the job's secret.
type relay struct {
	t      *testing.T
	ln     net.Listener
	target string
	// damage is called for each connection and direction (up: sender to receiver) and
	// copies src to dst, changing what it likes.
	damage func(conn int, up bool, dst io.Writer, src io.Reader)
	conns  atomic.Int64
	wg     sync.WaitGroup
}

func startRelay(t *testing.T, target string, damage func(conn int, up bool, dst io.Writer, src io.Reader)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r := &relay{t: t, ln: ln, target: target, damage: damage}
	go r.serve()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

func (r *relay) serve() {
	for {
		c, err := r.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", r.target)
		if err != nil {
			c.Close()
			continue
		}
		n := int(r.conns.Add(1))
		pipe := func(dst, src net.Conn, isUp bool) {
			r.damage(n, isUp, dst, src)
			dst.Close()
			src.Close()
		}
		go pipe(up, c, true)
		go pipe(c, up, false)
	}
}

// flipper damages connections: while flips remain in its budget, every connection
// (with probability p) has bits flipped at random offsets past the handshake — the
// first within its first 4 KiB, where every connection carries frames (headers, meta,
// the start of the data), up to perConn-1 more within window on the way to the
// receiver, one within 512 bytes on the way back, where little flows. A flip counts
// against the budget when it lands; inHandshake more flips land in handshakes. So the
// relay damages a bounded number of frames, wherever they are, and the job can finish.
type flipper struct {
	mu          sync.Mutex
	rng         *rand.Rand
	p           float64
	window      int64
	perConn     int
	budget      int
	inHandshake int
	flipped     int
}

func (f *flipper) damage(conn int, up bool, dst io.Writer, src io.Reader) {
	f.mu.Lock()
	var at []int64
	skip := int64(serverHandshake)
	if up {
		skip = clientHandshake
	}
	switch {
	case f.inHandshake > 0 && f.rng.Float64() < f.p:
		f.inHandshake--
		at = append(at, f.rng.Int64N(skip))
	case f.budget > 0 && f.rng.Float64() < f.p:
		if !up {
			at = append(at, skip+f.rng.Int64N(512))
			break
		}
		at = append(at, skip+f.rng.Int64N(4<<10))
		for range max(f.perConn, 1) - 1 {
			at = append(at, skip+f.rng.Int64N(f.window))
		}
	}
	bit := byte(1) << f.rng.IntN(8)
	f.mu.Unlock()
	buf := make([]byte, 32<<10)
	var off int64
	for {
		n, err := src.Read(buf)
		if n > 0 {
			for _, a := range at {
				if a < off || a >= off+int64(n) {
					continue
				}
				f.mu.Lock()
				if a < skip || f.budget > 0 {
					if a >= skip {
						f.budget--
					}
					buf[a-off] ^= bit
					f.flipped++
				}
				f.mu.Unlock()
			}
			off += int64(n)
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// rewriter replaces the content of every File and Block frame the senders send with
// other bytes of the same length, as a relay that wanted to plant data would; it cannot
// compute the frames' tags.
func rewriter(conn int, up bool, dst io.Writer, src io.Reader) {
	if !up {
		io.Copy(dst, src)
		return
	}
	// The client's hello, then (after the server's answer) its proof.
	for _, n := range []int{4 + 1 + 32, 32} {
		hs := make([]byte, n)
		if _, err := io.ReadFull(src, hs); err != nil {
			return
		}
		if _, err := dst.Write(hs); err != nil {
			return
		}
	}
	for {
		hdr := make([]byte, 12)
		if _, err := io.ReadFull(src, hdr); err != nil {
			return
		}
		metaLen, dataLen := binary.BigEndian.Uint32(hdr[4:]), binary.BigEndian.Uint32(hdr[8:])
		rest := make([]byte, int(metaLen)+int(dataLen)+16)
		if _, err := io.ReadFull(src, rest); err != nil {
			return
		}
		if hdr[0] == 0x40 || hdr[0] == 0x41 { // Block, File
			for i := int(metaLen); i < int(metaLen)+int(dataLen); i++ {
				rest[i] = 'X'
			}
		}
		if _, err := dst.Write(append(hdr, rest...)); err != nil {
			return
		}
	}
}
