package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dtnflow/dtnflow/agent/contract/claim"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// WarmPoolReconciler keeps the warm agents of each TransferEndpoint with a warmPool:
// agentsPerNode waiting on each usable node, for each side, in each of its namespaces
// the endpoint serves. It writes no status; the agents themselves are what it keeps.
type WarmPoolReconciler struct {
	Client client.Client
	Clock  clock.PassiveClock
	Pods   AgentPodOptions
	keys   *warmKeys
	ports  *portAllocator
}

// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=create

// Reconcile starts the warm agents an endpoint is missing and deletes those it no
// longer wants. Agents a job claimed are the job's and not counted.
func (r *WarmPoolReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ep dtnflowv1alpha1.TransferEndpoint
	if err := r.Client.Get(ctx, req.NamespacedName, &ep); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err) // its waiting agents go with it (owner references)
	}
	warm, err := observeWarmPool(ctx, r.Client, &ep)
	if err != nil {
		return ctrl.Result{}, err
	}
	var nodes []nodeView // none while the endpoint goes, or has no pool: no agent wanted
	if ep.DeletionTimestamp == nil && warmPoolOf(&ep) != nil {
		if nodes, err = observeNodes(ctx, r.Client, &ep); err != nil {
			return ctrl.Result{}, err
		}
	}
	want := wantedWarmSlots(&ep, warm.Namespaces.Served, nodes)
	for _, pod := range warm.Claimed {
		r.keys.forget(client.ObjectKeyFromObject(pod)) // its key sealed its one claim
	}
	remove, have := warmPodsToDelete(want, warm.Waiting, func(pod *corev1.Pod) bool {
		_, ok := r.keys.get(client.ObjectKeyFromObject(pod))
		return ok
	})
	for _, pod := range remove {
		// the version read: a claim made since (the cache may be behind it) makes the
		// pod a job's, and the delete fails
		err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID, ResourceVersion: &pod.ResourceVersion})
		switch {
		case err == nil || apierrors.IsNotFound(err):
			r.keys.forget(client.ObjectKeyFromObject(pod))
		case !apierrors.IsConflict(err):
			return ctrl.Result{}, fmt.Errorf("deleting warm agent %s: %w", podKey(pod), err)
		}
	}
	views := map[string]nodeView{}
	for _, n := range nodes {
		views[n.Name] = n
	}
	var delay time.Duration
	if pool := warmPoolOf(&ep); pool != nil {
		delay = warmRefillDelay(pool)
	}
	start, wait := warmRefills(want, have, warm.Claimed, r.Clock.Now(), delay)
	for slot, n := range start {
		for range n {
			if err := r.start(ctx, &ep, slot, views[slot.Node]); err != nil {
				return ctrl.Result{}, err
			}
		}
	}
	return ctrl.Result{RequeueAfter: wait}, nil
}

// start starts one warm agent in slot: its ServiceAccount, the pod, then the pod's own
// objects, and the ServiceAccount handed to the pod.
func (r *WarmPoolReconciler) start(ctx context.Context, ep *dtnflowv1alpha1.TransferEndpoint, slot warmSlot, node nodeView) error {
	name := warmAgentName(ep.Name)
	key, err := claim.NewKey()
	if err != nil {
		return err
	}
	listen, metrics, err := r.ports.AllocateAgent(slot.Node, portRangeOf(ep), sets.New(node.HostPorts...), slot.Namespace+"/"+name, true)
	if err != nil {
		return err
	}
	account := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: slot.Namespace,
		Labels: warmLabels(ep, slot.Side), OwnerReferences: []metav1.OwnerReference{endpointRef(ep)}}}
	if err := r.Client.Create(ctx, account); err != nil {
		return fmt.Errorf("creating the ServiceAccount of warm agent %s/%s: %w", slot.Namespace, name, err)
	}
	pod := buildWarmAgentPod(ep, slot, name, listen, metrics, r.Pods)
	r.keys.put(client.ObjectKeyFromObject(pod), key) // before the pod shows: a pass must not take it for a stranger's
	if err := r.Client.Create(ctx, pod); err != nil {
		r.keys.forget(client.ObjectKeyFromObject(pod))
		return fmt.Errorf("creating warm agent %s/%s: %w", slot.Namespace, name, err)
	}
	for _, obj := range warmAgentObjects(pod, key) {
		if err := r.Client.Create(ctx, obj); err != nil {
			return fmt.Errorf("creating %T %s/%s of a warm agent: %w", obj, slot.Namespace, name, err)
		}
	}
	handOver := client.MergeFrom(account.DeepCopy())
	account.OwnerReferences = []metav1.OwnerReference{podRef(pod)}
	if err := r.Client.Patch(ctx, account, handOver); err != nil {
		return fmt.Errorf("handing the ServiceAccount of warm agent %s/%s to its pod: %w", slot.Namespace, name, err)
	}
	logf.FromContext(ctx).V(1).Info("Started a warm agent", "pod", podKey(pod), "node", slot.Node, "side", slot.Side, "port", listen)
	return nil
}

// SetupWithManager watches endpoints, their waiting agents (a claim takes one away),
// nodes and namespaces.
func (r *WarmPoolReconciler) SetupWithManager(mgr ctrl.Manager) error {
	all := &TransferEndpointReconciler{Client: mgr.GetClient()}
	return ctrl.NewControllerManagedBy(mgr).
		Named("warmpool").
		For(&dtnflowv1alpha1.TransferEndpoint{}, builder.WithPredicates()).
		Owns(&corev1.Pod{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(all.endpointsForNode), builder.WithPredicates(nodeChanged())).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(all.endpointsForNamespace)).
		Complete(r)
}
