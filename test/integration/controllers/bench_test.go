package controllers

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/integration/framework"
)

// benchJobs is the number of TransferJobs of the load benchmark (DTNFLOW_BENCH_JOBS
// overrides it).
const benchJobs = 500

// steadyTimeout bounds the load benchmark's wait for every job to be Transferring.
const steadyTimeout = 8 * time.Minute

// BenchmarkManagerLoad measures the manager under load: it runs the real manager
// binary (bin/manager, or a fresh build) as its own process against the test API
// server, creates 500 Auto-mode TransferJobs at once (each limited to one stripe) on 20
// paths — four source sites and five destination sites of four nodes each, with a CPU
// budget — and plays kubelet and agents for all of them — pods start, coordinators list
// the dataset, probe (one job per path: the others plan from what it learns), and
// report transferring at the rate their directive paces them to — until every job is
// Transferring with its stripe Running. It reports the time to that steady state and
// the manager's resident memory (peak, and at steady state), read from /proc, and fails
// when any node's planned load (every job's plan on it) exceeds its NIC or CPU budget.
//
//	make bench-controller
func BenchmarkManagerLoad(b *testing.B) {
	n := benchJobs
	if s := os.Getenv("DTNFLOW_BENCH_JOBS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	for range b.N {
		r := runLoad(b, n)
		b.ReportMetric(r.planned.Seconds(), "s-to-planned")
		b.ReportMetric(r.steady.Seconds(), "s-to-steady")
		b.ReportMetric(float64(r.peakRSS)/(1<<20), "MiB-peak-rss")
		b.ReportMetric(float64(r.steadyRSS)/(1<<20), "MiB-steady-rss")
		b.ReportMetric(r.reconciles, "reconciles")
		b.ReportMetric(r.cpu, "manager-cpu-s")
		b.ReportMetric(r.nicUse, "max-node-nic-use")
		b.ReportMetric(r.cpuUse, "max-node-cpu-use")
		b.Logf("%d jobs on %d paths: all planned after %s, all Transferring after %s; manager RSS peak %.0f MiB, at steady state %.0f MiB; manager CPU %.1f s; %.0f TransferJob reconciles, %d pods; the busiest node's planned NIC %.0f %%, CPU budget %.0f %%",
			n, benchSources*benchDestinations, r.planned.Round(100*time.Millisecond), r.steady.Round(100*time.Millisecond), float64(r.peakRSS)/(1<<20), float64(r.steadyRSS)/(1<<20), r.cpu, r.reconciles, r.pods, 100*r.nicUse, 100*r.cpuUse)
	}
}

type loadResult struct {
	planned, steady    time.Duration
	peakRSS, steadyRSS int64
	reconciles         float64
	pods               int
	// cpu is the manager's CPU time (user + system) until steady state.
	cpu float64
	// nicUse and cpuUse are the highest planned use of a node's NIC and CPU budget.
	nicUse, cpuUse float64
}

