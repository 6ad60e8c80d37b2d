package controllers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	clocktesting "k8s.io/utils/clock/testing"

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
