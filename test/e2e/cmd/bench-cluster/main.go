// Command bench-cluster runs the WAN scenarios of `make bench-wan` through the operator
// (make bench-cluster): for each scenario it sets the local cluster's WAN (rate, RTT,
// loss, queue) to the scenario's, writes the scenario's dataset (test/bench/wan's
// generator, so the files are the ones bench-wan moves) at site A, applies a
// TransferJob in Auto mode and times it from creation to Complete — probing, planning,
// scheduling the agent pods and verifying included — then checks every file's SHA-256
// at site B. The table goes to stdout (markdown), one JSON line per run to -json.
//
// With -federated the local cluster runs as two clusters, one per site, each with its
// own dtnflow, paired as docs/site-pairing.md says: the job lives at site A and writes
// to site B's endpoint through a RemoteSite (B's receivers, B's nodes, B's budget),
// and each scenario runs once per -in-flight mode — the cross-cluster rows of issue 16,
// to set beside a run without -federated.
//
// By default every scenario starts cold (the path's PathProfile is deleted first), as
// bench-wan's dtnflow-auto rows do; -warm keeps what the previous run learned.
//
// Beside each operator run (unless -agent-auto=false) it runs the agent alone on the
// same path and dataset: `dtnflow-agent send --auto` (the binary of the agent image)
// in site A's node namespace to `dtnflow-agent receive` in site B's, timed from the
// sender's start to its exit, probing included — the side-by-side comparison of
// issue 11 ("a TransferJob is never meaningfully slower than the agent alone").
//
//	bench-cluster -rate 500M -rtt 20ms,50ms -loss 0 -dataset large,mixed
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/dtnflow/dtnflow/agent/journal"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
	"github.com/dtnflow/dtnflow/test/bench/agentbuild"
	"github.com/dtnflow/dtnflow/test/bench/wan"
	"github.com/dtnflow/dtnflow/test/dataset"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
	"github.com/dtnflow/dtnflow/test/topology"
	"github.com/dtnflow/dtnflow/test/wanem"
)

