package controllers

import (
	"context"
	"fmt"
	"math"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/planning"
	"github.com/dtnflow/dtnflow/optimizer"
)

// What jobs share (issue 13). Jobs that use a common endpoint — and, through them, every
// job of those endpoints' other paths — form one group: their paths' capacities and the
// endpoints' rate limits are divided between them (optimizer.Shares), the paths' and
// endpoints' maxActiveJobs decide who runs (optimizer.Admit), and each node's NIC, disk
// and CPU budget is divided by the rates and CPU their plans hold. Every pass of a job
// reads the group from the cache, through the ledger: what this manager decided for a
// job in an earlier pass counts even before the cache has the status that says it, so
// two passes never admit past a limit or plan a node past its budget on a stale read.
// Passes of different jobs run one at a time for the same reason (sharingLedger.pass).

// defaultPriority is the priority of a job that names no TransferPriorityClass.
const defaultPriority = 1

// Reasons of the Queued condition and of re-plans that follow the shares.
const (
	ReasonAdmitted      = "Admitted"
	ReasonPathLimit     = "PathLimit"
	ReasonEndpointLimit = "EndpointLimit"
	ReasonPreempted     = "Preempted"
	// ReasonFilesInUse: the job would write files another job of this cluster reads
	// or writes, or read files it writes, and waits until that job ends.
	ReasonFilesInUse              = "FilesInUse"
	ReasonPriorityClassNotFound   = "PriorityClassNotFound"
	ReasonPriorityClassNotAllowed = "PriorityClassNotAllowed"
	ReasonWaitingForPathProbe     = "WaitingForPathProbe"
	// ReasonPathJobArrived, ReasonPathJobLeft and ReasonShareChanged are the reasons of
	// re-plans to a new share: more jobs on the path, fewer (completed, failed,
	// suspended, deleted or preempted), or the same jobs with another capacity,
	// priority or site limit.
	ReasonPathJobArrived = "PathJobArrived"
	ReasonPathJobLeft    = "PathJobLeft"
	ReasonShareChanged   = "ShareChanged"
)

// shareTolerance is how far a job's share may move before the job is re-planned: the
// probe resolves 5 % (ExpSelection's α), and re-planning for less would churn pods.
const shareTolerance = 0.05

// sharingLedger serializes passes and remembers what they decided.
type sharingLedger struct {
	// pass is held by a pass from the sharing view to its status write.
	pass sync.Mutex

	mu      sync.Mutex
	decided map[types.UID]*dtnflowv1alpha1.TransferJobStatus
	// plannedWith is how many jobs were on the path when a job's plan was last made
	// for its share, so that a re-plan says whether jobs arrived or left since (the
	// status's count moves on while a re-plan waits for its interval). Lost on a
	// restart, when the status's count stands in.
	plannedWith map[types.UID]int32
}

func newSharingLedger() *sharingLedger {
	return &sharingLedger{decided: map[types.UID]*dtnflowv1alpha1.TransferJobStatus{}, plannedWith: map[types.UID]int32{}}
}

func (l *sharingLedger) setPlannedWith(uid types.UID, jobs int32) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.plannedWith[uid] = jobs
}

func (l *sharingLedger) getPlannedWith(uid types.UID) (int32, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	n, ok := l.plannedWith[uid]
	return n, ok
}

// record keeps the status a pass decided for a job.
func (l *sharingLedger) record(uid types.UID, st *dtnflowv1alpha1.TransferJobStatus) {
	keep := &dtnflowv1alpha1.TransferJobStatus{Conditions: st.Conditions, Plan: st.Plan, Sharing: st.Sharing, Queue: st.Queue, StartTime: st.StartTime,
		Progress: st.Progress}
	keep = keep.DeepCopy()
	l.mu.Lock()
	defer l.mu.Unlock()
	l.decided[uid] = keep
}

func (l *sharingLedger) forget(uid types.UID) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.decided, uid)
	delete(l.plannedWith, uid)
}

// statusOf is a job's status as this manager last decided it, else as cached.
func (l *sharingLedger) statusOf(job *dtnflowv1alpha1.TransferJob) *dtnflowv1alpha1.TransferJobStatus {
	l.mu.Lock()
	defer l.mu.Unlock()
	if st, ok := l.decided[job.UID]; ok {
		return st
	}
	return &job.Status
}

