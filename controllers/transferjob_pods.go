package controllers

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/agentlogs"
	"github.com/dtnflow/dtnflow/controllers/planning"
)

// layout is where a pass wants the job's agents: the coordinator's node and, for each
// stripe 0…stripes-1, the nodes of its sender and receiver.
type layout struct {
	// plan is what the pods are built for; nil while probing.
	plan *dtnflowv1alpha1.TransferPlan
	// probeCPU sizes the probe's pods while there is no plan, from what the samples
	// measured (planning.ProbeRequests); nil before the first sample.
	probeCPU        *dtnflowv1alpha1.TransferPlan
	stripes         int32
	coordinatorNode string
	sourceNodes     []string
	// destinationNodes is empty when the destination is an agent outside the cluster.
	destinationNodes []string
}

func (l layout) sourceNode(k int32) string { return l.sourceNodes[int(k)%len(l.sourceNodes)] }

func (l layout) destinationNode(k int32) string {
	if len(l.destinationNodes) == 0 {
		return ""
	}
	return l.destinationNodes[int(k)%len(l.destinationNodes)]
}

// cpu is what the agents' CPU requests come from: the plan, else the probe's
// measurements, else nil (the manager's defaults).
func (l layout) cpu() *dtnflowv1alpha1.TransferPlan {
	if l.plan != nil {
		return l.plan
	}
	return l.probeCPU
}

// resizeBand is how far a running agent's CPU may be from what this layout asks before
// it is resized: resizeDeadBand while the probe refits the requests at every sample,
// none once a plan states them (its pods ask exactly what its status says).
func (l layout) resizeBand() float64 {
	if l.plan != nil {
		return 0
	}
	return resizeDeadBand
}

func (l layout) planHash() string {
	if l.plan == nil || l.plan.Hash == "" {
		return ProbePlanHash
	}
	return l.plan.Hash
}

// probeLayout places the coordinator (and, to probe, stripe 0) before any plan exists:
// where they already run when those nodes are still usable, else on the usable node
// with the fewest stripes of other jobs.
func (r *TransferJobReconciler) probeLayout(p *pass, probe bool) layout {
	obs := p.obs
	l := layout{coordinatorNode: r.coordinatorNode(p, nil)}
	if !probe {
		return l
	}
	l.stripes = 1
	l.sourceNodes = []string{l.coordinatorNode}
	l.probeCPU = r.probeCPU(p)
	if obs.endpoints.Destination.Spec.ExternalAddress == "" {
		dst := ""
		if recv := obs.receivers[0]; recv != nil && obs.usable(obs.endpoints.DestinationNodes, pinnedNode(recv)) {
			dst = pinnedNode(recv)
		} else {
			dst = leastLoaded(obs.endpoints.DestinationNodes, p.job)
		}
		l.destinationNodes = []string{dst}
	}
	return l
}

// probeCPU is the probe stripe's and the coordinator's CPU while the job probes, as
// planning.ProbeRequests reads it from the samples so far (a side no sample measured
// keeps the probe's default); nil before the first sample.
func (r *TransferJobReconciler) probeCPU(p *pass) *dtnflowv1alpha1.TransferPlan {
	var ds *contract.Dataset
	if rep := p.obs.report; rep != nil {
		ds = rep.Dataset
	}
	src, dst, coord := planning.ProbeRequests(p.st.Samples, ds)
	if src == 0 && dst == 0 && coord == 0 {
		return nil
	}
	orDefault := func(m int64) int64 {
		if m > 0 {
			return m
		}
		return r.Pods.ProbeMillicores
	}
	return &dtnflowv1alpha1.TransferPlan{StripesPerNode: 1, SourceCPUMillicores: orDefault(src), DestinationCPUMillicores: orDefault(dst), CoordinatorCPUMillicores: coord}
}

