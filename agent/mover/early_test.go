package mover

import (
	"context"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// firstFrame is the first frame a test receiver read on its n-th authenticated
// connection (counted from 1), or the error that ended it before one came.
type firstFrame struct {
	conn  int
	hello wire.Hello
	err   error
}

// countingReceiver serves authenticated connections on ln, numbering them in the
// order their handshakes complete; it reports each one as it is authenticated
// (accepted) and then its first frame (frames), answers a control connection's
// session with SessionOK, and reads on until the connection ends.
func countingReceiver(ctx context.Context, t *testing.T, ln net.Listener) (accepted chan int, frames chan firstFrame) {
	t.Helper()
	accepted, frames = make(chan int, 16), make(chan firstFrame, 16)
	conns := make(chan int, 1) // the last number given, held by one handler at a time
	conns <- 0
	go Serve(ctx, ln, []byte(testSecret), 0, func(c *wire.Conn) {
		defer c.Close()
		idx := <-conns + 1
		conns <- idx
		accepted <- idx
		rd := c.Reader(64 << 10)
		h, meta, err := rd.Next()
		if err != nil {
			frames <- firstFrame{conn: idx, err: err}
			return
		}
		var hello wire.Hello
		if h.Type == wire.TypeHello {
			wire.DecodeJSON(meta, &hello)
		}
		frames <- firstFrame{conn: idx, hello: hello}
		if hello.Role == wire.RoleControl {
			c.Writer().WriteJSON(wire.TypeSessionOK, wire.SessionOK{})
		}
		for {
			if _, _, err := rd.Next(); err != nil {
				return
			}
		}
	}, slog.New(slog.DiscardHandler))
	return accepted, frames
}

// loopbackListener listens on a free port of the loopback.
func loopbackListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func earlyTestStripe(t *testing.T, addr string) (*Stripe, *scriptedSource) {
	t.Helper()
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	src := &scriptedSource{configs: make(chan wire.JobConfig, 1)}
	st := &Stripe{Index: 0, Receiver: addr, Secret: []byte(testSecret), Root: root, Log: slog.New(slog.DiscardHandler), RetryFor: 10 * time.Second}
	return st, src
}

// earlyWithReceiver is a counting receiver on the loopback and a stripe bound for
// it, under a context that ends with the test.
func earlyWithReceiver(t *testing.T) (context.Context, chan int, chan firstFrame, *Stripe, *scriptedSource) {
	ln := loopbackListener(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	accepted, frames := countingReceiver(ctx, t, ln)
	st, src := earlyTestStripe(t, ln.Addr().String())
	return ctx, accepted, frames, st, src
}

// runStripe runs st on src until the test ends.
func runStripe(t *testing.T, ctx context.Context, st *Stripe, src WorkSource) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx, src) }()
	t.Cleanup(func() { cancel(); <-done })
}

var earlyTestConfig = wire.JobConfig{Generation: 1, Job: "early", Checksum: "SHA256", Overwrite: "Always", Streams: 1, Concurrency: 1, Pipelining: 1,
	BlockSize: 1 << 20, ChunkSize: 4 << 20}

// waitFor returns the next value of ch, failing the test after connectWait.
func waitFor[T any](t *testing.T, ch <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(connectWait):
		t.Fatalf("no %s within %v", what, connectWait)
		panic("unreachable")
	}
}

// TestDialEarlyIsTheFirstSessionsControlConnection: a cluster's sender dials its
// receiver while its coordinator starts (here: before the source has given the stripe
// any configuration), and its first session opens on that connection — the handshake
// already made — rather than dialing again.
func TestDialEarlyIsTheFirstSessionsControlConnection(t *testing.T) {
	ctx, accepted, frames, st, src := earlyWithReceiver(t)
	st.DialEarly(ctx)
	st.DialEarly(ctx) // a second call dials nothing more
	runStripe(t, ctx, st, src)

	if got := waitFor(t, accepted, "early connection"); got != 1 {
		t.Fatalf("first connection numbered %d", got)
	}
	select {
	case f := <-frames:
		t.Fatalf("a frame (%+v) came before the stripe had a configuration", f)
	case extra := <-accepted:
		t.Fatalf("connection %d dialed before the stripe had a configuration", extra)
	default:
	}
	src.configs <- earlyTestConfig
	f := waitFor(t, frames, "first frame")
	if f.err != nil || f.conn != 1 || f.hello.Role != wire.RoleControl {
		t.Fatalf("first frame %+v; want the control Hello on connection 1, the early one", f)
	}
	// the session's data stream is the second connection
	if f := waitFor(t, frames, "data stream's first frame"); f.err != nil || f.conn != 2 || f.hello.Role != wire.RoleData {
		t.Fatalf("second connection's first frame %+v; want a data stream's Hello", f)
	}
}

// TestDialEarlyThatFailedCostsNothing: a receiver that is not listening yet when the
// sender dials early (its pod starts later) fails that dial; the first session dials
// as it always did, and opens.
func TestDialEarlyThatFailedCostsNothing(t *testing.T) {
	probe := loopbackListener(t)
	addr := probe.Addr().String()
	probe.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st, src := earlyTestStripe(t, addr)
	st.DialEarly(ctx)
	e := st.early
	<-e.done
	if e.err == nil {
		t.Skipf("something listens on %s", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("port taken meanwhile: %v", err)
	}
	_, frames := countingReceiver(ctx, t, ln)
	runStripe(t, ctx, st, src)
	src.configs <- earlyTestConfig
	if f := waitFor(t, frames, "first frame"); f.err != nil || f.conn != 1 || f.hello.Role != wire.RoleControl {
		t.Fatalf("first frame %+v; want the control Hello on a connection dialed by the session", f)
	}
}

// TestDialEarlyTooOldIsClosed: a connection dialed early that waited longer than
// earlyControlMaxAge for its session is closed, and the session dials afresh.
func TestDialEarlyTooOldIsClosed(t *testing.T) {
	ctx, accepted, frames, st, src := earlyWithReceiver(t)
	st.DialEarly(ctx)
	e := st.early
	<-e.done
	if e.err != nil {
		t.Fatal(e.err)
	}
	waitFor(t, accepted, "early connection")
	e.at = e.at.Add(-2 * earlyControlMaxAge) // as if it had waited that long
	runStripe(t, ctx, st, src)
	src.configs <- earlyTestConfig
	first := waitFor(t, frames, "first frame")
	second := waitFor(t, frames, "second frame")
	byConn := map[int]firstFrame{first.conn: first, second.conn: second}
	if f, ok := byConn[1]; !ok || f.err == nil {
		t.Fatalf("the old connection: %+v; want it closed without a frame", f)
	}
	if f, ok := byConn[2]; !ok || f.err != nil || f.hello.Role != wire.RoleControl {
		t.Fatalf("connection 2: %+v; want the session's control Hello", f)
	}
}