func runLoad(b *testing.B, n int) loadResult {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	bin := managerBinary(b)
	metricsAddr := freeAddr(b)
	kubeconfig := writeKubeconfig(b)

	var srcs, dsts []site
	for range benchSources {
		srcs = append(srcs, newSite(b, "bsrc", siteOptions{nodes: 4, budget: benchBudget, maxStripesPerNode: 64, ports: &dtnflowv1alpha1.PortRange{First: 40000, Last: 40999}}))
	}
	for range benchDestinations {
		dsts = append(dsts, newSite(b, "bdst", siteOptions{nodes: 4, budget: benchBudget, maxStripesPerNode: 64, ports: &dtnflowv1alpha1.PortRange{First: 40000, Last: 40999}}))
	}
	ns := createNamespace(b, nil)

	cmd := exec.CommandContext(ctx, bin, "--leader-elect=false", "--metrics-bind-address="+metricsAddr, "--metrics-secure=false",
		"--health-probe-bind-address=0", "--zap-log-level=error", "--agent-image=dtnflow-agent:bench", "--report-interval=10s")
	if w := os.Getenv("DTNFLOW_BENCH_WORKERS"); w != "" {
		cmd.Args = append(cmd.Args, "--job-workers="+w)
	}
	cmd.Env = append(os.Environ(), "KUBECONFIG="+kubeconfig)
	cmd.Stderr = &tailWriter{max: 64 << 10}
	if err := cmd.Start(); err != nil {
		b.Fatalf("starting %s: %v", bin, err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	sim := startAgentSimulator(ctx, b, ns)

	b.ResetTimer()
	start := time.Now()
	createJobs(b, ns, n, srcs, dsts)

	var res loadResult
	var rss int64
	deadline := time.After(steadyTimeout)
	for tick := time.NewTicker(500 * time.Millisecond); ; {
		select {
		case <-deadline:
			b.Fatalf("not every job was Transferring after %s: %s\nmanager log tail:\n%s", steadyTimeout, census(b, ns), cmd.Stderr.(*tailWriter).String())
		case <-tick.C:
		}
		rss = residentBytes(cmd.Process.Pid)
		res.peakRSS = max(res.peakRSS, peakResidentBytes(cmd.Process.Pid))
		planned, steady := countJobs(b, ns)
		if planned == n && res.planned == 0 {
			res.planned = time.Since(start)
		}
		if steady == n {
			res.steady = time.Since(start)
			break
		}
	}
	b.StopTimer()
	res.nicUse, res.cpuUse = nodeBudgets(b, ns, append(srcs, dsts...))
	res.steadyRSS = rss
	res.cpu = cpuSeconds(cmd.Process.Pid)
	res.reconciles = scrape(b, metricsAddr, `controller_runtime_reconcile_total{controller="transferjob",result="success"}`)
	if os.Getenv("DTNFLOW_BENCH_DEBUG") != "" {
		for _, s := range []string{
			`controller_runtime_reconcile_time_seconds_sum{controller="transferjob"}`,
			`controller_runtime_reconcile_time_seconds_count{controller="transferjob"}`,
			`controller_runtime_reconcile_time_seconds_sum{controller="transferendpoint"}`,
			`controller_runtime_reconcile_time_seconds_count{controller="transferendpoint"}`,
			`workqueue_queue_duration_seconds_sum{controller="transferjob",name="transferjob"}`,
			`workqueue_queue_duration_seconds_count{controller="transferjob",name="transferjob"}`,
			`controller_runtime_reconcile_total{controller="transferjob",result="requeue_after"}`,
			`controller_runtime_reconcile_total{controller="transferjob",result="error"}`,
			`rest_client_requests_total{code="201",host="` + strings.TrimPrefix(env.Config.Host, "https://") + `",method="POST"}`,
		} {
			b.Logf("%s %v", s, scrape(b, metricsAddr, s))
		}
		var pods corev1.PodList
		_ = env.Client.List(ctx, &pods, client.InNamespace(ns))
		kept := map[string]int{}
		for _, p := range pods.Items {
			if p.Labels[contract.LabelPlanHash] == "probe" {
				kept[p.Labels[contract.LabelRole]]++
			}
		}
		b.Logf("pods of the probe still running at steady state, by role: %v (of %d jobs)", kept, n)
	}
	res.pods = sim.pods()
	return res
}

// The load benchmark's topology: 4 × 5 = 20 paths, nodes of a 10 Gbit/s NIC and a
// CPU budget.
const (
	benchSources      = 4
	benchDestinations = 5
	benchBudget       = "16"
)

// nodeBudgets sums every job's plan on each node — its stripes' planned rate and its
// agents' CPU requests — fails the benchmark when a node's exceeds its NIC or CPU
// budget, and returns the highest use of each, as fractions.
func nodeBudgets(b *testing.B, ns string, sites []site) (nic, cpu float64) {
	var jobs dtnflowv1alpha1.TransferJobList
	if err := env.Client.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	rate, milli := map[string]int64{}, map[string]int64{}
	for _, j := range jobs.Items {
		p := j.Status.Plan
		if p == nil {
			continue
		}
		stripes := int64(max(len(p.SourceNodes), 1)) * int64(p.StripesPerNode)
		for _, n := range p.SourceNodes {
			rate[n] += p.PredictedBitsPerSecond / stripes * int64(p.StripesPerNode)
			milli[n] += int64(p.StripesPerNode) * p.SourceCPUMillicores
		}
		for _, n := range p.DestinationNodes {
			rate[n] += p.PredictedBitsPerSecond / stripes * int64(p.StripesPerNode)
			milli[n] += int64(p.StripesPerNode) * p.DestinationCPUMillicores
		}
	}
	budget := resource.MustParse(benchBudget)
	for _, s := range sites {
		for _, n := range s.nodes {
			if rate[n] > 10_000_000_000 || milli[n] > budget.MilliValue() {
				b.Errorf("node %s: planned %d bit/s over a 10 Gbit/s NIC, %d m over a %d m budget", n, rate[n], milli[n], budget.MilliValue())
			}
			nic = max(nic, float64(rate[n])/10e9)
			cpu = max(cpu, float64(milli[n])/float64(budget.MilliValue()))
		}
	}
	return nic, cpu
}

// createJobs creates n Auto-mode jobs, each limited to one node and one stripe, round
// robin over the paths from srcs to dsts, with a few writers at once as a GitOps tool
// would.
func createJobs(b *testing.B, ns string, n int, srcs, dsts []site) {
	var wg sync.WaitGroup
	var next atomic.Int32
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := int(next.Add(1)) - 1; i < n; i = int(next.Add(1)) - 1 {
				spec := jobSpec(srcs[i%len(srcs)], dsts[(i/len(srcs))%len(dsts)])
				spec.Tuning.Limits = &dtnflowv1alpha1.TuningLimits{MaxNodes: ptr.To[int32](1), MaxStripesPerNode: ptr.To[int32](1)}
				job := &dtnflowv1alpha1.TransferJob{}
				job.Namespace, job.Name, job.Spec = ns, fmt.Sprintf("load-%03d", i), spec
				if err := env.Client.Create(context.Background(), job); err != nil {
					b.Errorf("creating job %d: %v", i, err)
				}
			}
		}()
	}
	wg.Wait()
}