// shareView is what a pass knows of the job's place among the jobs it shares with.
type shareView struct {
	priority  int32
	admission optimizer.Admission
	// waitMessage says what the job waits for, for people, when it is not admitted.
	waitMessage string
	share       optimizer.JobShare
	boundBy     dtnflowv1alpha1.ShareBound
	// capacity is the path's capacity the shares divide; 0 when unknown.
	capacity   float64
	jobsOnPath int
	// prober is the job (namespace/name) elected to probe the path while it is cold
	// ("" when none is): the first admitted job on the path without a plan, in queue
	// order, unless one of them is probing already.
	prober string
	// loads are what other jobs' plans hold of each node.
	loads map[string]nodeLoad
	// othersOnPath is the rate the path's other running jobs measured in their latest
	// reports (those within two report intervals), and othersReporting how many did.
	othersOnPath    int64
	othersReporting int
}

// planShare is the rate the job's plan is held to: its share when paced, else 0.
func (v *shareView) planShare() int64 {
	if v == nil || !v.share.Paced || math.IsInf(v.share.BitsPerSecond, 0) {
		return 0
	}
	return int64(math.Round(v.share.BitsPerSecond))
}

// nodeLoad is what other jobs' plans hold of a node.
type nodeLoad struct {
	bitsPerSecond, millicores int64
}

// groupMember is one job of the group as the sharing view sees it.
type groupMember struct {
	job       *dtnflowv1alpha1.TransferJob
	st        *dtnflowv1alpha1.TransferJobStatus
	key       string // namespace/name
	priority  int32
	preempts  bool
	path      string
	links     []string
	trees     []optimizer.Tree
	srcLink   string
	dstLink   string
	running   bool
	suspended bool
}

func endpointLink(name string) string { return "endpoint " + name }

