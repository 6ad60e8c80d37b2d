package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
)

// Named timeouts: how long the tests wait for the manager to do one thing.
const (
	// actTimeout bounds the manager's reaction to one change (a pod event, a report).
	actTimeout = 20 * time.Second
	// quietPeriod is how long a test watches for something that must not happen.
	quietPeriod = 2 * time.Second
	poll        = 50 * time.Millisecond
)

// reportInterval is the report interval the manager is told, and the step by which
// tests move the fake clock between reports.
const reportInterval = 10 * time.Second

// testManager is one running manager.
type testManager struct {
	cancel context.CancelFunc
	done   chan error
	mgr    ctrl.Manager
}

// managerOptions tune startManager.
type managerOptions struct {
	leaderElection bool
	identity       string
	workers        int
	// namespace is the manager's own namespace (RemoteSites' credentials).
	namespace string
	// agentLogs plays the kubelets' logs (envtest runs none); nil: fakeLogs{}.
	agentLogs controllers.AgentLogSource
	// remotePoll is how often a job looks at its peer's side unwoken; 0: the default.
	remotePoll time.Duration
}

// fakeLogs plays the kubelet's answer to pods/log: a few lines naming the pod, or the
// error set for it.
type fakeLogs struct {
	errs map[string]error
}

func (f fakeLogs) TailLog(_ context.Context, pod *corev1.Pod, limit int) ([]byte, bool, error) {
	if err := f.errs[pod.Name]; err != nil {
		return nil, false, err
	}
	text := fmt.Sprintf("level=INFO msg=\"Started\" pod=%s uid=%s\nlevel=ERROR msg=\"Last words\" pod=%s\n", pod.Name, pod.UID, pod.Name)
	return []byte(text[:min(len(text), limit)]), false, nil
}

var managerSeq atomic.Int32

// startManager starts a manager with the production wiring (cache, indexes, both
// reconcilers, metrics) on the fake clock, and stops it when the test ends.
func startManager(t testing.TB, clk *clocktesting.FakeClock, o managerOptions) *testManager {
	t.Helper()
	opts := ctrl.Options{
		Scheme:                 env.Scheme,
		Cache:                  controllers.CacheOptions(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		// Tests start several managers in one process; controller names repeat.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
		// A pass still running at the end (a loaded machine) is given this long before
		// the manager returns anyway, well within stop's wait: the default (30 s) was
		// stop's own bound, and a shutdown that used all of it panicked the test.
		GracefulShutdownTimeout: ptr.To(10 * time.Second),
	}
	if o.leaderElection {
		opts.LeaderElection = true
		opts.LeaderElectionNamespace = "default"
		opts.LeaderElectionID = "dtnflow-test-" + strings.ToLower(strings.ReplaceAll(t.Name(), "/", "-"))
		opts.LeaderElectionReleaseOnCancel = true
		opts.LeaseDuration = ptr.To(4 * time.Second)
		opts.RenewDeadline = ptr.To(3 * time.Second)
		opts.RetryPeriod = ptr.To(500 * time.Millisecond)
	}
	cfg := *env.Config
	if o.identity != "" {
		cfg.UserAgent = o.identity
	}
	mgr, err := ctrl.NewManager(&cfg, opts)
	if err != nil {
		t.Fatalf("creating the manager: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if o.agentLogs == nil {
		o.agentLogs = fakeLogs{}
	}
	if err := controllers.Setup(ctx, mgr, controllers.Config{
		Planner: controllers.NewPlanner(),
		Pods: controllers.AgentPodOptions{Image: "dtnflow-agent:test", ImagePullPolicy: corev1.PullNever,
			CoordinatorMillicores: 100, ProbeMillicores: 250, APIServerHost: "10.99.0.1", APIServerPort: "6443"},
		ReportInterval: reportInterval,
		JobWorkers:     o.workers,
		Clock:          clk,
		Namespace:      o.namespace,
		AgentLogs:      o.agentLogs,
		RemotePoll:     o.remotePoll,
	}); err != nil {
		cancel()
		t.Fatalf("setting up the controllers: %v", err)
	}
	m := &testManager{cancel: cancel, done: make(chan error, 1), mgr: mgr}
	go func() { m.done <- mgr.Start(ctx) }()
	t.Cleanup(m.stop)
	managerSeq.Add(1)
	return m
}

// stop stops the manager and waits for it to return.
func (m *testManager) stop() {
	if m.cancel == nil {
		return
	}
	m.cancel()
	m.cancel = nil
	select {
	case <-m.done:
	case <-time.After(45 * time.Second):
		panic("the manager did not stop within 45s")
	}
}

// newClock is a fake clock for one test.
func newClock() *clocktesting.FakeClock {
	return clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
}

var uniq atomic.Int32

// unique returns a DNS-label-safe name with the given prefix, unique in the test run.
func unique(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, uniq.Add(1))
}

// createNamespace creates a namespace with the given labels.
func createNamespace(t testing.TB, labels map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unique("ns"), Labels: labels}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatalf("creating namespace: %v", err)
	}
	return ns.Name
}

