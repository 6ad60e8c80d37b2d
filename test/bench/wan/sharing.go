package wan

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dtnflow/dtnflow/test/topology"
	"github.com/dtnflow/dtnflow/test/wanem"
)

// SharingOptions configure the sharing benchmark through the agents alone (make
// bench-sharing-wan): jobs of `dtnflow-agent send --auto --share-dir` that share one
// emulated path, side by side with simultaneous globus-url-copy runs on it, and one
// job against long-lived iperf3 flows on the same bottleneck.
type SharingOptions struct {
	Link wanem.Config
	// Size is each job's dataset: one file of this many bytes, the same file for every
	// job (tmpfs holds one source and the jobs' destinations).
	Size int64
	// Jobs run together in the equal, weighted and GridFTP cases; Weights are the
	// weighted case's priorities, one per job.
	Jobs    int
	Weights []int
	// LateAfter is when the late case's extra job starts after the others.
	LateAfter time.Duration
	// Flows is the number of long-lived iperf3 TCP flows in the fairness cases.
	Flows int
	// Cases to run, in this order (SharingCases): alone, alone-warm, equal, gridftp,
	// weighted, late, fairness-strict, fairness-default, strict-alone.
	Cases []string
	Agent string
	// MaxStripes and MaxStreams bound each job's --auto.
	MaxStripes, MaxStreams int
	// Verify keeps dtnflow's end-to-end digest (globus-url-copy checks nothing).
	Verify bool
	// WorkDir (tmpfs) holds the dataset, the destinations and the share directory; it
	// is removed at the end. OutDir receives the agents' and tools' logs.
	WorkDir, OutDir string
	MTU             int
	Realtime        bool
	HostSysctls     map[string]string
	StateDir        string
	Log             io.Writer
	// JSON receives one line per case.
	JSON io.Writer
}

// SharingCases are every case, in the order they run.
var SharingCases = []string{"alone", "alone-warm", "equal", "gridftp", "weighted", "late", "fairness-strict", "fairness-default", "strict-alone"}

// JobRun is one job (or tool run, or competing flow) of a case: its bytes at the
// destination over time.
type JobRun struct {
	Name   string `json:"name"`
	Tool   string `json:"tool"`
	Weight int    `json:"weight,omitempty"`
	// StartSeconds, FirstByteSeconds and EndSeconds are from the case's start.
	StartSeconds     float64 `json:"startSeconds"`
	FirstByteSeconds float64 `json:"firstByteSeconds"`
	EndSeconds       float64 `json:"endSeconds"`
	Bytes            int64   `json:"bytes"`
	// BitsPerSecond is the job's rate over the case's window (see SharingResult).
	BitsPerSecond float64 `json:"bitsPerSecond"`
	// WholeBitsPerSecond is its bytes over its own time from start to end;
	// SteadyBitsPerSecond its rate over the second half of its bytes (past its probe
	// and ramp).
	WholeBitsPerSecond  float64 `json:"wholeBitsPerSecond"`
	SteadyBitsPerSecond float64 `json:"steadyBitsPerSecond"`
	// Plan is the agent's last plan (stripes × streams) and Replans its share
	// re-plans ("PathJobArrived@12.3s"), from its log.
	Plan    string   `json:"plan,omitempty"`
	Replans []string `json:"replans,omitempty"`
	// OfShare is BitsPerSecond over the job's weighted part of the aggregate
	// (aggregate × weight ÷ Σ weights).
	OfShare float64 `json:"ofShare,omitempty"`
	// Timeline is [seconds from the case's start, bytes] every poll.
	Timeline [][2]float64 `json:"timeline"`
	Note     string       `json:"note,omitempty"`
}