// planLayout places the agents of a plan: stripe k on the (k mod nodes)-th node of each
// side, so that removing the highest stripes keeps the nodes balanced.
func (r *TransferJobReconciler) planLayout(p *pass) layout {
	plan := p.st.Plan
	l := layout{plan: plan, stripes: stripeCount(plan), sourceNodes: plan.SourceNodes, destinationNodes: plan.DestinationNodes}
	if p.obs.endpoints.Destination.Spec.ExternalAddress != "" {
		l.destinationNodes = nil
	}
	l.coordinatorNode = r.coordinatorNode(p, plan)
	return l
}

// coordinatorNode keeps the coordinator where it runs while that node is usable;
// otherwise it goes to the plan's first source node, or the least loaded one.
func (r *TransferJobReconciler) coordinatorNode(p *pass, plan *dtnflowv1alpha1.TransferPlan) string {
	obs := p.obs
	side := obs.endpoints.SourceNodes
	if c := obs.coordinator; c != nil && obs.usable(side, pinnedNode(c)) {
		return pinnedNode(c)
	}
	if plan != nil && len(plan.SourceNodes) > 0 && obs.usable(side, plan.SourceNodes[0]) {
		return plan.SourceNodes[0]
	}
	return leastLoaded(side, p.job)
}

// leastLoaded is the usable node with the fewest stripes of other jobs (by name on ties).
func leastLoaded(side []nodeView, job *dtnflowv1alpha1.TransferJob) string {
	best := -1
	for i, n := range side {
		if n.Usable() && (best < 0 || n.StripesOfOthers(job.UID) < side[best].StripesOfOthers(job.UID)) {
			best = i
		}
	}
	if best < 0 {
		return ""
	}
	return side[best].Name
}

// syncPods makes the job's pods match the layout: the coordinator (with the directive),
// then each stripe's receiver (it listens) and sender (it needs both addresses), then
// removes pods beyond the layout. Pods on a node the layout no longer uses, senders
// whose peers moved, and stripe pods made for the probe are replaced.
func (r *TransferJobReconciler) syncPods(ctx context.Context, p *pass, l layout, directive *contract.Directive) error {
	err := r.syncAgentPods(ctx, p, l, directive)
	p.agentsScheduled(err)
	return err
}

// syncAgentPods runs the steps of syncPods in order; a step that fails ends the pass.
// Receivers come before the senders of their stripe, which need their addresses.
func (r *TransferJobReconciler) syncAgentPods(ctx context.Context, p *pass, l layout, directive *contract.Directive) error {
	coordAddr, err := r.syncCoordinator(ctx, p, l, directive)
	if err != nil {
		return err
	}
	rem := p.obs.remote
	if rem != nil && rem.want != nil {
		r.wantRemote(rem, l)
	}
	for k := int32(0); k < l.stripes; k++ {
		recvAddr, err := r.syncReceiver(ctx, p, l, k)
		if err != nil {
			return err
		}
		if rem.isSource() {
			if rem.want != nil {
				rem.want.Receivers[k] = recvAddr // the peer's sender of the stripe sends there
			}
			continue
		}
		if err := r.syncSender(ctx, p, l, k, coordAddr, recvAddr); err != nil {
			return err
		}
	}
	if err := r.deleteExtraAgents(ctx, p, l); err != nil {
		return err
	}
	p.st.Stripes = stripeStatuses(p.job, l, p.obs)
	return nil
}

