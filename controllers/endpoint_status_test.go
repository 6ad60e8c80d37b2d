package controllers

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

func TestEndpointStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	alloc := resource.MustParse("16")
	tests := map[string]struct {
		budget     string
		external   string
		nodes      []nodeView
		wantReady  metav1.ConditionStatus
		wantReason string
		wantNodes  int32
		wantBudget string
	}{
		"no nodes": {wantReady: metav1.ConditionFalse, wantReason: ReasonNoMatchingNodes},
		"none ready": {
			nodes:     []nodeView{{Name: "n1", Allocatable: &alloc}},
			wantReady: metav1.ConditionFalse, wantReason: ReasonNoReadyNodes, wantBudget: "16",
		},
		"one of two ready, budget from allocatable": {
			nodes:     []nodeView{{Name: "n1", Ready: true, Allocatable: &alloc, StripesByJob: map[types.UID]int{"j1": 2, "j2": 1}}, {Name: "n2"}},
			wantReady: metav1.ConditionTrue, wantReason: ReasonNodesReady, wantNodes: 1, wantBudget: "16",
		},
		"budget from the endpoint": {
			budget: "4", nodes: []nodeView{{Name: "n1", Ready: true, Allocatable: &alloc}},
			wantReady: metav1.ConditionTrue, wantReason: ReasonNodesReady, wantNodes: 1, wantBudget: "4",
		},
		"external agent": {
			external: "dtn.example.org:47000", wantReady: metav1.ConditionTrue, wantReason: ReasonExternalAgent,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ep := testEndpoint("site-a", "/srv/a", tc.budget)
			ep.Generation = 3
			ep.Spec.ExternalAddress = tc.external
			st := endpointStatus(ep, tc.nodes, nil, t0)
			c := meta.FindStatusCondition(st.Conditions, ConditionEndpointReady)
			if c == nil || c.Status != tc.wantReady || c.Reason != tc.wantReason || c.ObservedGeneration != 3 {
				t.Fatalf("Ready condition %+v; want %s %s", c, tc.wantReady, tc.wantReason)
			}
			if st.ReadyNodes != tc.wantNodes || len(st.Nodes) != len(tc.nodes) || st.ObservedGeneration != 3 {
				t.Errorf("readyNodes %d, %d nodes listed", st.ReadyNodes, len(st.Nodes))
			}
			if len(st.Nodes) > 0 {
				n := st.Nodes[0]
				if n.CPUBudget == nil || n.CPUBudget.String() != tc.wantBudget || n.NICBitsPerSecond != ep.Spec.NICBitsPerSecond {
					t.Errorf("node %+v; want budget %s", n, tc.wantBudget)
				}
				if want := int32(tc.nodes[0].Stripes()); n.Stripes != want {
					t.Errorf("stripes %d, want %d", n.Stripes, want)
				}
			}
			// The transition time moves only when the status does.
			ep.Status = st
			again := endpointStatus(ep, tc.nodes, nil, metav1.NewTime(t0.Add(time.Hour)))
			if !meta.FindStatusCondition(again.Conditions, ConditionEndpointReady).LastTransitionTime.Equal(&t0) {
				t.Errorf("an unchanged condition moved its transition time")
			}
		})
	}
}