// SharingResult is one case.
type SharingResult struct {
	Case   string `json:"case"`
	Path   string `json:"path"`
	Commit string `json:"commit,omitempty"`
	// WindowStart and WindowEnd bound the window in which every job transferred
	// (from the last first byte to the first end), in seconds from the case's start.
	WindowStart float64  `json:"windowStart"`
	WindowEnd   float64  `json:"windowEnd"`
	Jobs        []JobRun `json:"jobs"`
	// AggregateBitsPerSecond is the jobs' rates in the window together; Jain is
	// Jain's index of rate ÷ weight.
	AggregateBitsPerSecond float64 `json:"aggregateBitsPerSecond"`
	Jain                   float64 `json:"jain"`
	// WeightRatio is the mean rate of the heaviest jobs over that of the lightest
	// (0 when all weigh the same).
	WeightRatio float64 `json:"weightRatio,omitempty"`
	// ReferenceBitsPerSecond is one job's optimum: the alone-warm case's rate (one job
	// planned from the path's profile, from its first byte to its end) when it ran,
	// else the alone case's steady rate (the second half of its bytes, its probe
	// behind it); AggregateOfReference is the aggregate over it.
	ReferenceBitsPerSecond float64 `json:"referenceBitsPerSecond,omitempty"`
	AggregateOfReference   float64 `json:"aggregateOfReference,omitempty"`
	// Late: seconds from the late job's start to its rate (2 s windows) reaching 90 %
	// of its share, the share, and the lowest 2 s rate of the others meanwhile as a
	// fraction of their share.
	LateSecondsTo90     float64 `json:"lateSecondsTo90,omitempty"`
	LateShare           float64 `json:"lateShareBitsPerSecond,omitempty"`
	OthersMinOfShare    float64 `json:"othersMinOfShare,omitempty"`
	OthersMinOfShareJob string  `json:"othersMinOfShareJob,omitempty"`
	// Fairness: the competing flows' aggregate alone before the job, their fair share
	// with the job as one more flow, and each flow's rate while the job ran as a
	// fraction of it (and the job's).
	FlowsAloneBitsPerSecond float64   `json:"flowsAloneBitsPerSecond,omitempty"`
	FairShareBitsPerSecond  float64   `json:"fairShareBitsPerSecond,omitempty"`
	FlowsOfFairShare        []float64 `json:"flowsOfFairShare,omitempty"`
	JobOfFairShare          float64   `json:"jobOfFairShare,omitempty"`
	Started                 time.Time `json:"started"`
}

// sharingEnv is what the cases run on.
type sharingEnv struct {
	opts  SharingOptions
	topo  *topology.Topology
	data  string // root sent from: data/full/<file>
	file  string
	key   string
	share string
	ref   float64 // the job alone's rate
	port  int
}

