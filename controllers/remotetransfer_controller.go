package controllers

import (
	"context"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// remoteTransferKind is the Kind of RemoteTransfer, also set on the stand-in job its
// agents are built from.
const remoteTransferKind = "RemoteTransfer"

// RemoteTransferReconciler runs, at the serving site, the side of a peer's job that a
// RemoteTransfer asks for — as far as the TransferPeer of its namespace grants it — with
// this site's agents on this site's nodes: receivers (side Destination), or the
// coordinator and senders (side Source). The agent pods are built by the same function
// as a TransferJob's, through a stand-in job, owned by the RemoteTransfer; receivers
// are confined to the granted path and, when the peer requires it, refuse clear
// sessions. Its status carries back what the peer's job needs: this site's nodes for
// the planner, each stripe's state and receiver address, the coordinator's report.
type RemoteTransferReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Clock    clock.PassiveClock
	Pods     AgentPodOptions
	// ports is the port allocator shared with the TransferJob reconciler: both place
	// listening agents on the same nodes.
	ports *portAllocator
	// jobs is this site's TransferJob reconciler: a RemoteTransfer waits in one queue
	// with this site's jobs of its endpoint, decided under the same sharing ledger.
	jobs *TransferJobReconciler
}

// remotePlanHash is the plan-hash label of a RemoteTransfer's pods.
const remotePlanHash = "remote"

// +kubebuilder:rbac:groups=dtnflow.io,resources=transferpeers,verbs=get;list;watch
// +kubebuilder:rbac:groups=dtnflow.io,resources=remotetransfers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=dtnflow.io,resources=remotetransfers/status,verbs=get;update;patch

// Reconcile is one pass over a RemoteTransfer: check the grant, run or stop its agents,
// write its status once.
func (r *RemoteTransferReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var rt dtnflowv1alpha1.RemoteTransfer
	if err := r.Client.Get(ctx, req.NamespacedName, &rt); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if rt.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	// One pass at a time decides who holds the endpoints' places, through to the
	// status write (as the TransferJob reconciler's passes do).
	r.jobs.sharing.pass.Lock()
	defer r.jobs.sharing.pass.Unlock()
	st := rt.Status.DeepCopy()
	now := apiTime(r.Clock.Now())
	var peers dtnflowv1alpha1.TransferPeerList
	if err := r.Client.List(ctx, &peers); err != nil {
		return ctrl.Result{}, err
	}
	peer := peerOf(peers.Items, rt.Namespace)
	var ep *dtnflowv1alpha1.TransferEndpoint
	var got dtnflowv1alpha1.TransferEndpoint
	switch err := r.Client.Get(ctx, types.NamespacedName{Name: rt.Spec.Endpoint}, &got); {
	case err == nil:
		ep = &got
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}
	pods, err := r.pods(ctx, &rt)
	if err != nil {
		return ctrl.Result{}, err
	}
	var events []jobEvent
	prev := meta.FindStatusCondition(st.Conditions, dtnflowv1alpha1.ConditionAccepted)
	accept := func(status metav1.ConditionStatus, reason, msg string) {
		if prev == nil || prev.Status != status || prev.Reason != reason {
			typ := corev1.EventTypeNormal
			if status != metav1.ConditionTrue {
				typ = corev1.EventTypeWarning
			}
			events = append(events, jobEvent{Type: typ, Reason: reason, Action: "Admit", Note: msg})
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: dtnflowv1alpha1.ConditionAccepted, Status: status, Reason: reason,
			Message: msg, ObservedGeneration: rt.Generation, LastTransitionTime: now})
	}

	if prob := grantProblem(peer, &rt, ep); prob != nil {
		accept(metav1.ConditionFalse, prob.Reason, prob.Message)
		if err := r.deleteAll(ctx, pods); err != nil {
			return ctrl.Result{}, err
		}
		st.Stripes, st.Nodes, st.Report = nil, nil, ""
		meta.RemoveStatusCondition(&st.Conditions, dtnflowv1alpha1.ConditionQueued)
		st.Queue = nil
		return ctrl.Result{}, r.finish(ctx, &rt, st, events)
	}
	accept(metav1.ConditionTrue, ReasonGranted, fmt.Sprintf("TransferPeer %s grants %s of endpoint %s", peer.Name, rt.Spec.Side, rt.Spec.Endpoint))
	nodes, err := observeNodes(ctx, r.Client, ep)
	if err != nil {
		return ctrl.Result{}, err
	}
	st.Nodes = remoteNodes(ep, nodes, rt.UID)
	admitted, err := r.admit(ctx, &rt, st, now, &events)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !admitted || rt.Spec.Stripes == 0 || rt.Spec.SecretName == "" {
		if err := r.deleteAll(ctx, pods); err != nil {
			return ctrl.Result{}, err
		}
		st.Stripes, st.Report = nil, ""
		return ctrl.Result{}, r.finish(ctx, &rt, st, events)
	}

	// Failed agents are replaced (and counted: the peer's job counts them against its
	// backoffLimit).
	for name, pod := range pods {
		if pod.Status.Phase == corev1.PodFailed {
			st.AgentFailures++
			r.ports.NoteFailedAgent(pod)
			events = append(events, jobEvent{Type: corev1.EventTypeWarning, Reason: ReasonAgentFailed, Action: "ReplaceAgent",
				Note: fmt.Sprintf("Agent pod %s failed (%s); replacing it", name, terminationOf(pod))})
			if err := r.deletePod(ctx, pod); err != nil {
				return ctrl.Result{}, err
			}
			delete(pods, name)
		}
	}
	s := &remoteSync{r: r, rt: &rt, peer: peer, ep: ep, nodes: nodes, pods: pods, job: jobForRemote(&rt)}
	requeue, err := s.run(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	st.Stripes = s.stripes
	st.Report = ""
	if c := pods[CoordinatorPodName(rt.Name)]; c != nil && rt.Spec.Side == dtnflowv1alpha1.RemoteSideSource {
		st.Report = c.Annotations[contract.AnnotationReport]
	}
	if err := r.finish(ctx, &rt, st, events); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: requeue}, nil
}

