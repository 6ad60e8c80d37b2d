package controllers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

func TestLowestFreePort(t *testing.T) {
	r := dtnflowv1alpha1.PortRange{First: 47000, Last: 47003}
	tests := map[string]struct {
		used []int32
		want int32
		ok   bool
	}{
		"empty node":            {nil, 47000, true},
		"first taken":           {[]int32{47000}, 47001, true},
		"hole in the middle":    {[]int32{47000, 47002}, 47001, true},
		"ports outside ignored": {[]int32{46999, 47004}, 47000, true},
		"full":                  {[]int32{47000, 47001, 47002, 47003}, 0, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := lowestFreePort(r, sets.New(tc.used...))
			if got != tc.want || ok != tc.ok {
				t.Errorf("lowestFreePort = %d, %v; want %d, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
	if got, ok := lowestFreePort(dtnflowv1alpha1.PortRange{First: 65535, Last: 65535}, nil); got != 65535 || !ok {
		t.Errorf("top of the port space: %d, %v", got, ok)
	}
}

// TestPortAllocator checks that reservations keep two pods created before the cache
// shows either from getting the same port, that rebuilding a pod gives up its old
// reservation, and that reservations expire.
func TestPortAllocator(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a := newPortAllocator(clk)
	r := dtnflowv1alpha1.PortRange{First: 47000, Last: 47002}
	steps := []struct {
		node, holder string
		inUse        []int32
		advance      time.Duration
		want         int32
		wantErr      bool
	}{
		{node: "n1", holder: "ns/a", want: 47000},
		{node: "n1", holder: "ns/b", want: 47001},                          // a's reservation holds 47000
		{node: "n2", holder: "ns/c", want: 47000},                          // another node is independent
		{node: "n1", holder: "ns/a", want: 47000},                          // a rebuilt: its own reservation is given up first
		{node: "n1", holder: "ns/d", inUse: []int32{47002}, wantErr: true}, // 47000-47001 reserved, 47002 in use
		{node: "n1", holder: "ns/d", inUse: []int32{47002}, advance: portReservationTTL + time.Second, want: 47000},
	}
	for i, s := range steps {
		clk.SetTime(clk.Now().Add(s.advance))
		got, err := a.Allocate(s.node, r, sets.New(s.inUse...), s.holder)
		if (err != nil) != s.wantErr || got != s.want {
			t.Fatalf("step %d: Allocate(%s, %s) = %d, %v; want %d, error %v", i, s.node, s.holder, got, err, s.want, s.wantErr)
		}
	}
}

// TestAllocateAgent checks that every agent of a node gets a metrics port of its own
// (two agents of one node once shared 127.0.0.1:9750, and the second served nothing),
// that a listening agent's two ports differ, that a rebuilt pod gives up both of its
// reservations, and that the listening port is the one its peers are told.
func TestAllocateAgent(t *testing.T) {
	a := newPortAllocator(clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)))
	r := dtnflowv1alpha1.PortRange{First: 47000, Last: 47004}
	steps := []struct {
		holder              string
		listens             bool
		wantListen, wantMet int32
		wantErr             bool
	}{
		{holder: "ns/j-coordinator", listens: true, wantListen: 47000, wantMet: 47001},
		{holder: "ns/j-s0-send", wantMet: 47002},
		{holder: "ns/k-s0-send", wantMet: 47003},
		{holder: "ns/j-coordinator", listens: true, wantListen: 47000, wantMet: 47001}, // rebuilt
		{holder: "ns/k-coordinator", listens: true, wantErr: true},                     // one port left, two needed
	}
	for i, s := range steps {
		listen, met, err := a.AllocateAgent("n1", r, nil, s.holder, s.listens)
		if (err != nil) != s.wantErr || listen != s.wantListen || met != s.wantMet {
			t.Fatalf("step %d: AllocateAgent(%s) = %d, %d, %v; want %d, %d, error %v", i, s.holder, listen, met, err, s.wantListen, s.wantMet, s.wantErr)
		}
	}
	pod := buildAgentPod(testJob(), nil, agentPod{Role: contract.RoleCoordinator, Node: "n1", Endpoint: &dtnflowv1alpha1.TransferEndpoint{}, Port: 47000, MetricsPort: 47001}, AgentPodOptions{})
	if got := listenPortOf(pod); got != 47000 {
		t.Errorf("listenPortOf = %d, want the coordinator's port 47000, not its metrics port", got)
	}
	if got := hostPortsOf(pod); len(got) != 2 {
		t.Errorf("hostPortsOf = %v, want both ports counted as held", got)
	}
}

func TestHostPortsOf(t *testing.T) {
	pod := func(phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 47000, HostPort: 47000}, {ContainerPort: 9090}}}}},
			Status: corev1.PodStatus{Phase: phase}}
	}
	tests := map[corev1.PodPhase]int{corev1.PodPending: 1, corev1.PodRunning: 1, corev1.PodSucceeded: 0, corev1.PodFailed: 0}
	for phase, want := range tests {
		if got := len(hostPortsOf(pod(phase))); got != want {
			t.Errorf("%s: %d host ports, want %d", phase, got, want)
		}
	}
}

// TestHeldPortsArePassedOver: a link-cut e2e run once failed its job because site B's
// new receiver could not listen on 47002 — an outgoing connection of the node held it
// as its ephemeral port — and each replacement was given 47002 again until the
// backoffLimit ran out. A pod that failed that way has its ports passed over on its
// node for heldPortTTL; a pod that failed for another reason frees nothing and blocks
// nothing.
func TestHeldPortsArePassedOver(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	a := newPortAllocator(clk)
	r := dtnflowv1alpha1.PortRange{First: 47000, Last: 47009}
	failed := func(node, message string, ports ...int32) *corev1.Pod {
		pod := &corev1.Pod{Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{}}},
			Status: corev1.PodStatus{Phase: corev1.PodFailed, ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{
				Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error", Message: message}}}}}}
		for _, p := range ports {
			pod.Spec.Containers[0].Ports = append(pod.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: p, HostPort: p})
		}
		return pod
	}
	a.NoteFailedAgent(failed("b1", "dtnflow-agent: listen tcp :47000: bind: address already in use", 47000, 47001))
	a.NoteFailedAgent(failed("b1", "dtnflow-agent: writing /data/x: no space left on device", 47002, 47003))
	steps := []struct {
		node, holder string
		advance      time.Duration
		want         int32
	}{
		{node: "b1", holder: "ns/recv", want: 47002},                                       // 47000-47001 held; a failure of another kind blocks nothing
		{node: "b2", holder: "ns/recv-2", want: 47000},                                     // another node is not affected
		{node: "b1", holder: "ns/recv-3", want: 47003},                                     // still held, 47002 reserved
		{node: "b1", holder: "ns/recv-4", advance: heldPortTTL + time.Second, want: 47000}, // held no more (and the reservations expired)
	}
	for i, s := range steps {
		clk.SetTime(clk.Now().Add(s.advance))
		got, err := a.Allocate(s.node, r, nil, s.holder)
		if err != nil || got != s.want {
			t.Fatalf("step %d: Allocate(%s, %s) = %d, %v; want %d", i, s.node, s.holder, got, err, s.want)
		}
	}
}