// RunSharing builds the topology, writes the dataset and runs the cases.
func RunSharing(ctx context.Context, opts SharingOptions) ([]SharingResult, error) {
	if opts.Log == nil {
		opts.Log = io.Discard
	}
	if err := os.MkdirAll(opts.WorkDir, 0o755); err != nil {
		return nil, err
	}
	defer os.RemoveAll(opts.WorkDir)
	for d := opts.WorkDir; d != "/" && d != "."; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o005 != 0o005 {
			_ = os.Chmod(d, fi.Mode().Perm()|0o005)
		}
	}
	lifetime := 3 * time.Hour
	if dl, ok := ctx.Deadline(); ok {
		lifetime = time.Until(dl) + 5*time.Minute
	}
	topo, err := topology.Up(ctx, topology.Spec{Sources: 2, Destinations: 2, Link: opts.Link, MTU: opts.MTU,
		LinkOptions: wanem.Options{Realtime: opts.Realtime}, HostSysctls: opts.HostSysctls, StateDir: opts.StateDir, Lifetime: lifetime})
	if err != nil {
		return nil, fmt.Errorf("topology: %w", err)
	}
	defer topo.Down()
	ds, err := Generate(DatasetSpec{Kind: Large, LargeBytes: opts.Size, Seed: 1}, filepath.Join(opts.WorkDir, "data", "full"))
	if err != nil {
		return nil, err
	}
	env := &sharingEnv{opts: opts, topo: topo, data: filepath.Join(opts.WorkDir, "data"), file: ds.Files[0],
		key: filepath.Join(opts.WorkDir, "dtnflow.key"), share: filepath.Join(opts.WorkDir, "share"), port: 7400}
	if err := os.WriteFile(env.key, []byte("bench-sharing-shared-secret-0123456789\n"), 0o600); err != nil {
		return nil, err
	}
	fmt.Fprintf(opts.Log, "Topology %s; dataset one file of %s per job\n", topo.ID, humanBytes(opts.Size))
	var all []SharingResult
	for _, c := range opts.Cases {
		fmt.Fprintf(opts.Log, "Case %s\n", c)
		res, err := env.runCase(ctx, c)
		if err != nil {
			return all, fmt.Errorf("case %s: %w", c, err)
		}
		res.Path = fmt.Sprintf("%s %s loss %g", wanem.FormatRate(float64(opts.Link.AtoB.RateBitsPerSecond)), 2*opts.Link.AtoB.Delay, opts.Link.AtoB.Loss)
		switch c {
		case "alone":
			env.ref = res.Jobs[0].SteadyBitsPerSecond
		case "alone-warm":
			// planned from the path's profile, no probe: its whole transfer is its plan's
			env.ref = res.AggregateBitsPerSecond
		}
		if env.ref > 0 && !strings.HasPrefix(c, "alone") && !strings.Contains(c, "strict") && c != "fairness-default" {
			res.ReferenceBitsPerSecond = env.ref
			res.AggregateOfReference = res.AggregateBitsPerSecond / env.ref
		}
		fmt.Fprint(opts.Log, res.Summary())
		if opts.JSON != nil {
			b, _ := json.Marshal(res)
			fmt.Fprintln(opts.JSON, string(b))
		}
		all = append(all, res)
	}
	return all, nil
}

// Summary is the case in a few lines.
func (r SharingResult) Summary() string {
	var b strings.Builder
	for _, j := range r.Jobs {
		fmt.Fprintf(&b, "  %-16s %-8s w%-2d start %5.1fs end %6.1fs window %7.1f Mbit/s whole %7.1f steady %7.1f Mbit/s  %s %s %s\n", j.Name, j.Tool, j.Weight,
			j.StartSeconds, j.EndSeconds, j.BitsPerSecond/1e6, j.WholeBitsPerSecond/1e6, j.SteadyBitsPerSecond/1e6, j.Plan, strings.Join(j.Replans, " "), j.Note)
	}
	fmt.Fprintf(&b, "  window %.1f–%.1f s: aggregate %.1f Mbit/s", r.WindowStart, r.WindowEnd, r.AggregateBitsPerSecond/1e6)
	if r.AggregateOfReference > 0 {
		fmt.Fprintf(&b, " = %.3f× one job's optimum (the job alone's steady %.1f Mbit/s)", r.AggregateOfReference, r.ReferenceBitsPerSecond/1e6)
	}
	fmt.Fprintf(&b, "; Jain %.4f", r.Jain)
	if r.WeightRatio > 0 {
		fmt.Fprintf(&b, "; heaviest ÷ lightest %.3f", r.WeightRatio)
	}
	b.WriteString("\n")
	if r.LateShare > 0 {
		fmt.Fprintf(&b, "  late job: 90 %% of its share (%.1f Mbit/s) after %.1f s; others' lowest 2 s rate meanwhile %.2f of their share (%s)\n",
			r.LateShare/1e6, r.LateSecondsTo90, r.OthersMinOfShare, r.OthersMinOfShareJob)
	}
	if r.FairShareBitsPerSecond > 0 {
		fmt.Fprintf(&b, "  flows alone %.1f Mbit/s; fair share %.1f Mbit/s; flows %v of it; the job %.2f of it\n",
			r.FlowsAloneBitsPerSecond/1e6, r.FairShareBitsPerSecond/1e6, roundAll(r.FlowsOfFairShare), r.JobOfFairShare)
	}
	return b.String()
}

func roundAll(v []float64) []float64 {
	out := make([]float64, len(v))
	for i, x := range v {
		out[i] = math.Round(x*1000) / 1000
	}
	return out
}