// syncCoordinator makes the coordinator run on a usable node with the directive, and
// returns the address it listens on ("" until its node publishes one). A coordinator
// on a node no longer usable is deleted and made again on the layout's node. When the
// peer site runs the source side, the directive goes into its RemoteTransfer instead.
func (r *TransferJobReconciler) syncCoordinator(ctx context.Context, p *pass, l layout, directive *contract.Directive) (string, error) {
	obs := p.obs
	if obs.remote.isSource() {
		if directive != nil {
			obs.remote.setDirective(*directive)
		}
		return coordinatorAddress(obs), nil
	}
	if coord := obs.coordinator; coord != nil && !obs.usable(obs.endpoints.SourceNodes, pinnedNode(coord)) {
		if err := r.deletePod(ctx, p, coord); err != nil {
			return "", err
		}
		p.event(corev1.EventTypeNormal, ReasonNodeNotReady, "MoveCoordinator", fmt.Sprintf("Node %s is not usable: moving the coordinator to %s", pinnedNode(coord), l.coordinatorNode))
		obs.coordinator = nil
	}
	if obs.coordinator == nil {
		ap := agentPod{Role: contract.RoleCoordinator, Node: l.coordinatorNode, Endpoint: obs.endpoints.Source}
		if directive != nil {
			d := *directive
			d.Generation = 1
			ap.Directive = encodeDirective(d)
		}
		created, err := r.createAgent(ctx, p, l.plan, ap, obs.endpoints.SourceNodes)
		if err != nil {
			return "", err
		}
		obs.coordinator = created
	} else {
		if directive != nil {
			if err := r.syncDirective(ctx, p, *directive, l.planHash()); err != nil {
				return "", err
			}
		}
		if coord := obs.coordinator; !podTerminal(coord) {
			// the plan sizes the coordinator as it sizes the other agents, until it has
			// measured its own use
			want := withUse(agentResources(l.cpu(), agentPod{Role: contract.RoleCoordinator, Endpoint: obs.endpoints.Source}, r.Pods), podMillicores(coord),
				coordinatorUse(coord, obs.report, p.now.Time, r.ReportInterval))
			if err := r.resize(ctx, coord, want, l.resizeBand()); err != nil {
				return "", err
			}
		}
	}
	return coordinatorAddress(obs), nil
}

// coordinatorAddress is where the senders reach the coordinator: its node's address and
// its host port, "" while either is unknown.
func coordinatorAddress(obs *observed) string {
	coord := obs.coordinator
	if coord == nil {
		return ""
	}
	if n := obs.node(obs.endpoints.SourceNodes, pinnedNode(coord)); n != nil && n.Address != "" && listenPortOf(coord) != 0 {
		return hostPort(n.Address, listenPortOf(coord))
	}
	return ""
}

// syncReceiver makes stripe k's receiver run on the layout's node with the plan's CPU,
// and returns the address its sender sends to ("" while unknown). An external
// destination listens at its own address, and a peer site's receiver at the address
// its RemoteTransfer reports; only receivers of this cluster are created here. A live
// receiver on another node than the layout's is deleted and made again.
func (r *TransferJobReconciler) syncReceiver(ctx context.Context, p *pass, l layout, k int32) (string, error) {
	obs, rem := p.obs, p.obs.remote
	dst := obs.endpoints.Destination
	if rem.isDestination() {
		addr := dst.Spec.ExternalAddress
		if s := rem.stripe(k); s != nil {
			addr = s.Address // "" until the peer's receiver listens
		}
		if addr == "" {
			p.requeue(r.ReportInterval)
		}
		return addr, nil
	}
	if addr := dst.Spec.ExternalAddress; addr != "" {
		return addr, nil
	}
	dNode := l.destinationNode(k)
	recv := obs.receivers[k]
	if recv != nil && !podTerminal(recv) && pinnedNode(recv) != dNode {
		if err := r.deletePod(ctx, p, recv); err != nil {
			return "", err
		}
		recv = nil
		delete(obs.receivers, k)
	}
	if recv == nil {
		created, err := r.createAgent(ctx, p, l.plan, agentPod{Role: contract.RoleReceiver, Stripe: k, Node: dNode, Endpoint: dst}, obs.endpoints.DestinationNodes)
		if err != nil {
			return "", err
		}
		if created != nil {
			recv, obs.receivers[k] = created, created
		}
	}
	if recv == nil || podTerminal(recv) {
		return "", nil
	}
	addr := ""
	if n := obs.node(obs.endpoints.DestinationNodes, pinnedNode(recv)); n != nil && n.Address != "" {
		addr = hostPort(n.Address, listenPortOf(recv))
	}
	want := withUse(agentResources(l.cpu(), agentPod{Role: contract.RoleReceiver, Endpoint: dst}, r.Pods), podMillicores(recv),
		measuredUse(obs.report, contract.RoleReceiver, k, p.now.Time, r.ReportInterval))
	if err := r.resize(ctx, recv, want, l.resizeBand()); err != nil {
		return "", err
	}
	return addr, nil
}

