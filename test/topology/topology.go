// Package topology builds, on one Linux machine, N source hosts and M destination
// hosts as network namespaces behind one shared emulated wide-area bottleneck, and
// removes exactly what it built, also after a failure or a crash.
//
//	src0 ─┐                                                        ┌─ dst0
//	src1 ─┼─ br0 [dfw-<id>-rl] wan0 ══ wanem link ══ wan0 [dfw-<id>-rr] br0 ─┼─ dst1
//	 ...  ┘   10.250.1.1          10.250.0.1   10.250.0.2          10.250.2.1  └─ ...
//
// Source i is 10.250.1.(10+i), destination j is 10.250.2.(10+j) (the /16 is
// Spec.Subnet). Every host has one interface, eth0, a veth to its side's router, with
// an optional NIC cap (tbf, both ways); hosts route only the topology's /16, so their
// traffic cannot leave it. The routers forward between their bridge and the emulated
// link, whose A side is the sources' and B side the destinations'.
//
// Every name starts with dfw-<id>- (id random unless given), so runs never collide
// with each other or with other namespaces on the machine. Before each namespace is
// created its name is written to a state file (DefaultStateDir/<id>.json) together
// with the owning process; Down, or DownState from another process after a crash,
// deletes what is recorded and nothing else. The emulated link's TUN devices belong to
// the owning process and vanish with it.
//
// To join two namespaces that exist already (a local cluster's node namespaces, or a
// namespace and the host) use wanem.Join directly: it creates only TUN devices, which
// vanish with the process.
package topology

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/dtnflow/dtnflow/test/wanem"
)

// Spec describes a topology.
type Spec struct {
	// ID makes every name unique: 3–12 lowercase letters or digits; empty picks a
	// random 6-hex-digit one.
	ID string
	// Sources and Destinations are the numbers of hosts on each side (1–200).
	Sources, Destinations int
	// Link is the shared bottleneck: AtoB carries sources → destinations.
	Link wanem.Config
	// LinkOptions are the emulator's mechanics (MTU is taken from Spec.MTU).
	LinkOptions wanem.Options
	// SourceNIC and DestinationNIC cap every host's interface on that side (both
	// directions); zero means no cap.
	SourceNIC, DestinationNIC NIC
	// MTU of every interface; 0 means 9000.
	MTU int
	// Subnet is the topology's /16; the zero value means 10.250.0.0/16.
	Subnet netip.Prefix
	// HostSysctls are set in every host namespace (e.g. "net.ipv4.tcp_wmem": "4096
	// 16384 67108864"); namespaced sysctls only.
	HostSysctls map[string]string
	// StateDir holds the state file; empty means DefaultStateDir.
	StateDir string
	// Lifetime bounds the topology: it tears itself down when it expires (Done is
	// closed then). 0 means one hour.
	Lifetime time.Duration
	// ControlSocket, if set, serves the link's control API (wanem.ControlHandler).
	ControlSocket string
}

// NIC is a host interface cap, applied with tbf on both ends of the host's veth.
type NIC struct {
	RateBitsPerSecond int64
	// BurstBytes is tbf's bucket; 0 picks max(128 KiB, 1 ms at the rate).
	BurstBytes int64
	// QueueBytes is tbf's limit; 0 picks max(4 bursts, 10 ms at the rate).
	QueueBytes int64
}

// Host is a source or destination host of a topology.
type Host struct {
	// Name is "src<i>" or "dst<j>".
	Name string `json:"name"`
	// Netns is the namespace's name (dfw-<id>-src0, ...).
	Netns string `json:"netns"`
	// Addr is the host's address on eth0.
	Addr netip.Addr `json:"addr"`
	// HostsFile names every host of the topology (src0, dst1, ...); Command shows it
	// to the command as /etc/hosts.
	HostsFile string `json:"hostsFile,omitempty"`
}

// Command is name with args, run in the host's namespace and killed when ctx ends.
// Names resolve from the topology's hosts file, seen as /etc/hosts in a private mount
// namespace: tools that look their own address up (GridFTP does) must not ask a DNS
// server the host cannot reach.
func (h Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	enter := append([]string{"--net=" + wanem.NetnsPath(h.Netns), "--", name}, args...)
	if h.HostsFile == "" {
		return exec.CommandContext(ctx, "nsenter", enter...)
	}
	return exec.CommandContext(ctx, "unshare", append([]string{"--mount", "--propagation", "private", "--",
		"sh", "-c", `mount --bind "$0" /etc/hosts && exec nsenter "$@"`, h.HostsFile}, enter...)...)
}

// Do runs fn on a thread inside the host's namespace: sockets fn opens are the host's.
func (h Host) Do(fn func() error) error { return wanem.InNetns(h.Netns, fn) }