// runCase runs one case and measures it.
func (e *sharingEnv) runCase(ctx context.Context, c string) (SharingResult, error) {
	n := e.opts.Jobs
	res := SharingResult{Case: c, Started: time.Now()}
	var specs []jobSpec
	switch c {
	case "alone", "alone-warm":
		// alone probes the cold path; alone-warm plans from what it learned: one job's
		// optimum, the reference of the shared cases
		specs = []jobSpec{{name: c, tool: "dtnflow", weight: 1}}
	case "strict-alone":
		// what Strict costs with nobody to be fair to
		specs = []jobSpec{{name: "strict-alone", tool: "dtnflow", weight: 1, fairness: "Strict", noShare: true}}
	case "equal", "late":
		for i := range n {
			specs = append(specs, jobSpec{name: fmt.Sprintf("%s-%d", c, i), tool: "dtnflow", weight: 1})
		}
		if c == "late" {
			specs = append(specs, jobSpec{name: "late", tool: "dtnflow", weight: 1, after: e.opts.LateAfter})
		}
	case "weighted":
		for i := range n {
			w := 1
			if i < len(e.opts.Weights) {
				w = e.opts.Weights[i]
			}
			specs = append(specs, jobSpec{name: fmt.Sprintf("weighted-%d", i), tool: "dtnflow", weight: w})
		}
	case "gridftp":
		for i := range n {
			specs = append(specs, jobSpec{name: fmt.Sprintf("gridftp-%d", i), tool: "gridftp", weight: 1})
		}
	case "fairness-strict", "fairness-default":
		return e.fairness(ctx, c, strings.TrimPrefix(c, "fairness-"))
	default:
		return res, fmt.Errorf("unknown case %q", c)
	}
	jobs, err := e.runJobs(ctx, c, specs, res.Started)
	if err != nil {
		return res, err
	}
	res.Jobs = jobs
	res.window()
	if c == "late" {
		res.lateFigures()
	}
	return res, nil
}

type jobSpec struct {
	name, tool string
	weight     int
	after      time.Duration
	fairness   string
	noShare    bool
}