// countJobs counts the jobs with a plan and those Transferring with every stripe Running.
func countJobs(b *testing.B, ns string) (planned, steady int) {
	var jobs dtnflowv1alpha1.TransferJobList
	if err := env.Client.List(context.Background(), &jobs, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	for _, j := range jobs.Items {
		if meta.IsStatusConditionTrue(j.Status.Conditions, dtnflowv1alpha1.ConditionPlanned) {
			planned++
		}
		if j.Status.State != dtnflowv1alpha1.StateTransferring || len(j.Status.Stripes) == 0 {
			continue
		}
		running := true
		for _, s := range j.Status.Stripes {
			running = running && s.State == dtnflowv1alpha1.StripeRunning
		}
		if running {
			steady++
		}
	}
	return planned, steady
}

func census(b *testing.B, ns string) string {
	var jobs dtnflowv1alpha1.TransferJobList
	_ = env.Client.List(context.Background(), &jobs, client.InNamespace(ns))
	states := map[string]int{}
	for _, j := range jobs.Items {
		states[string(j.Status.State)]++
	}
	return fmt.Sprint(states)
}

// agentSimulator plays kubelet and coordinator for every agent pod in a namespace:
// pods start Running; a coordinator without a directive lists the dataset; one with a
// probe directive reports its samples; one with a transfer directive reports moving.
type agentSimulator struct {
	c    client.Client
	seen sync.Map // pod UID → struct{}
}

func (s *agentSimulator) pods() int {
	n := 0
	s.seen.Range(func(any, any) bool { n++; return true })
	return n
}

func startAgentSimulator(ctx context.Context, b *testing.B, ns string) *agentSimulator {
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, DefaultNamespaces: map[string]cache.Config{ns: {}}})
	if err != nil {
		b.Fatal(err)
	}
	inf, err := c.GetInformer(ctx, &corev1.Pod{})
	if err != nil {
		b.Fatal(err)
	}
	sim := &agentSimulator{c: env.Client}
	work := make(chan types.NamespacedName, 1<<16)
	enqueue := func(o any) {
		if p, ok := o.(*corev1.Pod); ok {
			work <- types.NamespacedName{Namespace: p.Namespace, Name: p.Name}
		}
	}
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }})
	go func() { _ = c.Start(ctx) }()
	c.WaitForCacheSync(ctx)
	for range 4 {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case key := <-work:
					var pod corev1.Pod
					if err := c.Get(ctx, key, &pod); err != nil || pod.DeletionTimestamp != nil {
						continue
					}
					sim.seen.Store(pod.UID, struct{}{})
					sim.step(ctx, &pod)
				}
			}
		}()
	}
	return sim
}

