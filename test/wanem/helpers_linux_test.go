package wanem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"os/exec"
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
