// Command bench-wan runs the side-by-side benchmark on an emulated wide-area path
// (package test/bench/wan). Every flag that takes a list makes a dimension of the
// scenario matrix:
//
//	bench-wan -rate 1G -rtt 50ms -loss 0,1e-4,1e-3 -dataset large \
//	    -tools iperf3,gridftp-default,gridftp-preset,gridftp-grid
//
// It needs root (namespaces, TUN), iperf3, globus-gridftp-server and globus-url-copy
// (`make bench-wan` installs them), and for the dtnflow rows the agent binary.
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

	"github.com/dtnflow/dtnflow/test/bench/agentbuild"
	"github.com/dtnflow/dtnflow/test/bench/wan"
	"github.com/dtnflow/dtnflow/test/wanem"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-wan:", err)
		os.Exit(1)
	}
}

func run() error {
	rates := flag.String("rate", "1G", "bottleneck rates (bits/s), comma-separated")
	rtts := flag.String("rtt", "50ms", "round-trip times, comma-separated")
	losses := flag.String("loss", "0", "random loss probabilities, comma-separated")
	queues := flag.String("queue", "default", "bottleneck queues in bytes (default: one BDP, at least 1 MiB), comma-separated")
	datasets := flag.String("dataset", "large", "datasets: large, mixed, small, smallmix (comma-separated)")
	cross := flag.String("cross", "off", "cross traffic: off, on (comma-separated)")
	tools := flag.String("tools", "iperf3,gridftp-default,gridftp-preset,gridftp-grid",
		"tools: iperf3, gridftp-default, gridftp-preset, gridftp-grid, dtnflow-grid, dtnflow-auto, dtnflow-auto+enc (--in-flight Encrypted), dtnflow-auto-static (--auto with the size classes' channels kept as planned)")
	largeSize := flag.String("large-size", "4GiB", "size of the large file")
	mixedTotal := flag.String("mixed-total", "4GiB", "total of the mixed dataset")
	mixedMin := flag.String("mixed-min", "64KiB", "smallest file of the mixed dataset")
	mixedMax := flag.String("mixed-max", "1GiB", "largest file of the mixed dataset")
	smallCount := flag.Int("small-count", 20000, "files in the small dataset")
	smallSize := flag.String("small-size", "64KiB", "size of each small file")
	smallMixLarge := flag.Int("smallmix-large", 3, "smallmix: the large files beside the -small-count small ones")
	smallMixLargeSize := flag.String("smallmix-large-size", "300MiB", "smallmix: size of each large file")
	sampleSeconds := flag.Float64("sample-seconds", 8, "grid points are probed on a sample of this many seconds at the link rate")
	iperfStreams := flag.String("iperf3-streams", "1,8", "iperf3 stream counts")
	iperfSeconds := flag.Int("iperf3-seconds", 20, "seconds per iperf3 run")
	gridP := flag.String("gridftp-p", "1,2,4,8,16,32,64", "gridftp-grid: -p values")
	gridCC := flag.String("gridftp-cc", "1,2,4,8,16", "gridftp-grid: -cc values (multi-file datasets)")
	gridBS := flag.String("gridftp-bs", "0,4MiB", "gridftp-grid: -tcp-bs values (0: autotuning)")
	dtnStreams := flag.String("dtnflow-streams", "1,2,4,8,16,32,64", "dtnflow-grid: streams per stripe")
	dtnStripes := flag.String("dtnflow-stripes", "1,2,4", "dtnflow-grid: stripes")
	dtnBuffers := flag.String("dtnflow-buffers", "0,4MiB", "dtnflow-grid: socket buffers (0: autotuning)")
	dtnVerify := flag.Bool("dtnflow-verify", false, "keep dtnflow's end-to-end digest (globus-url-copy checks nothing by default)")
	agent := flag.String("agent", "bin/dtnflow-agent", "dtnflow-agent binary (dtnflow rows)")
	out := flag.String("out", "", "output directory (default .cache/bench-wan/<time>)")
	work := flag.String("work", "/dev/shm/dtnflow-bench-wan", "scratch directory for datasets and destinations (tmpfs)")
	mtu := flag.Int("mtu", 9000, "MTU of the path")
	realtime := flag.Bool("realtime", true, "run the emulator's threads under SCHED_FIFO")
	timeout := flag.Duration("timeout", 4*time.Hour, "the whole run's bound")
	runLimit := flag.Duration("run-limit", 0, "stop any one transfer after this long and extrapolate its time from what it moved (0: none)")
	var sysctls []string
	flag.Func("sysctl", "key=value set in every host (repeatable), e.g. net.ipv4.tcp_wmem=4096 16384 67108864", func(s string) error {
		sysctls = append(sysctls, s)
		return nil
	})
	flag.Parse()

	for _, bin := range []string{"iperf3", "globus-gridftp-server", "globus-url-copy"} {
		if _, err := exec.LookPath(bin); err != nil {
			return fmt.Errorf("%s not found (make bench-wan installs it)", bin)
		}
	}
	if err := wanem.CanEmulate(); err != nil {
		return err
	}

	rateList, err := listOf(*rates, wanem.ParseRate)
	if err != nil {
		return fmt.Errorf("-rate: %w", err)
	}
	rttList, err := listOf(*rtts, time.ParseDuration)
	if err != nil {
		return fmt.Errorf("-rtt: %w", err)
	}
	lossList, err := listOf(*losses, func(s string) (float64, error) { return strconv.ParseFloat(s, 64) })
	if err != nil {
		return fmt.Errorf("-loss: %w", err)
	}
	queueList, err := listOf(*queues, func(s string) (int64, error) {
		if s == "default" {
			return 0, nil
		}
		return wanem.ParseBytes(s)
	})
	if err != nil {
		return fmt.Errorf("-queue: %w", err)
	}
	crossList, err := listOf(*cross, func(s string) (bool, error) {
		switch s {
		case "on":
			return true, nil
		case "off":
			return false, nil
		}
		return false, fmt.Errorf("%q: want on or off", s)
	})
	if err != nil {
		return fmt.Errorf("-cross: %w", err)
	}
	large, err := wanem.ParseBytes(*largeSize)
	if err != nil {
		return err
	}
	mTotal, err := wanem.ParseBytes(*mixedTotal)
	if err != nil {
		return err
	}
	mMin, err := wanem.ParseBytes(*mixedMin)
	if err != nil {
		return err
	}
	mMax, err := wanem.ParseBytes(*mixedMax)
	if err != nil {
		return err
	}
	sSize, err := wanem.ParseBytes(*smallSize)
	if err != nil {
		return err
	}
	smallMixSize, err := wanem.ParseBytes(*smallMixLargeSize)
	if err != nil {
		return err
	}
	dsList, err := listOf(*datasets, func(s string) (wan.DatasetSpec, error) {
		switch wan.DatasetKind(s) {
		case wan.Large:
			return wan.DatasetSpec{Kind: wan.Large, LargeBytes: large, Seed: 1}, nil
		case wan.Mixed:
			return wan.DatasetSpec{Kind: wan.Mixed, MixedTotalBytes: mTotal, MixedMinBytes: mMin, MixedMaxBytes: mMax, Seed: 1}, nil
		case wan.Small:
			return wan.DatasetSpec{Kind: wan.Small, SmallCount: *smallCount, SmallBytes: sSize, Seed: 1}, nil
		case wan.SmallMix:
			return wan.DatasetSpec{Kind: wan.SmallMix, SmallCount: *smallCount, SmallBytes: sSize, LargeCount: *smallMixLarge, LargeBytes: smallMixSize, Seed: 1}, nil
		}
		return wan.DatasetSpec{}, fmt.Errorf("%q: want large, mixed or small", s)
	})
	if err != nil {
		return fmt.Errorf("-dataset: %w", err)
	}
	ints := func(s string) (int, error) { return strconv.Atoi(s) }
	ps, err := listOf(*gridP, ints)
	if err != nil {
		return fmt.Errorf("-gridftp-p: %w", err)
	}
	ccs, err := listOf(*gridCC, ints)
	if err != nil {
		return fmt.Errorf("-gridftp-cc: %w", err)
	}
	bss, err := listOf(*gridBS, wanem.ParseBytes)
	if err != nil {
		return fmt.Errorf("-gridftp-bs: %w", err)
	}
	iStreams, err := listOf(*iperfStreams, ints)
	if err != nil {
		return fmt.Errorf("-iperf3-streams: %w", err)
	}
	dStreams, err := listOf(*dtnStreams, ints)
	if err != nil {
		return fmt.Errorf("-dtnflow-streams: %w", err)
	}
	dStripes, err := listOf(*dtnStripes, ints)
	if err != nil {
		return fmt.Errorf("-dtnflow-stripes: %w", err)
	}
	dBufs, err := listOf(*dtnBuffers, wanem.ParseBytes)
	if err != nil {
		return fmt.Errorf("-dtnflow-buffers: %w", err)
	}
	agentPath, _ := filepath.Abs(*agent)
	if strings.Contains(*tools, "dtnflow") {
		info, err := agentbuild.Describe(agentPath, agentbuild.RepoAbove())
		if err != nil {
			return fmt.Errorf("-agent: %w", err)
		}
		info.Report(os.Stderr, "dtnflow-agent")
	}

	var runners []wan.Runner
	for _, t := range strings.Split(*tools, ",") {
		switch strings.TrimSpace(t) {
		case "iperf3":
			runners = append(runners, wan.Iperf3{Streams: iStreams, Seconds: *iperfSeconds})
		case "gridftp-default":
			runners = append(runners, wan.GridFTP{Mode: wan.GridFTPDefault})
		case "gridftp-preset":
			runners = append(runners, wan.GridFTP{Mode: wan.GridFTPPreset})
		case "gridftp-grid":
			runners = append(runners, &gridPerDataset{ps: ps, ccs: ccs, bss: bss})
		case "dtnflow-grid":
			runners = append(runners, wan.Dtnflow{Mode: wan.DtnflowGrid, Agent: agentPath, Verify: *dtnVerify,
				Grid: wan.DefaultDtnflowGrid(dStreams, dStripes, dBufs)})
		case "dtnflow-auto", "dtnflow-auto+enc":
			runners = append(runners, wan.Dtnflow{Mode: wan.DtnflowAuto, Agent: agentPath, Verify: *dtnVerify,
				MaxStripes: maxOf(dStripes), MaxStreams: maxOf(dStreams), Encrypt: strings.HasSuffix(strings.TrimSpace(t), "+enc")})
		case "dtnflow-auto-static":
			// the same, with the size classes' channels kept as planned (no moves)
			runners = append(runners, wan.Dtnflow{Mode: wan.DtnflowAuto, Label: "dtnflow-auto-static", Extra: []string{"--class-moves=false"},
				Agent: agentPath, Verify: *dtnVerify, MaxStripes: maxOf(dStripes), MaxStreams: maxOf(dStreams)})
		case "":
		default:
			return fmt.Errorf("-tools: unknown tool %q", t)
		}
	}
	hostSysctls := map[string]string{}
	for _, kv := range sysctls {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return fmt.Errorf("-sysctl %q: want key=value", kv)
		}
		hostSysctls[k] = v
	}
	if *out == "" {
		*out = filepath.Join(".cache", "bench-wan", time.Now().UTC().Format("20060102T150405Z"))
	}

	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "bench-wan: results in %s\n", *out)
	_, err = wan.Run(ctx, wan.Options{
		Scenarios: wan.Matrix(rateList, rttList, lossList, queueList, dsList, crossList),
		Runners:   runners, WorkDir: *work, OutDir: *out, SampleSeconds: *sampleSeconds,
		MTU: *mtu, Realtime: *realtime, HostSysctls: hostSysctls, Log: os.Stderr, RunLimit: *runLimit,
	})
	if md, rerr := os.ReadFile(filepath.Join(*out, "results.md")); rerr == nil {
		fmt.Print(string(md))
	}
	return err
}

// gridPerDataset builds the GridFTP grid for the dataset of each scenario (a single
// file has no use for -cc and -pp).
type gridPerDataset struct {
	ps, ccs []int
	bss     []int64
}

func (g *gridPerDataset) Name() string { return string(wan.GridFTPGrid) }

func (g *gridPerDataset) Run(ctx context.Context, env *wan.Env) ([]wan.Result, error) {
	return wan.GridFTP{Mode: wan.GridFTPGrid, Grid: wan.DefaultGridFTPGrid(env.Dataset.Count(), g.ps, g.ccs, g.bss)}.Run(ctx, env)
}

func listOf[T any](s string, parse func(string) (T, error)) ([]T, error) {
	var out []T
	for _, f := range strings.Split(s, ",") {
		v, err := parse(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func maxOf(xs []int) int {
	m := 1
	for _, x := range xs {
		m = max(m, x)
	}
	return m
}
