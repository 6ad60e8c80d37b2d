package main

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
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
	// Schedule changes the bottleneck's rate during each run (from its first byte).
	Schedule []rateStep
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
	if len(s.Schedule) > 0 {
		n += "-schedule"
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
func suite(rate int64, rtt time.Duration, large, mixed, small, scheduled wan.DatasetSpec, flows int) []scenario {
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
		{Scenario: at(0, scheduled), Schedule: defaultSchedule(rate)},
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

// hosts are site A's and site B's first nodes as bench-wan's hosts, their names in a
// hosts file the tools see as /etc/hosts (globus-gridftp-server looks its own address
// up, and the nodes' namespaces reach no DNS server: without it the server would not
// start, "Temporary failure in name resolution").
func hosts(c *framework.Cluster) (src, dst topology.Host) {
	a, b := c.Source().Nodes[0], c.Destination().Nodes[0]
	src = topology.Host{Name: a.Name, Netns: a.Netns}
	dst = topology.Host{Name: b.Name, Netns: b.Netns}
	src.Addr, _ = netip.ParseAddr(a.IP)
	dst.Addr, _ = netip.ParseAddr(b.IP)
	path := filepath.Join(os.TempDir(), fmt.Sprintf("dtnflow-bench-cluster-%d.hosts", os.Getpid()))
	if err := os.WriteFile(path, []byte(hostsFile(readHosts(), src, dst)), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "bench-cluster: hosts file:", err)
		return src, dst
	}
	src.HostsFile, dst.HostsFile = path, path
	return src, dst
}

func readHosts() string {
	b, err := os.ReadFile("/etc/hosts")
	if err != nil {
		return "127.0.0.1 localhost\n"
	}
	return string(b)
}

// hostsFile is the machine's hosts file followed by the hosts' names.
func hostsFile(base string, hs ...topology.Host) string {
	if base != "" && !strings.HasSuffix(base, "\n") {
		base += "\n"
	}
	base += "# dtnflow bench-cluster: the sites' nodes\n"
	for _, h := range hs {
		if h.Addr.IsValid() {
			base += fmt.Sprintf("%s %s\n", h.Addr, h.Name)
		}
	}
	return base
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
	fixed                  wan.DtnflowConfig
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
	case "dtnflow-fixed":
		runner = wan.Dtnflow{Mode: wan.DtnflowFixed, Agent: o.agent, Grid: []wan.DtnflowConfig{o.fixed}}
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
	// what the tool wrote: everything under work beside the datasets
	tr := followRun(ctx, c, s, func() int64 { return max(treeBytes(work)-ds.Total-sample.Total, 0) })
	rs, err := runner.Run(ctx, env)
	r.Phases = tr.stop(s)
	r.DeliveredMbitPerSecond = tr.perSecond()
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

// rateStep changes the WAN's bottleneck rate At after the run's first byte reached the
// destination.
type rateStep struct {
	At   time.Duration `json:"at"`
	Rate int64         `json:"rateBitsPerSecond"`
}

// defaultSchedule is issue 11's: 1 Gbit/s, then 400 Mbit/s for 40 s, then 1 Gbit/s
// again (the first change 10 s after the first byte, so that a tool that probes has
// begun).
func defaultSchedule(rate int64) []rateStep {
	return []rateStep{{At: 10 * time.Second, Rate: rate * 2 / 5}, {At: 50 * time.Second, Rate: rate}}
}

// phaseRate is a tool's rate in the window of one phase of a schedule: from 10 s after
// the change (what the issue allows a tool to adapt) to 10 s later, or the next change
// or the run's end if sooner; the first phase from 5 s after the first byte to the
// first change.
type phaseRate struct {
	FromSeconds       float64 `json:"fromSeconds"`
	ToSeconds         float64 `json:"toSeconds"`
	LinkBitsPerSecond int64   `json:"linkBitsPerSecond"`
	BitsPerSecond     int64   `json:"bitsPerSecond"`
}

// trace follows a run's bytes at its destination (every 250 ms under a schedule,
// every 500 ms otherwise) and applies the scenario's schedule from its first byte;
// stop restores the scenario's rate.
type trace struct {
	mu sync.Mutex
	// begun is when the trace started, just before the run: the per-second series
	// counts from it, so the time to the first byte shows as its leading zeros.
	begun   time.Time
	t0      time.Time
	times   []time.Time
	bytes   []int64
	stopped chan struct{}
	done    chan struct{}
}

func followRun(ctx context.Context, c *framework.Cluster, s scenario, destBytes func() int64) *trace {
	tr := &trace{begun: time.Now(), stopped: make(chan struct{}), done: make(chan struct{})}
	interval := 500 * time.Millisecond
	if len(s.Schedule) > 0 {
		interval = 250 * time.Millisecond
	}
	go func() {
		defer close(tr.done)
		defer func() {
			if len(s.Schedule) > 0 {
				_ = c.SetWANRate(context.Background(), s.RateBitsPerSecond)
			}
		}()
		tick := time.NewTicker(interval)
		defer tick.Stop()
		next := 0
		base := destBytes() // what was there before the run (a key file, a journal)
		for {
			now := time.Now()
			b := destBytes() - base
			tr.mu.Lock()
			if tr.t0.IsZero() && b > 0 {
				tr.t0 = now
			}
			if !tr.t0.IsZero() {
				tr.times, tr.bytes = append(tr.times, now), append(tr.bytes, b)
				for next < len(s.Schedule) && now.Sub(tr.t0) >= s.Schedule[next].At {
					if err := c.SetWANRate(ctx, s.Schedule[next].Rate); err != nil {
						fmt.Fprintln(os.Stderr, "bench-cluster: schedule:", err)
					}
					next++
				}
			}
			tr.mu.Unlock()
			select {
			case <-tick.C:
			case <-tr.stopped:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return tr
}

// stop ends the trace and returns the rate of each phase.
func (tr *trace) stop(s scenario) []phaseRate {
	select {
	case <-tr.stopped:
	default:
		close(tr.stopped)
	}
	<-tr.done
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(s.Schedule) == 0 || len(tr.times) < 2 {
		return nil
	}
	end := tr.times[tr.last()].Sub(tr.t0)
	var out []phaseRate
	window := func(from, to time.Duration, link int64) {
		to = min(to, end)
		if to-from < time.Second {
			return
		}
		b0, b1 := tr.at(from), tr.at(to)
		out = append(out, phaseRate{FromSeconds: from.Seconds(), ToSeconds: to.Seconds(), LinkBitsPerSecond: link,
			BitsPerSecond: int64(float64(b1-b0) * 8 / (to - from).Seconds())})
	}
	window(5*time.Second, s.Schedule[0].At, s.RateBitsPerSecond)
	for i, st := range s.Schedule {
		to := st.At + 20*time.Second
		if i+1 < len(s.Schedule) {
			to = min(to, s.Schedule[i+1].At)
		}
		window(st.At+10*time.Second, to, st.Rate)
	}
	return out
}

// last is the index of the run's end, its first sample at the most bytes it delivered:
// after it the run moves nothing, and a tool that clears its destination once done
// (bench-wan's runs do, before the trace stops) would read as a negative rate.
func (tr *trace) last() int {
	last := 0
	for i, b := range tr.bytes {
		if b > tr.bytes[last] {
			last = i
		}
	}
	return last
}

// perSecond is the run's delivery in Mbit/s over each whole second from the trace's
// start to the run's end (the last second may be part of one): where a run's time went,
// side by side with another tool's — the first byte's wait, a probe's slower stretches,
// a plan's change, the tail. Call it after stop.
func (tr *trace) perSecond() []int64 {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if len(tr.times) < 2 {
		return nil
	}
	end := tr.times[tr.last()].Sub(tr.begun)
	fromFirst := tr.t0.Sub(tr.begun)
	bytesAt := func(d time.Duration) int64 { // before the first byte nothing had arrived
		if d <= fromFirst {
			return 0
		}
		return tr.at(d - fromFirst)
	}
	var out []int64
	for from := time.Duration(0); from < end; from += time.Second {
		to := min(from+time.Second, end)
		out = append(out, int64(float64(bytesAt(to)-bytesAt(from))*8/(to-from).Seconds()/1e6))
	}
	return out
}

// at is the bytes at the destination d after the first byte (linear between samples).
func (tr *trace) at(d time.Duration) int64 {
	t := tr.t0.Add(d)
	for i := 1; i < len(tr.times); i++ {
		if !tr.times[i].Before(t) {
			a, b := tr.times[i-1], tr.times[i]
			f := float64(t.Sub(a)) / float64(max(b.Sub(a), 1))
			return tr.bytes[i-1] + int64(f*float64(tr.bytes[i]-tr.bytes[i-1]))
		}
	}
	return tr.bytes[len(tr.bytes)-1]
}

// treeBytes is the bytes of the regular files under dir (0 when it does not exist).
func treeBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += writtenBytes(fi)
			}
		}
		return nil
	})
	return n
}

// writtenBytes is what a file holds: its allocated blocks, up to its size. A file
// written by stripes at the offsets of its chunks grows to the furthest chunk at once
// and fills its holes later, so its size is not what arrived: the schedule's phases of
// one 5 GiB file read 3310 Mbit/s on a 1 Gbit/s link, then 28 and 43 Mbit/s at
// 400 Mbit/s, while the job moved on at the link's rate. The receivers preallocate
// nothing, so the blocks follow the bytes written.
func writtenBytes(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return min(fi.Size(), st.Blocks*512)
	}
	return fi.Size()
}

// phasesSummary is the phases' rates for the table: "1000→931, 400→388, 1000→902
// Mbit/s (link→tool)".
func phasesSummary(ps []phaseRate) string {
	var parts []string
	for _, p := range ps {
		parts = append(parts, fmt.Sprintf("%d→%d", p.LinkBitsPerSecond/1e6, p.BitsPerSecond/1e6))
	}
	if len(parts) == 0 {
		return ""
	}
	return strings.Join(parts, ", ") + " Mbit/s (link→rate, 10–20 s after each change)"
}
