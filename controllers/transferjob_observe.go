package controllers

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// observed is everything one pass reads about a job besides the job itself, all from
// the manager's cache: its endpoints and their nodes, its namespace, its agent pods and
// the coordinator's report, and the path's profile.
type observed struct {
	endpoints jobEndpoints
	profile   *dtnflowv1alpha1.PathProfile

	coordinator *corev1.Pod
	senders     map[int32]*corev1.Pod
	receivers   map[int32]*corev1.Pod
	// strays are pods the job controls that no stripe of any plan would have: a
	// label edited by hand, a stripe index beyond any plan. They are deleted.
	strays []*corev1.Pod
	// leaving are the names of pods on their way out (being deleted, or deleted by us
	// and still in the cache): no pod of that name can be created until they are gone.
	leaving map[string]bool
	// vanishing are pods being deleted by someone else: a failure to account for.
	vanishing []*corev1.Pod

	report    *contract.Report
	reportErr error

	// remote is the side a peer site runs; nil for a job within this cluster.
	remote *remoteSide
}

// node returns the view of a node of the side, or nil when the endpoint does not select it.
func (o *observed) node(side []nodeView, name string) *nodeView {
	for i := range side {
		if side[i].Name == name {
			return &side[i]
		}
	}
	return nil
}

// usable says whether new agents may be placed on the named node of the side.
func (o *observed) usable(side []nodeView, name string) bool {
	n := o.node(side, name)
	return n != nil && n.Usable()
}

// agentPods lists every live agent pod of the job.
func (o *observed) agentPods() []*corev1.Pod {
	var pods []*corev1.Pod
	if o.coordinator != nil {
		pods = append(pods, o.coordinator)
	}
	for _, m := range []map[int32]*corev1.Pod{o.senders, o.receivers} {
		for _, p := range m {
			pods = append(pods, p)
		}
	}
	return append(pods, o.strays...)
}

// observe reads what a pass needs.
func (r *TransferJobReconciler) observe(ctx context.Context, job *dtnflowv1alpha1.TransferJob) (*observed, error) {
	o := &observed{senders: map[int32]*corev1.Pod{}, receivers: map[int32]*corev1.Pod{}, leaving: map[string]bool{}}
	var err error
	if o.remote, err = r.observeRemote(ctx, job); err != nil {
		return nil, err
	}
	// The peer's side is its endpoint and nodes as its RemoteTransfer reports them.
	if o.remote.isSource() {
		o.endpoints.Source, o.endpoints.SourceNodes = o.remote.remoteEndpoint()
	} else if o.endpoints.Source, err = r.endpoint(ctx, job.Spec.Source.Endpoint); err != nil {
		return nil, err
	}
	if o.remote.isDestination() {
		o.endpoints.Destination, o.endpoints.DestinationNodes = o.remote.remoteEndpoint()
	} else if o.endpoints.Destination, err = r.endpoint(ctx, job.Spec.Destination.Endpoint); err != nil {
		return nil, err
	}
	if o.endpoints.Source != nil && !o.remote.isSource() {
		if o.endpoints.SourceNodes, err = observeNodes(ctx, r.Client, o.endpoints.Source); err != nil {
			return nil, err
		}
	}
	if o.endpoints.Destination != nil && !o.remote.isDestination() {
		if o.endpoints.DestinationNodes, err = observeNodes(ctx, r.Client, o.endpoints.Destination); err != nil {
			return nil, err
		}
	}
	var ns corev1.Namespace
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: job.Namespace}, &ns); {
	case err == nil:
		o.endpoints.Namespace = &ns
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading namespace %s: %w", job.Namespace, err)
	}

	var profile dtnflowv1alpha1.PathProfile
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: PathProfileNameFor(job)}, &profile); {
	case err == nil:
		o.profile = &profile
	case !apierrors.IsNotFound(err):
		return nil, fmt.Errorf("reading PathProfile %s: %w", PathProfileNameFor(job), err)
	}

	if err := r.observePods(ctx, job, o); err != nil {
		return nil, err
	}
	o.report, o.reportErr = reportOf(o.coordinator)
	if o.remote.isSource() {
		o.report, o.reportErr = o.remote.report()
	}
	return o, nil
}

func (r *TransferJobReconciler) endpoint(ctx context.Context, name string) (*dtnflowv1alpha1.TransferEndpoint, error) {
	var ep dtnflowv1alpha1.TransferEndpoint
	if err := r.Client.Get(ctx, types.NamespacedName{Name: name}, &ep); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading TransferEndpoint %s: %w", name, err)
	}
	return &ep, nil
}

// observePods sorts the job's pods by role and stripe. Pods that are going away (being
// deleted, or deleted by us and not yet gone from the cache) are left out: they are
// neither counted as running nor replaced until they are gone.
func (r *TransferJobReconciler) observePods(ctx context.Context, job *dtnflowv1alpha1.TransferJob, o *observed) error {
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(job.Namespace), client.MatchingFields{IndexPodOwnerJob: job.Name}); err != nil {
		return fmt.Errorf("listing the pods of TransferJob %s/%s: %w", job.Namespace, job.Name, err)
	}
	present := make(map[string]types.UID, len(pods.Items))
	for i := range pods.Items {
		pod := &pods.Items[i]
		if controllerUID(pod) != job.UID {
			continue // a pod of an earlier job of the same name; the sweep removes it
		}
		present[slotName(job.Name, pod)] = pod.UID
	}
	r.exp.Observe(job.UID, present)
	for i := range pods.Items {
		pod := &pods.Items[i]
		if controllerUID(pod) != job.UID {
			continue
		}
		slot := slotName(job.Name, pod)
		if pod.DeletionTimestamp != nil || r.exp.Deleted(job.UID, pod.UID) {
			o.leaving[slot] = true
			if !r.exp.Deleted(job.UID, pod.UID) && !podTerminal(pod) {
				o.vanishing = append(o.vanishing, pod)
			}
			continue
		}
		role := contract.Role(pod.Labels[contract.LabelRole])
		stripe, err := strconv.ParseInt(pod.Labels[contract.LabelStripe], 10, 32)
		k := int32(stripe)
		switch {
		case role == contract.RoleCoordinator && slot == CoordinatorPodName(job.Name) && o.coordinator == nil:
			o.coordinator = pod
		case role == contract.RoleSender && err == nil && slot == AgentPodName(job.Name, role, k) && o.senders[k] == nil:
			o.senders[k] = pod
		case role == contract.RoleReceiver && err == nil && slot == AgentPodName(job.Name, role, k) && o.receivers[k] == nil:
			o.receivers[k] = pod
		default:
			o.strays = append(o.strays, pod)
		}
	}
	return nil
}