// syncSender makes stripe k's sender run on the layout's node, sending from the
// coordinator's address to recvAddr with the plan's CPU. A live sender on another node,
// or with other addresses than the ones now known, is deleted and made again; a sender
// is created only once both addresses are known (until then the pass is requeued).
func (r *TransferJobReconciler) syncSender(ctx context.Context, p *pass, l layout, k int32, coordAddr, recvAddr string) error {
	obs := p.obs
	src := obs.endpoints.Source
	sNode := l.sourceNode(k)
	send := obs.senders[k]
	if send != nil && !podTerminal(send) {
		stale := pinnedNode(send) != sNode
		if !stale && coordAddr != "" && recvAddr != "" {
			stale = !senderFor(send, k, coordAddr, recvAddr)
		}
		if stale {
			if err := r.deletePod(ctx, p, send); err != nil {
				return err
			}
			send = nil
			delete(obs.senders, k)
		}
	}
	switch {
	case send != nil && !podTerminal(send):
		return r.resize(ctx, send, withUse(agentResources(l.cpu(), agentPod{Role: contract.RoleSender, Endpoint: src}, r.Pods), podMillicores(send),
			measuredUse(obs.report, contract.RoleSender, k, p.now.Time, r.ReportInterval)), l.resizeBand())
	case send != nil:
		return nil
	case coordAddr == "" || recvAddr == "":
		p.requeue(r.ReportInterval) // an address is missing: the node publishes none yet
		return nil
	}
	created, err := r.createAgent(ctx, p, l.plan, agentPod{Role: contract.RoleSender, Stripe: k, Node: sNode, Endpoint: src,
		CoordinatorAddress: coordAddr, ReceiverAddress: recvAddr}, obs.endpoints.SourceNodes)
	if err != nil {
		return err
	}
	if created != nil {
		obs.senders[k] = created
	}
	return nil
}

// deleteExtraAgents deletes the senders and receivers of stripes beyond the layout and
// the stray pods, and forgets them.
func (r *TransferJobReconciler) deleteExtraAgents(ctx context.Context, p *pass, l layout) error {
	obs := p.obs
	var extra []*corev1.Pod
	for _, m := range []map[int32]*corev1.Pod{obs.senders, obs.receivers} {
		for k, pod := range m {
			if k >= l.stripes {
				extra = append(extra, pod)
				delete(m, k)
			}
		}
	}
	extra = append(extra, obs.strays...)
	obs.strays = nil
	for _, pod := range extra {
		if err := r.deletePod(ctx, p, pod); err != nil {
			return err
		}
	}
	return nil
}

// wantRemote says what the layout asks of the peer's side: its stripes, the nodes of
// its side the plan chose, and each agent's CPU request.
func (r *TransferJobReconciler) wantRemote(rem *remoteSide, l layout) {
	w := rem.want
	w.Stripes = l.stripes
	nodes, role := l.destinationNodes, contract.RoleReceiver
	if rem.isSource() {
		nodes, role = l.sourceNodes, contract.RoleSender
		w.Receivers = make([]string, l.stripes)
	}
	w.Nodes = nil
	for _, n := range nodes {
		if n != "" && !slices.Contains(w.Nodes, n) && len(w.Nodes) < 64 {
			w.Nodes = append(w.Nodes, n)
		}
	}
	res := agentResources(l.plan, agentPod{Role: role, Endpoint: &dtnflowv1alpha1.TransferEndpoint{}}, r.Pods)
	w.CPUMillicores = res.Requests.Cpu().MilliValue()
}

