package coord

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/dtnflow/dtnflow/agent/mover"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// A sender and its coordinator each send a keepalive every keepaliveEvery, and each
// drops the connection after linkTimeout without a frame: otherwise a frame whose
// length was damaged on the way would leave either side waiting for bytes that never
// come, the stripe holding its leases and the job stalled.
var (
	keepaliveEvery = 5 * time.Second
	linkTimeout    = 30 * time.Second
)

// keepalive writes a keepalive on w every keepaliveEvery until ctx ends or a write
// fails (then it calls broken).
func keepalive(ctx context.Context, w *wire.Writer, broken func()) {
	t := time.NewTicker(keepaliveEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if w.WriteFrame(wire.TypeKeepalive, nil, nil) != nil {
				broken()
				return
			}
		}
	}
}

// nextWithin reads the next frame, which must come within linkTimeout.
func nextWithin(conn *wire.Conn, rd *wire.Reader) (wire.Header, []byte, error) {
	conn.SetReadDeadline(time.Now().Add(linkTimeout))
	return rd.Next()
}

// ServeConn serves one sender connected to the coordinator (after the handshake).
// The sender's stripe is a member while the connection lives; when it drops, the
// stripe's leases go back to the others.
func (c *Core) ServeConn(conn *wire.Conn) {
	defer conn.Close()
	rd := conn.Reader(64 << 10)
	h, meta, err := rd.Next()
	if err != nil || h.Type != wire.TypeHello {
		return
	}
	var hello wire.Hello
	if wire.DecodeJSON(meta, &hello) != nil || hello.Role != wire.RoleSender {
		return
	}
	w := conn.Writer()
	m := c.Join(hello.Stripe)
	defer m.Leave()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go keepalive(ctx, w, func() { conn.Close() })
	go func() {
		for {
			select {
			case cfg := <-m.configs:
				cfg.NeedSummary = c.needSummary()
				if w.WriteJSON(wire.TypeJobConfig, cfg) != nil {
					cancel()
					return
				}
			case p := <-m.probes:
				if w.WriteJSON(wire.TypeProbeRequest, p) != nil {
					cancel()
					return
				}
			case <-ctx.Done():
				return
			}
		}
	}()
	var reqMu sync.Mutex // one WorkRequest at a time
	for {
		h, meta, err := nextWithin(conn, rd)
		if err != nil {
			return
		}
		switch h.Type {
		case wire.TypeKeepalive:
		case wire.TypeWorkRequest:
			var r wire.WorkRequest
			if wire.DecodeJSON(meta, &r) != nil || r.N <= 0 || r.N > 4096 {
				return
			}
			go func() {
				reqMu.Lock()
				defer reqMu.Unlock()
				g, err := m.Request(ctx, int(r.N))
				if err == nil && w.WriteJSON(wire.TypeWorkGrant, g) != nil {
					// The grant's units are leased to m but never reached it: drop the
					// connection so that Leave gives them back.
					conn.Close()
				}
			}()
		case wire.TypeWorkDone:
			var d wire.WorkDone
			if wire.DecodeJSON(meta, &d) != nil {
				return
			}
			m.Done(d.Results)
		case wire.TypeSummary:
			var s wire.Summary
			if wire.DecodeJSON(meta, &s) != nil {
				return
			}
			m.Summary(s)
		case wire.TypeManifest:
			var mf wire.Manifest
			if wire.DecodeJSON(meta, &mf) != nil {
				return
			}
			if mf.Unpack() != nil {
				return // a stripe that breaks the protocol: it leaves, its units go back
			}
			m.Manifest(mf)
		case wire.TypeStats:
			var s wire.StripeStats
			if wire.DecodeJSON(meta, &s) != nil {
				return
			}
			s.Stripe = hello.Stripe
			m.Stats(s)
		case wire.TypeProbeResult:
			var r wire.ProbeResult
			if wire.DecodeJSON(meta, &r) != nil {
				return
			}
			m.ProbeDone(r)
		default:
			return
		}
	}
}

// Remote is a coordinator across a connection, as a stripe's WorkSource.
type Remote struct {
	conn    *wire.Conn
	w       *wire.Writer
	configs chan wire.JobConfig
	probes  chan wire.ProbeRequest
	grants  chan wire.WorkGrant
	dead    chan struct{}
	once    sync.Once

	mu   sync.Mutex
	need bool
	// packed says the coordinator asked for the manifest packed.
	packed bool
}

