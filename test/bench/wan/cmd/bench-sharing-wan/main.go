// Command bench-sharing-wan runs jobs that share one emulated wide-area path through
// the agents alone (`dtnflow-agent send --auto --share-dir`, package test/bench/wan's
// RunSharing), side by side with simultaneous globus-url-copy runs with the
// Globus-like preset on the same path, and one job in each fairness mode against
// long-lived iperf3 TCP flows on the bottleneck:
//
//	bench-sharing-wan -rate 1G -rtt 50ms -jobs 4 -size 2GiB -weights 2,1,2,1
//
// It needs root (namespaces, TUN), iperf3, globus-gridftp-server and globus-url-copy
// (`make bench-sharing-wan` installs them), and the agent binary.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dtnflow/dtnflow/test/bench/wan"
	"github.com/dtnflow/dtnflow/test/wanem"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-sharing-wan:", err)
		os.Exit(1)
	}
}

func run() error {
	rate := flag.String("rate", "1G", "bottleneck rate (bits/s)")
	rtt := flag.Duration("rtt", 50*time.Millisecond, "round-trip time")
	loss := flag.Float64("loss", 0, "random loss probability")
	size := flag.String("size", "2GiB", "each job's dataset: one file of this size")
	jobs := flag.Int("jobs", 4, "jobs started together (and globus-url-copy runs side by side)")
	weights := flag.String("weights", "2,1,2,1", "the weighted case's priorities, one per job")
	lateAfter := flag.Duration("late-after", 15*time.Second, "the late case's extra job starts this long after the others")
	flows := flag.Int("flows", 3, "long-lived iperf3 TCP flows in the fairness cases")
	cases := flag.String("cases", strings.Join(wan.SharingCases, ","), "cases to run, in order (alone first: it is the reference and probes the path)")
	agent := flag.String("agent", "bin/dtnflow-agent", "dtnflow-agent binary")
	maxStripes := flag.Int("max-stripes", 4, "each job's --stripes (the most --auto may use)")
	maxStreams := flag.Int("max-streams", 32, "each job's --max-streams")
	verify := flag.Bool("verify", false, "keep dtnflow's end-to-end digest (globus-url-copy checks nothing by default)")
	work := flag.String("work", "/dev/shm/dtnflow-bench-sharing-wan", "scratch directory for the dataset and destinations (tmpfs)")
	out := flag.String("out", "", "output directory for logs (default .cache/bench-sharing-wan/<time>)")
	jsonPath := flag.String("json", ".cache/bench-sharing-wan.jsonl", "append one JSON line per case here")
	mtu := flag.Int("mtu", 9000, "MTU of the path")
	realtime := flag.Bool("realtime", true, "run the emulator's threads under SCHED_FIFO")
	timeout := flag.Duration("timeout", 2*time.Hour, "the whole run's bound")
	flag.Parse()

	for _, bin := range []string{"iperf3", "globus-gridftp-server", "globus-url-copy"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found (make bench-sharing-wan installs it)", bin)
		}
	}
	if err := wanem.CanEmulate(); err != nil {
		return err
	}
	r, err := wanem.ParseRate(*rate)
	if err != nil {
		return fmt.Errorf("-rate: %w", err)
	}
	sz, err := wanem.ParseBytes(*size)
	if err != nil {
		return fmt.Errorf("-size: %w", err)
	}
	var ws []int
	for _, f := range strings.Split(*weights, ",") {
		w, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || w < 1 || w > 1000 {
			return fmt.Errorf("-weights: %q: want 1 to 1000", f)
		}
		ws = append(ws, w)
	}
	var cs []string
	for _, c := range strings.Split(*cases, ",") {
		c = strings.TrimSpace(c)
		known := false
		for _, k := range wan.SharingCases {
			known = known || k == c
		}
		if !known {
			return fmt.Errorf("-cases: unknown case %q (want %s)", c, strings.Join(wan.SharingCases, ", "))
		}
		cs = append(cs, c)
	}
	if *out == "" {
		*out = filepath.Join(".cache", "bench-sharing-wan", time.Now().UTC().Format("20060102T150405Z"))
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	agentPath, _ := filepath.Abs(*agent)
	if _, err := os.Stat(agentPath); err != nil {
		return fmt.Errorf("-agent: %w", err)
	}
	jf, err := os.OpenFile(*jsonPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer jf.Close()
	link := wanem.Symmetric(wanem.Direction{Delay: *rtt / 2, RateBitsPerSecond: int64(r), Loss: *loss})
	link.Seed = 1

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "bench-sharing-wan: logs in %s, JSON lines in %s\n", *out, *jsonPath)
	_, err = wan.RunSharing(ctx, wan.SharingOptions{Link: link, Size: sz, Jobs: *jobs, Weights: ws, LateAfter: *lateAfter, Flows: *flows,
		Cases: cs, Agent: agentPath, MaxStripes: *maxStripes, MaxStreams: *maxStreams, Verify: *verify, WorkDir: *work, OutDir: *out,
		MTU: *mtu, Realtime: *realtime, Log: os.Stderr, JSON: jf})
	return err
}