// resize brings a running agent's CPU to what the plan now asks for (the probe's
// stripe once the plan exists, every stripe after a re-plan that changed the CPU per
// agent) through the pods/resize subresource: the kubelet applies it in place, so the
// agent keeps its connections and work. A CPU request or limit within band (relative)
// of what is wanted stands. The plan-hash label keeps naming the plan the pod was
// created for.
func (r *TransferJobReconciler) resize(ctx context.Context, pod *corev1.Pod, want corev1.ResourceRequirements, band float64) error {
	if len(pod.Spec.Containers) == 0 || sameResources(pod.Spec.Containers[0].Resources, want, band) {
		return nil
	}
	orig := pod.DeepCopy()
	pod.Spec.Containers[0].Resources = want
	if err := r.Client.SubResource("resize").Patch(ctx, pod, client.MergeFrom(orig)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("resizing the CPU of pod %s: %w", podKey(pod), err)
	}
	logf.FromContext(ctx).V(1).Info("Resized an agent pod", "pod", podKey(pod), "cpu", want.Requests.Cpu().String())
	return nil
}

// createAgent builds and creates one agent pod, with a host port for a listening role.
// It returns nil (and asks for another pass) when the name is still held by a pod on
// its way out, or a creation is in flight.
func (r *TransferJobReconciler) createAgent(ctx context.Context, p *pass, plan *dtnflowv1alpha1.TransferPlan, ap agentPod, side []nodeView) (*corev1.Pod, error) {
	job := p.job
	name := AgentPodName(job.Name, ap.Role, ap.Stripe)
	if p.obs.leaving[name] || r.exp.CreatePending(job.UID, name) {
		p.requeue(staleCacheRequeue)
		return nil, nil
	}
	if ap.Node == "" {
		return nil, nil
	}
	if rem := p.obs.remote; rem != nil {
		if rem.secret == "" {
			p.requeue(staleCacheRequeue)
			return nil, nil
		}
		ap.Secret = rem.secret
	}
	n := p.obs.node(side, ap.Node)
	if n == nil {
		return nil, nil
	}
	if claimed, err := r.claimWarmAgent(ctx, p, plan, ap); claimed != nil || err != nil {
		return claimed, err
	}
	var err error
	ap.Port, ap.MetricsPort, err = r.ports.AllocateAgent(ap.Node, portRangeOf(ap.Endpoint), sets.New(n.HostPorts...), job.Namespace+"/"+name, ap.Role != contract.RoleSender)
	if err != nil {
		return nil, err
	}
	pod := buildAgentPod(job, plan, ap, r.Pods)
	if err := r.Client.Create(ctx, pod); err != nil {
		if apierrors.IsAlreadyExists(err) {
			p.requeue(staleCacheRequeue)
			return nil, nil
		}
		return nil, &podCreateError{pod: name, err: err}
	}
	r.exp.ExpectCreate(job.UID, name)
	logf.FromContext(ctx).V(1).Info("Created an agent pod", "pod", podKey(pod), "role", ap.Role, "node", ap.Node, "port", ap.Port)
	return pod, nil
}

// deletePod deletes one of the job's pods (that very pod: a replacement of the same
// name is not touched) and remembers it.
func (r *TransferJobReconciler) deletePod(ctx context.Context, p *pass, pod *corev1.Pod) error {
	err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting pod %s: %w", podKey(pod), err)
	}
	slot := slotName(p.job.Name, pod)
	r.exp.ExpectDelete(p.job.UID, slot, pod.UID)
	p.obs.leaving[slot] = true
	logf.FromContext(ctx).V(1).Info("Deleted an agent pod", "pod", podKey(pod))
	return nil
}

