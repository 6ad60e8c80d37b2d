// Command dfw-topo builds and removes emulated wide-area topologies (see package
// topology):
//
//	dfw-topo up -sources 2 -destinations 2 -rate 1G -rtt 50ms -loss 1e-4 -src-nic 10G
//	    builds, prints the description (JSON) once ready, serves the link's control
//	    API on -control, prints the link's counters on SIGUSR1, and removes everything
//	    on SIGINT/SIGTERM or when -lifetime expires.
//	dfw-topo down -id 3fa9c1      (or -state FILE, or -all)
//	    removes a topology after its process died or while it runs (stops it first).
//	dfw-topo list
//
// Run a command in a host with `ip netns exec dfw-<id>-src0 ...` or nsenter
// --net=/run/netns/dfw-<id>-src0. Change the running link with
//
//	curl --unix-socket /run/dtnflow/topology/<id>.sock -X PATCH \
//	     -d '{"aToB":{"rateBitsPerSecond":500000000}}' http://wanem/config
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
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/dtnflow/dtnflow/test/topology"
	"github.com/dtnflow/dtnflow/test/wanem"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "up":
		err = up(os.Args[2:])
	case "down":
		err = down(os.Args[2:])
	case "list":
		err = list(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "dfw-topo:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: dfw-topo up|down|list [flags]  (dfw-topo up -h for the flags)")
	os.Exit(2)
}

type sysctlFlags map[string]string

func (s sysctlFlags) String() string { return fmt.Sprint(map[string]string(s)) }
func (s sysctlFlags) Set(v string) error {
	k, val, ok := strings.Cut(v, "=")
	if !ok {
		return errors.New("want key=value")
	}
	s[strings.TrimSpace(k)] = strings.TrimSpace(val)
	return nil
}

func up(args []string) error {
	fs := flag.NewFlagSet("up", flag.ExitOnError)
	id := fs.String("id", "", "topology id (3-12 lowercase letters/digits; empty: random)")
	sources := fs.Int("sources", 1, "number of source hosts")
	dests := fs.Int("destinations", 1, "number of destination hosts")
	srcNIC := fs.String("src-nic", "", "cap every source host's NIC (tbf, both ways), e.g. 10G")
	dstNIC := fs.String("dst-nic", "", "cap every destination host's NIC")
	subnet := fs.String("subnet", "10.250.0.0/16", "the topology's /16")
	stateDir := fs.String("state-dir", topology.DefaultStateDir, "where state files go")
	lifetime := fs.Duration("lifetime", 2*time.Hour, "tear down after this long (every run is bounded)")
	control := fs.String("control", "", "control socket (default <state-dir>/<id>.sock; \"none\" for none)")
	sysctls := sysctlFlags{}
	fs.Var(sysctls, "sysctl", "key=value set in every host namespace (repeatable), e.g. net.ipv4.tcp_wmem=4096 16384 67108864")
	linkFlags := wanem.AddLinkFlags(fs)
	_ = fs.Parse(args)

	cfg, opts, err := linkFlags.Config()
	if err != nil {
		return err
	}
	spec := topology.Spec{
		ID: *id, Sources: *sources, Destinations: *dests, Link: cfg, LinkOptions: opts, MTU: opts.MTU,
		StateDir: *stateDir, Lifetime: *lifetime, HostSysctls: sysctls,
	}
	if *lifetime <= 0 {
		return errors.New("-lifetime must be positive")
	}
	if spec.Subnet, err = netip.ParsePrefix(*subnet); err != nil {
		return fmt.Errorf("-subnet: %w", err)
	}
	for _, c := range []struct {
		flag string
		v    string
		nic  *topology.NIC
	}{{"-src-nic", *srcNIC, &spec.SourceNIC}, {"-dst-nic", *dstNIC, &spec.DestinationNIC}} {
		if c.nic.RateBitsPerSecond, err = wanem.ParseRate(c.v); err != nil {
			return fmt.Errorf("%s: %w", c.flag, err)
		}
	}
	if spec.ID == "" {
		spec.ID = topology.NewID()
	}
	switch *control {
	case "":
		spec.ControlSocket = filepath.Join(*stateDir, spec.ID+".sock")
	case "none":
	default:
		spec.ControlSocket = *control
	}

	// Signals are caught before building, so that an interrupt during the build
	// still tears down what exists.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	build, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	t, err := topology.Up(build, spec)
	if err != nil {
		return err
	}
	defer t.Down()
	b, _ := json.Marshal(t.Description)
	fmt.Println(string(b))

	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	for {
		select {
		case <-usr1:
			printStats(t.Link)
		case <-t.Done():
			fmt.Fprintln(os.Stderr, "dfw-topo: lifetime expired; torn down")
			return nil
		case <-ctx.Done():
			printStats(t.Link)
			return t.Down()
		}
	}
}

func printStats(l *wanem.Link) {
	b, _ := json.Marshal(l.Stats())
	fmt.Println(string(b))
}

func down(args []string) error {
	fs := flag.NewFlagSet("down", flag.ExitOnError)
	id := fs.String("id", "", "topology id: its state file, then any dfw-<id>-* namespace left")
	state := fs.String("state", "", "state file")
	all := fs.Bool("all", false, "every topology in -state-dir")
	stateDir := fs.String("state-dir", topology.DefaultStateDir, "where state files are")
	grace := fs.Duration("grace", 10*time.Second, "how long a running owner gets to clean up after SIGTERM")
	_ = fs.Parse(args)
	switch {
	case *state != "":
		return topology.DownState(*state, *grace)
	case *id != "":
		path := topology.StatePath(*stateDir, *id)
		var errs []error
		if _, err := os.Stat(path); err == nil {
			errs = append(errs, topology.DownState(path, *grace))
		}
		errs = append(errs, topology.SweepID(*id))
		return errors.Join(errs...)
	case *all:
		states, err := topology.List(*stateDir)
		if err != nil {
			return err
		}
		var errs []error
		for _, s := range states {
			errs = append(errs, topology.DownState(topology.StatePath(*stateDir, s.ID), *grace))
		}
		return errors.Join(errs...)
	}
	return errors.New("down needs -id, -state or -all")
}

func list(args []string) error {
	fs := flag.NewFlagSet("list", flag.ExitOnError)
	stateDir := fs.String("state-dir", topology.DefaultStateDir, "where state files are")
	_ = fs.Parse(args)
	states, err := topology.List(*stateDir)
	if err != nil {
		return err
	}
	for _, s := range states {
		fmt.Printf("%s\talive=%v\tpid=%d\tcreated=%s\tdeadline=%s\tnamespaces=%d\n",
			s.ID, s.Alive(), s.PID, s.Created.Format(time.RFC3339), s.Deadline.Format(time.RFC3339), len(s.Namespaces))
	}
	return nil
}
