package controllers

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// The job's side of a site pair. A job whose source or destination names a RemoteSite
// has its other side run by the peer's dtnflow: this manager writes a RemoteTransfer
// into the peer's namespace (through the credential the peer issued), saying what the
// plan wants of that side — stripes, nodes, CPU, the coordinator's directive, the
// addresses of this site's receivers — and reads back what the peer decided and
// observed: whether it accepts, its nodes (which the planner plans over like its own),
// each stripe's state and receiver address, the coordinator's report. The job's shared
// secret is made here and written to both sites in the same pass, under names that
// carry a random suffix recorded in the RemoteTransfer, so that a pass interrupted
// between the two writes is simply done again; neither manager ever reads a Secret.

// defaultRemotePoll is how often a job with a remote side looks at it again when
// nothing woke it sooner: the peer's RemoteTransfers are watched (remoteClients), and
// the look is what notices a peer that stopped answering, or a watch that broke.
const defaultRemotePoll = 2 * time.Second

// remoteSide is a pass's view of the peer's side of a job.
type remoteSide struct {
	siteName string
	site     *dtnflowv1alpha1.RemoteSite
	side     dtnflowv1alpha1.RemoteSide
	endpoint string
	client   client.Client
	// name and namespace of the RemoteTransfer at the peer.
	name, namespace string
	// rt is the RemoteTransfer as read this pass; nil before it exists.
	rt *dtnflowv1alpha1.RemoteTransfer
	// problem is why the peer cannot be used this pass (its API server is down, the
	// credential refused, ...), or nil.
	problem *jobProblem
	// want is the spec the pass wants the RemoteTransfer to have; pushed after it.
	want *dtnflowv1alpha1.RemoteTransferSpec
	// secret is this site's Secret holding the job's shared secret ("" until made).
	secret string
}

// isSource says whether the peer runs the source side (coordinator and senders).
func (rs *remoteSide) isSource() bool {
	return rs != nil && rs.side == dtnflowv1alpha1.RemoteSideSource
}

// isDestination says whether the peer runs the destination side (receivers).
func (rs *remoteSide) isDestination() bool {
	return rs != nil && rs.side == dtnflowv1alpha1.RemoteSideDestination
}

// remoteOf says which side of a job names a site, if any.
func remoteOf(job *dtnflowv1alpha1.TransferJob) (site string, side dtnflowv1alpha1.RemoteSide, endpoint string) {
	switch {
	case job.Spec.Source.Site != "":
		return job.Spec.Source.Site, dtnflowv1alpha1.RemoteSideSource, job.Spec.Source.Endpoint
	case job.Spec.Destination.Site != "":
		return job.Spec.Destination.Site, dtnflowv1alpha1.RemoteSideDestination, job.Spec.Destination.Endpoint
	}
	return "", "", ""
}

// RemoteTransferName is the name of a job's RemoteTransfer at the peer: its namespace
// and name here, and a hash of both (so that "a-b"/"c" and "a"/"b-c" differ).
func RemoteTransferName(job *dtnflowv1alpha1.TransferJob) string {
	return truncateWithHash(job.Namespace+"-"+job.Name, 200) + "-" + shortHash(job.Namespace+"/"+job.Name, 6)
}