// deleteAgents stops the given agent pods.
func (r *TransferJobReconciler) deleteAgents(ctx context.Context, p *pass, pods []*corev1.Pod, reason string) error {
	for _, pod := range pods {
		if err := r.deletePod(ctx, p, pod); err != nil {
			return err
		}
	}
	meta.RemoveStatusCondition(&p.st.Conditions, dtnflowv1alpha1.ConditionAgentsScheduled) // none left to schedule
	if p.obs != nil {
		p.obs.coordinator, p.obs.strays = nil, nil
		p.obs.senders, p.obs.receivers = map[int32]*corev1.Pod{}, map[int32]*corev1.Pod{}
	}
	if p.obs != nil {
		p.obs.remote.stopRemote()
	}
	if len(pods) > 0 {
		logf.FromContext(ctx).Info("Stopped the agents", "pods", len(pods), "reason", reason)
	}
	return nil
}

// syncDirective gives the coordinator a directive when it differs from the one it has,
// with the next generation, and labels it with the plan it now follows.
func (r *TransferJobReconciler) syncDirective(ctx context.Context, p *pass, want contract.Directive, hash string) error {
	coord := p.obs.coordinator
	if coord == nil || podTerminal(coord) {
		return nil
	}
	current := directiveOf(coord)
	if sameDirective(current, &want) && (hash == "" || coord.Labels[contract.LabelPlanHash] == hash) {
		return nil
	}
	want.Generation = 1
	if current != nil {
		want.Generation = current.Generation + 1
	}
	patch := client.MergeFrom(coord.DeepCopy())
	if coord.Annotations == nil {
		coord.Annotations = map[string]string{}
	}
	coord.Annotations[contract.AnnotationDirective] = encodeDirective(want)
	if hash != "" {
		coord.Labels[contract.LabelPlanHash] = hash
	}
	if err := r.Client.Patch(ctx, coord, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing the directive of pod %s: %w", podKey(coord), err)
	}
	logf.FromContext(ctx).Info("Gave the coordinator a directive", "pod", podKey(coord), "generation", want.Generation, "mode", want.Mode,
		"stripes", want.Stripes, "streams", want.StreamsPerStripe)
	return nil
}