var nodeIP atomic.Int32

// site is a TransferEndpoint and its nodes.
type site struct {
	name  string
	nodes []string
}

// siteOptions tune newSite.
type siteOptions struct {
	nodes             int
	budget            string
	readOnly          bool
	namespaceSelector *metav1.LabelSelector
	ports             *dtnflowv1alpha1.PortRange
	maxStripesPerNode int32
}

// newSite creates Ready nodes labelled for a new site, and its TransferEndpoint.
func newSite(t testing.TB, prefix string, o siteOptions) site {
	t.Helper()
	ctx := context.Background()
	s := site{name: unique(prefix)}
	if o.nodes == 0 {
		o.nodes = 2
	}
	for i := range o.nodes {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-n%d", s.name, i), Labels: map[string]string{"dtnflow.io/site": s.name}}}
		if err := env.Client.Create(ctx, n); err != nil {
			t.Fatalf("creating node: %v", err)
		}
		ip := nodeIP.Add(1)
		n.Status = corev1.NodeStatus{
			Conditions:  []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
			Addresses:   []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.%d.%d.%d", 1+ip/65536, (ip/256)%256, ip%256)}, {Type: corev1.NodeHostName, Address: n.Name}},
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourcePods: resource.MustParse("110")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourcePods: resource.MustParse("110")},
		}
		if err := env.Client.Status().Update(ctx, n); err != nil {
			t.Fatalf("making node %s Ready: %v", n.Name, err)
		}
		s.nodes = append(s.nodes, n.Name)
	}
	sel := o.namespaceSelector
	if sel == nil {
		sel = &metav1.LabelSelector{}
	}
	ep := &dtnflowv1alpha1.TransferEndpoint{
		ObjectMeta: metav1.ObjectMeta{Name: s.name},
		Spec: dtnflowv1alpha1.TransferEndpointSpec{
			NodeSelector:      map[string]string{"dtnflow.io/site": s.name},
			Storage:           dtnflowv1alpha1.EndpointStorage{HostPath: "/srv/" + s.name, ReadOnly: o.readOnly},
			NICBitsPerSecond:  10_000_000_000,
			NamespaceSelector: sel,
			AgentPorts:        o.ports,
			MaxStripesPerNode: o.maxStripesPerNode,
		},
	}
	if o.budget != "" {
		q := resource.MustParse(o.budget)
		ep.Spec.CPUBudgetPerNode = &q
	}
	if err := env.Client.Create(ctx, ep); err != nil {
		t.Fatalf("creating endpoint: %v", err)
	}
	return s
}