// observeRemote reads the peer's side of a job: its RemoteSite here, then the
// RemoteTransfer at the peer. A RemoteTransfer left by an earlier job of the same name
// is deleted.
func (r *TransferJobReconciler) observeRemote(ctx context.Context, job *dtnflowv1alpha1.TransferJob) (*remoteSide, error) {
	siteName, side, endpoint := remoteOf(job)
	if siteName == "" {
		return nil, nil
	}
	rs := &remoteSide{siteName: siteName, side: side, endpoint: endpoint, name: RemoteTransferName(job)}
	var site dtnflowv1alpha1.RemoteSite
	if err := r.Client.Get(ctx, types.NamespacedName{Name: siteName}, &site); err != nil {
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading RemoteSite %s: %w", siteName, err)
		}
		field := "spec.source.site"
		if side == dtnflowv1alpha1.RemoteSideDestination {
			field = "spec.destination.site"
		}
		rs.problem = &jobProblem{Reason: ReasonRemoteSiteNotFound, Blocking: true, Message: fmt.Sprintf("%s: RemoteSite %q not found", field, siteName)}
		return rs, nil
	}
	rs.site, rs.namespace = &site, site.Spec.Namespace
	if r.remotes == nil {
		rs.problem = &jobProblem{Reason: ReasonRemoteCredentialInvalid, Blocking: true, Message: "this manager was started without remote sites"}
		return rs, nil
	}
	cl, err := r.remotes.get(ctx, &site)
	if err != nil {
		rs.problem = remoteProblem(siteName, err)
		return rs, nil
	}
	rs.client = cl
	var rt dtnflowv1alpha1.RemoteTransfer
	switch err := cl.Get(ctx, types.NamespacedName{Namespace: rs.namespace, Name: rs.name}, &rt); {
	case err == nil:
		if rt.Spec.Origin.UID != string(job.UID) || rt.DeletionTimestamp != nil {
			if rt.DeletionTimestamp == nil {
				if err := cl.Delete(ctx, &rt, client.Preconditions{UID: &rt.UID}); err != nil && !apierrors.IsNotFound(err) {
					rs.problem = remoteProblem(siteName, err)
				}
			}
			break // a new one is made once the old one is gone
		}
		rs.rt = &rt
		rs.want = rt.Spec.DeepCopy()
	case apierrors.IsNotFound(err):
	default:
		rs.problem = remoteProblem(siteName, err)
	}
	return rs, nil
}

// remoteEndpoint is the peer's endpoint as the planner and the pod layout see one of
// this cluster's: the usable nodes the peer offers, with their NIC, CPU budget and
// stripe capacity (nodeView carries them per node), and no namespace restriction here
// (the peer decides; this site's RemoteSite namespaceSelector is checked in remoteGate).
func (rs *remoteSide) remoteEndpoint() (*dtnflowv1alpha1.TransferEndpoint, []nodeView) {
	ep := &dtnflowv1alpha1.TransferEndpoint{ObjectMeta: metav1.ObjectMeta{Name: rs.endpoint},
		Spec: dtnflowv1alpha1.TransferEndpointSpec{NamespaceSelector: &metav1.LabelSelector{}, NICBitsPerSecond: 1, MaxStripesPerNode: 1}}
	if rs.rt == nil {
		return ep, nil
	}
	var nodes []nodeView
	for _, n := range rs.rt.Status.Nodes {
		ep.Spec.NICBitsPerSecond = max(ep.Spec.NICBitsPerSecond, n.NICBitsPerSecond)
		ep.Spec.MaxStripesPerNode = max(ep.Spec.MaxStripesPerNode, n.MaxStripes)
		v := nodeView{Name: n.Name, Ready: true, StripesByJob: map[types.UID]int{"peer-site-jobs": int(n.OtherStripes)},
			nicBitsPerSecond: n.NICBitsPerSecond, cpuBudgetMillicores: n.CPUBudgetMillicores, maxStripes: n.MaxStripes}
		nodes = append(nodes, v)
	}
	return ep, nodes
}