// runJobs starts every job (each after its delay from now), polls the destinations
// until all have ended, and returns their runs, their times in seconds from t0.
func (e *sharingEnv) runJobs(ctx context.Context, c string, specs []jobSpec, t0 time.Time) ([]JobRun, error) {
	dst := filepath.Join(e.opts.WorkDir, "dst")
	if err := os.RemoveAll(dst); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dst)
	var gsrv *process
	for _, s := range specs {
		if s.tool == "gridftp" && gsrv == nil {
			src := e.topo.Sources[0]
			p, err := start(ctx, src, "globus-gridftp-server", "-aa", "-anonymous-user", "nobody", "-p", strconv.Itoa(gridftpPort), "-d", "error",
				"-control-interface", src.Addr.String(), "-data-interface", src.Addr.String())
			if err != nil {
				return nil, err
			}
			defer p.stop(3 * time.Second)
			if err := WaitListening(ctx, src, gridftpPort); err != nil {
				return nil, fmt.Errorf("%w: %s", err, tail(p.out.String(), 500))
			}
			gsrv = p
		}
	}
	type running struct {
		spec jobSpec
		dir  string
		proc *process
		recv *process
		args []string // the sender's
		out  string
		t0   time.Time
		done time.Time
		err  error
	}
	runs := make([]*running, len(specs))
	for i, s := range specs {
		r := &running{spec: s, dir: filepath.Join(dst, s.name)}
		if err := os.MkdirAll(r.dir, 0o777); err != nil {
			return nil, err
		}
		_ = os.Chmod(r.dir, 0o777)
		if s.tool == "dtnflow" {
			e.port++
			listen := fmt.Sprintf("%s:%d", e.topo.Destinations[0].Addr, e.port)
			recv, err := start(ctx, e.topo.Destinations[0], e.opts.Agent, "receive", "--listen", listen, "--root", r.dir, "--secret-file", e.key, "--metrics-addr", "")
			if err != nil {
				return nil, err
			}
			defer recv.stop(5 * time.Second)
			if err := WaitListening(ctx, e.topo.Destinations[0], e.port); err != nil {
				return nil, fmt.Errorf("%w: %s", err, tail(recv.out.String(), 500))
			}
			r.recv = recv
			runs[i] = r
			args := []string{"send", "--to", listen, "--root", e.data, "--secret-file", e.key, "--job", s.name, "--dest-path", s.name,
				"--verify=" + strconv.FormatBool(e.opts.Verify), "--auto", "--stripes", strconv.Itoa(e.opts.MaxStripes),
				"--max-streams", strconv.Itoa(e.opts.MaxStreams), "--metrics-addr", ""}
			if s.fairness != "" {
				args = append(args, "--fairness", s.fairness)
			}
			if !s.noShare {
				args = append(args, "--share-dir", e.share, "--priority", strconv.Itoa(s.weight))
			}
			r.args = append(args, "full")
		} else {
			runs[i] = r
		}
	}
	tr := newTracker(t0)
	for _, r := range runs {
		tr.add(r.spec.name, r.dir)
	}
	stopPoll := make(chan struct{})
	var pollWG sync.WaitGroup
	pollWG.Add(1)
	go func() {
		defer pollWG.Done()
		tr.loop(stopPoll, 250*time.Millisecond)
	}()
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-ctx.Done():
				r.err = ctx.Err()
				return
			case <-time.After(r.spec.after):
			}
			r.t0 = time.Now()
			var args []string
			var host topology.Host
			name := e.opts.Agent
			if r.spec.tool == "dtnflow" {
				args, host = r.args, e.topo.Sources[0]
			} else {
				_, cfg := GlobusPreset(e.opts.Size)
				host, name = e.topo.Destinations[0], "globus-url-copy"
				args = append(cfg.Args(), fmt.Sprintf("ftp://%s:%d%s", e.topo.Sources[0].Addr, gridftpPort, filepath.Join(e.data, "full", e.file)),
					"file://"+filepath.Join(r.dir, e.file))
			}
			_, _, r.out, r.err = runTimed(ctx, host, name, 0, args...)
			r.done = time.Now()
			_ = os.MkdirAll(filepath.Join(e.opts.OutDir, "logs"), 0o755)
			_ = os.WriteFile(filepath.Join(e.opts.OutDir, "logs", c+"-"+r.spec.name+".log"), []byte(r.out), 0o644)
		}()
	}
	wg.Wait()
	close(stopPoll)
	pollWG.Wait()
	tr.poll() // the last bytes
	var out []JobRun
	for _, r := range runs {
		if r.err != nil {
			return nil, fmt.Errorf("%s: %w", r.spec.name, r.err)
		}
		j := JobRun{Name: r.spec.name, Tool: r.spec.tool, Weight: r.spec.weight, StartSeconds: r.t0.Sub(t0).Seconds(), EndSeconds: r.done.Sub(t0).Seconds()}
		j.Timeline = tr.timeline(r.spec.name)
		j.Bytes = int64(j.Timeline[len(j.Timeline)-1][1])
		if j.Bytes < e.opts.Size {
			return nil, fmt.Errorf("%s: %d bytes at the destination of %d", r.spec.name, j.Bytes, e.opts.Size)
		}
		j.FirstByteSeconds = j.EndSeconds
		for _, p := range j.Timeline {
			if p[1] > 0 {
				j.FirstByteSeconds = p[0]
				break
			}
		}
		j.WholeBitsPerSecond = float64(e.opts.Size) * 8 / max(j.EndSeconds-j.StartSeconds, 1e-3)
		half := j.EndSeconds
		for _, p := range j.Timeline {
			if p[1] >= float64(j.Bytes)/2 {
				half = p[0]
				break
			}
		}
		j.SteadyBitsPerSecond = RateOver(j.Timeline, half, j.EndSeconds)
		if r.spec.tool == "dtnflow" {
			j.Plan, j.Replans = agentPlan(r.out, j.StartSeconds)
		}
		out = append(out, j)
	}
	return out, nil
}