// TestEndpointStatusWarmPool: the pool's counts and its WarmPoolReady condition, from
// what was observed — a namespace it cannot serve named first, then no usable node,
// then agents not yet running; agents beyond a slot's count, ended, leaving, or of a
// slot not wanted are not counted; without a pool, neither counts nor condition.
func TestEndpointStatusWarmPool(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 12, 2, 0, 0, 0, 0, time.UTC))
	nodes := []nodeView{{Name: "a1", Ready: true}, {Name: "a2", Ready: true}, {Name: "a3"}}
	agent := func(node, side string, phase corev1.PodPhase) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "physics", Labels: map[string]string{contract.LabelWarmSide: side}},
			Spec: corev1.PodSpec{Affinity: pinnedTo(node)}, Status: corev1.PodStatus{Phase: phase}}
	}
	claimedAt := func(p *corev1.Pod, at time.Time) *corev1.Pod {
		p.Annotations = map[string]string{contract.AnnotationClaimedAt: at.Format(time.RFC3339Nano)}
		return p
	}
	src, dst := contract.WarmSideSource, contract.WarmSideDestination
	// a full pool of one agent per node and side in physics: a1 and a2, both sides
	full := []*corev1.Pod{agent("a1", src, corev1.PodRunning), agent("a1", dst, corev1.PodRunning),
		agent("a2", src, corev1.PodRunning), agent("a2", dst, corev1.PodRunning)}
	leaving := agent("a1", src, corev1.PodRunning)
	leaving.DeletionTimestamp = &t0
	tests := map[string]struct {
		nodes      []nodeView
		namespaces warmNamespaceView
		waiting    []*corev1.Pod
		claimed    []*corev1.Pod
		want       dtnflowv1alpha1.WarmPoolStatus
		wantStatus metav1.ConditionStatus
		wantReason string
		wantInMsg  []string
	}{
		"every agent running": {
			nodes: nodes, namespaces: warmNamespaceView{Served: []string{"physics"}}, waiting: full,
			want:       dtnflowv1alpha1.WarmPoolStatus{Wanted: 4, Ready: 4},
			wantStatus: metav1.ConditionTrue, wantReason: ReasonAgentsWaiting, wantInMsg: []string{"4 agents", "physics"},
		},
		"some starting, extra and ended ones not counted": {
			nodes: nodes, namespaces: warmNamespaceView{Served: []string{"physics"}},
			waiting: []*corev1.Pod{
				agent("a1", src, corev1.PodRunning), agent("a1", src, corev1.PodRunning), // one too many
				agent("a1", dst, corev1.PodPending), agent("a1", dst, corev1.PodPending), // one too many
				agent("a2", src, corev1.PodFailed), leaving, // ended; being deleted
				agent("a2", dst, corev1.PodRunning),
				agent("a3", src, corev1.PodRunning), // a3 is not usable
			},
			want:       dtnflowv1alpha1.WarmPoolStatus{Wanted: 4, Ready: 2, Starting: 1},
			wantStatus: metav1.ConditionFalse, wantReason: ReasonAgentsStarting, wantInMsg: []string{"2 of 4 agents ready, 1 starting"},
		},
		"a job's claim a second ago holds back its agent's replacement": {
			nodes: nodes, namespaces: warmNamespaceView{Served: []string{"physics"}}, waiting: full[1:],
			claimed:    []*corev1.Pod{claimedAt(agent("a1", src, corev1.PodRunning), t0.Add(-time.Second))},
			want:       dtnflowv1alpha1.WarmPoolStatus{Wanted: 4, Ready: 3},
			wantStatus: metav1.ConditionFalse, wantReason: ReasonAgentsStarting,
			wantInMsg: []string{"3 of 4 agents ready, 0 starting, 1 to start once the refill delay"},
		},
		"a job's claim older than the delay holds nothing back": {
			nodes: nodes, namespaces: warmNamespaceView{Served: []string{"physics"}}, waiting: full[1:],
			claimed:    []*corev1.Pod{claimedAt(agent("a1", src, corev1.PodRunning), t0.Add(-time.Minute))},
			want:       dtnflowv1alpha1.WarmPoolStatus{Wanted: 4, Ready: 3},
			wantStatus: metav1.ConditionFalse, wantReason: ReasonAgentsStarting,
			wantInMsg: []string{"3 of 4 agents ready, 0 starting"},
		},
		"a namespace missing, another not selected": {
			nodes: nodes, namespaces: warmNamespaceView{Served: []string{"physics"}, Missing: []string{"bio"}, Unselected: []string{"kube-system"}}, waiting: full,
			want:       dtnflowv1alpha1.WarmPoolStatus{Wanted: 4, Ready: 4},
			wantStatus: metav1.ConditionFalse, wantReason: ReasonNamespacesNotServed,
			wantInMsg: []string{`namespace "bio" does not exist`, `namespace "kube-system" is not selected by spec.namespaceSelector`, "4 of 4 ready"},
		},
		"no usable node": {
			nodes: []nodeView{{Name: "a3"}}, namespaces: warmNamespaceView{Served: []string{"physics"}},
			wantStatus: metav1.ConditionFalse, wantReason: ReasonNoUsableNodes, wantInMsg: []string{"spec.nodeSelector"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			ep := testEndpoint("site-a", "/srv/a", "")
			ep.Generation = 4
			ep.Spec.AgentPods = &dtnflowv1alpha1.AgentPodSettings{WarmPool: &dtnflowv1alpha1.WarmPool{AgentsPerNode: 1, Namespaces: []string{"physics", "bio", "kube-system"}}}
			st := endpointStatus(ep, tc.nodes, &warmPoolView{Namespaces: tc.namespaces, Waiting: tc.waiting, Claimed: tc.claimed}, t0)
			if st.WarmPool == nil || *st.WarmPool != tc.want {
				t.Errorf("warmPool %+v, want %+v", st.WarmPool, tc.want)
			}
			c := meta.FindStatusCondition(st.Conditions, ConditionWarmPoolReady)
			if c == nil || c.Status != tc.wantStatus || c.Reason != tc.wantReason || c.ObservedGeneration != 4 {
				t.Fatalf("WarmPoolReady %+v; want %s %s", c, tc.wantStatus, tc.wantReason)
			}
			for _, s := range tc.wantInMsg {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message %q lacks %q", c.Message, s)
				}
			}
			if tc.claimed == nil && strings.Contains(c.Message, "refill delay") {
				t.Errorf("message %q holds agents back without a claim", c.Message)
			}
			// the pool removed: neither counts nor condition
			ep.Status = st
			ep.Spec.AgentPods.WarmPool = nil
			off := endpointStatus(ep, tc.nodes, nil, t0)
			if off.WarmPool != nil || meta.FindStatusCondition(off.Conditions, ConditionWarmPoolReady) != nil {
				t.Errorf("without a pool: warmPool %+v, conditions %+v", off.WarmPool, off.Conditions)
			}
		})
	}
}