// shareViewFor computes the job's view, or the problem that keeps it from running (a
// priority class that is missing or not open to its namespace).
func (r *TransferJobReconciler) shareViewFor(ctx context.Context, p *pass) (*shareView, *jobProblem, error) {
	job := p.job
	classes := map[string]*dtnflowv1alpha1.TransferPriorityClass{}
	classOf := func(name string) (*dtnflowv1alpha1.TransferPriorityClass, error) {
		if c, ok := classes[name]; ok {
			return c, nil
		}
		var c dtnflowv1alpha1.TransferPriorityClass
		switch err := r.Client.Get(ctx, types.NamespacedName{Name: name}, &c); {
		case apierrors.IsNotFound(err):
			classes[name] = nil
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("reading TransferPriorityClass %s: %w", name, err)
		}
		classes[name] = &c
		return &c, nil
	}
	if name := job.Spec.PriorityClassName; name != "" {
		c, err := classOf(name)
		if err != nil {
			return nil, nil, err
		}
		if c == nil {
			return nil, &jobProblem{Reason: ReasonPriorityClassNotFound, Blocking: true,
				Message: fmt.Sprintf("spec.priorityClassName: TransferPriorityClass %q not found", name)}, nil
		}
		if ok, err := namespaceAllowed(c.Spec.NamespaceSelector, p.obs.endpoints.Namespace); !ok {
			msg := fmt.Sprintf("spec.priorityClassName: namespace %q is not selected by spec.namespaceSelector of TransferPriorityClass %q", job.Namespace, name)
			if err != nil {
				msg = fmt.Sprintf("spec.priorityClassName: spec.namespaceSelector of TransferPriorityClass %q is invalid: %v", name, err)
			}
			return nil, &jobProblem{Reason: ReasonPriorityClassNotAllowed, Blocking: true, Message: msg}, nil
		}
	}

	group, err := r.sharingGroup(ctx, job)
	if err != nil {
		return nil, nil, err
	}
	endpoints := map[string]*dtnflowv1alpha1.TransferEndpoint{}
	profiles := map[string]*dtnflowv1alpha1.PathProfile{}
	var members []*groupMember
	self := -1
	for _, j := range group {
		st := r.sharing.statusOf(j)
		if j.UID == job.UID {
			// this pass's own reading: what the job was before this pass
			j, st = job, r.sharing.statusOf(job)
		}
		if finished(st) {
			continue
		}
		src, dst := jobEndpointKeys(j)
		m := &groupMember{job: j, st: st, key: memberKey(j), priority: defaultPriority,
			path: "path " + PathProfileNameFor(j), srcLink: endpointLink(src), dstLink: endpointLink(dst)}
		m.trees = jobTrees(j)
		m.links = []string{m.path, m.srcLink}
		if m.dstLink != m.srcLink {
			m.links = append(m.links, m.dstLink)
		}
		if name := j.Spec.PriorityClassName; name != "" {
			c, err := classOf(name)
			if err != nil {
				return nil, nil, err
			}
			if c != nil {
				m.priority = max(c.Spec.Priority, defaultPriority)
				m.preempts = c.Spec.Preemption == dtnflowv1alpha1.PreemptLowerPriority
			}
		}
		m.suspended = j.Spec.Suspend || meta.IsStatusConditionTrue(st.Conditions, dtnflowv1alpha1.ConditionSuspended) ||
			waitsForPeer(st) // the peer's queue, not this site's, holds it
		m.running = !m.suspended && holdsSlot(st)
		if j.UID == job.UID {
			self = len(members)
			m.suspended = false // this pass runs it: it is past its suspension
		}
		for _, name := range []string{src, dst} {
			if strings.Contains(name, "/") {
				endpoints[name] = nil // a peer site's: its limits are the peer's to apply
				continue
			}
			if _, ok := endpoints[name]; !ok {
				ep, err := r.endpoint(ctx, name)
				if err != nil {
					return nil, nil, err
				}
				endpoints[name] = ep
			}
		}
		if _, ok := profiles[m.path]; !ok {
			var pp dtnflowv1alpha1.PathProfile
			switch err := r.Client.Get(ctx, types.NamespacedName{Name: PathProfileNameFor(j)}, &pp); {
			case err == nil:
				profiles[m.path] = &pp
			case apierrors.IsNotFound(err):
				profiles[m.path] = nil
			default:
				return nil, nil, fmt.Errorf("reading PathProfile %s: %w", PathProfileNameFor(j), err)
			}
		}
		members = append(members, m)
	}
	if self < 0 {
		return nil, nil, fmt.Errorf("TransferJob %s/%s is not among the jobs of its own endpoints", job.Namespace, job.Name)
	}

	// admission
	limits := map[string]int{}
	for name, ep := range endpoints {
		if ep != nil && ep.Spec.Sharing != nil && ep.Spec.Sharing.MaxActiveJobs != nil {
			limits[endpointLink(name)] = int(*ep.Spec.Sharing.MaxActiveJobs)
		}
	}
	for link, pp := range profiles {
		if pp != nil && pp.Spec.MaxActiveJobs != nil {
			limits[link] = int(*pp.Spec.MaxActiveJobs)
		}
	}
	var cands []optimizer.AdmissionCandidate
	var candOf []*groupMember
	for _, m := range members {
		if m.suspended {
			continue
		}
		cands = append(cands, optimizer.AdmissionCandidate{ID: m.key, Priority: int(m.priority), Created: m.job.CreationTimestamp.Time,
			Running: m.running, Preempts: m.preempts, Links: m.links, Trees: m.trees})
		candOf = append(candOf, m)
	}
	admissions := optimizer.Admit(limits, cands)
	me := members[self]
	v := &shareView{priority: me.priority, loads: map[string]nodeLoad{}}
	admitted := map[*groupMember]bool{}
	for i, a := range admissions {
		if a.Admitted {
			admitted[candOf[i]] = true
		}
		if candOf[i] == me {
			v.admission = a
		}
	}
	if !v.admission.Admitted {
		v.waitMessage = waitMessage(v.admission, me, endpoints, profiles)
		if v.admission.FilesOf != "" {
			v.waitMessage = filesWaitMessage(v.admission, me, members)
		}
	}

	// shares of the admitted jobs
	var links []optimizer.SharedLink
	capacity := map[string]float64{}
	for link, pp := range profiles {
		var plans []*dtnflowv1alpha1.TransferPlan
		for m := range admitted {
			if m.path == link && m.st.Plan != nil {
				plans = append(plans, m.st.Plan)
			}
		}
		if me.path == link && p.st.Plan != nil {
			plans = append(plans, p.st.Plan)
		}
		c := pathCapacity(pp, plans, p.now.Time)
		capacity[link] = c
		l := optimizer.SharedLink{Name: link, CapacityBitsPerSecond: c}
		if pp != nil && pp.Spec.MaxBitsPerSecond != nil && (c <= 0 || float64(*pp.Spec.MaxBitsPerSecond) < c) {
			l.CapacityBitsPerSecond, l.Limit = float64(*pp.Spec.MaxBitsPerSecond), true
		}
		links = append(links, l)
	}
	for name, ep := range endpoints {
		if ep != nil && ep.Spec.Sharing != nil && ep.Spec.Sharing.MaxBitsPerSecond != nil {
			links = append(links, optimizer.SharedLink{Name: endpointLink(name), CapacityBitsPerSecond: float64(*ep.Spec.Sharing.MaxBitsPerSecond), Limit: true})
		}
	}
	sort.Slice(links, func(i, j int) bool { return links[i].Name < links[j].Name })
	var claims []optimizer.ShareClaim
	var claimOf []*groupMember
	for _, m := range members {
		if !admitted[m] && m != me {
			continue
		}
		plan := m.st.Plan
		if m == me {
			plan = p.st.Plan
		}
		claims = append(claims, optimizer.ShareClaim{ID: m.key, Weight: int(m.priority), DemandBitsPerSecond: demandOf(m.job, plan), Links: m.links})
		claimOf = append(claimOf, m)
	}
	for i, s := range optimizer.Shares(links, claims) {
		m := claimOf[i]
		if m == me {
			v.share = s
			v.boundBy = shareBound(s, me)
		}
		if m.path == me.path && (admitted[m] || m == me) {
			v.jobsOnPath++
		}
	}
	v.capacity = capacity[me.path]

	// the path's prober while it is cold, in queue order, one probing already first
	var waiting []*groupMember
	for _, m := range members {
		plan := m.st.Plan
		if m == me {
			plan = p.st.Plan
		}
		if m.path != me.path || !(admitted[m] || m == me) || plan != nil || m.job.Spec.Tuning.Mode == dtnflowv1alpha1.TuningFixed {
			continue
		}
		if c := meta.FindStatusCondition(m.st.Conditions, dtnflowv1alpha1.ConditionProbing); m != me && c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonProbing {
			v.prober = m.key
			break
		}
		waiting = append(waiting, m)
	}
	if v.prober == "" && len(waiting) > 0 {
		sort.SliceStable(waiting, func(i, j int) bool {
			a, b := waiting[i], waiting[j]
			if a.priority != b.priority {
				return a.priority > b.priority
			}
			if !a.job.CreationTimestamp.Equal(&b.job.CreationTimestamp) {
				return a.job.CreationTimestamp.Before(&b.job.CreationTimestamp)
			}
			return a.key < b.key
		})
		v.prober = waiting[0].key
	}

	// what the other admitted jobs' plans hold of each node, and what the path's
	// others measured lately
	for m := range admitted {
		if m == me || m.st.Plan == nil {
			continue
		}
		addPlanLoad(v.loads, m.st.Plan)
		if pr := m.st.Progress; m.path == me.path && pr != nil && pr.LastUpdateTime != nil && pr.CurrentBitsPerSecond > 0 &&
			p.now.Sub(pr.LastUpdateTime.Time) <= 2*r.ReportInterval {
			v.othersOnPath += pr.CurrentBitsPerSecond
			v.othersReporting++
		}
	}
	return v, nil, nil
}