// window sets the window in which every job transferred and each job's rate in it.
func (r *SharingResult) window() {
	start, end := 0.0, math.Inf(1)
	for _, j := range r.Jobs {
		start = math.Max(start, j.FirstByteSeconds)
		end = math.Min(end, j.EndSeconds)
	}
	r.WindowStart, r.WindowEnd = start, end
	if !(end > start) {
		return
	}
	var norm []float64
	r.AggregateBitsPerSecond = 0
	for i := range r.Jobs {
		j := &r.Jobs[i]
		j.BitsPerSecond = (bytesAt(j.Timeline, end) - bytesAt(j.Timeline, start)) * 8 / (end - start)
		r.AggregateBitsPerSecond += j.BitsPerSecond
		norm = append(norm, j.BitsPerSecond/float64(max(j.Weight, 1)))
	}
	r.Jain = Jain(norm)
	var wsum float64
	lo, hi := math.MaxInt, 0
	for _, j := range r.Jobs {
		wsum += float64(max(j.Weight, 1))
		lo, hi = min(lo, max(j.Weight, 1)), max(hi, max(j.Weight, 1))
	}
	var sumLo, sumHi float64
	var nLo, nHi int
	for i := range r.Jobs {
		j := &r.Jobs[i]
		w := max(j.Weight, 1)
		j.OfShare = j.BitsPerSecond / (r.AggregateBitsPerSecond * float64(w) / wsum)
		if w == lo {
			sumLo, nLo = sumLo+j.BitsPerSecond, nLo+1
		}
		if w == hi {
			sumHi, nHi = sumHi+j.BitsPerSecond, nHi+1
		}
	}
	if hi > lo && sumLo > 0 {
		r.WeightRatio = (sumHi / float64(nHi)) / (sumLo / float64(nLo))
	}
}

// lateFigures: the late job is the last. Its share is the aggregate of every job in
// the window (all running) ÷ weights; the time to 90 % of it is measured over 2 s
// windows from its start.
func (r *SharingResult) lateFigures() {
	late := r.Jobs[len(r.Jobs)-1]
	var wsum float64
	for _, j := range r.Jobs {
		wsum += float64(max(j.Weight, 1))
	}
	perWeight := r.AggregateBitsPerSecond / wsum
	r.LateShare = perWeight * float64(max(late.Weight, 1))
	r.LateSecondsTo90 = -1
	for t := late.StartSeconds; t+2 <= late.EndSeconds; t += 0.25 {
		if RateOver(late.Timeline, t, t+2) >= 0.9*r.LateShare {
			r.LateSecondsTo90 = t + 2 - late.StartSeconds
			break
		}
	}
	r.OthersMinOfShare = math.Inf(1)
	for _, j := range r.Jobs[:len(r.Jobs)-1] {
		share := perWeight * float64(max(j.Weight, 1))
		for t := late.StartSeconds; t+2 <= math.Min(late.StartSeconds+30, j.EndSeconds); t += 0.25 {
			if f := RateOver(j.Timeline, t, t+2) / share; f < r.OthersMinOfShare {
				r.OthersMinOfShare, r.OthersMinOfShareJob = f, j.Name
			}
		}
	}
}

