package controllers

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// The steps of syncAgentPods, each run alone against a fake client: what it creates,
// deletes, patches and returns, and what it asks of the pass.

// podsFixture is one pass of testJob() from site-a (nodes a1, a2) to site-b (nodes b1,
// b2), every node usable and with an address, and a reconciler over a fake client that
// holds the pods the pass observed.
type podsFixture struct {
	r *TransferJobReconciler
	p *pass
}

var fixtureNodeAddresses = map[string]string{"a1": "10.0.1.1", "a2": "10.0.1.2", "b1": "10.0.2.1", "b2": "10.0.2.2"}

func fixtureNodes(names ...string) []nodeView {
	var side []nodeView
	for _, n := range names {
		side = append(side, nodeView{Name: n, Ready: true, Address: fixtureNodeAddresses[n]})
	}
	return side
}

// newPodsFixture observes pods (each also stored in the fake client) sorted by role and
// stripe as observePods would.
func newPodsFixture(t *testing.T, pods ...*corev1.Pod) *podsFixture {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := dtnflowv1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	builder := fake.NewClientBuilder().WithScheme(scheme)
	for _, pod := range pods {
		builder = builder.WithObjects(pod)
	}
	r := &TransferJobReconciler{Client: builder.Build(), Clock: clocktesting.NewFakePassiveClock(time.Unix(1e9, 0)),
		Pods: DefaultAgentPodOptions, ReportInterval: 10 * time.Second}
	r.setDefaults()

	job := testJob()
	p := newPass(job, r.Clock.Now())
	p.obs = &observed{
		endpoints: jobEndpoints{
			Source: testEndpoint("site-a", "/srv/a", ""), Destination: testEndpoint("site-b", "/srv/b", ""),
			SourceNodes: fixtureNodes("a1", "a2"), DestinationNodes: fixtureNodes("b1", "b2"),
		},
		senders: map[int32]*corev1.Pod{}, receivers: map[int32]*corev1.Pod{}, leaving: map[string]bool{},
	}
	for _, pod := range pods {
		k, _ := strconv.ParseInt(pod.Labels[contract.LabelStripe], 10, 32)
		switch contract.Role(pod.Labels[contract.LabelRole]) {
		case contract.RoleCoordinator:
			p.obs.coordinator = pod
		case contract.RoleSender:
			p.obs.senders[int32(k)] = pod
		case contract.RoleReceiver:
			p.obs.receivers[int32(k)] = pod
		default:
			p.obs.strays = append(p.obs.strays, pod)
		}
	}
	return &podsFixture{r: r, p: p}
}

// existingAgent is an existing agent pod of testJob(), as buildAgentPod makes it.
func existingAgent(ap agentPod, uid types.UID) *corev1.Pod {
	if ap.Endpoint == nil {
		ap.Endpoint = testEndpoint("site-a", "/srv/a", "")
		if ap.Role == contract.RoleReceiver {
			ap.Endpoint = testEndpoint("site-b", "/srv/b", "")
		}
	}
	pod := buildAgentPod(testJob(), nil, ap, DefaultAgentPodOptions)
	pod.UID = uid
	return pod
}

// get reads a pod back from the fake client; nil when it is gone.
func (f *podsFixture) get(t *testing.T, name string) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	err := f.r.Client.Get(context.Background(), types.NamespacedName{Namespace: f.p.job.Namespace, Name: name}, &pod)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return &pod
}