// accountFailures counts the agent pods that failed (and deletes them, so they are
// replaced) or vanished since the last pass, against spec.backoffLimit.
func (r *TransferJobReconciler) accountFailures(ctx context.Context, p *pass) error {
	job, obs := p.job, p.obs
	count := func(pod *corev1.Pod, name string, role contract.Role) {
		p.st.AgentFailures++
		r.authReady.Delete(job.UID) // check the secret and RBAC again before replacing it
		p.failedRoles = append(p.failedRoles, string(role))
		if pod != nil {
			r.ports.NoteFailedAgent(pod)
			p.event(corev1.EventTypeWarning, ReasonAgentFailed, "ReplaceAgent", fmt.Sprintf("Agent pod %s failed (%s); replacing it", name, terminationOf(pod)))
		} else {
			p.event(corev1.EventTypeWarning, ReasonAgentVanished, "ReplaceAgent", fmt.Sprintf("Agent pod %s vanished; replacing it", name))
		}
	}
	gone := func(name string) bool {
		return !obs.leaving[name] && !r.exp.CreatePending(job.UID, name) && !r.exp.RecentlyDeleted(job.UID, name)
	}

	// The peer's agents that failed there count here too.
	if rem := obs.remote; rem != nil && rem.rt != nil {
		before := int32(0)
		if job.Status.Remote != nil {
			before = job.Status.Remote.AgentFailures
		}
		if d := rem.rt.Status.AgentFailures - before; d > 0 {
			p.st.AgentFailures += d
			r.authReady.Delete(job.UID)
			p.event(corev1.EventTypeWarning, ReasonAgentFailed, "ReplaceAgent", fmt.Sprintf("%d agent(s) of the %s side failed at site %s, which replaced them", d, rem.side, rem.siteName))
		}
	}

	// Failed pods; a coordinator that ended without reporting Complete failed too. Their
	// logs are kept before they are deleted: the replacement takes the name.
	wasRunning := meta.IsStatusConditionTrue(job.Status.Conditions, dtnflowv1alpha1.ConditionProbing) ||
		meta.IsStatusConditionTrue(job.Status.Conditions, dtnflowv1alpha1.ConditionTransferring)
	var failed []*corev1.Pod
	if c := obs.coordinator; c != nil && podTerminal(c) {
		failed = append(failed, c)
	}
	for _, m := range []map[int32]*corev1.Pod{obs.senders, obs.receivers} {
		for _, pod := range m {
			if pod.Status.Phase == corev1.PodFailed {
				failed = append(failed, pod)
			}
		}
	}
	r.archiveLogs(ctx, p, failed, agentlogs.ReasonFailed)
	if c := obs.coordinator; c != nil && podTerminal(c) {
		count(c, c.Name, contract.RoleCoordinator)
		if err := r.deletePod(ctx, p, c); err != nil {
			return err
		}
		obs.coordinator = nil
	}
	for _, m := range []map[int32]*corev1.Pod{obs.senders, obs.receivers} {
		for k, pod := range m {
			if pod.Status.Phase == corev1.PodFailed {
				count(pod, pod.Name, contract.Role(pod.Labels[contract.LabelRole]))
				if err := r.deletePod(ctx, p, pod); err != nil {
					return err
				}
				delete(m, k)
			}
		}
	}

	// Vanishing pods: deleted by someone else (seen terminating, or already gone) while
	// the coordinator was at work or their stripe was Running at the last pass. A pod
	// seen terminating is remembered as accounted, so that its disappearance later is
	// not counted again.
	runningStripes := map[int32]bool{}
	for _, s := range job.Status.Stripes {
		if k, ok := stripeIndex(job.Name, s.Name); ok && s.State == dtnflowv1alpha1.StripeRunning {
			runningStripes[k] = true
		}
	}
	for _, pod := range obs.vanishing {
		role := contract.Role(pod.Labels[contract.LabelRole])
		slot := slotName(job.Name, pod)
		k, _ := stripeIndex(job.Name, strings.TrimSuffix(strings.TrimSuffix(slot, "-send"), "-recv"))
		if (role == contract.RoleCoordinator && wasRunning) || (role != contract.RoleCoordinator && runningStripes[k]) {
			count(nil, pod.Name, role)
		}
		r.exp.ExpectDelete(job.UID, slot, pod.UID)
	}
	rem := obs.remote
	if !rem.isSource() && obs.coordinator == nil && gone(CoordinatorPodName(job.Name)) && wasRunning {
		count(nil, CoordinatorPodName(job.Name), contract.RoleCoordinator)
	}
	external := obs.endpoints.Destination.Spec.ExternalAddress != "" || rem.isDestination()
	for k := range runningStripes {
		if !rem.isSource() && obs.senders[k] == nil && gone(AgentPodName(job.Name, contract.RoleSender, k)) {
			count(nil, AgentPodName(job.Name, contract.RoleSender, k), contract.RoleSender)
		}
		if !external && obs.receivers[k] == nil && gone(AgentPodName(job.Name, contract.RoleReceiver, k)) {
			count(nil, AgentPodName(job.Name, contract.RoleReceiver, k), contract.RoleReceiver)
		}
	}
	return nil
}

// terminationOf says why a pod ended, for people.
func terminationOf(pod *corev1.Pod) string {
	for _, cs := range pod.Status.ContainerStatuses {
		if t := cs.State.Terminated; t != nil {
			s := fmt.Sprintf("exit code %d", t.ExitCode)
			if t.Reason != "" {
				s += ", " + t.Reason
			}
			if t.Message != "" {
				s += ": " + strings.TrimSpace(t.Message)
			}
			return s
		}
	}
	if pod.Status.Reason != "" {
		return pod.Status.Reason + ": " + pod.Status.Message
	}
	return "phase " + string(pod.Status.Phase)
}