// Result is one scenario's run through the operator.
type Result struct {
	Scenario string  `json:"scenario"`
	Tool     string  `json:"tool"`
	Rate     int64   `json:"rateBitsPerSecond"`
	RTT      string  `json:"rtt"`
	Loss     float64 `json:"loss"`
	Dataset  string  `json:"dataset"`
	Files    int     `json:"files"`
	Bytes    int64   `json:"bytes"`
	Cold     bool    `json:"cold"`
	// JobVerify is the job's spec.integrity.verify.
	JobVerify bool `json:"jobVerify"`
	// InFlight is the job's spec.integrity.inFlight ("" the default); Federated says the
	// job crossed from site A's cluster to site B's (-federated).
	InFlight  string `json:"inFlight,omitempty"`
	Federated bool   `json:"federated,omitempty"`
	// Seconds is from the TransferJob's creation to Complete as this program saw it.
	Seconds float64 `json:"seconds"`
	// BitsPerSecond is Bytes over Seconds: what a user gets, probing included.
	BitsPerSecond int64 `json:"bitsPerSecond"`
	// ShareOfLink is BitsPerSecond over the bottleneck rate.
	ShareOfLink float64 `json:"shareOfLink"`
	// PlanSeconds is from creation to the Planned condition (probe and fit), as this
	// program saw it (it reads the job every 250 ms).
	PlanSeconds float64 `json:"planSeconds"`
	// FirstProgressSeconds is from creation to the first read of the job whose
	// status.progress shows bytes done — verified bytes, which come a whole chunk
	// (64 MiB; 256 MiB before 539b39f) or file after the first byte: a measure the runs before status.timings
	// had too.
	FirstProgressSeconds float64 `json:"firstProgressSeconds,omitempty"`
	// FirstByteMilliseconds, PlanMilliseconds and CompleteMilliseconds are the job's
	// status.timings (from its creationTimestamp, whole seconds), when it has them.
	FirstByteMilliseconds *int64 `json:"firstByteMilliseconds,omitempty"`
	PlanMilliseconds      *int64 `json:"planMilliseconds,omitempty"`
	CompleteMilliseconds  *int64 `json:"completeMilliseconds,omitempty"`
	// JobAverageBitsPerSecond is the job's own status.progress.averageBitsPerSecond.
	JobAverageBitsPerSecond int64  `json:"jobAverageBitsPerSecond"`
	Plan                    string `json:"plan"`
	Model                   string `json:"model"`
	Replans                 int    `json:"replans"`
	// AgentConfig is what the agent alone ran with (tool dtnflow-agent-auto) and what
	// it chose.
	AgentConfig string `json:"agentConfig,omitempty"`
	// Build is which dtnflow-agent a dtnflow row ran: the digest of the binary of the
	// agent's own rows (-agent; agentbuild.Info.Digest), and the agent image of the
	// operator's rows (hack/images/build.sh tags it "dev-" and the same digest of the
	// binary inside it).
	Build string `json:"build,omitempty"`
	State string `json:"state"`
	Error string `json:"error,omitempty"`
	// Flows and GilbertElliott are the scenario's competing TCP flows and bursty loss.
	Flows          int                   `json:"flows,omitempty"`
	GilbertElliott *wanem.GilbertElliott `json:"gilbertElliott,omitempty"`
	// Note, ProbeSeconds and CPUSecondsPerGB are bench-wan's for its tools' rows: a
	// remark (the preset's class, the grid's size, a run stopped at the limit), the
	// grid's probing (not in Seconds) and both ends' CPU per 10⁹ bytes.
	Note            string  `json:"note,omitempty"`
	ProbeSeconds    float64 `json:"probeSeconds,omitempty"`
	CPUSecondsPerGB float64 `json:"cpuSecondsPerGB,omitempty"`
	// CPU is the operator's agent pods: each one's CPU request against what its
	// cgroup accounted while it ran.
	CPU []podCPU `json:"cpu,omitempty"`
	// Samples and ReplanLog are the operator job's probe samples and re-plans as its
	// status kept them: where its time to plan went.
	Samples   []dtnflowv1alpha1.ProbeSample `json:"samples,omitempty"`
	ReplanLog []dtnflowv1alpha1.Replan      `json:"replanLog,omitempty"`
	// Scheduler and ChannelMoves are the job's status.channels at the end.
	Scheduler    string `json:"scheduler,omitempty"`
	ChannelMoves int64  `json:"channelMoves,omitempty"`
	// Schedule and Phases are the scenario's changes of the bottleneck's rate and the
	// tool's rate in each phase.
	Schedule []rateStep  `json:"schedule,omitempty"`
	Phases   []phaseRate `json:"phases,omitempty"`
	// DeliveredMbitPerSecond is what reached the destination in each second from the
	// run's start (the job's creation, the sender's start, bench-wan's tool's start),
	// read from the destination's allocated blocks every 500 ms: the grid's row
	// includes its probing runs.
	DeliveredMbitPerSecond []int64 `json:"deliveredMbitPerSecond,omitempty"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-cluster:", err)
		os.Exit(1)
	}
}

func run() error {
	rates := flag.String("rate", "500M", "bottleneck rates (bits/s), comma-separated")
	rtts := flag.String("rtt", "20ms", "round-trip times, comma-separated")
	losses := flag.String("loss", "0", "random loss probabilities, comma-separated")
	queues := flag.String("queue", "default", "bottleneck queues in bytes (default: one BDP, at least 1 MiB), comma-separated")
	datasets := flag.String("dataset", "large", "datasets: large, mixed, small (comma-separated)")
	largeSize := flag.String("large-size", "1GiB", "size of the large file (bench-wan's default is 4GiB; the cluster's disks are slower than tmpfs)")
	mixedTotal := flag.String("mixed-total", "1GiB", "total of the mixed dataset")
	mixedMin := flag.String("mixed-min", "64KiB", "smallest file of the mixed dataset")
	mixedMax := flag.String("mixed-max", "256MiB", "largest file of the mixed dataset")
	smallCount := flag.Int("small-count", 5000, "files in the small dataset")
	smallSize := flag.String("small-size", "64KiB", "size of each small file")
	warm := flag.Bool("warm", false, "keep the PathProfile between runs (default: every run starts cold)")
	verify := flag.Bool("verify", true, "compare every file's SHA-256 at the destination after each run (outside the timed part)")
	jobVerify := flag.Bool("dtnflow-verify", false, "the jobs' spec.integrity.verify: read every file back at the destination (bench-wan's dtnflow rows run without, as globus-url-copy checks nothing by default)")
	jsonOut := flag.String("json", "", "append one JSON line per run to this file")
	reuse := flag.Bool("reuse", false, "use the running local cluster (make cluster-up + helm install) instead of starting one")
	keep := flag.Bool("keep", false, "leave the cluster running at the end")
	timeout := flag.Duration("timeout", 20*time.Minute, "bound of each run")
	agentAuto := flag.Bool("agent-auto", true, "run `dtnflow-agent send --auto` beside each operator run, on the same path and dataset")
	agentBin := flag.String("agent", filepath.Join(framework.RepoRoot(), ".cache/images/bin/dtnflow-agent"), "the dtnflow-agent binary for -agent-auto (default: the agent image's)")
	maxStripes := flag.Int("agent-max-stripes", 4, "send --auto --stripes (bench-wan's dtnflow-auto: the largest of its -dtnflow-stripes)")
	maxStreams := flag.Int("agent-max-streams", 64, "send --auto --max-streams (bench-wan's dtnflow-auto: the largest of its -dtnflow-streams)")
	agentConcurrency := flag.Int("agent-concurrency", 0, "send --auto --concurrency, the files in flight per stripe its size classes may use (0: the agent's default)")
	suiteName := flag.String("suite", "", "issue11: every scenario of make bench-wan (one large file at loss 0, 1e-4 and 1e-3, at 1e-3 with a competing flow, the mixed dataset, the small files) plus bursty loss and -flows competing flows, at the first -rate and -rtt; empty: the matrix of -rate, -rtt, -loss, -dataset")
	flows := flag.Int("flows", 4, "competing TCP flows of the suite's flows scenario")
	tools := flag.String("tools", "operator,agent-auto", "tools to run on each scenario, in order: operator, operator-warm-pool (the endpoints given a warm pool first), agent-auto, dtnflow-grid, dtnflow-fixed (-fixed), gridftp-default, gridftp-preset")
	gridStreams := flag.String("grid-streams", "1,4,16", "dtnflow-grid: streams per stripe")
	gridStripes := flag.String("grid-stripes", "1,2,4", "dtnflow-grid: stripes")
	sampleSeconds := flag.Float64("sample-seconds", 3, "dtnflow-grid: each grid point is probed on a sample of this many seconds at the link rate")
	runLimit := flag.Duration("run-limit", 0, "bench-wan's tools: stop a run that takes longer and extrapolate its time from what it moved (0: none)")
	logDir := flag.String("log-dir", "", "bench-wan's tools write their output here, and each operator run its agents' logs (the job's archive) in <scenario>-operator/")
	fixed := flag.String("fixed", "8,1", "dtnflow-fixed: streams,stripes of the fixed setting (the grid's best on the path)")
	scheduleSize := flag.String("schedule-size", "5GiB", "the suite's scheduled scenario: size of its file (it must outlast the schedule)")
	only := flag.String("only", "", "the suite's scenarios to run, by name (comma-separated; default all)")
	federated := flag.Bool("federated", false, "two clusters (DTN_CLUSTERS=2), dtnflow at each, paired: jobs at site A write to site B through a RemoteSite")
	inFlight := flag.String("in-flight", "", "the jobs' spec.integrity.inFlight, comma-separated (each scenario runs once per mode); empty: the default")
	flag.Parse()
	modes := strings.Split(*inFlight, ",")
	if *federated {
		os.Setenv("DTN_CLUSTERS", "2")
		*agentAuto = false // the agent alone knows no sites
	}

	var scenarios []scenario
	if *suiteName != "" {
		if *suiteName != "issue11" {
			return fmt.Errorf("-suite %q: want issue11", *suiteName)
		}
		ms, err := matrix(strings.Split(*rates, ",")[0], strings.Split(*rtts, ",")[0], "0", "default", "large,mixed,small", *largeSize, *mixedTotal, *mixedMin, *mixedMax, *smallCount, *smallSize)
		if err != nil {
			return err
		}
		scheduled := ms[0].Dataset
		if scheduled.LargeBytes, err = wanem.ParseBytes(*scheduleSize); err != nil {
			return fmt.Errorf("-schedule-size: %w", err)
		}
		scenarios = suite(ms[0].RateBitsPerSecond, ms[0].RTT, ms[0].Dataset, ms[1].Dataset, ms[2].Dataset, scheduled, *flows)
		if *only != "" {
			keep := scenarios[:0]
			for _, sc := range scenarios {
				if strings.Contains(","+*only+",", ","+sc.Name()+",") {
					keep = append(keep, sc)
				}
			}
			scenarios = keep
		}
	} else {
		ms, err := matrix(*rates, *rtts, *losses, *queues, *datasets, *largeSize, *mixedTotal, *mixedMin, *mixedMax, *smallCount, *smallSize)
		if err != nil {
			return err
		}
		for _, m := range ms {
			scenarios = append(scenarios, scenario{Scenario: m})
		}
	}
	toolList := strings.Split(*tools, ",")
	if !*agentAuto {
		toolList = slices.DeleteFunc(toolList, func(t string) bool { return t == "agent-auto" })
	}
	gs, err := parseInts("grid-streams", *gridStreams)
	if err != nil {
		return err
	}
	gk, err := parseInts("grid-stripes", *gridStripes)
	if err != nil {
		return err
	}
	fx, err := parseInts("fixed", *fixed)
	if err != nil || len(fx) != 2 {
		return fmt.Errorf("-fixed %q: want streams,stripes", *fixed)
	}
	agentInfo, err := agentbuild.Describe(*agentBin, framework.RepoRoot())
	if err != nil && slices.ContainsFunc(toolList, func(t string) bool { return t != "operator" && !strings.HasPrefix(t, "gridftp") }) {
		return fmt.Errorf("-agent: %w", err)
	}
	if err == nil {
		agentInfo.Report(os.Stderr, "dtnflow-agent for the agent's own rows")
	}
	topts := toolOptions{agent: *agentBin, maxStripes: *maxStripes, maxStreams: *maxStreams, gridStreams: gs, gridStripes: gk,
		fixed: wan.DtnflowConfig{Streams: fx[0], Stripes: fx[1]}, sampleSeconds: *sampleSeconds, runLimit: *runLimit, logDir: *logDir}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()

	var c *framework.Cluster
	if *reuse {
		c, err = framework.Load(framework.Dir())
	} else {
		c, err = framework.Up(ctx, os.Stderr)
		if err == nil && !*keep {
			defer func() { _ = framework.Down(context.Background(), os.Stderr) }()
		}
	}
	if err != nil {
		return err
	}
	var peer *framework.Cluster // site B's cluster with -federated
	if *federated {
		if peer, err = c.SiteB(); err != nil {
			return err
		}
		if err := setUpSitePair(ctx, c, peer); err != nil {
			return err
		}
	} else {
		if out, err := c.InstallDtnflow(ctx); err != nil {
			return fmt.Errorf("%w\n%s", err, out)
		}
		if err := applyEndpoints(ctx, c); err != nil {
			return err
		}
	}
	var jsonl io.Writer = io.Discard
	if *jsonOut != "" {
		f, err := os.OpenFile(*jsonOut, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		jsonl = f
	}

	fmt.Printf("| scenario | dataset | tool | files | MiB | time s | first byte s | first verified s | plan s | Mbit/s | share of link | plan (stripes × streams) | model | replans | state | ÷ agent alone | CPU request/used |\n")
	fmt.Printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	failed := 0
	row := func(r Result, ratio string) {
		if r.State != string(dtnflowv1alpha1.StateComplete) || r.Error != "" {
			failed++
		}
		plan := r.Plan
		if r.AgentConfig != "" {
			plan = r.AgentConfig
		}
		firstByte := 0.0
		if r.FirstByteMilliseconds != nil {
			firstByte = float64(*r.FirstByteMilliseconds) / 1000
		}
		if r.Note != "" {
			plan += " (" + r.Note + ")"
		}
		if r.Scheduler != "" {
			plan += fmt.Sprintf(", %s, %d channel moves", r.Scheduler, r.ChannelMoves)
		}
		if ph := phasesSummary(r.Phases); ph != "" {
			plan += "; " + ph
		}
		fmt.Printf("| %s | %s | %s | %d | %d | %.1f | %s | %s | %s | %.0f | %.2f | %s | %s | %d | %s%s | %s | %s |\n",
			r.Scenario, r.Dataset, r.Tool, r.Files, r.Bytes>>20, r.Seconds, secondsOrDash(firstByte), secondsOrDash(r.FirstProgressSeconds), secondsOrDash(r.PlanSeconds),
			float64(r.BitsPerSecond)/1e6, r.ShareOfLink, strings.ReplaceAll(plan, "|", "/"), r.Model, r.Replans, r.State, errSuffix(r.Error), ratio, cpuSummary(r.CPU))
		b, _ := json.Marshal(r)
		fmt.Fprintln(jsonl, string(b))
	}
	for i, s := range scenarios {
		// every tool first, then the rows with their ratio to the agent alone
		var rs []Result
		var agent *Result
		for n, tool := range expandModes(toolList, modes) {
			var r Result
			if tool.name == "dtnflow-grid" && len(s.Schedule) > 0 {
				// a grid probed while the rate changes would probe other capacities
				// than its run meets: the best setting the grid found on this path
				// runs instead
				tool.name = "dtnflow-fixed"
			}
			switch tool.name {
			case "operator", "operator-warm-pool":
				pool := tool.name == "operator-warm-pool"
				if err := setWarmPools(ctx, c, pool); err != nil {
					r = Result{Scenario: s.Name(), Tool: "dtnflow-" + tool.name, Error: err.Error()}
					break
				}
				r = runScenario(ctx, c, peer != nil, 10*i+n, s, tool.inFlight, !*warm, *verify, *jobVerify, *timeout, *logDir)
				if pool {
					r.Tool += "-warm-pool"
				}
			case "agent-auto":
				r = runAgentAuto(ctx, c, i, s, *agentBin, *maxStripes, *maxStreams, *agentConcurrency, *verify, *jobVerify, *timeout, *logDir)
			default:
				r = runWANTool(ctx, c, i, s, tool.name, topts)
			}
			r.Flows, r.GilbertElliott, r.Schedule = s.Flows, s.GilbertElliott, s.Schedule
			switch {
			case tool.name == "operator" || tool.name == "operator-warm-pool":
				r.Build = c.Images.Agent
			case !strings.HasPrefix(r.Tool, "gridftp"):
				r.Build = agentInfo.Digest
			}
			if r.Tool == "dtnflow-grid" && r.Error == "" && s.Loss == 0 && s.Flows == 0 && s.GilbertElliott == nil && s.Dataset.Kind == wan.Large {
				if cfg, ok := parseFixed(r.AgentConfig); ok {
					topts.fixed = cfg
				}
			}
			rs = append(rs, r)
			if r.Tool == "dtnflow-agent-auto" && r.Error == "" && r.Seconds > 0 {
				agent = &rs[len(rs)-1]
			}
			if ctx.Err() != nil {
				break
			}
		}
		for _, r := range rs {
			ratio := "–"
			if agent != nil && r.Error == "" && r.Seconds > 0 {
				ratio = fmt.Sprintf("%.2f×", r.Seconds/agent.Seconds)
			}
			row(r, ratio)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
	}
	if failed > 0 {
		return fmt.Errorf("%d of %d runs (%d scenarios × %d tools) did not complete cleanly", failed, len(scenarios)*len(toolList), len(scenarios), len(toolList))
	}
	return nil
}

// parseFixed reads a dtnflow-grid row's setting ("--streams 8 --stripes 1").
func parseFixed(config string) (wan.DtnflowConfig, bool) {
	var c wan.DtnflowConfig
	f := strings.Fields(config)
	for i := 0; i+1 < len(f); i++ {
		v, err := strconv.Atoi(f[i+1])
		switch {
		case err != nil:
		case f[i] == "--streams":
			c.Streams = v
		case f[i] == "--stripes":
			c.Stripes = v
		case f[i] == "--buffer":
			c.Buffer = int64(v)
		}
	}
	return c, c.Streams > 0 && c.Stripes > 0
}

func secondsOrDash(s float64) string {
	if s <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.1f", s)
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return ": " + strings.ReplaceAll(e, "|", "/")
}

func matrix(rates, rtts, losses, queues, datasets, largeSize, mixedTotal, mixedMin, mixedMax string, smallCount int, smallSize string) ([]wan.Scenario, error) {
	var rs []int64
	for _, v := range strings.Split(rates, ",") {
		r, err := wanem.ParseRate(v)
		if err != nil || r <= 0 {
			return nil, fmt.Errorf("-rate %q: %v", v, err)
		}
		rs = append(rs, r)
	}
	var ds []time.Duration
	for _, v := range strings.Split(rtts, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("-rtt %q: %v", v, err)
		}
		ds = append(ds, d)
	}
	var ls []float64
	for _, v := range strings.Split(losses, ",") {
		var l float64
		if _, err := fmt.Sscan(strings.TrimSpace(v), &l); err != nil || l < 0 || l >= 1 {
			return nil, fmt.Errorf("-loss %q: want a probability", v)
		}
		ls = append(ls, l)
	}
	var qs []int64
	for _, v := range strings.Split(queues, ",") {
		if strings.TrimSpace(v) == "default" {
			qs = append(qs, 0)
			continue
		}
		q, err := wanem.ParseBytes(v)
		if err != nil {
			return nil, fmt.Errorf("-queue %q: %v", v, err)
		}
		qs = append(qs, q)
	}
	bytesOf := func(flagName, v string) (int64, error) {
		n, err := wanem.ParseBytes(v)
		if err != nil {
			return 0, fmt.Errorf("-%s %q: %v", flagName, v, err)
		}
		return n, nil
	}
	var specs []wan.DatasetSpec
	for _, v := range strings.Split(datasets, ",") {
		spec := wan.DefaultDataset(wan.DatasetKind(strings.TrimSpace(v)))
		var err error
		switch spec.Kind {
		case wan.Large:
			if strings.TrimSpace(v) != "large" {
				return nil, fmt.Errorf("-dataset %q: want large, mixed or small", v)
			}
			spec.LargeBytes, err = bytesOf("large-size", largeSize)
		case wan.Mixed:
			if spec.MixedTotalBytes, err = bytesOf("mixed-total", mixedTotal); err == nil {
				if spec.MixedMinBytes, err = bytesOf("mixed-min", mixedMin); err == nil {
					spec.MixedMaxBytes, err = bytesOf("mixed-max", mixedMax)
				}
			}
		case wan.Small:
			spec.SmallCount = smallCount
			spec.SmallBytes, err = bytesOf("small-size", smallSize)
		}
		if err != nil {
			return nil, err
		}
		specs = append(specs, spec)
	}
	return wan.Matrix(rs, ds, ls, qs, specs, []bool{false}), nil
}

func applyEndpoints(ctx context.Context, c *framework.Cluster) error {
	b, err := os.ReadFile(c.Endpoints)
	if err != nil {
		return err
	}
	var names []string // the endpoints of this cluster's file (one per cluster with -federated)
	for _, doc := range strings.Split(string(b), "\n---") {
		var ep dtnflowv1alpha1.TransferEndpoint
		if err := yaml.Unmarshal([]byte(doc), &ep); err != nil || ep.Name == "" {
			continue
		}
		names = append(names, ep.Name)
		if err := c.Client.Create(ctx, &ep); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench", Labels: map[string]string{"dtnflow.io/transfers": "allowed"}}}
	if err := c.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, name := range names {
		for {
			var ep dtnflowv1alpha1.TransferEndpoint
			if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &ep); err == nil && meta.IsStatusConditionTrue(ep.Status.Conditions, "Ready") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("TransferEndpoint %s is not Ready", name)
			}
			time.Sleep(time.Second)
		}
	}
	return nil
}

func runScenario(ctx context.Context, c *framework.Cluster, federated bool, i int, s scenario, inFlight dtnflowv1alpha1.InFlightCheck, cold, verify, jobVerify bool, timeout time.Duration, logDir string) Result {
	tool := "dtnflow-operator"
	if federated {
		tool = "dtnflow-two-clusters"
	}
	if inFlight != "" {
		tool += "+" + string(inFlight)
	}
	r := Result{Scenario: s.Name(), Tool: tool, Rate: s.RateBitsPerSecond, RTT: s.RTT.String(), Loss: s.Loss,
		Dataset: string(s.Dataset.Kind), Cold: cold, JobVerify: jobVerify, InFlight: string(inFlight), Federated: federated}
	fail := func(err error) Result { r.Error = err.Error(); return r }
	if err := setWAN(ctx, c, s); err != nil {
		return fail(err)
	}
	rel := fmt.Sprintf("bench/%02d-%s", i, s.Name())
	srcDir := filepath.Join(c.Source().Storage, rel)
	destRoot := filepath.Join(c.Destination().Storage, "incoming-bench")
	// The receivers' journals too: the runs' jobs share names (bench-00, …), and a
	// journal of earlier runs is history the receiver summarises at each start (the
	// third run of a series spent 0.6 s on it where the first spent 0.27 s); send
	// --auto's journal lives under its destination root and goes with it.
	journals := filepath.Join(c.Destination().Storage, journal.Dir)
	for _, dir := range []string{srcDir, destRoot, journals} {
		_ = os.RemoveAll(dir)
		defer os.RemoveAll(dir)
	}
	ds, err := wan.Generate(s.Dataset, srcDir)
	if err != nil {
		return fail(err)
	}
	r.Files, r.Bytes = ds.Count(), ds.Total
	job := &dtnflowv1alpha1.TransferJob{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%02d", i), Namespace: "bench"},
		Spec: dtnflowv1alpha1.TransferJobSpec{
			Source:      dtnflowv1alpha1.TransferSource{Endpoint: c.Source().Name, Paths: []dtnflowv1alpha1.RelativePath{dtnflowv1alpha1.RelativePath(rel)}},
			Destination: dtnflowv1alpha1.TransferDestination{Endpoint: c.Destination().Name, Path: "incoming-bench"},
			Integrity:   dtnflowv1alpha1.TransferIntegrity{Checksum: dtnflowv1alpha1.ChecksumBLAKE3, Verify: &jobVerify, InFlight: inFlight},
		},
	}
	if federated {
		job.Spec.Destination.Site = benchSite
		// the destination folder is B's to create, as B's agents' user
		if err := os.MkdirAll(destRoot, 0o755); err != nil {
			return fail(err)
		}
		owner := c.Destination().Owner
		if err := os.Chown(destRoot, int(owner.User), int(owner.Group)); err != nil {
			return fail(err)
		}
	}
	if cold {
		profile := &dtnflowv1alpha1.PathProfile{ObjectMeta: metav1.ObjectMeta{Name: controllers.PathProfileNameFor(job)}}
		if err := c.Client.Delete(ctx, profile); err != nil && !apierrors.IsNotFound(err) {
			return fail(err)
		}
	}
	_ = c.Client.Delete(ctx, job)
	waitGone(ctx, c, job)
	stopFlows, err := competingFlows(ctx, c, s)
	if err != nil {
		return fail(err)
	}
	defer stopFlows()
	wctx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	cpu := watchCPU(wctx, c, job.Namespace, job.Name)
	tr := followRun(ctx, c, s, func() int64 { return treeBytes(destRoot) })
	defer tr.stop(s)
	wc, err := client.NewWithWatch(c.Config, client.Options{Scheme: framework.Scheme()})
	if err != nil {
		return fail(err)
	}
	start := time.Now()
	if err := c.Client.Create(ctx, job); err != nil {
		return fail(err)
	}
	defer func() { _ = c.Client.Delete(context.Background(), job) }()
	var got dtnflowv1alpha1.TransferJob
	var ended time.Time
	fctx, cancel := context.WithDeadline(ctx, start.Add(timeout))
	defer cancel()
	err = followJob(fctx, wc, client.ObjectKeyFromObject(job), func(j *dtnflowv1alpha1.TransferJob, at time.Time) {
		got = *j
		if r.PlanSeconds == 0 && meta.IsStatusConditionTrue(j.Status.Conditions, dtnflowv1alpha1.ConditionPlanned) {
			r.PlanSeconds = at.Sub(start).Seconds()
		}
		if r.FirstProgressSeconds == 0 && j.Status.Progress != nil && j.Status.Progress.BytesDone > 0 {
			r.FirstProgressSeconds = at.Sub(start).Seconds()
		}
		if jobEnded(j) {
			ended = at
		}
	})
	if err != nil {
		r.State = string(got.Status.State)
		if fctx.Err() != nil && ctx.Err() == nil {
			err = fmt.Errorf("not complete after %s", timeout)
		}
		return fail(err)
	}
	r.Seconds = ended.Sub(start).Seconds()
	r.Phases = tr.stop(s)
	r.DeliveredMbitPerSecond = tr.perSecond()
	stopWatch()
	r.CPU = cpu.results()
	if ch := got.Status.Channels; ch != nil {
		r.Scheduler, r.ChannelMoves = string(ch.Scheduler), ch.Moves
	}
	r.State = string(got.Status.State)
	r.BitsPerSecond = int64(float64(r.Bytes*8) / r.Seconds)
	r.ShareOfLink = float64(r.BitsPerSecond) / float64(s.RateBitsPerSecond)
	r.Replans = len(got.Status.Replans)
	r.Samples, r.ReplanLog = got.Status.Samples, got.Status.Replans
	if logDir != "" {
		if err := keepAgentLogs(ctx, c, &got, filepath.Join(logDir, fmt.Sprintf("%s-operator", s.Name()))); err != nil {
			fmt.Fprintf(os.Stderr, "bench-cluster: the agents' logs of %s: %v\n", got.Name, err)
		}
	}
	if tm := got.Status.Timings; tm != nil {
		r.FirstByteMilliseconds, r.PlanMilliseconds, r.CompleteMilliseconds = tm.FirstByteMilliseconds, tm.PlanMilliseconds, tm.CompleteMilliseconds
	}
	if p := got.Status.Progress; p != nil {
		r.JobAverageBitsPerSecond = p.AverageBitsPerSecond
	}
	if p := got.Status.Plan; p != nil {
		r.Plan = fmt.Sprintf("%d × %d × %d", len(p.SourceNodes), p.StripesPerNode, p.StreamsPerStripe)
		if p.ProbeHelperStripes > 0 {
			r.Plan += fmt.Sprintf(" + %d probe helper(s)", p.ProbeHelperStripes)
		}
		if p.Model != nil {
			r.Model = fmt.Sprintf("%s n*=%d", p.Model.Name, p.Model.OptimalStreams)
		}
	}
	if got.Status.State != dtnflowv1alpha1.StateComplete {
		if cond := meta.FindStatusCondition(got.Status.Conditions, dtnflowv1alpha1.ConditionFailed); cond != nil {
			return fail(fmt.Errorf("%s: %s", cond.Reason, cond.Message))
		}
		return fail(fmt.Errorf("ended %s", got.Status.State))
	}
	if verify {
		diff, _, err := dataset.CompareFolders(srcDir, filepath.Join(destRoot, rel))
		if err != nil {
			return fail(err)
		}
		if diff != "" {
			return fail(fmt.Errorf("the copy differs: %s", strings.SplitN(diff, "\n", 2)[0]))
		}
	}
	return r
}

func waitGone(ctx context.Context, c *framework.Cluster, job *dtnflowv1alpha1.TransferJob) {
	for i := 0; i < 120; i++ {
		if err := c.Client.Get(ctx, client.ObjectKeyFromObject(job), &dtnflowv1alpha1.TransferJob{}); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// agentPort is where the agent-alone run's receiver listens on site B's node (outside
// the cluster's agent port range, which the operator's pods use).
const agentPort = 7390

// runAgentAuto moves the scenario's dataset with the agent alone: `dtnflow-agent
// receive` in site B's node namespace and `dtnflow-agent send --auto` in site A's, on
// the WAN the scenario set, timed from the sender's start to its exit.
func runAgentAuto(ctx context.Context, c *framework.Cluster, i int, s scenario, agent string, maxStripes, maxStreams, concurrency int, verify, jobVerify bool, timeout time.Duration, logDir string) Result {
	r := Result{Scenario: s.Name(), Tool: "dtnflow-agent-auto", Rate: s.RateBitsPerSecond, RTT: s.RTT.String(), Loss: s.Loss,
		Dataset: string(s.Dataset.Kind), Cold: true, JobVerify: jobVerify}
	fail := func(err error) Result { r.Error = err.Error(); return r }
	if _, err := os.Stat(agent); err != nil {
		return fail(fmt.Errorf("-agent: %w", err))
	}
	if err := setWAN(ctx, c, s); err != nil {
		return fail(err)
	}
	srcNode, dstNode := c.Source().Nodes[0], c.Destination().Nodes[0]
	src := topology.Host{Name: srcNode.Name, Netns: srcNode.Netns}
	dst := topology.Host{Name: dstNode.Name, Netns: dstNode.Netns}
	if a, err := netip.ParseAddr(dstNode.IP); err == nil {
		dst.Addr = a
	}
	rel := fmt.Sprintf("bench/%02d-%s", i, s.Name())
	srcRoot := c.Source().Storage
	srcDir := filepath.Join(srcRoot, rel)
	destRoot := filepath.Join(c.Destination().Storage, "incoming-bench-agent")
	_ = os.RemoveAll(srcDir)
	_ = os.RemoveAll(destRoot)
	defer os.RemoveAll(srcDir)
	defer os.RemoveAll(destRoot)
	ds, err := wan.Generate(s.Dataset, srcDir)
	if err != nil {
		return fail(err)
	}
	r.Files, r.Bytes = ds.Count(), ds.Total
	if err := os.MkdirAll(destRoot, 0o755); err != nil {
		return fail(err)
	}
	key := filepath.Join(destRoot, ".key")
	if err := os.WriteFile(key, []byte("bench-cluster-agent-alone-secret-0123456789\n"), 0o600); err != nil {
		return fail(err)
	}
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	recv := dst.Command(rctx, agent, "receive", "--listen", fmt.Sprintf("%s:%d", dstNode.IP, agentPort), "--root", destRoot, "--secret-file", key, "--metrics-addr", "off")
	var recvOut strings.Builder
	recv.Stdout, recv.Stderr = &recvOut, &recvOut
	recv.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	recv.Cancel = func() error { return syscall.Kill(-recv.Process.Pid, syscall.SIGKILL) }
	if err := recv.Start(); err != nil {
		return fail(err)
	}
	defer func() { _ = syscall.Kill(-recv.Process.Pid, syscall.SIGTERM); _ = recv.Wait() }()
	if err := waitListening(rctx, dst, agentPort); err != nil {
		return fail(fmt.Errorf("%w: %s", err, recvOut.String()))
	}
	stopFlows, err := competingFlows(ctx, c, s)
	if err != nil {
		return fail(err)
	}
	defer stopFlows()
	args := []string{"send", "--auto", "--stripes", strconv.Itoa(maxStripes), "--max-streams", strconv.Itoa(maxStreams),
		"--to", fmt.Sprintf("%s:%d", dstNode.IP, agentPort), "--root", srcRoot, "--secret-file", key, "--metrics-addr", "off",
		"--dest-path", "copy", "--verify=" + strconv.FormatBool(jobVerify)}
	r.AgentConfig = "--auto --stripes " + strconv.Itoa(maxStripes) + " --max-streams " + strconv.Itoa(maxStreams)
	if concurrency > 0 {
		args = append(args, "--concurrency", strconv.Itoa(concurrency))
		r.AgentConfig += " --concurrency " + strconv.Itoa(concurrency)
	}
	args = append(args, rel)
	send := src.Command(rctx, agent, args...)
	var out strings.Builder
	send.Stdout, send.Stderr = &out, &out
	tr := followRun(ctx, c, s, func() int64 { return treeBytes(destRoot) })
	start := time.Now()
	err = send.Run()
	r.Seconds = time.Since(start).Seconds()
	r.Phases = tr.stop(s)
	r.DeliveredMbitPerSecond = tr.perSecond()
	// beside the operator's archive: what send --auto logged (its probe, its plan) is
	// what the operator's coordinator log is compared with
	keepAgentAloneLog(logDir, s, "send", out.String())
	keepAgentAloneLog(logDir, s, "receive", recvOut.String())
	if err != nil {
		r.State = "Failed"
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		return fail(fmt.Errorf("send --auto: %v: %s", err, lines[len(lines)-1]))
	}
	r.State = string(dtnflowv1alpha1.StateComplete)
	r.BitsPerSecond = int64(float64(r.Bytes*8) / r.Seconds)
	r.ShareOfLink = float64(r.BitsPerSecond) / float64(s.RateBitsPerSecond)
	if m := plannedLine.FindStringSubmatch(out.String()); m != nil {
		r.AgentConfig += fmt.Sprintf(" → %s × %s", m[1], m[2])
		r.Plan = fmt.Sprintf("1 × %s × %s", m[1], m[2])
	}
	if verify {
		diff, _, err := dataset.CompareFolders(srcDir, filepath.Join(destRoot, "copy", rel))
		if err != nil {
			return fail(err)
		}
		if diff != "" {
			return fail(fmt.Errorf("the agent's copy differs: %s", strings.SplitN(diff, "\n", 2)[0]))
		}
	}
	return r
}

// keepAgentAloneLog writes one process's output of an agent-alone run under
// logDir/<scenario>-agent-auto/ (nothing without -log-dir).
func keepAgentAloneLog(logDir string, s scenario, role, text string) {
	if logDir == "" {
		return
	}
	dir := filepath.Join(logDir, s.Name()+"-agent-auto")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "keeping the agent-alone run's log: %v\n", err)
		return
	}
	if err := os.WriteFile(filepath.Join(dir, role+".log"), []byte(text), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "keeping the agent-alone run's log: %v\n", err)
	}
}