// Description is what a topology looks like, as written in its state file and
// printed by the command.
type Description struct {
	ID            string       `json:"id"`
	Sources       []Host       `json:"sources"`
	Destinations  []Host       `json:"destinations"`
	LeftRouter    string       `json:"leftRouter"`
	RightRouter   string       `json:"rightRouter"`
	Link          wanem.Config `json:"link"`
	ControlSocket string       `json:"controlSocket,omitempty"`
	StateFile     string       `json:"stateFile"`
}

// Topology is a built topology.
type Topology struct {
	Description
	Link *wanem.Link

	state     *stateFile
	done      chan struct{}
	downOnce  sync.Once
	downErr   error
	stopTimer func() bool
	stopCtl   context.CancelFunc
}

// Done is closed when the topology has been torn down (by Down or by its Lifetime).
func (t *Topology) Done() <-chan struct{} { return t.done }

const maxHosts = 200

func prefixOf(id string) string { return "dfw-" + id + "-" }

func validID(id string) bool {
	if len(id) < 3 || len(id) > 12 {
		return false
	}
	for _, c := range id {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// NewID is a random topology id.
func NewID() string {
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *Spec) defaults() error {
	if s.ID == "" {
		s.ID = NewID()
	}
	if !validID(s.ID) {
		return fmt.Errorf("id: %q must be 3 to 12 lowercase letters or digits", s.ID)
	}
	if s.Sources < 1 || s.Sources > maxHosts {
		return fmt.Errorf("sources: %d is outside [1, %d]", s.Sources, maxHosts)
	}
	if s.Destinations < 1 || s.Destinations > maxHosts {
		return fmt.Errorf("destinations: %d is outside [1, %d]", s.Destinations, maxHosts)
	}
	if s.MTU == 0 {
		s.MTU = 9000
	}
	if !s.Subnet.IsValid() {
		s.Subnet = netip.MustParsePrefix("10.250.0.0/16")
	}
	if s.Subnet.Bits() != 16 || !s.Subnet.Addr().Is4() || s.Subnet.Masked() != s.Subnet {
		return fmt.Errorf("subnet: %s must be an IPv4 /16 like 10.250.0.0/16", s.Subnet)
	}
	if s.StateDir == "" {
		s.StateDir = DefaultStateDir
	}
	if s.Lifetime == 0 {
		s.Lifetime = time.Hour
	}
	if s.Lifetime < 0 {
		return fmt.Errorf("lifetime: %v is negative", s.Lifetime)
	}
	for k := range s.HostSysctls {
		if !strings.HasPrefix(k, "net.") {
			return fmt.Errorf("hostSysctls: %q is not a namespaced net.* sysctl", k)
		}
	}
	for side, n := range map[string]NIC{"sourceNIC": s.SourceNIC, "destinationNIC": s.DestinationNIC} {
		if n.RateBitsPerSecond < 0 || n.BurstBytes < 0 || n.QueueBytes < 0 {
			return fmt.Errorf("%s: negative value in %+v", side, n)
		}
	}
	return s.Link.Validate()
}

// addr is subnet.<third>.<fourth>.
func addr(subnet netip.Prefix, third, fourth int) netip.Addr {
	a := subnet.Addr().As4()
	a[2], a[3] = byte(third), byte(fourth)
	return netip.AddrFrom4(a)
}

func sidePrefix(subnet netip.Prefix, third int) netip.Prefix {
	return netip.PrefixFrom(addr(subnet, third, 0), 24)
}

// Up builds the topology spec describes and starts its emulated link. On failure it
// removes whatever it had built before returning the error.
func Up(ctx context.Context, spec Spec) (t *Topology, err error) {
	if err := spec.defaults(); err != nil {
		return nil, err
	}
	if err := wanem.CanEmulate(); err != nil {
		return nil, err
	}
	prefix := prefixOf(spec.ID)
	statePath := StatePath(spec.StateDir, spec.ID)
	if _, err := os.Stat(statePath); err == nil {
		return nil, fmt.Errorf("topology %s exists already (%s): pick another id or run down", spec.ID, statePath)
	}
	start, err := processStart(os.Getpid())
	if err != nil {
		return nil, err
	}
	now := time.Now()
	sf := &stateFile{path: statePath, state: State{
		ID: spec.ID, Prefix: prefix, PID: os.Getpid(), PIDStart: start,
		Created: now, Deadline: now.Add(spec.Lifetime), ControlSocket: spec.ControlSocket,
	}}
	if err := sf.save(); err != nil {
		return nil, fmt.Errorf("state file: %w", err)
	}
	t = &Topology{state: sf, done: make(chan struct{})}
	defer func() {
		if err != nil {
			if derr := t.Down(); derr != nil {
				err = fmt.Errorf("%w (and cleaning up: %v)", err, derr)
			}
		}
	}()

	b := &builder{ctx: ctx, spec: spec, state: sf}
	t.Description = Description{
		ID: spec.ID, LeftRouter: prefix + "rl", RightRouter: prefix + "rr",
		Link: spec.Link, ControlSocket: spec.ControlSocket, StateFile: statePath,
	}
	if err := b.router(t.LeftRouter, addr(spec.Subnet, 1, 1)); err != nil {
		return t, err
	}
	if err := b.router(t.RightRouter, addr(spec.Subnet, 2, 1)); err != nil {
		return t, err
	}
	for i := range spec.Sources {
		h := Host{Name: "src" + strconv.Itoa(i), Netns: prefix + "src" + strconv.Itoa(i), Addr: addr(spec.Subnet, 1, 10+i)}
		if err := b.host(h, t.LeftRouter, addr(spec.Subnet, 1, 1), spec.SourceNIC); err != nil {
			return t, err
		}
		t.Sources = append(t.Sources, h)
	}
	for j := range spec.Destinations {
		h := Host{Name: "dst" + strconv.Itoa(j), Netns: prefix + "dst" + strconv.Itoa(j), Addr: addr(spec.Subnet, 2, 10+j)}
		if err := b.host(h, t.RightRouter, addr(spec.Subnet, 2, 1), spec.DestinationNIC); err != nil {
			return t, err
		}
		t.Destinations = append(t.Destinations, h)
	}

	hosts := hostsPath(spec.StateDir, spec.ID)
	if err := writeHostsFile(hosts, t.Hosts(), spec.ID); err != nil {
		return t, err
	}
	for i := range t.Sources {
		t.Sources[i].HostsFile = hosts
	}
	for i := range t.Destinations {
		t.Destinations[i].HostsFile = hosts
	}

	opts := spec.LinkOptions
	opts.MTU = spec.MTU
	left, right := addr(spec.Subnet, 0, 1), addr(spec.Subnet, 0, 2)
	t.Link, err = wanem.Join(ctx,
		wanem.Endpoint{Netns: t.LeftRouter, Name: "wan0", Addr: netip.PrefixFrom(left, 32), Peer: right,
			Routes: []netip.Prefix{sidePrefix(spec.Subnet, 2)}},
		wanem.Endpoint{Netns: t.RightRouter, Name: "wan0", Addr: netip.PrefixFrom(right, 32), Peer: left,
			Routes: []netip.Prefix{sidePrefix(spec.Subnet, 1)}},
		spec.Link, opts)
	if err != nil {
		return t, fmt.Errorf("emulated link: %w", err)
	}
	if spec.ControlSocket != "" {
		cctx, cancel := context.WithCancel(context.Background())
		t.stopCtl = cancel
		if err := wanem.ServeControl(cctx, spec.ControlSocket, t.Link); err != nil {
			return t, err
		}
	}
	d := t.Description
	sf.state.Description = &d
	if err := sf.save(); err != nil {
		return t, err
	}
	timer := time.AfterFunc(spec.Lifetime, func() { _ = t.Down() })
	t.stopTimer = timer.Stop
	return t, nil
}

// Down stops the link and deletes every namespace the topology created, then its
// state file. It is safe to call more than once and from several goroutines.
func (t *Topology) Down() error {
	t.downOnce.Do(func() {
		if t.stopTimer != nil {
			t.stopTimer()
		}
		var errs []error
		if t.stopCtl != nil {
			t.stopCtl()
		}
		if t.Link != nil {
			if err := t.Link.Close(); err != nil {
				errs = append(errs, err)
			}
		}
		s := t.state.state
		if err := sweep(s.Prefix, s.Namespaces); err != nil {
			errs = append(errs, err)
		}
		if s.ControlSocket != "" {
			_ = os.Remove(s.ControlSocket)
		}
		_ = os.Remove(hostsPath(filepath.Dir(t.state.path), s.ID))
		if len(errs) == 0 {
			if err := os.Remove(t.state.path); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
		t.downErr = errors.Join(errs...)
		close(t.done)
	})
	return t.downErr
}

// Hosts is every source, then every destination.
func (t *Topology) Hosts() []Host {
	return append(append([]Host(nil), t.Sources...), t.Destinations...)
}

// builder runs the ip/tc/sysctl commands that build a topology.
type builder struct {
	ctx   context.Context
	spec  Spec
	state *stateFile
}

func (b *builder) run(ns string, name string, args ...string) error {
	if err := b.ctx.Err(); err != nil {
		return err
	}
	cmd := wanem.NetnsCommand(ns, name, args...)
	out, err := exec.CommandContext(b.ctx, cmd.Path, cmd.Args[1:]...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// netns records and creates a namespace with its loopback up. A namespace that exists
// already is not ours (or is a leftover that `down -id` should sweep): refuse it
// without recording it.
func (b *builder) netns(ns string) error {
	if _, err := os.Stat("/run/netns/" + ns); err == nil {
		return fmt.Errorf("namespace %s exists already", ns)
	}
	if err := b.state.intend(ns); err != nil {
		return err
	}
	if out, err := exec.CommandContext(b.ctx, "ip", "netns", "add", ns).CombinedOutput(); err != nil {
		return fmt.Errorf("ip netns add %s: %w: %s", ns, err, strings.TrimSpace(string(out)))
	}
	return b.run(ns, "ip", "link", "set", "lo", "up")
}

// router creates a router namespace: a bridge for its side's hosts with the side's
// gateway address gw, and forwarding on.
func (b *builder) router(ns string, gw netip.Addr) error {
	if err := b.netns(ns); err != nil {
		return err
	}
	mtu := strconv.Itoa(b.spec.MTU)
	for _, c := range [][]string{
		{"sysctl", "-qw", "net.ipv4.ip_forward=1"},
		{"sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"},
		{"ip", "link", "add", "br0", "mtu", mtu, "type", "bridge"},
		{"ip", "addr", "add", gw.String() + "/24", "dev", "br0"},
		{"ip", "link", "set", "br0", "up"},
	} {
		if err := b.run(ns, c[0], c[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// host creates host h's namespace and its veth to router, whose bridge holds the
// gateway gw.
func (b *builder) host(h Host, router string, gw netip.Addr, nic NIC) error {
	if err := b.netns(h.Netns); err != nil {
		return err
	}
	mtu := strconv.Itoa(b.spec.MTU)
	if err := b.run(router, "ip", "link", "add", h.Name, "mtu", mtu, "type", "veth", "peer", "name", "eth0", "mtu", mtu, "netns", h.Netns); err != nil {
		return err
	}
	cmds := []struct {
		ns   string
		args []string
	}{
		{router, []string{"ip", "link", "set", h.Name, "master", "br0", "up"}},
		{h.Netns, []string{"sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"}},
		{h.Netns, []string{"ip", "addr", "add", h.Addr.String() + "/24", "dev", "eth0"}},
		{h.Netns, []string{"ip", "link", "set", "eth0", "up"}},
		// Only the topology's /16 is reachable; nothing leaves it.
		{h.Netns, []string{"ip", "route", "add", b.spec.Subnet.String(), "via", gw.String(), "dev", "eth0"}},
	}
	for k, v := range b.spec.HostSysctls {
		cmds = append(cmds, struct {
			ns   string
			args []string
		}{h.Netns, []string{"sysctl", "-qw", k + "=" + v}})
	}
	if nic.RateBitsPerSecond > 0 {
		tbf := nic.tbfArgs(b.spec.MTU)
		cmds = append(cmds,
			struct {
				ns   string
				args []string
			}{h.Netns, append([]string{"tc", "qdisc", "add", "dev", "eth0", "root"}, tbf...)},
			struct {
				ns   string
				args []string
			}{router, append([]string{"tc", "qdisc", "add", "dev", h.Name, "root"}, tbf...)})
	}
	for _, c := range cmds {
		if err := b.run(c.ns, c.args[0], c.args[1:]...); err != nil {
			return err
		}
	}
	return nil
}

// tbfArgs are the tc arguments of the cap.
func (n NIC) tbfArgs(mtu int) []string {
	burst := n.BurstBytes
	if burst == 0 {
		burst = max(128<<10, n.RateBitsPerSecond/8/1000, int64(2*mtu))
	}
	limit := n.QueueBytes
	if limit == 0 {
		limit = max(4*burst, n.RateBitsPerSecond/8/100)
	}
	return []string{"tbf", "rate", strconv.FormatInt(n.RateBitsPerSecond, 10) + "bit",
		"burst", strconv.FormatInt(burst, 10), "limit", strconv.FormatInt(limit, 10)}
}

func hostsPath(dir, id string) string { return filepath.Join(dir, id+".hosts") }

// writeHostsFile writes the machine's /etc/hosts followed by the topology's hosts.
func writeHostsFile(path string, hosts []Host, id string) error {
	base, err := os.ReadFile("/etc/hosts")
	if err != nil {
		base = []byte("127.0.0.1 localhost\n")
	}
	var b strings.Builder
	b.Write(base)
	if len(base) > 0 && base[len(base)-1] != '\n' {
		b.WriteByte('\n')
	}
	fmt.Fprintf(&b, "# dtnflow topology %s\n", id)
	for _, h := range hosts {
		fmt.Fprintf(&b, "%s %s %s.%s\n", h.Addr, h.Name, h.Name, strings.TrimSuffix(prefixOf(id), "-"))
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func deleteNetns(ns string) error {
	if _, err := os.Stat("/run/netns/" + ns); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip netns del %s: %w: %s", ns, err, strings.TrimSpace(string(out)))
	}
	return nil
}
