package mover

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/dtnflow/dtnflow/agent/auth"
	"github.com/dtnflow/dtnflow/agent/metrics"
)

// Serve accepts connections on ln until ctx ends. Each connection is told apart by its
// first four bytes: the protocol's magic goes through the handshake and then to proto;
// an HTTP method goes to httpHandler (metrics and status share the one port an agent
// takes on a host network); anything else, or a failed handshake, is refused and
// counted.
func Serve(ctx context.Context, ln net.Listener, secret []byte, httpHandler http.Handler, proto func(net.Conn), log *slog.Logger) error {
	hl := &chanListener{addr: ln.Addr(), ch: make(chan net.Conn), done: make(chan struct{})}
	srv := &http.Server{Handler: httpHandler, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(hl)
	go func() {
		<-ctx.Done()
		ln.Close()
		hl.Close()
		srv.Close()
	}()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		go func() {
			var first [4]byte
			c.SetReadDeadline(time.Now().Add(auth.Timeout))
			if _, err := io.ReadFull(c, first[:]); err != nil {
				metrics.AuthRefused.WithLabelValues("protocol").Inc()
				c.Close()
				return
			}
			c.SetReadDeadline(time.Time{})
			switch string(first[:]) {
			case auth.Magic:
				if err := auth.Server(c, first[:], secret); err != nil {
					metrics.AuthRefused.WithLabelValues("auth").Inc()
					log.Warn("Refused a connection", "peer", c.RemoteAddr().String(), "reason", err.Error())
					c.Close()
					return
				}
				proto(c)
			case "GET ", "HEAD", "POST":
				select {
				case hl.ch <- &prefixConn{Conn: c, prefix: first[:]}:
				case <-hl.done:
					c.Close()
				}
			default:
				metrics.AuthRefused.WithLabelValues("protocol").Inc()
				log.Warn("Refused a connection that speaks neither dtnflow nor HTTP", "peer", c.RemoteAddr().String())
				c.Close()
			}
		}()
	}
}

// Dial connects to addr and runs the client handshake.
func Dial(ctx context.Context, addr string, secret []byte, bufferBytes int64) (net.Conn, error) {
	d := net.Dialer{Timeout: 10 * time.Second}
	if bufferBytes > 0 {
		// Set before connect so the window scale is chosen for the buffer.
		d.Control = setBufferControl(bufferBytes)
	}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	if err := auth.Client(c, secret); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

type prefixConn struct {
	net.Conn
	prefix []byte
}

func (p *prefixConn) Read(b []byte) (int, error) {
	if len(p.prefix) > 0 {
		n := copy(b, p.prefix)
		p.prefix = p.prefix[n:]
		return n, nil
	}
	return p.Conn.Read(b)
}

type chanListener struct {
	addr net.Addr
	ch   chan net.Conn
	once sync.Once
	done chan struct{}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}
func (l *chanListener) Close() error   { l.once.Do(func() { close(l.done) }); return nil }
func (l *chanListener) Addr() net.Addr { return l.addr }
