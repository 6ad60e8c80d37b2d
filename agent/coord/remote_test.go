package coord

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/mover"
	"github.com/dtnflow/dtnflow/agent/wire"
)

const linkSecret = "link-test-secret-0123456789"

// serve runs proto behind the handshake on a loopback port.
func serve(t *testing.T, proto func(*wire.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go mover.Serve(ctx, ln, []byte(linkSecret), 0, proto, slog.New(slog.NewTextHandler(io.Discard, nil)))
	return ln.Addr().String()
}

func shortLink(t *testing.T) {
	oldEvery, oldTimeout := keepaliveEvery, linkTimeout
	keepaliveEvery, linkTimeout = 50*time.Millisecond, 400*time.Millisecond
	t.Cleanup(func() { keepaliveEvery, linkTimeout = oldEvery, oldTimeout })
}

// TestSilentCoordinatorIsDropped: a coordinator that stops sending anything (a frame
// whose length was damaged leaves the reader waiting the same way) is given up after
// the link timeout, so the sender reconnects instead of waiting forever.
func TestSilentCoordinatorIsDropped(t *testing.T) {
	shortLink(t)
	addr := serve(t, func(c *wire.Conn) { io.Copy(io.Discard, c); c.Close() }) // reads, never writes
	r, err := DialRemote(context.Background(), addr, []byte(linkSecret), 0)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.Dead():
	case <-time.After(10 * time.Second):
		t.Fatal("the sender still waits on a coordinator that has said nothing for 10 s")
	}
}

// TestSilentSenderLeaves: a sender whose connection goes silent is dropped by the
// coordinator after the link timeout, and its leased units go back to the others.
func TestSilentSenderLeaves(t *testing.T) {
	shortLink(t)
	c := newCore(t, map[string]int{"d/a": 10, "d/b": 10})
	addr := serve(t, c.ServeConn)
	conn, err := mover.Dial(context.Background(), addr, []byte(linkSecret), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.Writer().WriteJSON(wire.TypeHello, wire.Hello{Role: wire.RoleSender, Stripe: 7})
	deadline := time.After(10 * time.Second)
	// waitFor waits on the core's change signal (Join and Leave raise it) until cond.
	waitFor := func(what string, cond func() bool) {
		for {
			ch := c.Changed()
			if cond() {
				return
			}
			select {
			case <-ch:
			case <-deadline:
				t.Fatalf("after 10 s: %s", what)
			}
		}
	}
	waitFor("the sender never joined", func() bool { return c.ProbeMember() != nil })
	waitFor("a silent sender is still a member", func() bool { return c.ProbeMember() == nil })
}

// TestManifestOverTheLink: a stripe connected to its coordinator passes the receiver's
// manifest on packed when the coordinator asks for it so, and the job is Complete; a
// stripe that predates packing sends it in JSON, and the job is Complete too; a packed
// part that does not unpack is a stripe breaking the protocol: it is dropped, and the
// job is not Complete.
func TestManifestOverTheLink(t *testing.T) {
	for _, how := range []string{"packed", "json", "broken"} {
		t.Run(how, func(t *testing.T) {
			c := newCore(t, map[string]int{"d/a": 10, "d/b": 20, "d/big": 700})
			addr := serve(t, c.ServeConn)
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			r, err := DialRemote(ctx, addr, []byte(linkSecret), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			select {
			case <-r.Configs():
			case <-ctx.Done():
				t.Fatal("no job config from the coordinator")
			}
			if r.NeedSummary() {
				r.Summary(wire.Summary{Last: true})
			}
			var g wire.WorkGrant
			for {
				if g, err = r.Request(ctx, 10); err != nil {
					t.Fatal(err)
				}
				if g.Manifest {
					break
				}
				var rs []wire.UnitResult
				for _, u := range g.Units {
					rs = append(rs, wire.UnitResult{ID: u.ID, OK: true, Digest: "src-" + string(u.Dest) + "-" + string(rune('0'+u.Index))})
				}
				r.Done(rs)
			}
			if !g.PackedManifest {
				t.Fatal("the coordinator's manifest request does not say it reads the packed form")
			}
			c.mu.Lock()
			mf := manifestOf(c, nil)
			c.mu.Unlock()
			switch how {
			case "packed":
				r.Manifest(mf)
			case "json":
				r.w.WriteJSON(wire.TypeManifest, mf)
			case "broken":
				r.w.WriteJSON(wire.TypeManifest, wire.Manifest{Packed: []byte("not deflate data"), Last: true})
			}
			for {
				ch := c.Changed()
				if how == "broken" {
					select {
					case <-r.Dead():
						if p := c.Phase(); p == contract.PhaseComplete {
							t.Fatalf("phase %s after a manifest that did not unpack", p)
						}
						return
					case <-ctx.Done():
						t.Fatal("a stripe whose packed manifest does not unpack is still connected")
					}
				}
				if p := c.Phase(); p == contract.PhaseComplete {
					return
				} else if p.Finished() {
					t.Fatalf("phase %s after the manifest was sent", p)
				}
				select {
				case <-ch:
				case <-ctx.Done():
					t.Fatalf("phase %s 20 s after the manifest was sent", c.Phase())
				}
			}
		})
	}
}
