package controllers

import (
	"fmt"

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

// maxEndpointNodes is the most nodes status.nodes lists (the API's bound).
const maxEndpointNodes = 256

// endpointStatus derives a TransferEndpoint's status from its nodes as observed (sorted
// by name). prev is the current status, whose condition transition times are kept when
// nothing changed.
func endpointStatus(ep *dtnflowv1alpha1.TransferEndpoint, nodes []nodeView, now metav1.Time) dtnflowv1alpha1.TransferEndpointStatus {
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
	return st
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
