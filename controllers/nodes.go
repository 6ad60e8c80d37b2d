package controllers

import (
	"context"
	"fmt"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// nodeView is one node of an endpoint as observed now: what the Node says, and the
// dtnflow agents pinned to it.
type nodeView struct {
	Name          string
	Ready         bool
	Unschedulable bool
	// Address is where host-network agents on the node are reached ("" when the Node
	// publishes no address).
	Address     string
	Allocatable *resource.Quantity
	// StripesByJob counts the live sender and receiver pods pinned to the node, per
	// owning job.
	StripesByJob map[types.UID]int
	// HostPorts are the host ports live dtnflow pods hold on the node.
	HostPorts []int32

	// A peer site's node carries its own capacities (its RemoteTransfer's status);
	// 0 means the endpoint's.
	nicBitsPerSecond    int64
	cpuBudgetMillicores int64
	maxStripes          int32
	// OthersBitsPerSecond and OthersMillicores are what other jobs' plans hold of the
	// node: their planned rate through it and their agents' planned CPU (set by the
	// pass's sharing view; the planner takes them off the node's budgets).
	OthersBitsPerSecond, OthersMillicores int64
}

// Usable says whether new agent pods may go to the node.
func (n nodeView) Usable() bool { return n.Ready && !n.Unschedulable }

// Stripes is the number of stripes of every job on the node.
func (n nodeView) Stripes() int {
	total := 0
	for _, k := range n.StripesByJob {
		total += k
	}
	return total
}

// StripesOfOthers is the number of stripes on the node that belong to jobs other than uid.
func (n nodeView) StripesOfOthers(uid types.UID) int { return n.Stripes() - n.StripesByJob[uid] }

// nodeReady says whether a Node's Ready condition is True.
func nodeReady(node *corev1.Node) bool {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// observeNodes lists the nodes an endpoint selects, sorted by name, with the agents
// pinned to each. An endpoint with an external address has no nodes of its own.
func observeNodes(ctx context.Context, c client.Reader, ep *dtnflowv1alpha1.TransferEndpoint) ([]nodeView, error) {
	if ep.Spec.ExternalAddress != "" || len(ep.Spec.NodeSelector) == 0 {
		return nil, nil
	}
	// Read-only lists straight from the cache: a job's pass reads every pod on every
	// node of both its sites, and copying them each time would dominate its cost.
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, client.MatchingLabels(ep.Spec.NodeSelector), client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing the nodes of TransferEndpoint %s: %w", ep.Name, err)
	}
	views := make([]nodeView, 0, len(nodes.Items))
	for i := range nodes.Items {
		node := &nodes.Items[i]
		v := nodeView{
			Name:          node.Name,
			Ready:         nodeReady(node),
			Unschedulable: node.Spec.Unschedulable,
			StripesByJob:  map[types.UID]int{},
		}
		v.Address, _ = nodeAddress(node)
		if cpu, ok := node.Status.Allocatable[corev1.ResourceCPU]; ok {
			cpu := cpu.DeepCopy()
			v.Allocatable = &cpu
		}
		var pods corev1.PodList
		if err := c.List(ctx, &pods, client.MatchingFields{IndexPodNode: node.Name}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing the agent pods on node %s: %w", node.Name, err)
		}
		for j := range pods.Items {
			pod := &pods.Items[j]
			// A pod being deleted holds its port until it is gone, but its stripe is
			// already leaving.
			v.HostPorts = append(v.HostPorts, hostPortsOf(pod)...)
			if podTerminal(pod) || pod.DeletionTimestamp != nil {
				continue
			}
			role := contract.Role(pod.Labels[contract.LabelRole])
			if owner := controllerUID(pod); owner != "" && (role == contract.RoleSender || role == contract.RoleReceiver) {
				v.StripesByJob[owner]++
			}
		}
		views = append(views, v)
	}
	sort.Slice(views, func(i, j int) bool { return views[i].Name < views[j].Name })
	return views, nil
}

// podTerminal says whether a pod has ended.
func podTerminal(pod *corev1.Pod) bool {
	return pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed
}

// controllerUID is the UID of an object's controlling owner, "" when it has none.
func controllerUID(o client.Object) types.UID {
	for _, ref := range o.GetOwnerReferences() {
		if ref.Controller != nil && *ref.Controller {
			return ref.UID
		}
	}
	return ""
}
