package wanem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requireEmulation skips the test when this process cannot build links.
func requireEmulation(t testing.TB) {
	t.Helper()
	if err := CanEmulate(); err != nil {
		t.Skipf("skipping: %v", err)
	}
}

// testNetns creates a network namespace named dfw-<id>-<suffix> that is removed when
// the test ends, whatever happens.
func testNetns(t testing.TB, id, suffix string) string {
	t.Helper()
	name := "dfw-" + id + "-" + suffix
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add %s: %v: %s", name, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("ip netns del %s: %v: %s", name, err, out)
		}
	})
	if out, err := IPCommand(name, "link", "set", "lo", "up").CombinedOutput(); err != nil {
		t.Fatalf("lo up in %s: %v: %s", name, err, out)
	}
	return name
}

func shortID(t testing.TB) string {
	t.Helper()
	b := make([]byte, 3)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// pair is two fresh namespaces joined by an emulated link: A is 10.251.0.1, B 10.251.0.2.
type pair struct {
	nsA, nsB string
	addrA    netip.Addr
	addrB    netip.Addr
	link     *Link
}

func newPair(t testing.TB, cfg Config, opts Options) *pair {
	t.Helper()
	requireEmulation(t)
	id := shortID(t)
	p := &pair{
		nsA:   testNetns(t, id, "a"),
		nsB:   testNetns(t, id, "b"),
		addrA: netip.MustParseAddr("10.251.0.1"),
		addrB: netip.MustParseAddr("10.251.0.2"),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := Join(ctx,
		Endpoint{Netns: p.nsA, Name: "wan0", Addr: netip.PrefixFrom(p.addrA, 32), Peer: p.addrB},
		Endpoint{Netns: p.nsB, Name: "wan0", Addr: netip.PrefixFrom(p.addrB, 32), Peer: p.addrA},
		cfg, opts)
	if err != nil {
		t.Fatalf("Join: %v", err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	p.link = l
	return p
}

// runIn runs a command in namespace ns with a deadline and returns its stdout.
func runIn(t testing.TB, ctx context.Context, ns string, name string, args ...string) string {
	t.Helper()
	cmd := NetnsCommand(ns, name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...).Output()
	if err != nil {
		t.Fatalf("%s: %v: %s%s", strings.Join(cmd.Args, " "), err, out, stderr.String())
	}
	return string(out)
}

func fmtBps(v float64) string { return fmt.Sprintf("%.1f Mbit/s", v/1e6) }

// dialThrough opens one TCP connection from A to B's port across the link and returns
// A's end; B's end is handed to read in a goroutine, whose result (or the accept's
// error) arrives on the channel. Both ends and the listener close when the test ends.
func (p *pair) dialThrough(t testing.TB, port int, read func(net.Conn) error) (net.Conn, <-chan error) {
	t.Helper()
	addr := net.JoinHostPort(p.addrB.String(), strconv.Itoa(port))
	var ln net.Listener
	if err := inNetns(p.nsB, func() (err error) {
		ln, err = net.Listen("tcp4", addr)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	done := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- err
			return
		}
		defer c.Close()
		done <- read(c)
	}()
	var c net.Conn
	if err := inNetns(p.nsA, func() (err error) {
		c, err = net.DialTimeout("tcp4", addr, 5*time.Second)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, done
}

// discard reads a connection to its end.
func discard(c net.Conn) error {
	_, err := io.Copy(io.Discard, c)
	return err
}