// holdsSlot says whether a job's status says it was admitted and runs: its Queued
// condition is False, or — a job that ran before admission existed — it has none and
// has started.
func holdsSlot(st *dtnflowv1alpha1.TransferJobStatus) bool {
	c := meta.FindStatusCondition(st.Conditions, dtnflowv1alpha1.ConditionQueued)
	if c == nil {
		return st.StartTime != nil
	}
	return c.Status == metav1.ConditionFalse
}

// sharingGroup lists the unfinished jobs that share an endpoint with the job, and those
// that share one with them, and so on (read-only objects from the cache).
func (r *TransferJobReconciler) sharingGroup(ctx context.Context, job *dtnflowv1alpha1.TransferJob) ([]*dtnflowv1alpha1.TransferJob, error) {
	seenEP := map[string]bool{}
	seenJob := map[types.UID]bool{}
	src, dst := jobEndpointKeys(job)
	queue := []string{src, dst}
	var out []*dtnflowv1alpha1.TransferJob
	for len(queue) > 0 {
		ep := queue[0]
		queue = queue[1:]
		if seenEP[ep] {
			continue
		}
		seenEP[ep] = true
		var list dtnflowv1alpha1.TransferJobList
		if err := r.Client.List(ctx, &list, client.MatchingFields{IndexJobEndpoint: ep}, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("listing the jobs of endpoint %s: %w", ep, err)
		}
		for i := range list.Items {
			j := &list.Items[i]
			if seenJob[j.UID] || j.DeletionTimestamp != nil {
				continue
			}
			seenJob[j.UID] = true
			out = append(out, j)
			jsrc, jdst := jobEndpointKeys(j)
			queue = append(queue, jsrc, jdst)
		}
		if strings.Contains(ep, "/") {
			continue // a peer site's endpoint: no RemoteTransfer here uses it
		}
		// the peer sites' jobs served by this endpoint
		rts, err := remoteTransfersOf(ctx, r.Client, ep)
		if err != nil {
			return nil, err
		}
		for _, rt := range rts {
			if !seenJob[rt.UID] {
				seenJob[rt.UID] = true
				out = append(out, remoteStandIn(rt))
			}
		}
	}
	if !seenJob[job.UID] {
		out = append(out, job) // not in the cache yet
	}
	sort.Slice(out, func(i, j int) bool { return memberKey(out[i]) < memberKey(out[j]) })
	return out, nil
}