// fairness runs one job (fairness mode Strict or Default, probing on its own) against
// Flows long-lived iperf3 flows from src1 to dst1 through the same bottleneck: the
// flows run alone for a while first (their aggregate is the bottleneck's capacity for
// TCP), then the job; each flow's rate while the job runs is compared with its fair
// share, the flows' aggregate alone ÷ (flows + 1).
func (e *sharingEnv) fairness(ctx context.Context, c, mode string) (SharingResult, error) {
	res := SharingResult{Case: c, Started: time.Now()}
	src, dst := e.topo.Sources[1], e.topo.Destinations[1]
	const warm = 12 * time.Second
	type flow struct {
		srv, cli *process
		t0       time.Time
	}
	flows := make([]*flow, e.opts.Flows)
	for i := range flows {
		port := 5310 + i
		srv, err := start(ctx, dst, "iperf3", "-s", "-B", dst.Addr.String(), "-p", strconv.Itoa(port))
		if err != nil {
			return res, err
		}
		defer srv.stop(2 * time.Second)
		if err := WaitListening(ctx, dst, port); err != nil {
			return res, err
		}
		flows[i] = &flow{srv: srv}
	}
	for i, f := range flows {
		cli, err := start(ctx, src, "iperf3", "-c", dst.Addr.String(), "-p", strconv.Itoa(5310+i), "-t", "86400", "-i", "0.5", "--forceflush", "-P", "1")
		if err != nil {
			return res, err
		}
		defer cli.stop(2 * time.Second)
		f.cli, f.t0 = cli, time.Now()
	}
	select {
	case <-ctx.Done():
		return res, ctx.Err()
	case <-time.After(warm):
	}
	jobs, err := e.runJobs(ctx, c, []jobSpec{{name: c, tool: "dtnflow", weight: 1, fairness: strings.ToUpper(mode[:1]) + mode[1:], noShare: true}}, res.Started)
	if err != nil {
		return res, err
	}
	job := jobs[0]
	var flowRuns []JobRun
	for i, f := range flows {
		f.cli.stop(2 * time.Second)
		flowRuns = append(flowRuns, JobRun{Name: fmt.Sprintf("iperf3-%d", i), Tool: "iperf3", Timeline: IperfTimeline(f.cli.out.String()),
			StartSeconds: f.t0.Sub(res.Started).Seconds()})
	}
	// alone: from 3 s after the flows started to the job's start
	var alone float64
	ws, we := 3.0, job.StartSeconds
	for i := range flowRuns {
		fr := &flowRuns[i]
		for k := range fr.Timeline {
			fr.Timeline[k][0] += fr.StartSeconds
		}
		alone += RateOver(fr.Timeline, ws, we)
	}
	res.FlowsAloneBitsPerSecond = alone
	res.FairShareBitsPerSecond = alone / float64(e.opts.Flows+1)
	// while the job ran: from its first byte + 5 s (its probe's first samples) to its end
	s, t := job.FirstByteSeconds+5, job.EndSeconds
	res.WindowStart, res.WindowEnd = s, t
	job.BitsPerSecond = RateOver(job.Timeline, s, t)
	res.JobOfFairShare = job.BitsPerSecond / res.FairShareBitsPerSecond
	res.AggregateBitsPerSecond = job.BitsPerSecond
	var norm []float64
	norm = append(norm, job.BitsPerSecond)
	for i := range flowRuns {
		fr := &flowRuns[i]
		fr.BitsPerSecond = RateOver(fr.Timeline, s, t)
		res.FlowsOfFairShare = append(res.FlowsOfFairShare, fr.BitsPerSecond/res.FairShareBitsPerSecond)
		res.AggregateBitsPerSecond += fr.BitsPerSecond
		norm = append(norm, fr.BitsPerSecond)
	}
	res.Jain = Jain(norm)
	res.Jobs = append([]JobRun{job}, flowRuns...)
	return res, nil
}

var iperfLine = regexp.MustCompile(`^\[\s*\d+\]\s+([0-9.]+)-([0-9.]+)\s+sec\s+([0-9.]+)\s+([KMGT]?)Bytes`)

// IperfTimeline reads an iperf3 client's interval lines into cumulative bytes over
// seconds from its start.
func IperfTimeline(out string) [][2]float64 {
	tl := [][2]float64{{0, 0}}
	var total float64
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := iperfLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil || strings.Contains(sc.Text(), "sender") || strings.Contains(sc.Text(), "receiver") {
			continue
		}
		end, _ := strconv.ParseFloat(m[2], 64)
		v, _ := strconv.ParseFloat(m[3], 64)
		switch m[4] {
		case "K":
			v *= 1 << 10
		case "M":
			v *= 1 << 20
		case "G":
			v *= 1 << 30
		case "T":
			v *= 1 << 40
		}
		total += v
		tl = append(tl, [2]float64{end, total})
	}
	return tl
}