// setNodeReady marks a node Ready or NotReady, as its kubelet (or the node lifecycle
// controller) would.
func setNodeReady(t testing.TB, name string, ready bool) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var n corev1.Node
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Name: name}, &n)).To(Succeed())
		status := corev1.ConditionTrue
		if !ready {
			status = corev1.ConditionUnknown
		}
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i].Status = status
				n.Status.Conditions[i].LastTransitionTime = metav1.Now()
			}
		}
		g.Expect(env.Client.Status().Update(context.Background(), &n)).To(Succeed())
	}).WithTimeout(actTimeout).WithPolling(poll).Should(Succeed())
}

// jobSpec is a TransferJob's spec between two sites.
func jobSpec(src, dst site) dtnflowv1alpha1.TransferJobSpec {
	return dtnflowv1alpha1.TransferJobSpec{
		Source:      dtnflowv1alpha1.TransferSource{Endpoint: src.name, Paths: []dtnflowv1alpha1.RelativePath{"runs/0427"}},
		Destination: dtnflowv1alpha1.TransferDestination{Endpoint: dst.name, Path: "incoming"},
	}
}

// createJob creates a TransferJob. A job of jobSpec's destination writes under
// incoming/<its name>, as two jobs of a site would: jobs that write the same files take
// turns (reason FilesInUse), which a test asks for by giving them one destination.
func createJob(t testing.TB, ns, name string, spec dtnflowv1alpha1.TransferJobSpec) *dtnflowv1alpha1.TransferJob {
	t.Helper()
	if spec.Destination.Path == "incoming" {
		spec.Destination.Path = dtnflowv1alpha1.RelativePath("incoming/" + name)
	}
	job := &dtnflowv1alpha1.TransferJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if err := env.Client.Create(context.Background(), job); err != nil {
		t.Fatalf("creating job: %v", err)
	}
	return job
}

// getJob reads a job from the API server.
func getJob(g Gomega, job *dtnflowv1alpha1.TransferJob) *dtnflowv1alpha1.TransferJob {
	var out dtnflowv1alpha1.TransferJob
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), &out)).To(Succeed())
	return &out
}

// updateJob changes a job's spec, retrying on conflicts.
func updateJob(t testing.TB, job *dtnflowv1alpha1.TransferJob, change func(*dtnflowv1alpha1.TransferJob)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		j := getJob(g, job)
		change(j)
		g.Expect(env.Client.Update(context.Background(), j)).To(Succeed())
	}).WithTimeout(actTimeout).WithPolling(poll).Should(Succeed())
}

// agentPods lists the job's agent pods by role (live ones: not being deleted).
type agentPods struct {
	coordinator *corev1.Pod
	senders     map[int32]*corev1.Pod
	receivers   map[int32]*corev1.Pod
	all         []*corev1.Pod
}

func listAgents(g Gomega, job *dtnflowv1alpha1.TransferJob) agentPods {
	var pods corev1.PodList
	g.Expect(env.Client.List(context.Background(), &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{contract.LabelJob: controllers.JobLabelValue(job.Name)})).To(Succeed())
	out := agentPods{senders: map[int32]*corev1.Pod{}, receivers: map[int32]*corev1.Pod{}}
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		out.all = append(out.all, p)
		var k int32
		fmt.Sscanf(p.Labels[contract.LabelStripe], "%d", &k)
		switch contract.Role(p.Labels[contract.LabelRole]) {
		case contract.RoleCoordinator:
			out.coordinator = p
		case contract.RoleSender:
			out.senders[k] = p
		case contract.RoleReceiver:
			out.receivers[k] = p
		}
	}
	return out
}

// setPhase moves a pod to a phase, as its kubelet would.
func setPhase(g Gomega, pod *corev1.Pod, phase corev1.PodPhase) {
	p := pod.DeepCopy()
	p.Status.Phase = phase
	if phase == corev1.PodFailed {
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "agent", State: corev1.ContainerState{
			Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: "connection reset by peer"}}}}
	}
	g.Expect(env.Client.Status().Update(context.Background(), p)).To(Succeed())
}

