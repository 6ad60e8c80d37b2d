package controllers

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/optimizer"
)

// A peer site's job counts at the serving site (issue 16): the side a RemoteTransfer
// asks for runs this site's agents on this site's endpoint, so it takes one of the
// endpoint's spec.sharing.maxActiveJobs with this site's own jobs, in one queue with
// them. It joins the sharing view as a stand-in job: its own endpoint here, a peer
// endpoint (whose limits are the peer's) on the other end, the default priority (the
// peer's priority classes mean nothing here), never preempting; this site's classes
// that allow preemption may take its place, as they may a local job's.

// ReasonRemoteQueued is the reason of a job's Queued condition while the peer site
// that serves its other side queues that side.
const ReasonRemoteQueued = "RemoteQueued"

// remoteWantsSlot says whether a RemoteTransfer asks for a place at this site: the
// peer's job went ahead (it set spec.secretName once its own site admitted it) and the
// side was not refused here.
func remoteWantsSlot(rt *dtnflowv1alpha1.RemoteTransfer) bool {
	return rt.DeletionTimestamp == nil && rt.Spec.SecretName != "" &&
		!meta.IsStatusConditionFalse(rt.Status.Conditions, dtnflowv1alpha1.ConditionAccepted)
}

// remoteStandIn is the stand-in job of a RemoteTransfer in the sharing view. Its status
// carries the RemoteTransfer's Queued condition alone: holding a slot is Queued False.
func remoteStandIn(rt *dtnflowv1alpha1.RemoteTransfer) *dtnflowv1alpha1.TransferJob {
	job := &dtnflowv1alpha1.TransferJob{
		TypeMeta: metav1.TypeMeta{APIVersion: dtnflowv1alpha1.GroupVersion.String(), Kind: remoteTransferKind},
		ObjectMeta: metav1.ObjectMeta{Name: rt.Name, Namespace: rt.Namespace, UID: rt.UID,
			CreationTimestamp: rt.CreationTimestamp},
	}
	// the peer's end: a key with a '/', so no local endpoint's limits apply to it,
	// and a path of its own
	peerSite, peerEndpoint := "peer-"+rt.Namespace, rt.Spec.Origin.Namespace+"."+rt.Spec.Origin.Name
	// and the trees it uses here (jobTrees): a Destination side writes anywhere under
	// its path (the source paths that land there are the peer's), a Source side reads
	// its paths
	if rt.Spec.Side == dtnflowv1alpha1.RemoteSideDestination {
		job.Spec.Source.Site, job.Spec.Source.Endpoint = peerSite, peerEndpoint
		job.Spec.Source.Paths = []dtnflowv1alpha1.RelativePath{"."}
		job.Spec.Destination.Endpoint, job.Spec.Destination.Path = rt.Spec.Endpoint, rt.Spec.Path
	} else {
		job.Spec.Source.Endpoint, job.Spec.Source.Paths = rt.Spec.Endpoint, rt.Spec.Paths
		job.Spec.Destination.Site, job.Spec.Destination.Endpoint = peerSite, peerEndpoint
	}
	if c := meta.FindStatusCondition(rt.Status.Conditions, dtnflowv1alpha1.ConditionQueued); c != nil {
		job.Status.Conditions = []metav1.Condition{*c}
	}
	return job
}

// memberKey names a job of the sharing view (in Admit's decisions and wait messages):
// namespace/name, or "RemoteTransfer namespace/name" for a peer's side.
func memberKey(j *dtnflowv1alpha1.TransferJob) string {
	if j.Kind == remoteTransferKind {
		return remoteTransferKind + " " + j.Namespace + "/" + j.Name
	}
	return j.Namespace + "/" + j.Name
}

// waitsForPeer says whether a job waits for its peer site to admit its other side: it
// then holds no slot here and asks for none until the peer admits it.
func waitsForPeer(st *dtnflowv1alpha1.TransferJobStatus) bool {
	c := meta.FindStatusCondition(st.Conditions, dtnflowv1alpha1.ConditionQueued)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonRemoteQueued
}

