package main

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/bench/wan"
	"github.com/dtnflow/dtnflow/test/topology"
)

// FairnessResult is one job of a fairness mode against long-lived iperf3 flows on the
// WAN (issue 13 item 4): the flows alone set the bottleneck's TCP capacity, a fair
// share is that ÷ (flows + 1), and each flow's rate while the job ran is compared with
// it.
type FairnessResult struct {
	Mode  string `json:"mode"`
	Flows int    `json:"flows"`
	// FlowsAloneBitsPerSecond is the flows' aggregate before the job was created.
	FlowsAloneBitsPerSecond int64 `json:"flowsAloneBitsPerSecond"`
	FairShareBitsPerSecond  int64 `json:"fairShareBitsPerSecond"`
	// WindowSeconds is the window the rates are read over: from 5 s after the job's
	// first byte (its first samples) to its end, on the run's clock.
	WindowStartSeconds float64 `json:"windowStartSeconds"`
	WindowEndSeconds   float64 `json:"windowEndSeconds"`
	// JobBitsPerSecond is the job's bytes over its time from first byte to Complete.
	JobBitsPerSecond int64   `json:"jobBitsPerSecond"`
	JobOfFairShare   float64 `json:"jobOfFairShare"`
	// FlowsOfFairShare is each flow's rate in the window ÷ the fair share.
	FlowsOfFairShare []float64 `json:"flowsOfFairShare"`
	Plan             string    `json:"plan"`
	State            string    `json:"state"`
}

// flowBasePort is where the first competing flow's iperf3 server listens in site B's
// node (one server per flow: an iperf3 server runs one test at a time).
const flowBasePort = 5310

// flowsWarm is how long the flows run alone before the job: their aggregate over the
// last part of it is the bottleneck's capacity for TCP.
const flowsWarm = 12 * time.Second

// iperfFlow is one long-lived iperf3 client and its server.
type iperfFlow struct {
	srv, cli *os.Process
	out      *lockedBuffer
	started  time.Time
}

// lockedBuffer collects a process's output while it runs.
type lockedBuffer struct {
	mu sync.Mutex
	sb strings.Builder
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sb.String()
}

// nodeHosts are site A's and site B's first nodes as topology hosts.
func nodeHosts(b *bench) (src, dst topology.Host) {
	a, z := b.c.Source().Nodes[0], b.c.Destination().Nodes[0]
	src = topology.Host{Name: a.Name, Netns: a.Netns}
	dst = topology.Host{Name: z.Name, Netns: z.Netns}
	src.Addr, _ = netip.ParseAddr(a.IP)
	dst.Addr, _ = netip.ParseAddr(z.IP)
	return src, dst
}

// startFlows starts n iperf3 flows from site A's node to site B's across the WAN, each
// reporting every 0.5 s; stop ends them all.
func startFlows(ctx context.Context, b *bench, n int) (flows []*iperfFlow, stop func(), err error) {
	src, dst := nodeHosts(b)
	kill := func(p *os.Process) {
		if p != nil {
			_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
			_, _ = p.Wait()
		}
	}
	stop = func() {
		for _, f := range flows {
			kill(f.cli)
			kill(f.srv)
		}
	}
	for i := range n {
		port := flowBasePort + i
		srv := dst.Command(ctx, "iperf3", "-s", "-B", dst.Addr.String(), "-p", strconv.Itoa(port))
		srv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		srv.Stdout, srv.Stderr = io.Discard, io.Discard
		if err := srv.Start(); err != nil {
			stop()
			return nil, nil, err
		}
		f := &iperfFlow{srv: srv.Process, out: &lockedBuffer{}}
		flows = append(flows, f)
		if err := wan.WaitListening(ctx, dst, port); err != nil {
			stop()
			return nil, nil, err
		}
	}
	for i, f := range flows {
		cli := src.Command(ctx, "iperf3", "-c", dst.Addr.String(), "-p", strconv.Itoa(flowBasePort+i), "-t", "86400", "-i", "0.5", "--forceflush", "-P", "1")
		cli.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cli.Stdout, cli.Stderr = f.out, f.out
		if err := cli.Start(); err != nil {
			stop()
			return nil, nil, err
		}
		f.cli, f.started = cli.Process, time.Now()
	}
	return flows, stop, nil
}