// runAll plays the kubelet: every Pending agent pod of the job starts Running. It
// returns the pods it listed, as it left them: a second list would show a pod the
// manager created meanwhile still Pending (a replacement that never ran, so that has no
// log), under a name the caller takes as started.
func runAll(g Gomega, job *dtnflowv1alpha1.TransferJob) agentPods {
	pods := listAgents(g, job)
	for _, p := range pods.all {
		if p.Status.Phase == "" || p.Status.Phase == corev1.PodPending {
			setPhase(g, p, corev1.PodRunning)
			p.Status.Phase = corev1.PodRunning
		}
	}
	return pods
}

// report plays the coordinator: it writes rep into its pod's report annotation, as the
// agent does with a merge patch.
func report(g Gomega, job *dtnflowv1alpha1.TransferJob, rep contract.Report) {
	pods := listAgents(g, job)
	g.Expect(pods.coordinator).NotTo(BeNil(), "no coordinator pod to report from")
	b, err := json.Marshal(rep)
	g.Expect(err).NotTo(HaveOccurred())
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.AnnotationReport: string(b)}}})
	g.Expect(env.Client.Patch(context.Background(), pods.coordinator, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

// directive reads the directive the controller gave the coordinator.
func directive(g Gomega, job *dtnflowv1alpha1.TransferJob) contract.Directive {
	pods := listAgents(g, job)
	g.Expect(pods.coordinator).NotTo(BeNil())
	raw := pods.coordinator.Annotations[contract.AnnotationDirective]
	g.Expect(raw).NotTo(BeEmpty(), "the coordinator has no directive")
	var d contract.Directive
	g.Expect(json.Unmarshal([]byte(raw), &d)).To(Succeed())
	return d
}

// condition returns a job's condition of the type, or nil.
func condition(job *dtnflowv1alpha1.TransferJob, typ string) *metav1.Condition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == typ {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

// eventually is Eventually with the act timeout and polling of these tests.
func eventually(t testing.TB, f func(g Gomega)) {
	t.Helper()
	NewWithT(t).Eventually(f).WithTimeout(actTimeout).WithPolling(poll).Should(Succeed())
}

// consistently checks that f holds for the quiet period.
func consistently(t testing.TB, f func(g Gomega)) {
	t.Helper()
	NewWithT(t).Consistently(f).WithTimeout(quietPeriod).WithPolling(poll).Should(Succeed())
}

// gone says whether an object no longer exists.
func gone(g Gomega, obj client.Object) bool {
	err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
	return apierrors.IsNotFound(err)
}

// getNamespace reads a namespace.
func getNamespace(g Gomega, name string) *corev1.Namespace {
	var ns corev1.Namespace
	g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Name: name}, &ns)).To(Succeed())
	return &ns
}

// reason is the reason of a job's condition of the type, "" when it has none.
func reason(job *dtnflowv1alpha1.TransferJob, typ string) string {
	if c := condition(job, typ); c != nil {
		return c.Reason
	}
	return ""
}

// progressOf is a job's progress, failing the poll (not panicking) while it has none.
func progressOf(g Gomega, job *dtnflowv1alpha1.TransferJob) *dtnflowv1alpha1.TransferProgress {
	g.Expect(job.Status.Progress).NotTo(BeNil(), "no progress yet")
	return job.Status.Progress
}

// planOf is a job's plan, failing the poll while it has none.
func planOf(g Gomega, job *dtnflowv1alpha1.TransferJob) *dtnflowv1alpha1.TransferPlan {
	g.Expect(job.Status.Plan).NotTo(BeNil(), "no plan yet")
	return job.Status.Plan
}

// relabel moves a node to a site (its dtnflow.io/site label).
func relabel(t testing.TB, node, site string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var n corev1.Node
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Name: node}, &n)).To(Succeed())
		n.Labels["dtnflow.io/site"] = site
		g.Expect(env.Client.Update(context.Background(), &n)).To(Succeed())
	}).WithTimeout(actTimeout).WithPolling(poll).Should(Succeed())
}
