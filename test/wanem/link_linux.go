package wanem

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Endpoint is one end of an emulated link: a TUN device in a network namespace, with
// an address and the routes that lead into the link.
type Endpoint struct {
	// Netns is the namespace the TUN goes into: a name from `ip netns`, a path such as
	// /proc/<pid>/ns/net, or "" for the caller's own namespace (the host).
	Netns string `json:"netns"`
	// Name is the TUN's interface name (at most 15 bytes).
	Name string `json:"name"`
	// Addr is the TUN's address, e.g. 10.250.0.1/32; optional.
	Addr netip.Prefix `json:"addr"`
	// Peer is the address of the far end: with Addr it makes a point-to-point link
	// (ip addr add Addr peer Peer) and a host route to Peer through the TUN.
	Peer netip.Addr `json:"peer"`
	// Routes are more destinations routed through the TUN (e.g. the far side's
	// subnets, or a Kubernetes node's pod CIDR).
	Routes []netip.Prefix `json:"routes,omitempty"`
}

func (e Endpoint) validate(side string) error {
	switch {
	case e.Name == "" || len(e.Name) > 15:
		return fmt.Errorf("%s.name: %q must be 1 to 15 bytes", side, e.Name)
	case e.Peer.IsValid() && !e.Addr.IsValid():
		return fmt.Errorf("%s.peer: %s needs an addr", side, e.Peer)
	}
	if p := NetnsPath(e.Netns); p != "" {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("%s.netns: %w", side, err)
		}
	}
	return nil
}

// Options are the link's mechanics, fixed for its life.
type Options struct {
	// MTU of both TUN devices; 0 means 9000.
	MTU int
	// NoOffload opens the TUNs without virtio headers and offloads, so the kernel hands
	// over one packet per MTU (slower; kept for measuring the difference).
	NoOffload bool
	// Granularity is the longest a TCP super-packet may take to serialize on the
	// bottleneck and still be delivered whole at its last segment's arrival; longer
	// ones (at low rates) are cut into segments, each delivered at its own time. 0
	// means DefaultGranularity.
	Granularity time.Duration
	// TxQueueLen of the TUNs (packets the kernel queues for the emulator to read
	// before it drops; a busy machine can hold the emulator off for milliseconds);
	// 0 means 5000.
	TxQueueLen int
	// Realtime runs the emulator's four threads (a reader and a writer per
	// direction) under SCHED_FIFO, so that other busy processes on the machine do not
	// delay packets past their due time (best effort; needs CAP_SYS_NICE).
	Realtime bool
}

// DefaultGranularity keeps 64 KiB super-packets whole at rates from about 500 Mbit/s.
const DefaultGranularity = time.Millisecond

// Link is a running emulated link between two endpoints.
type Link struct {
	a, b    Endpoint
	opts    Options
	started time.Time

	mu   sync.Mutex // guards cfg
	cfg  Config
	ab   *pipe
	ba   *pipe
	tunA int
	tunB int
	stop int // eventfd that tells all four loops to end

	closeOnce sync.Once
	closeErr  error
}