// admit decides whether the side may run now: once the peer's job goes ahead (it sets
// spec.secretName), the side waits in one queue with this site's jobs of its endpoint
// (status.queue, Queued True) or holds a place there (Queued False). Before that it
// asks for none. The decision is recorded with the sharing ledger.
func (r *RemoteTransferReconciler) admit(ctx context.Context, rt *dtnflowv1alpha1.RemoteTransfer, st *dtnflowv1alpha1.RemoteTransferStatus, now metav1.Time, evs *[]jobEvent) (bool, error) {
	defer r.jobs.sharing.recordRemote(rt.UID, st)
	if rt.Spec.SecretName == "" {
		meta.RemoveStatusCondition(&st.Conditions, dtnflowv1alpha1.ConditionQueued)
		st.Queue = nil
		return true, nil
	}
	a, wait, err := r.jobs.remoteAdmission(ctx, rt, st, now)
	if err != nil {
		return false, err
	}
	prev := meta.FindStatusCondition(st.Conditions, dtnflowv1alpha1.ConditionQueued)
	waiting := prev != nil && prev.Status == metav1.ConditionTrue
	if a.Admitted {
		if waiting {
			*evs = append(*evs, jobEvent{Type: corev1.EventTypeNormal, Reason: ReasonAdmitted, Action: "Admit",
				Note: fmt.Sprintf("Admitted after waiting since %s", prev.LastTransitionTime.UTC().Format("15:04:05"))})
		}
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: dtnflowv1alpha1.ConditionQueued, Status: metav1.ConditionFalse,
			Reason: ReasonAdmitted, Message: fmt.Sprintf("holds a place at endpoint %s with this site's jobs", rt.Spec.Endpoint),
			ObservedGeneration: rt.Generation, LastTransitionTime: now})
		st.Queue = nil
		return true, nil
	}
	reason := waitReason(prev, a)
	if !waiting || prev.Reason != reason {
		*evs = append(*evs, jobEvent{Type: corev1.EventTypeNormal, Reason: reason, Action: "Queue", Note: wait})
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: dtnflowv1alpha1.ConditionQueued, Status: metav1.ConditionTrue,
		Reason: reason, Message: contract.Cut(wait, 1024), ObservedGeneration: rt.Generation, LastTransitionTime: now})
	st.Queue = queueEntry(st.Queue, reason, a.Position, wait, now)
	return false, nil
}