// remoteGate decides whether the job may go on with its peer this pass: a problem that
// withdraws access (blocking) or one that only delays. It creates the RemoteTransfer
// when it is missing and records the peer's side in status.remote.
func (r *TransferJobReconciler) remoteGate(ctx context.Context, p *pass) *jobProblem {
	rs := p.obs.remote
	p.requeue(r.RemotePoll)
	st := p.st.Remote
	if st == nil || st.Site != rs.siteName {
		st = &dtnflowv1alpha1.RemoteSideStatus{Site: rs.siteName, Side: rs.side, Accepted: metav1.ConditionUnknown}
	}
	p.st.Remote = st
	st.Transfer = rs.namespace + "/" + rs.name
	if rs.namespace == "" {
		st.Transfer = ""
	}
	note := func(prob *jobProblem) *jobProblem {
		st.Reason, st.Message = prob.Reason, contract.Cut(prob.Message, 1024)
		return prob
	}
	if rs.problem != nil {
		return note(rs.problem)
	}
	if ok, err := namespaceAllowed(rs.site.Spec.NamespaceSelector, p.obs.endpoints.Namespace); !ok {
		msg := fmt.Sprintf("namespace %q is not selected by spec.namespaceSelector of RemoteSite %q", p.job.Namespace, rs.siteName)
		if err != nil {
			msg = fmt.Sprintf("spec.namespaceSelector of RemoteSite %q is invalid: %v", rs.siteName, err)
		}
		return note(&jobProblem{Reason: ReasonNamespaceNotAllowed, Blocking: true, Message: msg})
	}
	st.LastSeenTime = &p.now
	if rs.rt == nil {
		rt := &dtnflowv1alpha1.RemoteTransfer{ObjectMeta: metav1.ObjectMeta{Name: rs.name, Namespace: rs.namespace,
			Labels: map[string]string{contract.LabelManagedBy: contract.ManagedByValue}}, Spec: remoteSpec(p.job, rs.side)}
		if err := rs.client.Create(ctx, rt); err != nil && !apierrors.IsAlreadyExists(err) {
			return note(remoteProblem(rs.siteName, err))
		}
		p.event(corev1.EventTypeNormal, ReasonWaitingForRemote, "Delegate", fmt.Sprintf("Asked site %s to run the %s side (RemoteTransfer %s/%s)", rs.siteName, rs.side, rs.namespace, rs.name))
		return note(&jobProblem{Reason: ReasonWaitingForRemote, Message: fmt.Sprintf("waiting for site %s to accept the %s side", rs.siteName, rs.side)})
	}
	st.AgentFailures = rs.rt.Status.AgentFailures
	st.Nodes = nil
	for _, s := range rs.rt.Status.Stripes {
		if s.Node != "" && !containsString(st.Nodes, s.Node) && len(st.Nodes) < 64 {
			st.Nodes = append(st.Nodes, s.Node)
		}
	}
	c := meta.FindStatusCondition(rs.rt.Status.Conditions, dtnflowv1alpha1.ConditionAccepted)
	switch {
	case c == nil || c.Status == metav1.ConditionUnknown:
		st.Accepted = metav1.ConditionUnknown
		return note(&jobProblem{Reason: ReasonWaitingForRemote, Message: fmt.Sprintf("waiting for site %s to accept the %s side", rs.siteName, rs.side)})
	case c.Status == metav1.ConditionFalse:
		st.Accepted = metav1.ConditionFalse
		st.Reason, st.Message = c.Reason, contract.Cut(c.Message, 1024)
		return &jobProblem{Reason: ReasonRemoteRefused, Blocking: true,
			Message: contract.Cut(fmt.Sprintf("site %s refused the %s side (%s): %s", rs.siteName, rs.side, c.Reason, c.Message), 1024)}
	}
	st.Accepted, st.Reason, st.Message = metav1.ConditionTrue, c.Reason, contract.Cut(c.Message, 1024)
	if q := meta.FindStatusCondition(rs.rt.Status.Conditions, dtnflowv1alpha1.ConditionQueued); q != nil && q.Status == metav1.ConditionTrue && rs.rt.Spec.SecretName != "" {
		st.Reason, st.Message = q.Reason, contract.Cut(q.Message, 1024)
		queue := rs.rt.Status.Queue
		if queue == nil {
			queue = &dtnflowv1alpha1.TransferQueue{Position: 1}
		}
		return &jobProblem{Reason: ReasonRemoteQueued, Blocking: true, peerQueue: queue,
			Message: contract.Cut(fmt.Sprintf("site %s queues the %s side (%s): %s", rs.siteName, rs.side, q.Reason, q.Message), 1024)}
	}
	return nil
}

// remoteSpec is the RemoteTransfer's spec from the job, before any stripe.
func remoteSpec(job *dtnflowv1alpha1.TransferJob, side dtnflowv1alpha1.RemoteSide) dtnflowv1alpha1.RemoteTransferSpec {
	spec := dtnflowv1alpha1.RemoteTransferSpec{
		Origin:    dtnflowv1alpha1.RemoteOrigin{Namespace: job.Namespace, Name: job.Name, UID: string(job.UID)},
		Side:      side,
		Path:      job.Spec.Destination.Path,
		Integrity: job.Spec.Integrity,
		Overwrite: job.Spec.Overwrite,
	}
	spec.Integrity.InFlight = dtnflowv1alpha1.InFlightCheck(jobOptions(job).InFlight)
	if side == dtnflowv1alpha1.RemoteSideSource {
		spec.Endpoint, spec.Paths = job.Spec.Source.Endpoint, job.Spec.Source.Paths
	} else {
		spec.Endpoint = job.Spec.Destination.Endpoint
	}
	return spec
}