// pathCapacity is what the shares of a path divide: the larger of the plateau and the
// highest aggregate its PathProfile holds while fresh, and the capacity the running
// jobs' plans found (pathBitsPerSecond); 0 when none knows.
func pathCapacity(pp *dtnflowv1alpha1.PathProfile, plans []*dtnflowv1alpha1.TransferPlan, now time.Time) float64 {
	c := 0.0
	if planning.Fresh(pp, now) && pp.Status.Capacity != nil {
		c = float64(max(pp.Status.Capacity.PlateauBitsPerSecond, pp.Status.Capacity.HighestAggregateBitsPerSecond))
	}
	for _, plan := range plans {
		c = math.Max(c, float64(plan.PathBitsPerSecond))
	}
	return c
}

// demandOf is the most a job can use whatever its share: its own rate limit, and the
// rate its plan predicts when its nodes, not the path or a share, bound it. 0: no bound.
func demandOf(job *dtnflowv1alpha1.TransferJob, plan *dtnflowv1alpha1.TransferPlan) float64 {
	d := math.Inf(1)
	if l := job.Spec.Tuning.Limits; l != nil && l.MaxBitsPerSecond != nil {
		d = float64(*l.MaxBitsPerSecond)
	}
	if plan != nil && plan.PredictedBitsPerSecond > 0 {
		switch plan.BindingResource {
		case dtnflowv1alpha1.BindingNIC, dtnflowv1alpha1.BindingCPU, dtnflowv1alpha1.BindingDisk, dtnflowv1alpha1.BindingNodes:
			d = math.Min(d, float64(plan.PredictedBitsPerSecond))
		}
	}
	if math.IsInf(d, 0) {
		return 0
	}
	return d
}

// shareBound names what set a share, for status.sharing.boundBy.
func shareBound(s optimizer.JobShare, m *groupMember) dtnflowv1alpha1.ShareBound {
	switch s.BoundBy {
	case "":
		if math.IsInf(s.BitsPerSecond, 0) {
			return dtnflowv1alpha1.ShareBoundNone
		}
		return dtnflowv1alpha1.ShareBoundDemand
	case m.path:
		return dtnflowv1alpha1.ShareBoundPath
	case m.srcLink:
		return dtnflowv1alpha1.ShareBoundSourceEndpoint
	case m.dstLink:
		return dtnflowv1alpha1.ShareBoundDestinationEndpoint
	}
	return dtnflowv1alpha1.ShareBoundNone
}