// finish writes the status when it changed, then records the pass's Events.
func (r *RemoteTransferReconciler) finish(ctx context.Context, rt *dtnflowv1alpha1.RemoteTransfer, st *dtnflowv1alpha1.RemoteTransferStatus, evs []jobEvent) error {
	st.ObservedGeneration = rt.Generation
	if !equality.Semantic.DeepEqual(*st, rt.Status) {
		patch := client.MergeFrom(rt.DeepCopy())
		rt.Status = *st
		if err := r.Client.Status().Patch(ctx, rt, patch); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	if r.Recorder != nil {
		for _, e := range evs {
			r.Recorder.Eventf(rt, nil, e.Type, e.Reason, e.Action, "%s", contract.Cut(e.Note, eventNoteLimit))
		}
	}
	return nil
}

// pods lists the RemoteTransfer's live pods by name.
func (r *RemoteTransferReconciler) pods(ctx context.Context, rt *dtnflowv1alpha1.RemoteTransfer) (map[string]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(rt.Namespace), client.MatchingFields{IndexPodOwnerRemote: rt.Name}); err != nil {
		return nil, err
	}
	out := map[string]*corev1.Pod{}
	for i := range list.Items {
		pod := &list.Items[i]
		if controllerUID(pod) == rt.UID && pod.DeletionTimestamp == nil {
			out[pod.Name] = pod
		}
	}
	return out, nil
}

func (r *RemoteTransferReconciler) deletePod(ctx context.Context, pod *corev1.Pod) error {
	if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s: %w", podKey(pod), err)
	}
	return nil
}

func (r *RemoteTransferReconciler) deleteAll(ctx context.Context, pods map[string]*corev1.Pod) error {
	for _, pod := range pods {
		if err := r.deletePod(ctx, pod); err != nil {
			return err
		}
	}
	return nil
}

// jobForRemote is the stand-in TransferJob a RemoteTransfer's agents are built from: its
// name, namespace and UID (so the pods are named and owned after the RemoteTransfer,
// controllerRefOf), and the parts of a job's spec the agents' command lines read.
func jobForRemote(rt *dtnflowv1alpha1.RemoteTransfer) *dtnflowv1alpha1.TransferJob {
	job := &dtnflowv1alpha1.TransferJob{
		TypeMeta:   metav1.TypeMeta{APIVersion: dtnflowv1alpha1.GroupVersion.String(), Kind: remoteTransferKind},
		ObjectMeta: metav1.ObjectMeta{Name: rt.Name, Namespace: rt.Namespace, UID: rt.UID},
		Spec: dtnflowv1alpha1.TransferJobSpec{
			Source:      dtnflowv1alpha1.TransferSource{Endpoint: rt.Spec.Endpoint, Paths: rt.Spec.Paths},
			Destination: dtnflowv1alpha1.TransferDestination{Path: rt.Spec.Path},
			Integrity:   rt.Spec.Integrity,
			Overwrite:   rt.Spec.Overwrite,
		},
	}
	return job
}

