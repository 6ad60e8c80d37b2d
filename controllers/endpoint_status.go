package controllers

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// ConditionEndpointReady is the TransferEndpoint condition that says whether jobs can
// place agents on the site.
const ConditionEndpointReady = "Ready"

// Reasons of the endpoint's Ready condition.
const (
	ReasonNodesReady      = "NodesReady"
	ReasonNoMatchingNodes = "NoMatchingNodes"
	ReasonExternalAgent   = "ExternalAgent"
)

// ConditionWarmPoolReady is the TransferEndpoint condition, present with a warm pool,
// that says whether every agent the pool keeps waits, running.
const ConditionWarmPoolReady = "WarmPoolReady"

// Reasons of the endpoint's WarmPoolReady condition.
const (
	ReasonAgentsWaiting       = "AgentsWaiting"
	ReasonAgentsStarting      = "AgentsStarting"
	ReasonNamespacesNotServed = "NamespacesNotServed"
	ReasonNoUsableNodes       = "NoUsableNodes"
)

// warmPoolView is what was observed of an endpoint's warm pool: the namespaces it
// lists, and its waiting agents (those the endpoint controls).
type warmPoolView struct {
	Namespaces warmNamespaceView
	Waiting    []*corev1.Pod
	Claimed    []*corev1.Pod // agents jobs took: a recent claim holds back a replacement
}

// maxEndpointNodes is the most nodes status.nodes lists (the API's bound).
const maxEndpointNodes = 256

// endpointStatus derives a TransferEndpoint's status from its nodes as observed (sorted
// by name) and its warm pool (nil without one). The conditions' transition times of the
// current status are kept when nothing changed.
func endpointStatus(ep *dtnflowv1alpha1.TransferEndpoint, nodes []nodeView, warm *warmPoolView, now metav1.Time) dtnflowv1alpha1.TransferEndpointStatus {
	st := dtnflowv1alpha1.TransferEndpointStatus{
		Conditions:         append([]metav1.Condition(nil), ep.Status.Conditions...),
		ObservedGeneration: ep.Generation,
	}
	for i, n := range nodes {
		if n.Ready {
			st.ReadyNodes++
		}
		if i >= maxEndpointNodes {
			continue
		}
		st.Nodes = append(st.Nodes, dtnflowv1alpha1.EndpointNode{
			Name:             n.Name,
			Ready:            n.Ready,
			AllocatableCPU:   n.Allocatable,
			CPUBudget:        nodeCPUBudget(ep, n),
			NICBitsPerSecond: ep.Spec.NICBitsPerSecond,
			Stripes:          int32(n.Stripes()),
		})
	}
	cond := metav1.Condition{Type: ConditionEndpointReady, ObservedGeneration: ep.Generation, LastTransitionTime: now}
	switch {
	case ep.Spec.ExternalAddress != "":
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonExternalAgent
		cond.Message = fmt.Sprintf("stripes connect to the agent at %s, outside the cluster", ep.Spec.ExternalAddress)
	case len(nodes) == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonNoMatchingNodes
		cond.Message = "no node matches spec.nodeSelector"
	case st.ReadyNodes == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonNoReadyNodes
		cond.Message = fmt.Sprintf("none of the %d nodes matching spec.nodeSelector is Ready", len(nodes))
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonNodesReady
		cond.Message = fmt.Sprintf("%d of %d nodes matching spec.nodeSelector are Ready", st.ReadyNodes, len(nodes))
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	if warm == nil {
		meta.RemoveStatusCondition(&st.Conditions, ConditionWarmPoolReady)
		return st
	}
	var warmCond metav1.Condition
	st.WarmPool, warmCond = warmPoolStatus(ep, nodes, warm, now.Time)
	warmCond.Type, warmCond.ObservedGeneration, warmCond.LastTransitionTime = ConditionWarmPoolReady, ep.Generation, now
	meta.SetStatusCondition(&st.Conditions, warmCond)
	return st
}

// warmPoolStatus counts the agents the pool wants and those waiting for them (never more
// in a slot than it wants: the pool deletes the rest), and says what keeps it from
// being ready: a listed namespace it cannot serve first, since that is the site's to
// fix and does not pass by itself.
func warmPoolStatus(ep *dtnflowv1alpha1.TransferEndpoint, nodes []nodeView, warm *warmPoolView, now time.Time) (*dtnflowv1alpha1.WarmPoolStatus, metav1.Condition) {
	want := wantedWarmSlots(ep, warm.Namespaces.Served, nodes)
	running, starting := map[warmSlot]int{}, map[warmSlot]int{}
	for _, pod := range warm.Waiting {
		switch slot := warmSlotOf(pod); {
		case warmAgentRunning(pod):
			running[slot]++
		case pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodPending:
			starting[slot]++
		}
	}
	st := &dtnflowv1alpha1.WarmPoolStatus{}
	have := map[warmSlot]int{}
	short := 0
	for slot, n := range want {
		ready := min(running[slot], n)
		have[slot] = ready + min(starting[slot], n-ready)
		short += n - have[slot]
		st.Wanted += int32(n)
		st.Ready += int32(ready)
		st.Starting += int32(have[slot] - ready)
	}
	start, _ := warmRefills(want, have, warm.Claimed, now, warmRefillDelay(warmPoolOf(ep)))
	for _, n := range start {
		short -= n
	}
	held := short // replacements that wait for the refill delay
	var cond metav1.Condition
	var unserved []string
	for _, ns := range warm.Namespaces.Missing {
		unserved = append(unserved, fmt.Sprintf("namespace %q does not exist", ns))
	}
	for _, ns := range warm.Namespaces.Unselected {
		unserved = append(unserved, fmt.Sprintf("namespace %q is not selected by spec.namespaceSelector", ns))
	}
	switch {
	case len(unserved) > 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonNamespacesNotServed
		cond.Message = fmt.Sprintf("%s: no agents wait there (%d of %d ready elsewhere)", strings.Join(unserved, "; "), st.Ready, st.Wanted)
	case st.Wanted == 0:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonNoUsableNodes
		cond.Message = "no node matching spec.nodeSelector is usable (Ready and schedulable): no agents wait"
	case st.Ready < st.Wanted:
		cond.Status, cond.Reason = metav1.ConditionFalse, ReasonAgentsStarting
		cond.Message = fmt.Sprintf("%d of %d agents ready, %d starting", st.Ready, st.Wanted, st.Starting)
		if held > 0 {
			cond.Message += fmt.Sprintf(", %d to start once the refill delay after a job's claim has passed", held)
		}
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonAgentsWaiting
		cond.Message = fmt.Sprintf("%d agents wait, running, in %s", st.Wanted, strings.Join(warm.Namespaces.Served, ", "))
	}
	return st, cond
}

// nodeCPUBudget is the CPU dtnflow may use on a node: the endpoint's budget, or the
// node's allocatable CPU when the endpoint sets none.
func nodeCPUBudget(ep *dtnflowv1alpha1.TransferEndpoint, n nodeView) *resource.Quantity {
	if b := ep.Spec.CPUBudgetPerNode; b != nil {
		q := b.DeepCopy()
		return &q
	}
	if n.Allocatable != nil {
		q := n.Allocatable.DeepCopy()
		return &q
	}
	return nil
}