// DialRemote connects a stripe to its coordinator.
func DialRemote(ctx context.Context, addr string, secret []byte, stripe int32) (*Remote, error) {
	c, err := mover.Dial(ctx, addr, secret, 0)
	if err != nil {
		return nil, fmt.Errorf("coordinator %s: %w", addr, err)
	}
	r := &Remote{conn: c, w: c.Writer(), configs: make(chan wire.JobConfig, 1), probes: make(chan wire.ProbeRequest, 1),
		grants: make(chan wire.WorkGrant, 1), dead: make(chan struct{})}
	if err := r.w.WriteJSON(wire.TypeHello, wire.Hello{Role: wire.RoleSender, Stripe: stripe}); err != nil {
		c.Close()
		return nil, err
	}
	go r.read()
	kctx, stop := context.WithCancel(context.Background())
	go func() { <-r.dead; stop() }()
	go keepalive(kctx, r.w, r.Close)
	return r, nil
}

func (r *Remote) read() {
	defer r.Close()
	rd := r.conn.Reader(64 << 10)
	for {
		h, meta, err := nextWithin(r.conn, rd)
		if err != nil {
			return
		}
		switch h.Type {
		case wire.TypeKeepalive:
		case wire.TypeJobConfig:
			var c wire.JobConfig
			if wire.DecodeJSON(meta, &c) != nil {
				return
			}
			r.mu.Lock()
			r.need = c.NeedSummary
			r.mu.Unlock()
			select {
			case <-r.configs:
			default:
			}
			r.configs <- c
		case wire.TypeWorkGrant:
			var g wire.WorkGrant
			if wire.DecodeJSON(meta, &g) != nil {
				return
			}
			r.grants <- g
		case wire.TypeProbeRequest:
			var p wire.ProbeRequest
			if wire.DecodeJSON(meta, &p) != nil {
				return
			}
			r.probes <- p
		default:
			return
		}
	}
}

// Dead is closed when the connection to the coordinator is gone.
func (r *Remote) Dead() <-chan struct{} { return r.dead }

// Close drops the connection.
func (r *Remote) Close() {
	r.once.Do(func() { close(r.dead); r.conn.Close() })
}

func (r *Remote) Configs() <-chan wire.JobConfig   { return r.configs }
func (r *Remote) Probes() <-chan wire.ProbeRequest { return r.probes }
func (r *Remote) NeedSummary() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.need
}
func (r *Remote) Summary(s wire.Summary) {
	r.w.WriteJSON(wire.TypeSummary, s)
	if s.Last {
		r.mu.Lock()
		r.need = false
		r.mu.Unlock()
	}
}

// Manifest passes a part of the receiver's manifest on, packed when the coordinator
// asked for it so: its JSON costs the coordinator about 4 ms of decoding per
// thousand files (BenchmarkManifestPart).
func (r *Remote) Manifest(mf wire.Manifest) {
	r.mu.Lock()
	packed := r.packed
	r.mu.Unlock()
	if packed {
		mf.Pack() // on failure the files go as JSON, which the coordinator reads too
	}
	r.w.WriteJSON(wire.TypeManifest, mf)
}
func (r *Remote) Done(rs []wire.UnitResult) {
	r.w.WriteJSON(wire.TypeWorkDone, wire.WorkDone{Results: rs})
}
func (r *Remote) Stats(s wire.StripeStats)     { r.w.WriteJSON(wire.TypeStats, s) }
func (r *Remote) ProbeDone(p wire.ProbeResult) { r.w.WriteJSON(wire.TypeProbeResult, p) }

// Request implements mover.WorkSource.
func (r *Remote) Request(ctx context.Context, n int) (wire.WorkGrant, error) {
	if err := r.w.WriteJSON(wire.TypeWorkRequest, wire.WorkRequest{N: int32(n)}); err != nil {
		return wire.WorkGrant{}, mover.ErrSourceLost
	}
	select {
	case g := <-r.grants:
		if g.Manifest {
			r.mu.Lock()
			r.packed = g.PackedManifest
			r.mu.Unlock()
		}
		return g, nil
	case <-r.dead:
		return wire.WorkGrant{}, mover.ErrSourceLost
	case <-ctx.Done():
		return wire.WorkGrant{}, ctx.Err()
	}
}