// plannedLine is send --auto's log line of its plan (slog text).
var plannedLine = regexp.MustCompile(`msg=Planned stripes=(\d+) streams=(\d+)`)

// waitListening waits until something listens on port in host's namespace.
func waitListening(ctx context.Context, host topology.Host, port int) error {
	hexPort := fmt.Sprintf(":%04X ", port)
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); {
		out, err := host.Command(ctx, "cat", "/proc/net/tcp").Output()
		if err == nil {
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				if len(f) > 3 && strings.HasSuffix(f[1]+" ", hexPort) && f[3] == "0A" {
					return nil
				}
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on port %d in %s", port, host.Netns)
}

// benchSite is site B's RemoteSite at A with -federated.
const benchSite = "site-b"

// setUpSitePair installs dtnflow at each site, creates each site's endpoint and the
// bench namespace at A, and pairs the sites: B grants A's bench namespace writes under
// incoming-bench, encrypted or not (the rows compare both).
func setUpSitePair(ctx context.Context, a, b *framework.Cluster) error {
	for _, s := range []struct {
		c    *framework.Cluster
		site string
	}{{a, a.Source().Name}, {b, a.Destination().Name}} {
		if out, err := s.c.InstallAtSite(ctx, s.site); err != nil {
			return fmt.Errorf("%w\n%s", err, out)
		}
		if err := applyEndpoints(ctx, s.c); err != nil {
			return err
		}
	}
	peer := &dtnflowv1alpha1.TransferPeer{ObjectMeta: metav1.ObjectMeta{Name: "site-a"},
		Spec: dtnflowv1alpha1.TransferPeerSpec{Namespace: "peer-site-a", RemoteNamespaces: []string{"bench"}, RequireEncryption: new(false),
			Grants: []dtnflowv1alpha1.TransferGrant{{Endpoint: a.Destination().Name, Access: dtnflowv1alpha1.GrantWrite,
				Paths: []dtnflowv1alpha1.RelativePath{"incoming-bench"}}}}}
	return a.PairSites(ctx, b, peer, benchSite, filepath.Join(framework.RepoRoot(), ".cache", "bench-cluster-pairing"), os.Stderr)
}

// toolRun is one tool's run of a scenario: the operator once per in-flight mode.
type toolRun struct {
	name     string
	inFlight dtnflowv1alpha1.InFlightCheck
}

// expandModes lists the runs of a scenario: every tool in order, the operator once for
// each of modes (one "" mode: the job's default).
func expandModes(tools, modes []string) []toolRun {
	var out []toolRun
	for _, t := range tools {
		t = strings.TrimSpace(t)
		if t != "operator" && t != "operator-warm-pool" {
			out = append(out, toolRun{name: t})
			continue
		}
		for _, m := range modes {
			out = append(out, toolRun{name: t, inFlight: dtnflowv1alpha1.InFlightCheck(strings.TrimSpace(m))})
		}
	}
	return out
}

// keepAgentLogs writes the job's archive of agent logs (the ConfigMap the manager fills
// as the job ends, which goes with the job) into dir, one file per key.
func keepAgentLogs(ctx context.Context, c *framework.Cluster, job *dtnflowv1alpha1.TransferJob, dir string) error {
	var cm corev1.ConfigMap
	if err := c.Client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: controllers.AgentLogsName(job.Name)}, &cm); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for k, v := range cm.Data {
		if err := os.WriteFile(filepath.Join(dir, filepath.Base(k)), []byte(v), 0o644); err != nil {
			return err
		}
	}
	return nil
}