// stripeIndex parses k from the name StripeName(jobName, k).
func stripeIndex(jobName, stripeName string) (int32, bool) {
	rest, ok := strings.CutPrefix(stripeName, namePrefix(jobName)+"-s")
	if !ok {
		return 0, false
	}
	k, err := strconv.ParseInt(rest, 10, 32)
	if err != nil || k < 0 {
		return 0, false
	}
	return int32(k), true
}

// stripeStatuses derives status.stripes from the layout and the pods.
func stripeStatuses(job *dtnflowv1alpha1.TransferJob, l layout, obs *observed) []dtnflowv1alpha1.StripeStatus {
	rates := map[int32]int64{}
	if obs.report != nil {
		for _, s := range obs.report.Stripes {
			rates[s.Index] = max(s.BitsPerSecond, 0)
		}
	}
	rem := obs.remote
	external := obs.endpoints.Destination.Spec.ExternalAddress != ""
	out := make([]dtnflowv1alpha1.StripeStatus, 0, l.stripes)
	for k := int32(0); k < l.stripes && k < 512; k++ {
		var pods []*corev1.Pod
		if !rem.isSource() {
			pods = append(pods, obs.senders[k])
		}
		if !external && !rem.isDestination() {
			pods = append(pods, obs.receivers[k])
		}
		st := dtnflowv1alpha1.StripeStatus{
			Name:            StripeName(job.Name, k),
			SourceNode:      l.sourceNode(k),
			DestinationNode: l.destinationNode(k),
			State:           stripeState(pods),
			BitsPerSecond:   rates[k],
		}
		if rem != nil { // the peer's agent of the stripe, where the peer put it
			st.State = bothStates(st.State, rem.stripeState(k))
			if s := rem.stripe(k); s != nil && s.Node != "" {
				if rem.isSource() {
					st.SourceNode = s.Node
				} else {
					st.DestinationNode = s.Node
				}
			}
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// bothStates is a stripe's state from its two sides' states, as stripeState does for
// pods: Failed if one failed, Succeeded or Running when both are, Pending otherwise.
func bothStates(a, b dtnflowv1alpha1.StripeState) dtnflowv1alpha1.StripeState {
	switch {
	case a == dtnflowv1alpha1.StripeFailed || b == dtnflowv1alpha1.StripeFailed:
		return dtnflowv1alpha1.StripeFailed
	case a == dtnflowv1alpha1.StripeSucceeded && b == dtnflowv1alpha1.StripeSucceeded:
		return dtnflowv1alpha1.StripeSucceeded
	case (a == dtnflowv1alpha1.StripeRunning || a == dtnflowv1alpha1.StripeSucceeded) && (b == dtnflowv1alpha1.StripeRunning || b == dtnflowv1alpha1.StripeSucceeded):
		return dtnflowv1alpha1.StripeRunning
	}
	return dtnflowv1alpha1.StripePending
}

// stripeState is one stripe's state from its pods: Failed if one failed, Running or
// Succeeded when all are, Pending otherwise (one not yet created, scheduled or started).
func stripeState(pods []*corev1.Pod) dtnflowv1alpha1.StripeState {
	running, succeeded := 0, 0
	for _, pod := range pods {
		switch {
		case pod == nil:
			return dtnflowv1alpha1.StripePending
		case pod.Status.Phase == corev1.PodFailed:
			return dtnflowv1alpha1.StripeFailed
		case pod.Status.Phase == corev1.PodSucceeded:
			succeeded++
		case pod.Status.Phase == corev1.PodRunning:
			running++
		}
	}
	switch {
	case succeeded == len(pods):
		return dtnflowv1alpha1.StripeSucceeded
	case running+succeeded == len(pods):
		return dtnflowv1alpha1.StripeRunning
	}
	return dtnflowv1alpha1.StripePending
}