// step does what the pod's kubelet or agent would do next.
func (s *agentSimulator) step(ctx context.Context, pod *corev1.Pod) {
	if pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending {
		p := pod.DeepCopy()
		p.Status.Phase = corev1.PodRunning
		_ = s.c.Status().Update(ctx, p)
		return
	}
	if pod.Labels[contract.LabelRole] != string(contract.RoleCoordinator) {
		return
	}
	var d contract.Directive
	if raw := pod.Annotations[contract.AnnotationDirective]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &d)
	}
	var last contract.Report
	if raw := pod.Annotations[contract.AnnotationReport]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &last)
	}
	now := time.Now().UTC().Truncate(time.Second)
	rep := contract.Report{Generation: d.Generation, Time: now, Dataset: dataset, BytesTotal: dataset.Bytes, FilesTotal: dataset.Files}
	switch d.Mode {
	case "":
		rep.Phase = contract.PhaseStarting
	case contract.ModeProbe:
		rep.Phase, rep.Samples = contract.PhaseProbed, probeSamples(now.Add(-time.Minute))
	case contract.ModeTransfer:
		// the path's 900 Mbit/s, or the share the directive paces the job to
		bps := int64(900_000_000)
		if d.MaxBitsPerSecond > 0 {
			bps = min(bps, d.MaxBitsPerSecond)
		}
		rep.Phase, rep.BitsPerSecond = contract.PhaseTransferring, bps
		if d.Probe != nil {
			rep.Probe, rep.Samples = contract.PhaseProbed, probeSamples(now.Add(-time.Minute))
		}
		for k := range d.Stripes {
			rep.Stripes = append(rep.Stripes, contract.StripeReport{Index: k, Connected: true, Streams: d.StreamsPerStripe, BitsPerSecond: bps / int64(d.Stripes)})
		}
	default:
		return
	}
	if last.Phase == rep.Phase && last.Generation == rep.Generation {
		return // already reported; the next report would come an interval later
	}
	raw, _ := json.Marshal(rep)
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.AnnotationReport: string(raw)}}})
	_ = s.c.Patch(ctx, pod, client.RawPatch(types.MergePatchType, patch))
}

// managerBinary is bin/manager as `make bench-controller` builds it, or a fresh build.
func managerBinary(b *testing.B) string {
	if p := os.Getenv("DTNFLOW_MANAGER_BIN"); p != "" {
		return p
	}
	out := filepath.Join(b.TempDir(), "manager")
	cmd := exec.Command("go", "build", "-o", out, ".")
	cmd.Dir = framework.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOTOOLCHAIN=local")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("building the manager: %v\n%s", err, msg)
	}
	return out
}

// writeKubeconfig writes a kubeconfig for the test API server's admin user.
func writeKubeconfig(b *testing.B) string {
	cfg := env.Config
	kc := clientcmdapi.NewConfig()
	kc.Clusters["envtest"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["envtest"] = &clientcmdapi.Context{Cluster: "envtest", AuthInfo: "admin"}
	kc.CurrentContext = "envtest"
	path := filepath.Join(b.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		b.Fatal(err)
	}
	return path
}

func freeAddr(b *testing.B) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// residentBytes is a process's resident set size now; peakResidentBytes its peak.
func residentBytes(pid int) int64     { return procStatus(pid, "VmRSS:") }
func peakResidentBytes(pid int) int64 { return procStatus(pid, "VmHWM:") }

func procStatus(pid int, key string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), key); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// cpuSeconds is a process's user and system CPU time so far.
func cpuSeconds(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces) start at ")".
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ is 100 on Linux
}

// scrape reads one sample from the manager's metrics endpoint.
func scrape(b *testing.B, addr, series string) float64 {
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		b.Logf("scraping the manager's metrics: %v", err)
		return 0
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	for _, line := range strings.Split(string(body), "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, _ := strconv.ParseFloat(strings.TrimSpace(rest), 64)
			return v
		}
	}
	return 0
}

// tailWriter keeps the last bytes written to it.
type tailWriter struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf = append(w.buf, p...)
	if len(w.buf) > w.max {
		w.buf = w.buf[len(w.buf)-w.max:]
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return string(w.buf)
}