func (f *podsFixture) podNames(t *testing.T) []string {
	t.Helper()
	var pods corev1.PodList
	if err := f.r.Client.List(context.Background(), &pods, client.InNamespace(f.p.job.Namespace)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, pod := range pods.Items {
		names = append(names, pod.Name)
	}
	slices.Sort(names)
	return names
}

func TestSyncCoordinator(t *testing.T) {
	ctx := context.Background()
	job := testJob()
	name := CoordinatorPodName(job.Name)
	directive := &contract.Directive{Mode: contract.ModeTransfer, Stripes: 2, StreamsPerStripe: 4}
	l := layout{coordinatorNode: "a1", stripes: 2, sourceNodes: []string{"a1", "a2"}, destinationNodes: []string{"b1", "b2"}}

	t.Run("CreatesItWithTheDirective", func(t *testing.T) {
		f := newPodsFixture(t)
		addr, err := f.r.syncCoordinator(ctx, f.p, l, directive)
		if err != nil {
			t.Fatal(err)
		}
		pod := f.get(t, name)
		if pod == nil || f.p.obs.coordinator == nil {
			t.Fatalf("no coordinator created (stored %v, observed %v)", pod, f.p.obs.coordinator)
		}
		if pinnedNode(pod) != "a1" {
			t.Errorf("coordinator on %q, want a1", pinnedNode(pod))
		}
		if d := directiveOf(pod); d == nil || d.Generation != 1 || d.StreamsPerStripe != 4 {
			t.Errorf("directive %+v, want generation 1 with 4 streams", d)
		}
		if want := hostPort("10.0.1.1", listenPortOf(pod)); listenPortOf(pod) == 0 || addr != want {
			t.Errorf("address %q, want %q", addr, want)
		}
	})

	t.Run("MovesOffAnUnusableNode", func(t *testing.T) {
		old := existingAgent(agentPod{Role: contract.RoleCoordinator, Node: "a2", Port: 7000}, "coord-old")
		f := newPodsFixture(t, old)
		f.p.obs.endpoints.SourceNodes[1].Ready = false
		addr, err := f.r.syncCoordinator(ctx, f.p, l, directive)
		if err != nil {
			t.Fatal(err)
		}
		if f.get(t, name) != nil || f.p.obs.coordinator != nil {
			t.Error("the coordinator on the unusable node is still there")
		}
		if addr != "" {
			t.Errorf("address %q of a deleted coordinator", addr)
		}
		// Its replacement waits for the old pod to be gone: another pass soon.
		if !f.p.obs.leaving[name] || f.p.requeueAfter != staleCacheRequeue {
			t.Errorf("leaving %v, requeue %v: want the name held and a requeue after %v", f.p.obs.leaving[name], f.p.requeueAfter, staleCacheRequeue)
		}
		if len(f.p.events) != 1 || f.p.events[0].Reason != ReasonNodeNotReady || f.p.events[0].Action != "MoveCoordinator" {
			t.Errorf("events %+v, want one MoveCoordinator", f.p.events)
		}
	})

	t.Run("GivesARunningOneTheNextDirective", func(t *testing.T) {
		running := existingAgent(agentPod{Role: contract.RoleCoordinator, Node: "a2", Port: 7000,
			Directive: encodeDirective(contract.Directive{Generation: 3, Mode: contract.ModeProbe})}, "coord")
		f := newPodsFixture(t, running)
		plan := l
		plan.plan = &dtnflowv1alpha1.TransferPlan{Hash: "feedface"}
		addr, err := f.r.syncCoordinator(ctx, f.p, plan, directive)
		if err != nil {
			t.Fatal(err)
		}
		pod := f.get(t, name)
		if d := directiveOf(pod); d == nil || d.Generation != 4 || d.Mode != contract.ModeTransfer {
			t.Errorf("directive %+v, want generation 4 in mode Transfer", d)
		}
		if pod.Labels[contract.LabelPlanHash] != "feedface" {
			t.Errorf("plan hash %q, want feedface", pod.Labels[contract.LabelPlanHash])
		}
		if addr != "10.0.1.2:7000" {
			t.Errorf("address %q, want the running coordinator's 10.0.1.2:7000", addr)
		}
	})

	t.Run("FollowsItsMeasuredUse", func(t *testing.T) {
		// the plan's request from the prior per file (issue 11's small files: 241m)
		// until the coordinator's reports measure its use; within a quarter of that
		// what the pod asks stands
		for _, c := range []struct {
			name     string
			measured func(asked int64) int64
			phase    contract.Phase
			want     func(asked int64) int64
		}{
			{"measured well below", func(int64) int64 { return 97 }, contract.PhaseTransferring, func(int64) int64 { return 97 }},
			{"measured well above", func(int64) int64 { return 900 }, contract.PhaseTransferring, func(int64) int64 { return 900 }},
			{"within a quarter of what it asks", func(a int64) int64 { return a * 9 / 10 }, contract.PhaseTransferring, func(a int64) int64 { return a }},
			{"not measured yet", func(int64) int64 { return 0 }, contract.PhaseTransferring, func(int64) int64 { return 241 }},
			{"a job paused", func(int64) int64 { return 97 }, contract.PhasePaused, func(int64) int64 { return 241 }},
		} {
			running := existingAgent(agentPod{Role: contract.RoleCoordinator, Node: "a1", Port: 7000,
				Directive: encodeDirective(contract.Directive{Generation: 1, Mode: contract.ModeTransfer})}, "coord")
			asked := podMillicores(running)
			f := newPodsFixture(t, running)
			planned := l
			planned.plan = &dtnflowv1alpha1.TransferPlan{CoordinatorCPUMillicores: 241, Hash: "feedface"}
			f.p.obs.report = &contract.Report{Phase: c.phase, Time: f.p.now.Time, CoordinatorMillicores: c.measured(asked)}
			if _, err := f.r.syncCoordinator(ctx, f.p, planned, nil); err != nil {
				t.Fatal(err)
			}
			pod := f.get(t, name)
			if got := podMillicores(pod); got != c.want(asked) || pod.UID != "coord" {
				t.Errorf("%s: CPU request %dm (pod %s), want %dm on the running pod (it asked %dm)", c.name, got, pod.UID, c.want(asked), asked)
			}
		}
	})

	t.Run("APeerSourceGetsTheDirective", func(t *testing.T) {
		f := newPodsFixture(t)
		f.p.obs.remote = &remoteSide{side: dtnflowv1alpha1.RemoteSideSource, want: &dtnflowv1alpha1.RemoteTransferSpec{}}
		addr, err := f.r.syncCoordinator(ctx, f.p, l, directive)
		if err != nil {
			t.Fatal(err)
		}
		if names := f.podNames(t); len(names) != 0 || addr != "" {
			t.Errorf("pods %v, address %q: the peer runs the coordinator", names, addr)
		}
		var d contract.Directive
		if err := json.Unmarshal([]byte(f.p.obs.remote.want.Directive), &d); err != nil || d.Generation != 1 || d.StreamsPerStripe != 4 {
			t.Errorf("the RemoteTransfer's directive %q (%v), want generation 1 with 4 streams", f.p.obs.remote.want.Directive, err)
		}
	})
}

func TestSyncReceiver(t *testing.T) {
	ctx := context.Background()
	job := testJob()
	name := AgentPodName(job.Name, contract.RoleReceiver, 1)
	l := layout{coordinatorNode: "a1", stripes: 2, sourceNodes: []string{"a1", "a2"}, destinationNodes: []string{"b1", "b2"}}

	t.Run("CreatesItOnTheStripesNode", func(t *testing.T) {
		f := newPodsFixture(t)
		addr, err := f.r.syncReceiver(ctx, f.p, l, 1)
		if err != nil {
			t.Fatal(err)
		}
		pod := f.get(t, name)
		if pod == nil || f.p.obs.receivers[1] == nil {
			t.Fatal("no receiver created for stripe 1")
		}
		if pinnedNode(pod) != "b2" {
			t.Errorf("receiver on %q, want b2 (stripe 1 of nodes b1, b2)", pinnedNode(pod))
		}
		if want := hostPort("10.0.2.2", listenPortOf(pod)); listenPortOf(pod) == 0 || addr != want {
			t.Errorf("address %q, want %q", addr, want)
		}
	})

	t.Run("ResizesARunningOneToThePlan", func(t *testing.T) {
		running := existingAgent(agentPod{Role: contract.RoleReceiver, Stripe: 1, Node: "b2", Port: 7100}, "recv")
		f := newPodsFixture(t, running)
		planned := l
		planned.plan = &dtnflowv1alpha1.TransferPlan{DestinationCPUMillicores: 900, Hash: "feedface"}
		addr, err := f.r.syncReceiver(ctx, f.p, planned, 1)
		if err != nil {
			t.Fatal(err)
		}
		if addr != "10.0.2.2:7100" {
			t.Errorf("address %q, want 10.0.2.2:7100", addr)
		}
		pod := f.get(t, name)
		if got := pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue(); got != 900 {
			t.Errorf("CPU request %dm, want the plan's 900m", got)
		}
		if pod.UID != "recv" {
			t.Error("the receiver was replaced, not resized")
		}
	})

	t.Run("LeavesAProbingOneWithinTheDeadBand", func(t *testing.T) {
		for _, c := range []struct {
			name string
			plan bool
			want func(asked int64) int64 // the request after the pass
		}{
			{"refitted by the probe", false, func(asked int64) int64 { return asked }},
			{"stated by a plan", true, func(asked int64) int64 { return asked + asked/20 }},
		} {
			running := existingAgent(agentPod{Role: contract.RoleReceiver, Stripe: 1, Node: "b2", Port: 7100}, "recv")
			asked := podMillicores(running)
			f := newPodsFixture(t, running)
			near := &dtnflowv1alpha1.TransferPlan{DestinationCPUMillicores: asked + asked/20, Hash: "feedface"}
			lay := l
			if c.plan {
				lay.plan = near
			} else {
				lay.probeCPU = near
			}
			if _, err := f.r.syncReceiver(ctx, f.p, lay, 1); err != nil {
				t.Fatal(err)
			}
			if got := podMillicores(f.get(t, name)); got != c.want(asked) {
				t.Errorf("%s: CPU request %dm, want %dm (asked %dm, wanted %dm)", c.name, got, c.want(asked), asked, near.DestinationCPUMillicores)
			}
		}
	})

	t.Run("ReplacesOneOnAnotherNode", func(t *testing.T) {
		moved := existingAgent(agentPod{Role: contract.RoleReceiver, Stripe: 1, Node: "b1", Port: 7100}, "recv")
		f := newPodsFixture(t, moved)
		addr, err := f.r.syncReceiver(ctx, f.p, l, 1)
		if err != nil {
			t.Fatal(err)
		}
		if f.get(t, name) != nil || f.p.obs.receivers[1] != nil {
			t.Error("the receiver on b1 is still there")
		}
		if addr != "" || f.p.requeueAfter != staleCacheRequeue {
			t.Errorf("address %q, requeue %v: want none until the old pod is gone, and a pass after %v", addr, f.p.requeueAfter, staleCacheRequeue)
		}
	})

	t.Run("LeavesAFinishedOneAlone", func(t *testing.T) {
		done := existingAgent(agentPod{Role: contract.RoleReceiver, Stripe: 1, Node: "b1", Port: 7100}, "recv")
		done.Status.Phase = corev1.PodSucceeded
		f := newPodsFixture(t, done)
		addr, err := f.r.syncReceiver(ctx, f.p, l, 1)
		if err != nil {
			t.Fatal(err)
		}
		if pod := f.get(t, name); pod == nil || pod.UID != "recv" || addr != "" {
			t.Errorf("pod %v, address %q: want the finished receiver kept, without an address", pod, addr)
		}
	})

	t.Run("AnExternalDestinationListensItself", func(t *testing.T) {
		f := newPodsFixture(t)
		f.p.obs.endpoints.Destination.Spec.ExternalAddress = "dtn.example.org:7000"
		addr, err := f.r.syncReceiver(ctx, f.p, l, 1)
		if err != nil {
			t.Fatal(err)
		}
		if names := f.podNames(t); addr != "dtn.example.org:7000" || len(names) != 0 {
			t.Errorf("address %q, pods %v: want the external address and no pod", addr, names)
		}
	})

	t.Run("APeerDestinationSaysWhereItListens", func(t *testing.T) {
		f := newPodsFixture(t)
		f.p.obs.remote = &remoteSide{side: dtnflowv1alpha1.RemoteSideDestination, rt: &dtnflowv1alpha1.RemoteTransfer{}}
		f.p.obs.remote.rt.Status.Stripes = []dtnflowv1alpha1.RemoteStripe{{Index: 0, Address: "192.0.2.7:7100"}}
		if addr, err := f.r.syncReceiver(ctx, f.p, l, 0); err != nil || addr != "192.0.2.7:7100" || f.p.requeueAfter != 0 {
			t.Errorf("stripe 0: address %q (%v), requeue %v: want the peer's address and no requeue", addr, err, f.p.requeueAfter)
		}
		if addr, err := f.r.syncReceiver(ctx, f.p, l, 1); err != nil || addr != "" || f.p.requeueAfter != f.r.ReportInterval {
			t.Errorf("stripe 1: address %q (%v), requeue %v: want none yet and a pass after a report interval", addr, err, f.p.requeueAfter)
		}
		if names := f.podNames(t); len(names) != 0 {
			t.Errorf("pods %v: the peer runs the receivers", names)
		}
	})
}

func TestSyncSender(t *testing.T) {
	ctx := context.Background()
	job := testJob()
	name := AgentPodName(job.Name, contract.RoleSender, 1)
	l := layout{coordinatorNode: "a1", stripes: 2, sourceNodes: []string{"a1", "a2"}, destinationNodes: []string{"b1", "b2"}}
	const coordAddr, recvAddr = "10.0.1.1:7000", "10.0.2.2:7100"

	t.Run("CreatesItWithBothAddresses", func(t *testing.T) {
		f := newPodsFixture(t)
		if err := f.r.syncSender(ctx, f.p, l, 1, coordAddr, recvAddr); err != nil {
			t.Fatal(err)
		}
		pod := f.get(t, name)
		if pod == nil || f.p.obs.senders[1] == nil {
			t.Fatal("no sender created for stripe 1")
		}
		if pinnedNode(pod) != "a2" {
			t.Errorf("sender on %q, want a2", pinnedNode(pod))
		}
		// its metrics on a port of its own: a2's first free one, as the pod declares it
		metricsAddr := "127.0.0.1:" + strconv.Itoa(int(DefaultAgentPorts.First))
		if args := pod.Spec.Containers[0].Args; !slices.Equal(args, append(contract.SenderArgs(1, coordAddr, recvAddr), "--metrics-addr", metricsAddr)) {
			t.Errorf("args %v", args)
		}
		if ports := pod.Spec.Containers[0].Ports; len(ports) != 1 || ports[0].Name != "metrics" || ports[0].HostPort != DefaultAgentPorts.First || listenPortOf(pod) != 0 {
			t.Errorf("ports %+v: want only the metrics port %d, and no listening port", ports, DefaultAgentPorts.First)
		}
	})

	t.Run("WaitsForAnAddress", func(t *testing.T) {
		for _, addrs := range [][2]string{{"", recvAddr}, {coordAddr, ""}} {
			f := newPodsFixture(t)
			if err := f.r.syncSender(ctx, f.p, l, 1, addrs[0], addrs[1]); err != nil {
				t.Fatal(err)
			}
			if names := f.podNames(t); len(names) != 0 || f.p.requeueAfter != f.r.ReportInterval {
				t.Errorf("addresses %q: pods %v, requeue %v; want none and a pass after a report interval", addrs, names, f.p.requeueAfter)
			}
		}
	})

	t.Run("ReplacesOneWhosePeerMoved", func(t *testing.T) {
		old := existingAgent(agentPod{Role: contract.RoleSender, Stripe: 1, Node: "a2", CoordinatorAddress: coordAddr, ReceiverAddress: "10.0.2.1:7100"}, "send")
		f := newPodsFixture(t, old)
		if err := f.r.syncSender(ctx, f.p, l, 1, coordAddr, recvAddr); err != nil {
			t.Fatal(err)
		}
		if f.get(t, name) != nil || f.p.obs.senders[1] != nil {
			t.Error("the sender to the old receiver address is still there")
		}
		if f.p.requeueAfter != staleCacheRequeue {
			t.Errorf("requeue %v, want %v while the old sender goes", f.p.requeueAfter, staleCacheRequeue)
		}
	})

	// A sender serves its metrics on a port of its own: the address is in its args but
	// is no reason to replace it (the bench's sender was once deleted and created again
	// every pass, and the job moved nothing).
	t.Run("KeepsOneWithItsOwnMetricsPort", func(t *testing.T) {
		running := existingAgent(agentPod{Role: contract.RoleSender, Stripe: 1, Node: "a2", CoordinatorAddress: coordAddr, ReceiverAddress: recvAddr, MetricsPort: 47003}, "send")
		f := newPodsFixture(t, running)
		if err := f.r.syncSender(ctx, f.p, l, 1, coordAddr, recvAddr); err != nil {
			t.Fatal(err)
		}
		if pod := f.get(t, name); pod == nil || pod.UID != "send" {
			t.Errorf("pod %v: want the running sender kept", pod)
		}
	})

	t.Run("KeepsOneWhileAnAddressIsUnknown", func(t *testing.T) {
		running := existingAgent(agentPod{Role: contract.RoleSender, Stripe: 1, Node: "a2", CoordinatorAddress: coordAddr, ReceiverAddress: "10.0.2.1:7100"}, "send")
		f := newPodsFixture(t, running)
		if err := f.r.syncSender(ctx, f.p, l, 1, coordAddr, ""); err != nil {
			t.Fatal(err)
		}
		if pod := f.get(t, name); pod == nil || pod.UID != "send" || f.p.requeueAfter != 0 {
			t.Errorf("pod %v, requeue %v: want the running sender kept and no requeue", pod, f.p.requeueAfter)
		}
	})

	t.Run("ReplacesOneOnAnotherNode", func(t *testing.T) {
		old := existingAgent(agentPod{Role: contract.RoleSender, Stripe: 1, Node: "a1", CoordinatorAddress: coordAddr, ReceiverAddress: recvAddr}, "send")
		f := newPodsFixture(t, old)
		if err := f.r.syncSender(ctx, f.p, l, 1, coordAddr, recvAddr); err != nil {
			t.Fatal(err)
		}
		if f.get(t, name) != nil {
			t.Error("the sender on a1 is still there")
		}
	})
}

func TestDeleteExtraAgents(t *testing.T) {
	job := testJob()
	var pods []*corev1.Pod
	for k := int32(0); k < 4; k++ {
		pods = append(pods,
			existingAgent(agentPod{Role: contract.RoleSender, Stripe: k, Node: "a1"}, types.UID("send-"+strconv.Itoa(int(k)))),
			existingAgent(agentPod{Role: contract.RoleReceiver, Stripe: k, Node: "b1", Port: 7100 + k}, types.UID("recv-"+strconv.Itoa(int(k)))))
	}
	stray := existingAgent(agentPod{Role: contract.RoleSender, Stripe: 9, Node: "a1"}, "stray")
	stray.Name, stray.Labels[contract.LabelRole] = job.Name+"-edited", "edited"
	pods = append(pods, stray)
	f := newPodsFixture(t, pods...)
	if len(f.p.obs.strays) != 1 {
		t.Fatalf("strays %d, want 1", len(f.p.obs.strays))
	}

	if err := f.r.deleteExtraAgents(context.Background(), f.p, layout{stripes: 2}); err != nil {
		t.Fatal(err)
	}
	var want []string
	for k := int32(0); k < 2; k++ {
		want = append(want, AgentPodName(job.Name, contract.RoleReceiver, k), AgentPodName(job.Name, contract.RoleSender, k))
	}
	slices.Sort(want)
	if got := f.podNames(t); !slices.Equal(got, want) {
		t.Errorf("pods left %v, want %v", got, want)
	}
	if len(f.p.obs.senders) != 2 || len(f.p.obs.receivers) != 2 || f.p.obs.strays != nil {
		t.Errorf("observed %d senders, %d receivers, %d strays; want 2, 2, 0", len(f.p.obs.senders), len(f.p.obs.receivers), len(f.p.obs.strays))
	}
	for _, name := range []string{AgentPodName(job.Name, contract.RoleSender, 3), stray.Name} {
		if !f.p.obs.leaving[name] {
			t.Errorf("%s is not remembered as leaving", name)
		}
	}
}

// TestAPassOnItsOwnStaleStatusRetriesAtOnce: a pass that finds in the cache the job its
// last status write replaced does nothing and runs again — well within a coordinator's
// report interval, since the write's event starts no pass and a report that came in
// just after the write (the probe's end, which the plan answers) waits on it. A second's
// requeue held the plan's directive 1.2 s after the probe ended on the local cluster.
func TestAPassOnItsOwnStaleStatusRetriesAtOnce(t *testing.T) {
	job := testJob()
	f := newPodsFixture(t)
	if err := f.r.Client.Create(context.Background(), job); err != nil {
		t.Fatal(err)
	}
	var cached dtnflowv1alpha1.TransferJob
	if err := f.r.Client.Get(context.Background(), types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, &cached); err != nil {
		t.Fatal(err)
	}
	f.r.exp.StatusWritten(cached.UID, cached.ResourceVersion) // our write replaced what the cache still holds
	res, err := f.r.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Namespace: job.Namespace, Name: job.Name}})
	if err != nil {
		t.Fatal(err)
	}
	if res.RequeueAfter <= 0 || res.RequeueAfter > 200*time.Millisecond {
		t.Errorf("requeue after %v, want a pass again within 200 ms", res.RequeueAfter)
	}
	var after dtnflowv1alpha1.TransferJob
	if err := f.r.Client.Get(context.Background(), types.NamespacedName{Namespace: job.Namespace, Name: job.Name}, &after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != cached.ResourceVersion {
		t.Errorf("the stale pass wrote the job (resourceVersion %s → %s)", cached.ResourceVersion, after.ResourceVersion)
	}
}
