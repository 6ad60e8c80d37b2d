// Command wanem joins two network namespaces (or a namespace and the host) through an
// emulated wide-area link: delay, loss, bit corruption, a rate-limited bottleneck with
// a drop-tail queue. It runs until SIGINT/SIGTERM or -duration, prints the counters on
// SIGUSR1 and at exit, and serves the control API on -control (see wanem.ControlHandler):
//
//	wanem -a-netns nodeA -b-netns nodeB -a-addr 10.250.0.1/32 -b-addr 10.250.0.2/32 \
//	      -rate 1G -rtt 50ms -loss 1e-4 -control /run/wanem.sock
//	curl --unix-socket /run/wanem.sock -X PATCH -d '{"aToB":{"rateBitsPerSecond":500000000}}' http://wanem/config
//
// Everything it creates (two TUN devices, their addresses and routes) disappears when
// it exits, even when killed.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/dtnflow/dtnflow/test/wanem"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "wanem:", err)
		os.Exit(1)
	}
}

func run() error {
	fs := flag.NewFlagSet("wanem", flag.ExitOnError)
	aNetns := fs.String("a-netns", "", "namespace of end A: a name from `ip netns`, a path, or \"host\" (required)")
	bNetns := fs.String("b-netns", "", "namespace of end B (required)")
	aIf := fs.String("a-if", "dfw-wan0", "TUN name in A (at most 15 bytes)")
	bIf := fs.String("b-if", "dfw-wan0", "TUN name in B")
	aAddr := fs.String("a-addr", "10.250.0.1/32", "address of A's TUN (B reaches A there)")
	bAddr := fs.String("b-addr", "10.250.0.2/32", "address of B's TUN")
	aRoutes := fs.String("a-routes", "", "comma-separated prefixes A routes into the link (e.g. B's pod CIDR)")
	bRoutes := fs.String("b-routes", "", "comma-separated prefixes B routes into the link")
	control := fs.String("control", "", "unix socket for the control API (empty: none)")
	duration := fs.Duration("duration", 12*time.Hour, "stop after this long (every run is bounded)")
	linkFlags := wanem.AddLinkFlags(fs)
	_ = fs.Parse(os.Args[1:])

	if *aNetns == "" || *bNetns == "" {
		return errors.New("-a-netns and -b-netns are required (\"host\" for this process's namespace)")
	}
	if *duration <= 0 {
		return errors.New("-duration must be positive")
	}
	cfg, opts, err := linkFlags.Config()
	if err != nil {
		return err
	}
	a, err := endpoint("a", *aNetns, *aIf, *aAddr, *bAddr, *aRoutes)
	if err != nil {
		return err
	}
	b, err := endpoint("b", *bNetns, *bIf, *bAddr, *aAddr, *bRoutes)
	if err != nil {
		return err
	}
	if err := wanem.CanEmulate(); err != nil {
		return err
	}

	ctx, cancel := context.WithTimeout(context.Background(), *duration)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	link, err := wanem.Join(ctx, a, b, cfg, opts)
	if err != nil {
		return err
	}
	defer link.Close()
	if *control != "" {
		if err := wanem.ServeControl(ctx, *control, link); err != nil {
			return err
		}
	}
	ready, _ := json.Marshal(map[string]any{"ready": true, "a": a, "b": b, "config": cfg, "control": *control})
	fmt.Println(string(ready))

	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	for {
		select {
		case <-usr1:
			dumpStats(link)
		case <-ctx.Done():
			dumpStats(link)
			return link.Close()
		}
	}
}

func dumpStats(link *wanem.Link) {
	b, _ := json.Marshal(link.Stats())
	fmt.Println(string(b))
}

func endpoint(side, ns, name, addr, peer, routes string) (wanem.Endpoint, error) {
	e := wanem.Endpoint{Netns: ns, Name: name}
	if ns == "host" {
		e.Netns = ""
	}
	var err error
	if e.Addr, err = netip.ParsePrefix(addr); err != nil {
		return e, fmt.Errorf("-%s-addr: %w", side, err)
	}
	p, err := netip.ParsePrefix(peer)
	if err != nil {
		return e, fmt.Errorf("peer of %s: %w", side, err)
	}
	e.Peer = p.Addr()
	for _, r := range strings.Split(routes, ",") {
		if r = strings.TrimSpace(r); r == "" {
			continue
		}
		pr, err := netip.ParsePrefix(r)
		if err != nil {
			return e, fmt.Errorf("-%s-routes: %w", side, err)
		}
		e.Routes = append(e.Routes, pr)
	}
	return e, nil
}