// ensureRemoteAuth makes the job's shared secret at both sites once: fresh random bytes
// written to a Secret here (owned by the job) and one at the peer (owned by the
// RemoteTransfer), both named with the same random suffix, which is then recorded in
// the RemoteTransfer's spec.secretName — only after both writes worked, so a pass
// interrupted half way makes a new pair next time (the orphan goes with its owner).
func (r *TransferJobReconciler) ensureRemoteAuth(ctx context.Context, p *pass) error {
	rs := p.obs.remote
	if name := rs.rt.Spec.SecretName; name != "" {
		rs.secret = localSecretName(p.job, name)
		return nil
	}
	var nonce [3]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return err
	}
	suffix := hex.EncodeToString(nonce[:])
	secret, err := buildJobSecret(p.job)
	if err != nil {
		return err
	}
	remote := secret.DeepCopy()
	owner := *metav1.NewControllerRef(rs.rt, dtnflowv1alpha1.GroupVersion.WithKind(remoteTransferKind))
	// the peer's credential may not update its RemoteTransfers' finalizers, which
	// blockOwnerDeletion asks for where OwnerReferencesPermissionEnforcement is on
	owner.BlockOwnerDeletion = ptr.To(false)
	remote.ObjectMeta = metav1.ObjectMeta{Name: SecretName(rs.rt.Name) + "-" + suffix, Namespace: rs.namespace,
		Labels:          map[string]string{contract.LabelManagedBy: contract.ManagedByValue},
		OwnerReferences: []metav1.OwnerReference{owner}}
	if err := rs.client.Create(ctx, remote); err != nil {
		return fmt.Errorf("creating the job's secret at site %s: %w", rs.siteName, err)
	}
	secret.Name = SecretName(p.job.Name) + "-" + suffix
	if err := r.Client.Create(ctx, secret); err != nil {
		return fmt.Errorf("creating Secret %s: %w", secret.Name, err)
	}
	rs.want.SecretName = remote.Name
	if err := r.pushRemote(ctx, p); err != nil {
		return err
	}
	rs.secret = secret.Name
	return nil
}

// localSecretName is this site's Secret of a job whose peer Secret is remoteName: the
// same random suffix.
func localSecretName(job *dtnflowv1alpha1.TransferJob, remoteName string) string {
	return SecretName(job.Name) + remoteName[len(remoteName)-len("-xxxxxx"):]
}

// pushRemote writes the RemoteTransfer's spec when the pass changed it.
func (r *TransferJobReconciler) pushRemote(ctx context.Context, p *pass) error {
	rs := p.obs.remote
	if rs == nil || rs.rt == nil || rs.want == nil || rs.client == nil || equality.Semantic.DeepEqual(*rs.want, rs.rt.Spec) {
		return nil
	}
	patch := client.MergeFromWithOptions(rs.rt.DeepCopy(), client.MergeFromWithOptimisticLock{})
	rs.rt.Spec = *rs.want
	if err := rs.client.Patch(ctx, rs.rt, patch); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			p.requeue(staleCacheRequeue)
			return nil
		}
		prob := remoteProblem(rs.siteName, err)
		if !prob.Blocking {
			logf.FromContext(ctx).Info("Could not update the peer's side; trying again", "site", rs.siteName, "err", err.Error())
			return nil
		}
		return fmt.Errorf("updating RemoteTransfer %s/%s at site %s: %w", rs.namespace, rs.name, rs.siteName, err)
	}
	rs.want = rs.rt.Spec.DeepCopy()
	return nil
}

// stopRemote asks the peer to stop the side's agents (the job is blocked, suspended or
// waits), keeping the RemoteTransfer and its secret.
func (rs *remoteSide) stopRemote() {
	if rs != nil && rs.want != nil {
		rs.want.Stripes = 0
	}
}

// remoteDirective is the directive the peer's coordinator has (side Source).
func (rs *remoteSide) remoteDirective() *contract.Directive {
	if rs == nil || rs.rt == nil || rs.rt.Spec.Directive == "" {
		return nil
	}
	var d contract.Directive
	if json.Unmarshal([]byte(rs.rt.Spec.Directive), &d) != nil {
		return nil
	}
	return &d
}