// remoteTransfersOf lists the RemoteTransfers of a local endpoint that ask for a place.
func remoteTransfersOf(ctx context.Context, c client.Client, endpoint string) ([]*dtnflowv1alpha1.RemoteTransfer, error) {
	var list dtnflowv1alpha1.RemoteTransferList
	if err := c.List(ctx, &list, client.MatchingFields{IndexRemoteEndpoint: endpoint}); err != nil {
		return nil, fmt.Errorf("listing the RemoteTransfers of endpoint %s: %w", endpoint, err)
	}
	var out []*dtnflowv1alpha1.RemoteTransfer
	for i := range list.Items {
		if remoteWantsSlot(&list.Items[i]) {
			out = append(out, &list.Items[i])
		}
	}
	return out, nil
}

// remoteAdmission decides whether this site admits a RemoteTransfer's side now (st is
// its status as this pass has it); the caller holds the sharing ledger's pass lock and
// records the decision with it.
func (r *TransferJobReconciler) remoteAdmission(ctx context.Context, rt *dtnflowv1alpha1.RemoteTransfer, st *dtnflowv1alpha1.RemoteTransferStatus, now metav1.Time) (optimizer.Admission, string, error) {
	cur := rt.DeepCopy()
	cur.Status = *st
	standIn := remoteStandIn(cur)
	p := &pass{job: standIn, st: standIn.Status.DeepCopy(), now: now, at: now.Time}
	view, prob, err := r.shareViewFor(ctx, p)
	if err != nil {
		return optimizer.Admission{}, "", err
	}
	if prob != nil { // only a job's own priority class raises one; a stand-in names none
		return optimizer.Admission{}, prob.Message, nil
	}
	return view.admission, view.waitMessage, nil
}

// recordRemote keeps the Queued condition a pass decided for a RemoteTransfer, so that
// passes of this site's jobs count it before the cache has the status that says it.
func (l *sharingLedger) recordRemote(uid types.UID, st *dtnflowv1alpha1.RemoteTransferStatus) {
	keep := &dtnflowv1alpha1.TransferJobStatus{}
	if c := meta.FindStatusCondition(st.Conditions, dtnflowv1alpha1.ConditionQueued); c != nil {
		keep.Conditions = []metav1.Condition{*c}
	}
	l.record(uid, keep)
}

// remoteSlotChanged passes the RemoteTransfer events that can free or take a place at
// an endpoint: arrivals, departures, and a change of the peer's go-ahead, of the grant
// or of the queue.
func remoteSlotChanged() predicate.Predicate {
	sig := func(rt *dtnflowv1alpha1.RemoteTransfer) string {
		s := fmt.Sprintf("%v", remoteWantsSlot(rt))
		if c := meta.FindStatusCondition(rt.Status.Conditions, dtnflowv1alpha1.ConditionQueued); c != nil {
			s += "/" + string(c.Status)
		}
		return s
	}
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return sig(e.ObjectOld.(*dtnflowv1alpha1.RemoteTransfer)) != sig(e.ObjectNew.(*dtnflowv1alpha1.RemoteTransfer))
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// jobsOfRemoteEndpoint maps a RemoteTransfer to this site's jobs of its endpoint.
func (r *TransferJobReconciler) jobsOfRemoteEndpoint(ctx context.Context, o client.Object) []reconcile.Request {
	return r.jobsOfEndpoint(ctx, o.(*dtnflowv1alpha1.RemoteTransfer).Spec.Endpoint)
}

// transfersOfEndpoints maps a job, or another RemoteTransfer, to the RemoteTransfers of
// the same local endpoints: a place it frees may be theirs.
func (r *RemoteTransferReconciler) transfersOfEndpoints(ctx context.Context, o client.Object) []reconcile.Request {
	var endpoints []string
	switch obj := o.(type) {
	case *dtnflowv1alpha1.TransferJob:
		src, dst := jobEndpointKeys(obj)
		endpoints = []string{src, dst}
	case *dtnflowv1alpha1.RemoteTransfer:
		endpoints = []string{obj.Spec.Endpoint}
	}
	var reqs []reconcile.Request
	seen := map[types.NamespacedName]bool{{Namespace: o.GetNamespace(), Name: o.GetName()}: true}
	for _, ep := range endpoints {
		rts, err := remoteTransfersOf(ctx, r.Client, ep)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the RemoteTransfers of an endpoint")
			return nil
		}
		for _, rt := range rts {
			key := types.NamespacedName{Namespace: rt.Namespace, Name: rt.Name}
			if !seen[key] {
				seen[key] = true
				reqs = append(reqs, reconcile.Request{NamespacedName: key})
			}
		}
	}
	return reqs
}