// fairness runs one job in mode against n long-lived iperf3 flows on the WAN: the
// flows alone for flowsWarm, then the job (cold path: it probes on its own, as the
// agents' case does) until Complete; each flow's rate from 5 s after the job's first
// byte to its end is compared with a fair share of what the flows carried alone.
func (b *bench) fairness(ctx context.Context, mode dtnflowv1alpha1.FairnessMode, n int) (FairnessResult, error) {
	res := FairnessResult{Mode: string(mode), Flows: n}
	if err := b.forgetPath(ctx); err != nil {
		return res, err
	}
	j, err := b.job("fair-"+strings.ToLower(string(mode)), "", b.fileBytes)
	if err != nil {
		return res, err
	}
	j.Spec.Tuning.Fairness = mode
	start := time.Now()
	flows, stop, err := startFlows(ctx, b, n)
	if err != nil {
		return res, err
	}
	defer stop()
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(flowsWarm):
	}
	created := time.Now()
	if err := b.create(ctx, j); err != nil {
		return res, err
	}
	var got *dtnflowv1alpha1.TransferJob
	deadline := time.Now().Add(b.timeout)
	for {
		var s sample
		got, s, err = b.read(ctx, j)
		if err != nil {
			return res, err
		}
		if done(s.state) {
			break
		}
		if time.Now().After(deadline) {
			return res, fmt.Errorf("job %s is not complete after %s", j.Name, b.timeout)
		}
		time.Sleep(500 * time.Millisecond)
	}
	ended := time.Now()
	stop()
	res.State = string(got.Status.State)
	if p := got.Status.Plan; p != nil {
		res.Plan = fmt.Sprintf("%d × %d × %d", len(p.SourceNodes), p.StripesPerNode, p.StreamsPerStripe)
	}
	if got.Status.State != dtnflowv1alpha1.StateComplete {
		return res, fmt.Errorf("job %s ended %s", j.Name, got.Status.State)
	}
	t := got.Status.Timings
	if t == nil || t.FirstByteMilliseconds == nil {
		return res, fmt.Errorf("job %s: no first byte in status.timings", j.Name)
	}
	firstByte := got.CreationTimestamp.Add(time.Duration(*t.FirstByteMilliseconds) * time.Millisecond)
	if firstByte.Before(created.Truncate(time.Second)) {
		firstByte = created
	}
	res.JobBitsPerSecond = int64(float64(b.fileBytes) * 8 / ended.Sub(firstByte).Seconds())
	since := func(at time.Time) float64 { return at.Sub(start).Seconds() }
	var alone float64
	timelines := make([][][2]float64, len(flows))
	for i, f := range flows {
		tl := wan.IperfTimeline(f.out.String())
		for k := range tl {
			tl[k][0] += since(f.started)
		}
		timelines[i] = tl
		alone += wan.RateOver(tl, since(f.started)+3, since(created))
	}
	res.FlowsAloneBitsPerSecond = int64(alone)
	fair := alone / float64(n+1)
	res.FairShareBitsPerSecond = int64(fair)
	res.WindowStartSeconds, res.WindowEndSeconds = since(firstByte)+5, since(ended)
	if fair > 0 {
		res.JobOfFairShare = float64(res.JobBitsPerSecond) / fair
		for _, tl := range timelines {
			res.FlowsOfFairShare = append(res.FlowsOfFairShare, wan.RateOver(tl, res.WindowStartSeconds, res.WindowEndSeconds)/fair)
		}
	}
	return res, b.sameFiles(j)
}

// forgetPath deletes the path's PathProfile, so that the next job probes it cold.
func (b *bench) forgetPath(ctx context.Context) error {
	profile := &dtnflowv1alpha1.PathProfile{}
	profile.Name = b.c.Source().Name + "." + b.c.Destination().Name
	return client.IgnoreNotFound(b.c.Client.Delete(ctx, profile))
}

func reportFairness(w io.Writer, r FairnessResult) {
	fmt.Fprintf(w, "fairness %s against %d iperf3 flows: flows alone %.0f Mbit/s, fair share %.0f Mbit/s; window %.1f–%.1f s\n",
		r.Mode, r.Flows, float64(r.FlowsAloneBitsPerSecond)/1e6, float64(r.FairShareBitsPerSecond)/1e6, r.WindowStartSeconds, r.WindowEndSeconds)
	flows := make([]string, len(r.FlowsOfFairShare))
	for i, f := range r.FlowsOfFairShare {
		flows[i] = fmt.Sprintf("%.2f", f)
	}
	fmt.Fprintf(w, "job %.0f Mbit/s (%.2f of a fair share, plan %s, %s); each flow's rate ÷ fair share: %s\n",
		float64(r.JobBitsPerSecond)/1e6, r.JobOfFairShare, r.Plan, r.State, strings.Join(flows, ", "))
}
