package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dtnflow/dtnflow/test/bench/wan"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
	"github.com/dtnflow/dtnflow/test/topology"
	"github.com/dtnflow/dtnflow/test/wanem"
)

// scenario is one of bench-cluster's runs: bench-wan's scenario (path and dataset)
// and what else shares or disturbs the path.
type scenario struct {
	wan.Scenario
	// Flows is how many competing TCP flows (one iperf3 client with -P Flows, site A's
	// node to site B's) cross the bottleneck for the whole of every tool's run.
	Flows int
	// GilbertElliott adds bursty loss on the WAN.
	GilbertElliott *wanem.GilbertElliott
}

// Name labels the scenario in tables and files.
func (s scenario) Name() string {
	n := s.Scenario.Name()
	if s.GilbertElliott != nil {
		n += "-ge"
	}
	if s.Flows > 0 {
		n += fmt.Sprintf("-flows%d", s.Flows)
	}
	return n
}

// defaultGE is the suite's bursty loss: bursts of 10 packets on average (r 0.1) every
// 10 000 or so (p 1e-4), half of a burst's packets lost: a mean loss of 5·10⁻⁴, in
// bursts that a stream feels as one loss event where random loss spreads them out.
var defaultGE = wanem.GilbertElliott{P: 1e-4, R: 0.1, LossGood: 0, LossBad: 0.5}

// suite is issue 11 item 5's scenarios on one rate and RTT: every scenario of make
// bench-wan (one large file at loss 0, 1e-4 and 1e-3, at 1e-3 with a competing flow,
// the mixed dataset and the many small files at loss 0), then bursty loss and several
// competing flows.
func suite(rate int64, rtt time.Duration, large, mixed, small wan.DatasetSpec, flows int) []scenario {
	at := func(loss float64, ds wan.DatasetSpec) wan.Scenario {
		return wan.Scenario{RateBitsPerSecond: rate, RTT: rtt, Loss: loss, Dataset: ds}
	}
	cross := at(1e-3, large)
	cross.CrossTraffic = true
	ge := defaultGE
	return []scenario{
		{Scenario: at(0, large)},
		{Scenario: at(1e-4, large)},
		{Scenario: at(1e-3, large)},
		{Scenario: cross, Flows: 1},
		{Scenario: at(0, mixed)},
		{Scenario: at(0, small)},
		{Scenario: at(0, large), GilbertElliott: &ge},
		{Scenario: at(0, large), Flows: flows},
	}
}

// setWAN gives the cluster's WAN the scenario's rate, delay, loss, queue and bursty
// loss.
func setWAN(ctx context.Context, c *framework.Cluster, s scenario) error {
	if err := c.SetWAN(ctx, s.RateBitsPerSecond, s.RTT/2, s.Loss, s.QueueBytes); err != nil {
		return err
	}
	if c.WAN.Mode != "wanem" {
		if s.GilbertElliott != nil {
			return fmt.Errorf("the %s WAN has no bursty loss", c.WAN.Mode)
		}
		return nil
	}
	both := map[string]any{"noGilbertElliott": true}
	if s.GilbertElliott != nil {
		both = map[string]any{"gilbertElliott": s.GilbertElliott}
	}
	if _, err := wanem.NewControlClient(c.WAN.Control).Update(ctx, map[string]any{"both": both}); err != nil {
		return fmt.Errorf("setting the WAN's bursty loss: %w", err)
	}
	return nil
}

// hosts are site A's and site B's first nodes as bench-wan's hosts.
func hosts(c *framework.Cluster) (src, dst topology.Host) {
	a, b := c.Source().Nodes[0], c.Destination().Nodes[0]
	src = topology.Host{Name: a.Name, Netns: a.Netns}
	dst = topology.Host{Name: b.Name, Netns: b.Netns}
	src.Addr, _ = netip.ParseAddr(a.IP)
	dst.Addr, _ = netip.ParseAddr(b.IP)
	return src, dst
}

// flowPort is where the competing flows' iperf3 server listens in site B's node.
const flowPort = 5302

