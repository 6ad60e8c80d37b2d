package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
			st := endpointStatus(ep, tc.nodes, t0)
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
			again := endpointStatus(ep, tc.nodes, metav1.NewTime(t0.Add(time.Hour)))
			if !meta.FindStatusCondition(again.Conditions, ConditionEndpointReady).LastTransitionTime.Equal(&t0) {
				t.Errorf("an unchanged condition moved its transition time")
			}
		})
	}
}