// remoteNodes are the endpoint's usable nodes as the peer's planner needs them.
func remoteNodes(ep *dtnflowv1alpha1.TransferEndpoint, nodes []nodeView, self types.UID) []dtnflowv1alpha1.RemoteNode {
	var out []dtnflowv1alpha1.RemoteNode
	for _, n := range nodes {
		if !n.Usable() || len(out) == 64 {
			continue
		}
		rn := dtnflowv1alpha1.RemoteNode{Name: n.Name, NICBitsPerSecond: ep.Spec.NICBitsPerSecond, MaxStripes: ep.Spec.MaxStripesPerNode,
			OtherStripes: int32(min(n.StripesOfOthers(self), 4096))}
		if b := ep.Spec.CPUBudgetPerNode; b != nil {
			rn.CPUBudgetMillicores = b.MilliValue()
		} else if n.Allocatable != nil {
			rn.CPUBudgetMillicores = n.Allocatable.MilliValue()
		}
		out = append(out, rn)
	}
	return out
}

// remoteSync is one pass's work on a granted RemoteTransfer's agents.
type remoteSync struct {
	r     *RemoteTransferReconciler
	rt    *dtnflowv1alpha1.RemoteTransfer
	peer  *dtnflowv1alpha1.TransferPeer
	ep    *dtnflowv1alpha1.TransferEndpoint
	nodes []nodeView
	pods  map[string]*corev1.Pod
	job   *dtnflowv1alpha1.TransferJob

	stripes []dtnflowv1alpha1.RemoteStripe
}

