package mover

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"time"

	"github.com/dtnflow/dtnflow/agent/auth"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// DefaultMaxHandshakes bounds the connections that have not yet proved the secret: each
// costs a goroutine and a file descriptor for at most auth.Timeout, so a flood of
// connections that never speak cannot take the descriptors the job needs. It leaves
// room for the largest legitimate burst: every stream of several stripes dialled at
// once (8 stripes × 32 streams, plus control connections) on a long path, where a
// handshake takes a few round trips.
const DefaultMaxHandshakes = 512

// Serve accepts connections on ln until ctx ends. Each runs the handshake (bounded by
// auth.Timeout; at most maxHandshakes at once — 0: DefaultMaxHandshakes — the rest
// closed at once and counted as busy) and then goes to proto with its session keys. Only the dtnflow protocol is
// spoken here: /metrics and /status, which name paths and errors, are served on their
// own address (ServeMetrics). An accept error (out of file descriptors, say) is waited
// out with back-off rather than ending the receiver.
func Serve(ctx context.Context, ln net.Listener, secret []byte, maxHandshakes int, proto func(*wire.Conn), log *slog.Logger) error {
	go func() {
		<-ctx.Done()
		ln.Close()
	}()
	if maxHandshakes <= 0 {
		maxHandshakes = DefaultMaxHandshakes
	}
	pending := make(chan struct{}, maxHandshakes)
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// EMFILE, ENFILE, ENOBUFS, ECONNABORTED...: wait, then accept again.
			if backoff == 0 {
				log.Warn("Accepting connections failed; backing off and retrying", "err", err.Error())
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			t := time.NewTimer(backoff)
			select {
			case <-ctx.Done():
				t.Stop()
				return nil
			case <-t.C:
			}
			continue
		}
		backoff = 0
		select {
		case pending <- struct{}{}:
		default:
			metrics.AuthRefused.WithLabelValues("busy").Inc()
			c.Close()
			continue
		}
		go func() {
			keys, err := auth.Server(c, nil, secret)
			<-pending
			if err != nil {
				// A peer with another secret gives up on our proof before sending its
				// own, so anything but a wrong opening counts as an authentication
				// failure.
				reason := "auth"
				var ne net.Error
				if errors.Is(err, auth.ErrNotProtocol) || errors.As(err, &ne) && ne.Timeout() {
					reason = "protocol"
				}
				metrics.AuthRefused.WithLabelValues(reason).Inc()
				log.Warn("Refused a connection", "peer", c.RemoteAddr().String(), "reason", err.Error())
				c.Close()
				return
			}
			proto(wire.NewConn(c, wire.Keys{MAC: keys.ServerToClient[:], Enc: keys.ServerToClientEnc[:]},
				wire.Keys{MAC: keys.ClientToServer[:], Enc: keys.ClientToServerEnc[:]}))
		}()
	}
}

// Dial connects to addr and runs the client handshake, for a connection its owner
// reads (a control connection, a coordinator link): its first frames go out right
// behind the client's proof, and the server's verdict is read before the first frame
// the connection's Reader returns (auth.ClientProof) — a round trip less before the
// connection is of use.
func Dial(ctx context.Context, addr string, secret []byte, bufferBytes int64) (*wire.Conn, error) {
	return dial(ctx, addr, secret, bufferBytes, true, 0)
}

// DialWriteOnly is Dial for a connection that is only ever written (a data stream): it
// waits for the server's verdict. Left unread, the verdict byte would make the close
// of such a connection a reset, on which the receiver drops the frames it has not yet
// read — a stream closed when the streams are cut, or a probe's helper stripe when it
// stops, would lose its last frames and their units wait on results that never come.
func DialWriteOnly(ctx context.Context, addr string, secret []byte, bufferBytes int64) (*wire.Conn, error) {
	return dial(ctx, addr, secret, bufferBytes, false, 0)
}

// dialUnitStream is DialWriteOnly for a session's data stream, which carries the
// units its stripe holds: the bytes it leaves unsent in the kernel are bounded by
// notSentLowWater. (A memory-to-memory probe's streams carry no units and keep the
// kernel's default.)
func dialUnitStream(ctx context.Context, addr string, secret []byte, bufferBytes int64) (*wire.Conn, error) {
	return dial(ctx, addr, secret, bufferBytes, false, notSentLowWater)
}

// dial connects, sets the socket buffers (bufferBytes > 0) and the low-water mark of
// its unsent bytes (lowWater > 0) before connecting, and authenticates.
func dial(ctx context.Context, addr string, secret []byte, bufferBytes int64, pipelined bool, lowWater int) (*wire.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	// before connect, so that the window scale is chosen for the buffer
	d.Control = socketControl(bufferBytes, lowWater)
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	var keys auth.Keys
	if pipelined {
		keys, err = auth.ClientProof(c, secret)
	} else {
		keys, err = auth.Client(c, secret)
	}
	if err != nil {
		c.Close()
		return nil, err
	}
	conn := wire.NewConn(c, wire.Keys{MAC: keys.ClientToServer[:], Enc: keys.ClientToServerEnc[:]},
		wire.Keys{MAC: keys.ServerToClient[:], Enc: keys.ServerToClientEnc[:]})
	if pipelined {
		conn.CheckFirst(auth.ReadVerdict)
	}
	return conn, nil
}
