package controllers

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// TransferEndpointReconciler keeps each TransferEndpoint's status: the nodes it
// selects, which are Ready, their CPU, and how many stripes run on each.
type TransferEndpointReconciler struct {
	Client client.Client
	Clock  clock.PassiveClock

	mu        sync.Mutex
	lastWrite map[string]time.Time
}

// endpointWriteInterval is the least time between two status writes of one endpoint.
// Every agent pod that starts or ends changes a stripe count; hundreds of jobs starting
// together would otherwise rewrite the endpoint hundreds of times for numbers that are
// only informational (jobs read nodes and pods themselves). It is measured on the
// machine's clock, not the injected one, because it paces API writes.
const endpointWriteInterval = 2 * time.Second

// +kubebuilder:rbac:groups=dtnflow.io,resources=transferendpoints,verbs=get;list;watch
// +kubebuilder:rbac:groups=dtnflow.io,resources=transferendpoints/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch

// Reconcile observes an endpoint's nodes and writes its status when it changed.
func (r *TransferEndpointReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ep dtnflowv1alpha1.TransferEndpoint
	if err := r.Client.Get(ctx, req.NamespacedName, &ep); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	nodes, err := observeNodes(ctx, r.Client, &ep)
	if err != nil {
		return ctrl.Result{}, err
	}
	var warm *warmPoolView
	if warmPoolOf(&ep) != nil {
		if warm, err = observeWarmPool(ctx, r.Client, &ep); err != nil {
			return ctrl.Result{}, err
		}
	}
	st := endpointStatus(&ep, nodes, warm, apiTime(r.Clock.Now()))
	if equality.Semantic.DeepEqual(st, ep.Status) {
		return ctrl.Result{}, nil
	}
	if wait := r.untilNextWrite(ep.Name); wait > 0 {
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	patch := client.MergeFrom(ep.DeepCopy())
	ep.Status = st
	if err := r.Client.Status().Patch(ctx, &ep, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("writing the status of TransferEndpoint %s: %w", ep.Name, err)
	}
	r.wrote(ep.Name)
	ctrl.LoggerFrom(ctx).V(1).Info("Updated endpoint status", "transferEndpoint", klog.KObj(&ep), "readyNodes", st.ReadyNodes)
	return ctrl.Result{}, nil
}

// untilNextWrite is how long the endpoint's next status write must wait.
func (r *TransferEndpointReconciler) untilNextWrite(name string) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	last, ok := r.lastWrite[name]
	if !ok {
		return 0
	}
	return endpointWriteInterval - time.Since(last)
}

func (r *TransferEndpointReconciler) wrote(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastWrite == nil {
		r.lastWrite = map[string]time.Time{}
	}
	r.lastWrite[name] = time.Now()
}

// SetupWithManager registers the reconciler: it watches endpoints, the nodes they may
// select (when labels, readiness, schedulability or CPU change), agent pods (when one
// starts or ends on a node; a warm agent also when it comes to run or a job claims it)
// and the namespaces warm pools list.
func (r *TransferEndpointReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("transferendpoint").
		For(&dtnflowv1alpha1.TransferEndpoint{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.endpointsForNode),
			builder.WithPredicates(nodeChanged())).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.endpointsForPod),
			builder.WithPredicates(agentPodStartedOrEnded())).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.endpointsForNamespace),
			builder.WithPredicates(labelsChanged())).
		Complete(r)
}

// endpointsForNode maps a node to every endpoint: an endpoint may select the node now
// or may have selected it before a label changed, and endpoints are few.
func (r *TransferEndpointReconciler) endpointsForNode(ctx context.Context, _ client.Object) []reconcile.Request {
	var eps dtnflowv1alpha1.TransferEndpointList
	if err := r.Client.List(ctx, &eps); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing endpoints for a node event")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(eps.Items))
	for _, ep := range eps.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: ep.Name}})
	}
	return reqs
}

// endpointsForNamespace maps a namespace to the endpoints whose warm pool lists it.
func (r *TransferEndpointReconciler) endpointsForNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var eps dtnflowv1alpha1.TransferEndpointList
	if err := r.Client.List(ctx, &eps); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing endpoints for a namespace event")
		return nil
	}
	var reqs []reconcile.Request
	for _, ep := range eps.Items {
		if pool := warmPoolOf(&ep); pool != nil && slices.Contains(pool.Namespaces, o.GetName()) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: ep.Name}})
		}
	}
	return reqs
}

// endpointsForPod maps an agent pod to the endpoints that select its node, and a warm
// agent to its pool's endpoint.
func (r *TransferEndpointReconciler) endpointsForPod(ctx context.Context, o client.Object) []reconcile.Request {
	var reqs []reconcile.Request
	pool := o.GetLabels()[contract.LabelWarmPool]
	if pool != "" {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: pool}})
	}
	name := pinnedNode(o.(*corev1.Pod))
	if name == "" {
		return reqs
	}
	var node corev1.Node
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, &node); err != nil {
		return reqs
	}
	var eps dtnflowv1alpha1.TransferEndpointList
	if err := r.Client.List(ctx, &eps); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing endpoints for a pod event")
		return reqs
	}
	for _, ep := range eps.Items {
		if ep.Name == pool {
			continue
		}
		if len(ep.Spec.NodeSelector) > 0 && labels.SelectorFromSet(ep.Spec.NodeSelector).Matches(labels.Set(node.Labels)) {
			reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Name: ep.Name}})
		}
	}
	return reqs
}

// nodeChanged passes node events that can change an endpoint's status, and drops the
// periodic heartbeats that change nothing it shows.
func nodeChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)
			return !equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
				nodeReady(o) != nodeReady(n) ||
				o.Spec.Unschedulable != n.Spec.Unschedulable ||
				!o.Status.Allocatable.Cpu().Equal(*n.Status.Allocatable.Cpu()) ||
				!equality.Semantic.DeepEqual(o.Status.Addresses, n.Status.Addresses)
		},
	}
}

// agentPodStartedOrEnded passes the pod events that change a node's stripe count, and
// those that change a warm pool's counts: a warm agent that comes to run, or that a job
// claims (its controlling owner changes).
func agentPodStartedOrEnded() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*corev1.Pod), e.ObjectNew.(*corev1.Pod)
			if podTerminal(o) != podTerminal(n) || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) {
				return true
			}
			_, warm := n.Labels[contract.LabelWarmPool]
			return warm && (o.Status.Phase != n.Status.Phase || controllerUID(o) != controllerUID(n))
		},
	}
}