// node picks the node of stripe k: the peer's plan's choice when it is usable here,
// else this site's usable nodes in turn.
func (s *remoteSync) node(k int32) string {
	usable := map[string]bool{}
	var names []string
	for _, n := range s.nodes {
		if n.Usable() {
			usable[n.Name] = true
			names = append(names, n.Name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	if hint := s.rt.Spec.Nodes; len(hint) > 0 && usable[hint[int(k)%len(hint)]] {
		return hint[int(k)%len(hint)]
	}
	return names[int(k)%len(names)]
}

// plan is the stand-in plan the pods' CPU comes from: the peer's request per agent,
// capped at this site's budget shared among the stripes on a node.
func (s *remoteSync) plan() *dtnflowv1alpha1.TransferPlan {
	perNode := map[string]int32{}
	for k := int32(0); k < s.rt.Spec.Stripes; k++ {
		perNode[s.node(k)]++
	}
	most := int32(1)
	for _, n := range perNode {
		most = max(most, n)
	}
	cpu := s.rt.Spec.CPUMillicores
	if cpu == 0 {
		cpu = s.r.Pods.ProbeMillicores
	}
	if b := s.ep.Spec.CPUBudgetPerNode; b != nil && !b.IsZero() {
		cpu = min(cpu, b.MilliValue()/int64(most))
	}
	return &dtnflowv1alpha1.TransferPlan{StripesPerNode: most, SourceCPUMillicores: cpu, DestinationCPUMillicores: cpu, Hash: remotePlanHash}
}

// run brings the agents to the spec: receivers, or coordinator and senders; removes
// those beyond spec.stripes; records each stripe. It returns how soon to look again
// when something could not be placed yet.
func (s *remoteSync) run(ctx context.Context) (requeue time.Duration, err error) {
	plan := s.plan()
	want := sets.New[string]()
	if s.rt.Spec.Side == dtnflowv1alpha1.RemoteSideDestination {
		for k := int32(0); k < s.rt.Spec.Stripes; k++ {
			name := AgentPodName(s.rt.Name, contract.RoleReceiver, k)
			want.Insert(name)
			pod, err := s.ensure(ctx, plan, agentPod{Role: contract.RoleReceiver, Stripe: k, Node: s.node(k), Endpoint: s.ep,
				Receiver: contract.ReceiverOptions{Confine: string(s.rt.Spec.Path), RequireEncryption: requiresEncryption(s.peer)}})
			if err != nil {
				return 0, err
			}
			st := dtnflowv1alpha1.RemoteStripe{Index: k, Node: s.node(k), State: stripeState([]*corev1.Pod{pod})}
			if pod != nil {
				st.Node = pinnedNode(pod)
				// the address as soon as the pod is placed (its node and host port are
				// known), as for a receiver of a job within one cluster: the peer's
				// sender starts while the receiver does, and retries until it listens
				if n := nodeByName(s.nodes, st.Node); n != nil && n.Address != "" && !podTerminal(pod) {
					st.Address = hostPort(n.Address, listenPortOf(pod))
				}
			}
			s.stripes = append(s.stripes, st)
		}
	} else {
		coordName := CoordinatorPodName(s.rt.Name)
		want.Insert(coordName)
		if err := s.ensureCoordinatorAuth(ctx); err != nil {
			return 0, err
		}
		coord, err := s.ensure(ctx, plan, agentPod{Role: contract.RoleCoordinator, Node: s.node(0), Endpoint: s.ep, Directive: s.rt.Spec.Directive})
		if err != nil {
			return 0, err
		}
		if err := s.syncDirective(ctx, coord); err != nil {
			return 0, err
		}
		coordAddr := ""
		if coord != nil {
			if n := nodeByName(s.nodes, pinnedNode(coord)); n != nil && n.Address != "" {
				coordAddr = hostPort(n.Address, listenPortOf(coord))
			}
		}
		for k := int32(0); k < s.rt.Spec.Stripes; k++ {
			name := AgentPodName(s.rt.Name, contract.RoleSender, k)
			want.Insert(name)
			recv := ""
			if int(k) < len(s.rt.Spec.Receivers) {
				recv = s.rt.Spec.Receivers[k]
			}
			pod := s.pods[name]
			if pod != nil && (coordAddr == "" || recv == "" || !senderFor(pod, k, coordAddr, recv)) && !podTerminal(pod) {
				if err := s.r.deletePod(ctx, pod); err != nil { // its peers moved
					return 0, err
				}
				delete(s.pods, name)
				pod = nil
			}
			if pod == nil && coordAddr != "" && recv != "" {
				if pod, err = s.ensure(ctx, plan, agentPod{Role: contract.RoleSender, Stripe: k, Node: s.node(k), Endpoint: s.ep,
					CoordinatorAddress: coordAddr, ReceiverAddress: recv}); err != nil {
					return 0, err
				}
			} else if pod == nil {
				requeue = s.r.retryLater()
			}
			st := dtnflowv1alpha1.RemoteStripe{Index: k, Node: s.node(k), State: stripeState([]*corev1.Pod{pod})}
			if pod != nil {
				st.Node = pinnedNode(pod)
			}
			s.stripes = append(s.stripes, st)
		}
	}
	for name, pod := range s.pods {
		if !want.Has(name) {
			if err := s.r.deletePod(ctx, pod); err != nil {
				return 0, err
			}
		}
	}
	sort.Slice(s.stripes, func(i, j int) bool { return s.stripes[i].Index < s.stripes[j].Index })
	return requeue, nil
}

// ensure returns the agent pod of ap, creating it when it is missing (with a port for a
// listening role), and replacing one pinned to a node that is no longer usable.
func (s *remoteSync) ensure(ctx context.Context, plan *dtnflowv1alpha1.TransferPlan, ap agentPod) (*corev1.Pod, error) {
	name := AgentPodName(s.rt.Name, ap.Role, ap.Stripe)
	if pod := s.pods[name]; pod != nil {
		if podTerminal(pod) || nodeUsable(s.nodes, pinnedNode(pod)) {
			return pod, nil
		}
		if err := s.r.deletePod(ctx, pod); err != nil {
			return nil, err
		}
		delete(s.pods, name)
		return nil, nil // the next pass places it anew, once this one is gone
	}
	if ap.Node == "" {
		return nil, nil
	}
	ap.Secret = s.rt.Spec.SecretName
	n := nodeByName(s.nodes, ap.Node)
	if n == nil {
		return nil, nil
	}
	var err error
	ap.Port, ap.MetricsPort, err = s.r.ports.AllocateAgent(ap.Node, portRangeOf(s.ep), sets.New(n.HostPorts...), s.rt.Namespace+"/"+name, ap.Role != contract.RoleSender)
	if err != nil {
		return nil, err
	}
	pod := buildAgentPod(s.job, plan, ap, s.r.Pods)
	if err := s.r.Client.Create(ctx, pod); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("creating pod %s: %w", name, err)
	}
	s.pods[name] = pod
	return pod, nil
}

// ensureCoordinatorAuth creates the coordinator's ServiceAccount, Role and RoleBinding
// (its own pod, nothing else), owned by the RemoteTransfer.
func (s *remoteSync) ensureCoordinatorAuth(ctx context.Context) error {
	for _, obj := range []client.Object{buildCoordinatorServiceAccount(s.job), buildCoordinatorRole(s.job), buildCoordinatorRoleBinding(s.job)} {
		if err := s.r.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}

// syncDirective hands the peer's directive to the coordinator when it changed; the
// peer numbers its directives, so a newer one replaces an older one.
func (s *remoteSync) syncDirective(ctx context.Context, coord *corev1.Pod) error {
	if coord == nil || podTerminal(coord) || s.rt.Spec.Directive == "" || coord.Annotations[contract.AnnotationDirective] == s.rt.Spec.Directive {
		return nil
	}
	patch := client.MergeFrom(coord.DeepCopy())
	if coord.Annotations == nil {
		coord.Annotations = map[string]string{}
	}
	coord.Annotations[contract.AnnotationDirective] = s.rt.Spec.Directive
	if err := s.r.Client.Patch(ctx, coord, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("writing the directive of pod %s: %w", podKey(coord), err)
	}
	return nil
}

func nodeByName(nodes []nodeView, name string) *nodeView {
	for i := range nodes {
		if nodes[i].Name == name {
			return &nodes[i]
		}
	}
	return nil
}

func nodeUsable(nodes []nodeView, name string) bool {
	n := nodeByName(nodes, name)
	return n != nil && n.Usable()
}

// retryLater is how soon a pass that could not place an agent (an address not known
// yet) looks again.
func (r *RemoteTransferReconciler) retryLater() time.Duration { return staleCacheRequeue * 2 }

// SetupWithManager registers the RemoteTransfer reconciler: it wakes on changes of its
// RemoteTransfers' spec, on their pods, and on any TransferPeer change (a grant
// withdrawn, a peer deleted), which wakes every RemoteTransfer of the peer's namespace.
func (r *RemoteTransferReconciler) SetupWithManager(mgr ctrl.Manager, jobs *TransferJobReconciler) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.ports, r.jobs = jobs.ports, jobs
	return ctrl.NewControllerManagedBy(mgr).
		Named("remotetransfer").
		For(&dtnflowv1alpha1.RemoteTransfer{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.Pod{}).
		Watches(&dtnflowv1alpha1.TransferPeer{}, handler.EnqueueRequestsFromMapFunc(r.transfersOfPeer)).
		Watches(&dtnflowv1alpha1.TransferJob{}, handler.EnqueueRequestsFromMapFunc(r.transfersOfEndpoints), builder.WithPredicates(sharingChanged())).
		Watches(&dtnflowv1alpha1.RemoteTransfer{}, handler.EnqueueRequestsFromMapFunc(r.transfersOfEndpoints), builder.WithPredicates(remoteSlotChanged())).
		Complete(r)
}

// transfersOfPeer maps a TransferPeer to the RemoteTransfers in its namespace.
func (r *RemoteTransferReconciler) transfersOfPeer(ctx context.Context, o client.Object) []reconcile.Request {
	peer, ok := o.(*dtnflowv1alpha1.TransferPeer)
	if !ok {
		return nil
	}
	var list dtnflowv1alpha1.RemoteTransferList
	if err := r.Client.List(ctx, &list, client.InNamespace(peer.Spec.Namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the RemoteTransfers of a peer")
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, rt := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: rt.Namespace, Name: rt.Name}})
	}
	return reqs
}