// setDirective gives the peer's coordinator a directive when it differs, numbered after
// the last one.
func (rs *remoteSide) setDirective(want contract.Directive) {
	current := rs.remoteDirective()
	if rs.want == nil || sameDirective(current, &want) {
		return
	}
	want.Generation = 1
	if current != nil {
		want.Generation = current.Generation + 1
	}
	rs.want.Directive = encodeDirective(want)
}

// report is the peer coordinator's report (side Source).
func (rs *remoteSide) report() (*contract.Report, error) {
	if rs == nil || rs.rt == nil || rs.rt.Status.Report == "" {
		return nil, nil
	}
	var rep contract.Report
	if err := json.Unmarshal([]byte(rs.rt.Status.Report), &rep); err != nil {
		return nil, fmt.Errorf("the report of site %s's coordinator: %w", rs.siteName, err)
	}
	return &rep, nil
}

// stripe is the peer's stripe k, or nil.
func (rs *remoteSide) stripe(k int32) *dtnflowv1alpha1.RemoteStripe {
	if rs == nil || rs.rt == nil {
		return nil
	}
	for i := range rs.rt.Status.Stripes {
		if rs.rt.Status.Stripes[i].Index == k {
			return &rs.rt.Status.Stripes[i]
		}
	}
	return nil
}

// stripeState is the state of the peer's agent of stripe k (Pending when unknown).
func (rs *remoteSide) stripeState(k int32) dtnflowv1alpha1.StripeState {
	if s := rs.stripe(k); s != nil && rs.want != nil && k < rs.want.Stripes {
		return s.State
	}
	return dtnflowv1alpha1.StripePending
}

// releaseRemote deletes a finished job's RemoteTransfer at the peer (its agents and
// secret go with it). It returns false when the peer could not be told (try again).
func (r *TransferJobReconciler) releaseRemote(ctx context.Context, p *pass) bool {
	if p.st.Remote == nil || p.st.Remote.Reason == ReasonReleased {
		return true
	}
	rs, err := r.observeRemote(ctx, p.job)
	if err != nil || rs == nil || rs.client == nil {
		return rs == nil || (rs.problem != nil && rs.problem.Blocking)
	}
	if rs.rt != nil {
		if err := rs.client.Delete(ctx, rs.rt, client.Preconditions{UID: &rs.rt.UID}); err != nil && !apierrors.IsNotFound(err) {
			return remoteProblem(rs.siteName, err).Blocking
		}
	}
	p.st.Remote.Reason, p.st.Remote.Message = ReasonReleased, fmt.Sprintf("the job finished: RemoteTransfer %s/%s deleted at site %s", rs.namespace, rs.name, rs.siteName)
	p.st.Remote.Nodes = nil
	return true
}

// ReasonReleased says a finished job's side was removed at the peer.
const ReasonReleased = "Released"

// sweepRemote deletes, at every peer, the RemoteTransfer of a job that is gone (when no
// live job of the same name owns it).
func (r *TransferJobReconciler) sweepRemote(ctx context.Context, key types.NamespacedName, liveUID types.UID) {
	if r.remotes == nil {
		return
	}
	var sites dtnflowv1alpha1.RemoteSiteList
	if err := r.Client.List(ctx, &sites); err != nil {
		return
	}
	job := &dtnflowv1alpha1.TransferJob{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	for i := range sites.Items {
		cl, err := r.remotes.get(ctx, &sites.Items[i])
		if err != nil {
			continue
		}
		var rt dtnflowv1alpha1.RemoteTransfer
		if err := cl.Get(ctx, types.NamespacedName{Namespace: sites.Items[i].Spec.Namespace, Name: RemoteTransferName(job)}, &rt); err != nil {
			continue
		}
		if rt.Spec.Origin.UID != string(liveUID) {
			if err := cl.Delete(ctx, &rt, client.Preconditions{UID: ptr.To(rt.UID)}); err == nil {
				logf.FromContext(ctx).Info("Deleted the RemoteTransfer a deleted job left at a peer", "site", sites.Items[i].Name, "remoteTransfer", rt.Namespace+"/"+rt.Name)
			}
		}
	}
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
