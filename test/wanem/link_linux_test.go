package wanem

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/netip"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

// pingSamples pings dst from namespace ns count times and returns the RTTs.
func pingSamples(t *testing.T, ns string, dst netip.Addr, count int, interval string) []time.Duration {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := runIn(t, ctx, ns, "ping", "-n", "-c", strconv.Itoa(count), "-i", interval, "-W", "5", dst.String())
	var rtts []time.Duration
	for _, line := range strings.Split(out, "\n") {
		i := strings.Index(line, "time=")
		if i < 0 {
			continue
		}
		f := strings.Fields(line[i+len("time="):])
		ms, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			t.Fatalf("parse %q: %v", line, err)
		}
		rtts = append(rtts, time.Duration(ms*float64(time.Millisecond)))
	}
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	return rtts
}

func requirePing(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("ping"); err != nil {
		t.Skip("ping not installed (apt-get install iputils-ping)")
	}
}

func TestJoinPingAndClose(t *testing.T) {
	requirePing(t)
	p := newPair(t, Symmetric(Direction{Delay: 10 * time.Millisecond}), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, ns := range []string{p.nsA, p.nsB} {
		out := runIn(t, ctx, ns, "ip", "-d", "link", "show", "wan0")
		if !strings.Contains(out, "mtu 9000") || !strings.Contains(out, "vnet_hdr on") {
			t.Errorf("%s: wan0 is not a 9000-byte TUN with virtio headers:\n%s", ns, out)
		}
	}
	rtts := pingSamples(t, p.nsA, p.addrB, 10, "0.02")
	if len(rtts) != 10 {
		t.Fatalf("%d of 10 pings answered", len(rtts))
	}
	// Never faster than the configured propagation delay. How close to it is a
	// question of the machine's load: the accuracy runs measure it.
	if rtts[0] < 20*time.Millisecond {
		t.Errorf("fastest RTT %v is below the configured 20ms", rtts[0])
	}
	if _, err := tunDrops(p.nsA, "wan0"); err != nil {
		t.Errorf("kernel drop counter of wan0: %v", err)
	}
	if _, err := tunDrops(p.nsA, "nosuchif"); err == nil {
		t.Error("kernel drop counter of a missing interface: no error")
	}
	st := p.link.Stats()
	if st.AtoB.DeliveredSegments < 10 || st.BtoA.DeliveredSegments < 10 || st.AtoB.LostSegments != 0 {
		t.Errorf("counters after 10 pings: %+v", st)
	}
	if err := p.link.Close(); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{p.nsA, p.nsB} {
		if err := IPCommand(ns, "link", "show", "wan0").Run(); err == nil {
			t.Errorf("%s: wan0 still there after Close", ns)
		}
	}
}

// udpBlast sends n datagrams of size bytes from A to B, letting the emulator keep up
// (so that the kernel drops nothing), and returns how many arrived.
func udpBlast(t *testing.T, p *pair, n, size int) int {
	t.Helper()
	var rx net.PacketConn
	if err := inNetns(p.nsB, func() (err error) {
		rx, err = net.ListenPacket("udp4", p.addrB.String()+":9999")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer rx.Close()
	_ = rx.(*net.UDPConn).SetReadBuffer(8 << 20)
	var tx net.Conn
	if err := inNetns(p.nsA, func() (err error) {
		tx, err = net.Dial("udp4", p.addrB.String()+":9999")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer tx.Close()

	got := make(chan int)
	go func() {
		buf := make([]byte, 65536)
		count := 0
		for {
			_ = rx.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, _, err := rx.ReadFrom(buf); err != nil {
				got <- count
				return
			}
			count++
		}
	}()
	msg := make([]byte, size)
	base := p.link.Stats().AtoB.Packets
	for i := 0; i < n; i++ {
		if _, err := tx.Write(msg); err != nil {
			t.Fatal(err)
		}
		if i%200 == 199 {
			waitFor(t, 10*time.Second, func() bool { return p.link.Stats().AtoB.Packets-base >= uint64(i+1) })
		}
	}
	return <-got
}

// waitFor polls cond until it holds or the deadline passes.
func waitFor(t *testing.T, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("condition not met within %v", timeout)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestRandomLossMatchesCounters(t *testing.T) {
	const n, p = 20000, 0.05
	pr := newPair(t, Config{AtoB: Direction{Loss: p}, Seed: 7}, Options{})
	arrived := udpBlast(t, pr, n, 1200)
	st := pr.link.Stats().AtoB
	if st.Segments != n {
		t.Fatalf("emulator saw %d datagrams, sent %d", st.Segments, n)
	}
	if uint64(arrived) != st.DeliveredSegments {
		t.Errorf("receiver got %d, emulator delivered %d", arrived, st.DeliveredSegments)
	}
	sd := math.Sqrt(n * p * (1 - p))
	if lost := float64(n - arrived); math.Abs(lost-n*p) > 4*sd {
		t.Errorf("lost %.0f of %d, want %.0f ± %.0f", lost, n, n*p, 4*sd)
	}
}

func TestRateLimitIsNeverExceeded(t *testing.T) {
	const rate = 50e6
	const size = 3 << 20
	p := newPair(t, Symmetric(Direction{RateBitsPerSecond: rate, Delay: time.Millisecond}), Options{})
	c, done := p.dialThrough(t, 9998, discard)
	start := time.Now()
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("transfer did not finish")
	}
	elapsed := time.Since(start)
	// The line cannot carry the payload faster than the rate (headers only add time).
	bits, bps := float64(size*8), float64(rate)
	if floor := time.Duration(bits / bps * float64(time.Second)); elapsed < floor {
		t.Errorf("3 MiB in %v at %v: faster than the line (at least %v)", elapsed, FormatRate(rate), floor)
	}
	if ceiling := 10 * time.Second; elapsed > ceiling {
		t.Errorf("3 MiB took %v at %v", elapsed, FormatRate(rate))
	}
	if st := p.link.Stats().AtoB; st.QueueHighWaterBytes == 0 || st.DeliveredBytes < size {
		t.Errorf("counters: %+v", st)
	}
}

func TestControlSocketChangesTheRunningLink(t *testing.T) {
	requirePing(t)
	p := newPair(t, Symmetric(Direction{Delay: time.Millisecond, RateBitsPerSecond: 1e9}), Options{})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sock := filepath.Join(t.TempDir(), "wanem.sock")
	if err := ServeControl(ctx, sock, p.link); err != nil {
		t.Fatal(err)
	}
	cl := NewControlClient(sock)

	cfg, err := cl.Update(ctx, map[string]any{"both": map[string]any{"delay": "15ms"}, "aToB": map[string]any{"rateBitsPerSecond": 5e8}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.AtoB.RateBitsPerSecond != 5e8 || cfg.BtoA.RateBitsPerSecond != 1e9 || cfg.RTT() != 30*time.Millisecond {
		t.Errorf("after update: %+v", cfg)
	}
	if got := p.link.Config(); got.AtoB.RateBitsPerSecond != 5e8 {
		t.Errorf("link config not changed: %+v", got)
	}
	rtts := pingSamples(t, p.nsA, p.addrB, 5, "0.05")
	if len(rtts) != 5 || rtts[0] < 30*time.Millisecond {
		t.Errorf("RTTs after raising the delay to 15ms each way: %v", rtts)
	}

	_, err = cl.Update(ctx, map[string]any{"aToB": map[string]any{"loss": 2}})
	if err == nil || !strings.Contains(err.Error(), "aToB.loss") {
		t.Errorf("invalid loss: %v, want an error naming aToB.loss", err)
	}
	// Valid "both" first, then an unknown field: nothing at all may change.
	_, err = cl.Update(ctx, json.RawMessage(`{"both":{"loss":0.2},"aToB":{"bandwidth":2}}`))
	if err == nil || !strings.Contains(err.Error(), "bandwidth") {
		t.Errorf("unknown field: %v", err)
	}
	if got := p.link.Config(); got.AtoB.Loss != 0 {
		t.Errorf("a refused update changed the link: %+v", got)
	}
	st, err := cl.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.AtoB.DeliveredSegments < 5 || st.Config.AtoB.RateBitsPerSecond != 5e8 {
		t.Errorf("stats: %+v", st)
	}
	if err := ServeControl(ctx, sock, p.link); err == nil {
		t.Error("a second server on a live socket should be refused")
	}
}

func TestJoinByPathWithRoutes(t *testing.T) {
	requirePing(t)
	requireEmulation(t)
	id := shortID(t)
	nsA, nsB := testNetns(t, id, "a"), testNetns(t, id, "b")
	// B has a "pod subnet" behind it; A routes it into the link.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	runIn(t, ctx, nsB, "ip", "addr", "add", "10.252.7.1/24", "dev", "lo")
	l, err := Join(ctx,
		Endpoint{Netns: "/run/netns/" + nsA, Name: "dfwlink", Addr: netip.MustParsePrefix("10.251.9.1/32"), Peer: netip.MustParseAddr("10.251.9.2"),
			Routes: []netip.Prefix{netip.MustParsePrefix("10.252.7.0/24")}},
		Endpoint{Netns: "/run/netns/" + nsB, Name: "dfwlink", Addr: netip.MustParsePrefix("10.251.9.2/32"), Peer: netip.MustParseAddr("10.251.9.1")},
		Config{}, Options{MTU: 1500})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if rtts := pingSamples(t, nsA, netip.MustParseAddr("10.252.7.1"), 3, "0.05"); len(rtts) != 3 {
		t.Errorf("routed prefix unreachable: %v", rtts)
	}
	out := runIn(t, ctx, nsA, "ip", "link", "show", "dfwlink")
	if !strings.Contains(out, "mtu 1500") {
		t.Errorf("mtu: %s", out)
	}
}

func TestJoinFailureLeavesNothing(t *testing.T) {
	requireEmulation(t)
	id := shortID(t)
	nsA := testNetns(t, id, "a")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cancelled, cancelNow := context.WithCancel(ctx)
	cancelNow()
	for name, c := range map[string]struct {
		ctx context.Context
		b   Endpoint
	}{
		"missing namespace":           {ctx, Endpoint{Netns: "dfw-" + id + "-nonexistent", Name: "wan0"}},
		"cancelled while configuring": {cancelled, Endpoint{Netns: nsA, Name: "wan1"}},
		"name too long":               {ctx, Endpoint{Netns: nsA, Name: "a-very-long-interface-name"}},
		"same name twice":             {ctx, Endpoint{Netns: nsA, Name: "wan0"}},
	} {
		ctx, b := c.ctx, c.b
		_, err := Join(ctx, Endpoint{Netns: nsA, Name: "wan0"}, b, Config{}, Options{})
		if err == nil {
			t.Errorf("%s: Join succeeded", name)
			continue
		}
		out, _ := IPCommand(nsA, "-o", "link", "show").CombinedOutput()
		if strings.Contains(string(out), "wan0") || strings.Contains(string(out), "wan1") {
			t.Errorf("%s: a TUN was left behind after %v:\n%s", name, err, out)
		}
	}
}

// tcpThrough sends data from A to B over one TCP connection and returns what B read.
func tcpThrough(t *testing.T, p *pair, data []byte) []byte {
	t.Helper()
	var got []byte
	c, done := p.dialThrough(t, 9997, func(c net.Conn) (err error) {
		got, err = io.ReadAll(c)
		return err
	})
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	c.Close()
	select {
	case <-done:
		return got
	case <-time.After(60 * time.Second):
		t.Fatal("transfer did not finish")
		return nil
	}
}

// TestCorruptionCaughtOrDelivered sends 8 MiB through a link that corrupts 2 % of the
// packets: by default the receiving stack's checksum catches every flip (TCP
// retransmits, the bytes arrive intact); with CorruptUndetected the flips reach the
// application, one bit each.
func TestCorruptionCaughtOrDelivered(t *testing.T) {
	data := make([]byte, 8<<20)
	_, _ = rand.NewChaCha8([32]byte{5, 6}).Read(data)
	for _, undetected := range []bool{false, true} {
		p := newPair(t, Config{AtoB: Direction{Corrupt: 0.02, CorruptUndetected: undetected}, Seed: 11}, Options{})
		got := tcpThrough(t, p, data)
		st := p.link.Stats().AtoB
		if st.CorruptedSegments == 0 {
			t.Fatalf("undetected=%v: nothing corrupted: %+v", undetected, st)
		}
		if len(got) != len(data) {
			t.Fatalf("undetected=%v: received %d of %d bytes", undetected, len(got), len(data))
		}
		flipped := 0
		for i := range data {
			for x := data[i] ^ got[i]; x != 0; x &= x - 1 {
				flipped++
			}
		}
		t.Logf("undetected=%v: %d of %d segments corrupted, %d bits wrong at the receiver", undetected, st.CorruptedSegments, st.Segments, flipped)
		switch {
		case !undetected && flipped != 0:
			t.Errorf("%d bits arrived flipped although the checksum should catch every flip", flipped)
		case undetected && (flipped == 0 || uint64(flipped) > st.CorruptedSegments):
			t.Errorf("%d bits arrived flipped, want 1..%d (one per corrupted segment)", flipped, st.CorruptedSegments)
		}
	}
}