// competingFlows starts the scenario's competing TCP flows and returns what stops
// them: an iperf3 server in site B's node and a client with -P Flows in site A's,
// through the same WAN as the job.
func competingFlows(ctx context.Context, c *framework.Cluster, s scenario) (stop func(), err error) {
	if s.Flows <= 0 {
		return func() {}, nil
	}
	src, dst := hosts(c)
	srv := dst.Command(ctx, "iperf3", "-s", "-B", dst.Addr.String(), "-p", strconv.Itoa(flowPort))
	srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := srv.Start(); err != nil {
		return nil, err
	}
	kill := func(p *os.Process) { _ = syscall.Kill(-p.Pid, syscall.SIGKILL) }
	if err := waitListening(ctx, dst, flowPort); err != nil {
		kill(srv.Process)
		_ = srv.Wait()
		return nil, err
	}
	cli := src.Command(ctx, "iperf3", "-c", dst.Addr.String(), "-p", strconv.Itoa(flowPort), "-t", "86400", "-P", strconv.Itoa(s.Flows))
	cli.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cli.Start(); err != nil {
		kill(srv.Process)
		_ = srv.Wait()
		return nil, err
	}
	return func() {
		kill(cli.Process)
		_ = cli.Wait()
		kill(srv.Process)
		_ = srv.Wait()
	}, nil
}

// toolOptions are the other tools' settings.
type toolOptions struct {
	agent                  string
	maxStripes, maxStreams int
	gridStreams            []int
	gridStripes            []int
	sampleSeconds          float64
	runLimit               time.Duration
	logDir                 string
}

// runWANTool runs one of bench-wan's tools (gridftp-default, gridftp-preset,
// dtnflow-grid) between site A's node and site B's over the cluster's WAN, on the
// scenario's dataset written under site A's storage, and returns its row.
func runWANTool(ctx context.Context, c *framework.Cluster, i int, s scenario, tool string, o toolOptions) Result {
	r := Result{Scenario: s.Name(), Tool: tool, Rate: s.RateBitsPerSecond, RTT: s.RTT.String(), Loss: s.Loss, Dataset: string(s.Dataset.Kind), Cold: true}
	fail := func(err error) Result { r.Error = err.Error(); return r }
	if err := setWAN(ctx, c, s); err != nil {
		return fail(err)
	}
	var runner wan.Runner
	switch tool {
	case "gridftp-default":
		runner = wan.GridFTP{Mode: wan.GridFTPDefault}
	case "gridftp-preset":
		runner = wan.GridFTP{Mode: wan.GridFTPPreset}
	case "dtnflow-grid":
		runner = wan.Dtnflow{Mode: wan.DtnflowGrid, Agent: o.agent, Grid: wan.DefaultDtnflowGrid(o.gridStreams, o.gridStripes, []int64{0})}
	default:
		return fail(fmt.Errorf("unknown tool %q", tool))
	}
	// Everything under site A's storage (tmpfs): the dataset, the sample and the
	// destinations the tools write. The anonymous GridFTP server reads as nobody.
	work := filepath.Join(c.Source().Storage, fmt.Sprintf("bench-tools/%02d", i))
	_ = os.RemoveAll(work)
	defer os.RemoveAll(work)
	if err := os.MkdirAll(work, 0o755); err != nil {
		return fail(err)
	}
	for d := work; d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			_ = os.Chmod(d, fi.Mode().Perm()|0o005)
		}
	}
	ds, err := wan.Generate(s.Dataset, filepath.Join(work, "data", "full"))
	if err != nil {
		return fail(err)
	}
	r.Files, r.Bytes = ds.Count(), ds.Total
	sample, err := wan.Generate(s.Dataset.Sample(int64(float64(s.RateBitsPerSecond)/8*o.sampleSeconds)), filepath.Join(work, "data", "sample"))
	if err != nil {
		return fail(err)
	}
	stop, err := competingFlows(ctx, c, s)
	if err != nil {
		return fail(err)
	}
	defer stop()
	src, dst := hosts(c)
	env := &wan.Env{Scenario: s.Scenario, Src: src, Dst: dst, Dataset: ds, SampleDataset: sample, WorkDir: work,
		LogDir: o.logDir, RunLimit: o.runLimit, Log: os.Stderr}
	rs, err := runner.Run(ctx, env)
	for _, res := range rs {
		if !res.Chosen {
			continue
		}
		r.Seconds, r.BitsPerSecond = res.TotalSeconds, int64(res.BitsPerSecond)
		r.ShareOfLink = res.BitsPerSecond / float64(s.RateBitsPerSecond)
		r.AgentConfig, r.Note, r.ProbeSeconds, r.CPUSecondsPerGB = res.Config, res.Note, res.ProbeSeconds, res.CPUSecondsPerGB
		r.State = "Complete"
		if res.Partial {
			r.State = "Partial"
		}
	}
	if err != nil {
		return fail(err)
	}
	return r
}

// parseInts reads a comma-separated list of positive integers.
func parseInts(flagName, v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-%s %q: want positive integers", flagName, v)
		}
		out = append(out, n)
	}
	return out, nil
}