// Join builds an emulated link between endpoints a and b: a TUN in each namespace,
// addressed and routed as asked, and the emulator between them, running until Close.
// Everything it creates goes away with the TUNs when the link is closed or the process
// exits, so a crash leaves nothing behind. Packets that a sends into its TUN come out
// of b's after cfg.AtoB, and back through cfg.BtoA.
func Join(ctx context.Context, a, b Endpoint, cfg Config, opts Options) (*Link, error) {
	if err := a.validate("a"); err != nil {
		return nil, err
	}
	if err := b.validate("b"); err != nil {
		return nil, err
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if opts.MTU == 0 {
		opts.MTU = 9000
	}
	if opts.MTU < 576 || opts.MTU > 65000 {
		return nil, fmt.Errorf("mtu: %d is outside [576, 65000]", opts.MTU)
	}
	if opts.Granularity == 0 {
		opts.Granularity = DefaultGranularity
	}
	if opts.TxQueueLen == 0 {
		opts.TxQueueLen = 5000
	}
	l := &Link{a: a, b: b, opts: opts, cfg: cfg, started: time.Now(), tunA: -1, tunB: -1, stop: -1}
	ok := false
	defer func() {
		if !ok {
			l.closeFDs()
		}
	}()
	var err error
	if l.stop, err = unix.Eventfd(0, unix.EFD_CLOEXEC|unix.EFD_NONBLOCK); err != nil {
		return nil, err
	}
	if l.tunA, err = openTUN(a.Netns, a.Name, !opts.NoOffload); err != nil {
		return nil, fmt.Errorf("a: %w", err)
	}
	if l.tunB, err = openTUN(b.Netns, b.Name, !opts.NoOffload); err != nil {
		return nil, fmt.Errorf("b: %w", err)
	}
	if err := configureEndpoint(ctx, a, opts); err != nil {
		return nil, fmt.Errorf("a: %w", err)
	}
	if err := configureEndpoint(ctx, b, opts); err != nil {
		return nil, fmt.Errorf("b: %w", err)
	}
	rtt := cfg.RTT()
	if l.ab, err = newPipe(l.tunA, l.tunB, l.stop, opts, cfg.AtoB, rtt, cfg.Seed); err != nil {
		return nil, err
	}
	if l.ba, err = newPipe(l.tunB, l.tunA, l.stop, opts, cfg.BtoA, rtt, cfg.Seed+1); err != nil {
		unix.Close(l.ab.line.wake)
		return nil, err
	}
	l.ab.start()
	l.ba.start()
	ok = true
	return l, nil
}

func configureEndpoint(ctx context.Context, e Endpoint, opts Options) error {
	cmds := [][]string{
		// No IPv6 link-local address and no router solicitations on the link.
		{"link", "set", "dev", e.Name, "addrgenmode", "none"},
		{"link", "set", "dev", e.Name, "mtu", strconv.Itoa(opts.MTU), "txqueuelen", strconv.Itoa(opts.TxQueueLen), "up"},
	}
	if e.Addr.IsValid() {
		add := []string{"addr", "add", e.Addr.String()}
		if e.Peer.IsValid() {
			add = append(add, "peer", e.Peer.String())
		}
		cmds = append(cmds, append(add, "dev", e.Name))
	}
	for _, r := range e.Routes {
		cmds = append(cmds, []string{"route", "replace", r.String(), "dev", e.Name})
	}
	for _, c := range cmds {
		cmd := IPCommand(e.Netns, c...)
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := run(cmd); err != nil {
			return err
		}
	}
	return nil
}

// A and B are the link's endpoints.
func (l *Link) A() Endpoint { return l.a }
func (l *Link) B() Endpoint { return l.b }

// Config is the link's current configuration.
func (l *Link) Config() Config {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.cfg
}

// SetConfig changes the link while it runs; packets already past the bottleneck keep
// the delay they were given (they are on the wire).
func (l *Link) SetConfig(cfg Config) error {
	_, err := l.Update(func(c *Config) { *c = cfg })
	return err
}

// Update applies change to a copy of the current configuration and, if the result is
// valid, sets it; concurrent updates are applied one after the other.
func (l *Link) Update(change func(*Config)) (Config, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	cfg := l.cfg
	change(&cfg)
	if err := cfg.Validate(); err != nil {
		return l.cfg, err
	}
	rtt := cfg.RTT()
	l.ab.configure(cfg.AtoB, rtt)
	l.ba.configure(cfg.BtoA, rtt)
	l.cfg = cfg
	return cfg, nil
}

// Stats is a snapshot of the link's counters.
func (l *Link) Stats() Stats {
	st := Stats{
		Config: l.Config(),
		Uptime: time.Since(l.started),
		AtoB:   l.ab.ctr.snapshot(),
		BtoA:   l.ba.ctr.snapshot(),
	}
	// Best effort: the TUNs are gone once the link is closed.
	if d, err := tunDrops(l.a.Netns, l.a.Name); err == nil {
		st.AtoB.KernelDropped = d
	}
	if d, err := tunDrops(l.b.Netns, l.b.Name); err == nil {
		st.BtoA.KernelDropped = d
	}
	return st
}

// Close stops the emulator and removes both TUNs (and so their addresses and routes).
func (l *Link) Close() error {
	l.closeOnce.Do(func() {
		_, _ = unix.Write(l.stop, one)
		l.ab.wait()
		l.ba.wait()
		l.closeErr = l.closeFDs()
	})
	return l.closeErr
}

func (l *Link) closeFDs() error {
	var errs []error
	for _, fd := range []*int{&l.tunA, &l.tunB, &l.stop} {
		if *fd >= 0 {
			if err := unix.Close(*fd); err != nil {
				errs = append(errs, err)
			}
			*fd = -1
		}
	}
	return errors.Join(errs...)
}