// agentPlan reads an agent's log: its last plan and its share re-plans, at seconds on
// the case's clock (the job started at start).
func agentPlan(out string, start float64) (string, []string) {
	var plan string
	var replans []string
	var first time.Time
	for _, line := range strings.Split(out, "\n") {
		kv := slogFields(line)
		t, err := time.Parse(time.RFC3339Nano, kv["time"])
		if err == nil && first.IsZero() {
			first = t
		}
		at := start
		if err == nil {
			at += t.Sub(first).Seconds()
		}
		switch kv["msg"] {
		case "Planned":
			plan = kv["stripes"] + " × " + kv["streams"]
		case "Planned from the path's profile":
			replans = append(replans, fmt.Sprintf("Warm(share %s)@%.1fs", kv["share"], at))
		case "Re-planned":
			replans = append(replans, fmt.Sprintf("%s(%s)@%.1fs", kv["reason"], kv["share"], at))
		}
	}
	return plan, replans
}

// tracker polls each job's destination: the bytes allocated there (st_blocks, so a
// file written at offsets counts what was written, not its length).
type tracker struct {
	t0    time.Time
	mu    sync.Mutex
	dirs  map[string]string
	lines map[string][][2]float64
}

func newTracker(t0 time.Time) *tracker {
	return &tracker{t0: t0, dirs: map[string]string{}, lines: map[string][][2]float64{}}
}

func (t *tracker) add(name, dir string) { t.dirs[name] = dir }

func (t *tracker) loop(stop <-chan struct{}, every time.Duration) {
	tk := time.NewTicker(every)
	defer tk.Stop()
	for {
		t.poll()
		select {
		case <-stop:
			return
		case <-tk.C:
		}
	}
}

func (t *tracker) poll() {
	for name, dir := range t.dirs {
		b := allocated(dir)
		now := time.Since(t.t0).Seconds()
		t.mu.Lock()
		l := t.lines[name]
		if n := len(l); n > 0 && float64(b) < l[n-1][1] {
			b = int64(l[n-1][1]) // a temporary file renamed between two reads
		}
		t.lines[name] = append(l, [2]float64{now, float64(b)})
		t.mu.Unlock()
	}
}

func (t *tracker) timeline(name string) [][2]float64 {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([][2]float64(nil), t.lines[name]...)
}

// allocated is the bytes allocated to the regular files under dir, its journal
// directory left out.
func allocated(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == ".dtnflow" {
			return filepath.SkipDir
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					n += min(st.Blocks*512, fi.Size())
				}
			}
		}
		return nil
	})
	return n
}

// bytesAt interpolates a timeline at t.
func bytesAt(tl [][2]float64, t float64) float64 {
	if len(tl) == 0 {
		return 0
	}
	i := sort.Search(len(tl), func(i int) bool { return tl[i][0] >= t })
	if i == 0 {
		return tl[0][1]
	}
	if i == len(tl) {
		return tl[len(tl)-1][1]
	}
	a, b := tl[i-1], tl[i]
	if b[0] == a[0] {
		return b[1]
	}
	return a[1] + (b[1]-a[1])*(t-a[0])/(b[0]-a[0])
}

// RateOver is the timeline's rate in bits/s over [a, b].
func RateOver(tl [][2]float64, a, b float64) float64 {
	if !(b > a) {
		return 0
	}
	return (bytesAt(tl, b) - bytesAt(tl, a)) * 8 / (b - a)
}

// Jain is Jain's fairness index of xs: (Σx)² / (n·Σx²).
func Jain(xs []float64) float64 {
	var s, s2 float64
	for _, x := range xs {
		s += x
		s2 += x * x
	}
	if s2 == 0 {
		return 0
	}
	return s * s / (float64(len(xs)) * s2)
}