// addPlanLoad adds what a plan holds of its nodes: on each, its stripes' planned rate
// and its agents' planned CPU.
func addPlanLoad(loads map[string]nodeLoad, plan *dtnflowv1alpha1.TransferPlan) {
	stripes := int64(planning.Stripes(*plan))
	perNodeRate := plan.PredictedBitsPerSecond / max(stripes, 1) * int64(max(plan.StripesPerNode, 1))
	for _, side := range []struct {
		nodes []string
		cpu   int64
	}{{plan.SourceNodes, plan.SourceCPUMillicores}, {plan.DestinationNodes, plan.DestinationCPUMillicores}} {
		for _, n := range side.nodes {
			l := loads[n]
			l.bitsPerSecond += perNodeRate
			l.millicores += int64(max(plan.StripesPerNode, 1)) * side.cpu
			loads[n] = l
		}
	}
}

// waitMessage says what a job that is not admitted waits for.
func waitMessage(a optimizer.Admission, m *groupMember, endpoints map[string]*dtnflowv1alpha1.TransferEndpoint, profiles map[string]*dtnflowv1alpha1.PathProfile) string {
	limit := func(link string) string {
		if name, ok := strings.CutPrefix(link, "endpoint "); ok {
			if ep := endpoints[name]; ep != nil && ep.Spec.Sharing != nil && ep.Spec.Sharing.MaxActiveJobs != nil {
				return fmt.Sprintf("TransferEndpoint %s allows %d job(s) at once (spec.sharing.maxActiveJobs)", name, *ep.Spec.Sharing.MaxActiveJobs)
			}
			return "TransferEndpoint " + name
		}
		if pp := profiles[link]; pp != nil && pp.Spec.MaxActiveJobs != nil {
			return fmt.Sprintf("PathProfile %s allows %d job(s) at once (spec.maxActiveJobs)", pp.Name, *pp.Spec.MaxActiveJobs)
		}
		return strings.TrimPrefix(link, "path ")
	}
	if a.PreemptedBy != "" {
		return fmt.Sprintf("preempted by %s, of higher priority: %s; position %d", a.PreemptedBy, limit(a.WaitingFor), a.Position)
	}
	return fmt.Sprintf("%s; position %d, higher priority first, then first come first served", limit(a.WaitingFor), a.Position)
}

// jobTrees are the trees a job reads (its source paths, at its source endpoint) and
// writes (where they land under its destination path): a file at source path f is
// written at path.Join(destination path, f). A peer's stand-in (remoteStandIn) has the
// trees of its side here.
func jobTrees(j *dtnflowv1alpha1.TransferJob) []optimizer.Tree {
	src, dst := jobEndpointKeys(j)
	trees := make([]optimizer.Tree, 0, 2*len(j.Spec.Source.Paths))
	for _, p := range j.Spec.Source.Paths {
		trees = append(trees, optimizer.Tree{Endpoint: src, Path: string(p)},
			optimizer.Tree{Endpoint: dst, Path: path.Join(string(j.Spec.Destination.Path), string(p)), Writes: true})
	}
	return trees
}

// filesWaitMessage says which job's files a job waits for, naming the first trees
// where they meet.
func filesWaitMessage(a optimizer.Admission, me *groupMember, members []*groupMember) string {
	verb := func(t optimizer.Tree) string {
		if t.Writes {
			return "writes"
		}
		return "reads"
	}
	where := ""
	if i := slices.IndexFunc(members, func(m *groupMember) bool { return m.key == a.FilesOf }); i >= 0 {
		if t, u, ok := optimizer.Overlap(me.trees, members[i].trees); ok {
			where = fmt.Sprintf(": it %s %s at endpoint %s, where this job %s %s", verb(u), u.Path, u.Endpoint, verb(t), t.Path)
		}
	}
	who := "TransferJob " + a.FilesOf
	if strings.HasPrefix(a.FilesOf, remoteTransferKind+" ") {
		who = a.FilesOf + " (a peer site's job)"
	}
	return fmt.Sprintf("waits for the files of %s%s; position %d, higher priority first, then first come first served", who, where, a.Position)
}

// queueReason is status.queue.reason for an admission that waits.
func queueReason(a optimizer.Admission) string {
	switch {
	case a.PreemptedBy != "":
		return ReasonPreempted
	case a.FilesOf != "":
		return ReasonFilesInUse
	case strings.HasPrefix(a.WaitingFor, "endpoint "):
		return ReasonEndpointLimit
	}
	return ReasonPathLimit
}
