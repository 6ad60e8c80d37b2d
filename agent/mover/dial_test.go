package mover

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"

	"github.com/dtnflow/dtnflow/agent/auth"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// heldVerdict is a server's side of a connection that holds its handshake verdict
// until the client has sent something past its proof: a client that waits for the
// verdict before it writes waits forever.
type heldVerdict struct {
	net.Conn
	mu      sync.Mutex
	held    []byte
	replace byte // when not 0, the verdict sent instead of the server's
}

func (h *heldVerdict) Write(b []byte) (int, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(b) == 1 && (b[0] == 'K' || b[0] == 'R') && h.held == nil {
		h.held = []byte{b[0]}
		if h.replace != 0 {
			h.held[0] = h.replace
		}
		return 1, nil
	}
	return h.Conn.Write(b)
}

func (h *heldVerdict) Read(b []byte) (int, error) {
	n, err := h.Conn.Read(b)
	h.mu.Lock()
	defer h.mu.Unlock()
	if n > 0 && h.held != nil && h.held[0] != 0 {
		h.Conn.Write(h.held)
		h.held[0] = 0 // sent
	}
	return n, err
}

// serveHeld accepts one connection, runs the server handshake on it with the verdict
// held (and replaced by replace, when not 0), reads one frame and answers it.
func serveHeld(t *testing.T, replace byte) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		hc := &heldVerdict{Conn: c, replace: replace}
		keys, err := auth.Server(hc, nil, []byte(testSecret))
		if err != nil {
			return
		}
		conn := wire.NewConn(hc, wire.Keys{MAC: keys.ServerToClient[:], Enc: keys.ServerToClientEnc[:]},
			wire.Keys{MAC: keys.ClientToServer[:], Enc: keys.ClientToServerEnc[:]})
		if _, _, err := conn.Reader(64 << 10).Next(); err != nil {
			return
		}
		conn.Writer().WriteJSON(wire.TypeSessionOK, wire.SessionOK{})
		conn.Reader(64 << 10).Next() // until the client leaves
	}()
	return ln.Addr().String()
}

// TestDialSendsBehindItsProof: a connection from Dial carries its first frame before
// the server's verdict arrives (a round trip less per connection on a long path),
// and reads the verdict before the first frame it reads: accepted, the server's answer
// comes through; refused, the read fails with auth.ErrRefused.
func TestDialSendsBehindItsProof(t *testing.T) {
	for _, tc := range []struct {
		name    string
		replace byte
		want    error
	}{
		{name: "accepted"},
		{name: "refused", replace: 'R', want: auth.ErrRefused},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := serveHeld(t, tc.replace)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := Dial(ctx, addr, []byte(testSecret), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			if err := c.Writer().WriteJSON(wire.TypeHello, wire.Hello{Role: wire.RoleControl}); err != nil {
				t.Fatal(err)
			}
			h, _, err := c.Reader(64 << 10).Next()
			switch {
			case tc.want != nil && !errors.Is(err, tc.want):
				t.Fatalf("first read: %v, want %v", err, tc.want)
			case tc.want == nil && (err != nil || h.Type != wire.TypeSessionOK):
				t.Fatalf("first read: frame %d, %v; want the server's SessionOK (a client that waits for the verdict before writing times out here)", h.Type, err)
			}
		})
	}
}

// TestWriteOnlyConnectionsEndCleanly: a connection that is only written must not be
// closed with the server's verdict unread in its socket: the kernel then resets it
// instead of ending it, dropping whatever the client had not yet sent (a data stream's
// send buffer holds megabytes), and the server sees a reset. DialWriteOnly reads the
// verdict: the server here, which reads only after the client has written and closed,
// gets the frames and then a clean end. A Dial connection, whose verdict is left to a
// Reader that a data stream never makes, ends in a reset.
func TestWriteOnlyConnectionsEndCleanly(t *testing.T) {
	for _, tc := range []struct {
		name      string
		dial      func(context.Context, string, []byte, int64) (*wire.Conn, error)
		wantReset bool
	}{
		{name: "DialWriteOnly", dial: DialWriteOnly},
		{name: "Dial", dial: Dial, wantReset: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			closed := make(chan struct{})
			got := make(chan error, 1)
			go func() {
				c, err := ln.Accept()
				if err != nil {
					got <- err
					return
				}
				defer c.Close()
				keys, err := auth.Server(c, nil, []byte(testSecret))
				if err != nil {
					got <- err
					return
				}
				conn := wire.NewConn(c, wire.Keys{MAC: keys.ServerToClient[:]}, wire.Keys{MAC: keys.ClientToServer[:]})
				<-closed // the client wrote and closed before anything is read
				rd := conn.Reader(64 << 10)
				for range 3 {
					if _, _, err := rd.Next(); err != nil {
						got <- err
						return
					}
				}
				_, _, err = rd.Next() // after the frames: the client's close
				got <- err
			}()
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			c, err := tc.dial(ctx, ln.Addr().String(), []byte(testSecret), 0)
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if err := c.Writer().WriteJSON(wire.TypeHello, wire.Hello{Role: wire.RoleData}); err != nil {
					t.Fatal(err)
				}
			}
			// the verdict is in this socket before it closes (1 byte queued)
			waitQueued(t, c.NetConn(), tc.wantReset)
			c.Close()
			close(closed)
			err = <-got
			if tc.wantReset {
				if !errors.Is(err, unix.ECONNRESET) {
					t.Fatalf("server read %v after the frames; want the reset that an unread verdict causes at close", err)
				}
				return
			}
			if !errors.Is(err, io.EOF) {
				t.Fatalf("server read %v after the frames; want the end of a clean close", err)
			}
		})
	}
}

// queuedWait bounds the wait for the server's verdict to reach the client's socket.
const queuedWait = 5 * time.Second

// waitQueued waits until c's receive queue holds a byte (want) or checks that it holds
// none.
func waitQueued(t *testing.T, c net.Conn, want bool) {
	t.Helper()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	queued := func() int {
		var n int
		rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.SIOCINQ) })
		return n
	}
	if !want {
		if n := queued(); n > 0 {
			t.Fatalf("%d bytes queued unread in the client's socket; want none", n)
		}
		return
	}
	NewWithT(t).Eventually(queued).WithTimeout(queuedWait).WithPolling(time.Millisecond).
		Should(BeNumerically(">", 0), "the server's verdict never reached the client's socket")
}
