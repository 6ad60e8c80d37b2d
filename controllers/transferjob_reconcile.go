package controllers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/agentlogs"
	"github.com/dtnflow/dtnflow/controllers/planning"
)

// The life of a job, one pass at a time. Every pass starts from the API objects (the
// job's status, its pods and their annotations), so a restarted manager carries on
// where the last one stopped:
//
//	finished (Complete or Failed) → stop agents, honour ttlSecondsAfterFinished
//	endpoints refuse the job      → Planned=False with the reason, no agents
//	spec.suspend                  → Pause directive, then stop agents (Suspended)
//	coordinator reports Complete  → Complete, PathProfile learns, agents stop
//	… PartiallyComplete           → PartiallyComplete (files skipped at the source), the
//	                                same otherwise
//	coordinator reports Failed    → Failed with the agent's error
//	agent pods failed or vanished → counted (backoffLimit → Failed) and replaced
//	no plan yet                   → transfer at once on stripe 0, probing on the job's
//	                                own data (Probing), then plan (Planned)
//	plan                          → re-plan on tuning change, lost node or rescale
//	                                intent; pods per stripe (stripe 0 kept); directive;
//	                                progress

// Reasons of the job's conditions.
const (
	ReasonProbing              = "Probing"
	ReasonListingDataset       = "ListingDataset"
	ReasonProbeComplete        = "ProbeComplete"
	ReasonProbeSkipped         = "ProbeSkipped"
	ReasonPlanned              = "Planned"
	ReasonFixedTuning          = "FixedTuning"
	ReasonPlanFailed           = "PlanFailed"
	ReasonNoFreeStripeSlot     = "NoFreeStripeSlot"
	ReasonStartingAgents       = "StartingAgents"
	ReasonTransferring         = "Transferring"
	ReasonPausing              = "Pausing"
	ReasonSuspended            = "Suspended"
	ReasonResumed              = "Resumed"
	ReasonVerified             = "Verified"
	ReasonSourceFilesSkipped   = "SourceFilesSkipped"
	ReasonComplete             = "Complete"
	ReasonTransferFailed       = "TransferFailed"
	ReasonBackoffLimitExceeded = "BackoffLimitExceeded"
	ReasonFailed               = "Failed"
	ReasonAgentFailed          = "AgentFailed"
	ReasonAgentVanished        = "AgentVanished"
	ReasonTuningChanged        = "TuningChanged"
	ReasonNodeNotReady         = "NodeNotReady"
	// ReasonContinuingProfile: a fresh PathProfile's samples leave the stream curve
	// unfinished, and the job's probe goes on from them (contract.ProbeDirective.Known).
	ReasonContinuingProfile = "ContinuingProfile"
)

// defaultBackoffLimit is spec.backoffLimit's default, for objects stored without it.
const defaultBackoffLimit = 6

func (r *TransferJobReconciler) reconcile(ctx context.Context, p *pass) error {
	err := r.reconcileJob(ctx, p)
	if p.obs != nil && p.obs.remote != nil {
		// what the pass decided for the peer's side goes there once, at its end
		if perr := r.pushRemote(ctx, p); perr != nil {
			err = errors.Join(err, perr)
		}
	}
	return err
}

func (r *TransferJobReconciler) reconcileJob(ctx context.Context, p *pass) error {
	if finished(p.st) {
		return r.reconcileFinished(ctx, p)
	}
	obs, err := r.observe(ctx, p.job)
	if err != nil {
		return err
	}
	p.obs = obs
	if obs.remote != nil {
		if prob := r.remoteGate(ctx, p); prob != nil {
			if prob.peerQueue != nil {
				return r.queue(ctx, p, ReasonRemoteQueued, int(prob.peerQueue.Position), prob.Message)
			}
			return r.reconcileBlocked(ctx, p, prob)
		}
	}
	if prob := validateJob(p.job, obs.endpoints); prob != nil {
		return r.reconcileBlocked(ctx, p, prob)
	}
	if p.job.Spec.Suspend {
		return r.reconcileSuspended(ctx, p)
	}
	if meta.IsStatusConditionTrue(p.st.Conditions, dtnflowv1alpha1.ConditionSuspended) {
		p.condition(dtnflowv1alpha1.ConditionSuspended, metav1.ConditionFalse, ReasonResumed, "spec.suspend is false: resuming from what was verified")
		p.event(corev1.EventTypeNormal, ReasonResumed, "Resume", "Resuming from what was verified")
	}
	if goOn, err := r.admit(ctx, p); err != nil || !goOn {
		return err
	}
	if p.st.StartTime == nil {
		if rec := expiredRecord(p.job, obs.profile); rec != nil {
			return r.completedBefore(p, rec) // a GitOps tool restored a job its TTL deleted
		}
		p.st.StartTime = &p.now
		// to the millisecond: the job's creationTimestamp is kept to the second
		logf.FromContext(ctx).Info("Acting on a new job", "created", p.job.CreationTimestamp.Time)
	}
	if err := r.ensureAuth(ctx, p); err != nil {
		return err
	}
	if obs.remote != nil {
		if err := r.ensureRemoteAuth(ctx, p); err != nil {
			return err
		}
	}
	if obs.reportErr != nil {
		logf.FromContext(ctx).Error(obs.reportErr, "Ignoring an unreadable report")
	}
	if rep := obs.report; rep != nil && rep.FirstByteTime != nil {
		p.timing(func(t *dtnflowv1alpha1.TransferTimings) **int64 { return &t.FirstByteMilliseconds }, *rep.FirstByteTime)
	}
	if rep := obs.report; rep != nil {
		p.st.FailedFiles = unionFiles(p.st.FailedFiles, rep.FailedFiles)
		p.st.SkippedFiles = unionFiles(p.st.SkippedFiles, rep.SkippedFiles)
		p.st.NotMoved = unionFiles(p.st.NotMoved, rep.NotMoved)
		switch rep.Phase {
		case contract.PhaseComplete, contract.PhasePartiallyComplete:
			return r.complete(ctx, p)
		case contract.PhaseFailed:
			// the last counts (files done and failed) before the job ends on them
			p.st.Progress = progressFrom(p.st.Progress, rep, p.st.StartTime, p.now.Time)
			return r.fail(ctx, p, ReasonTransferFailed, "the coordinator reported: "+rep.Error)
		}
	}
	if err := r.accountFailures(ctx, p); err != nil {
		return err
	}
	if limit := backoffLimit(p.job); p.st.AgentFailures > limit {
		return r.fail(ctx, p, ReasonBackoffLimitExceeded,
			fmt.Sprintf("%d agent pods failed or vanished, more than spec.backoffLimit (%d)", p.st.AgentFailures, limit))
	}
	if p.st.Plan == nil {
		planned, err := r.probeAndPlan(ctx, p)
		if err != nil || !planned {
			return err
		}
	}
	return r.run(ctx, p)
}

func backoffLimit(job *dtnflowv1alpha1.TransferJob) int32 {
	if job.Spec.BackoffLimit != nil {
		return *job.Spec.BackoffLimit
	}
	return defaultBackoffLimit
}

// reconcileBlocked handles a job its endpoints refuse: a clear condition, and no agents
// while access is withdrawn.
func (r *TransferJobReconciler) reconcileBlocked(ctx context.Context, p *pass, prob *jobProblem) error {
	prev := meta.FindStatusCondition(p.st.Conditions, dtnflowv1alpha1.ConditionPlanned)
	if prev == nil || prev.Reason != prob.Reason || prev.Message != prob.Message {
		p.event(corev1.EventTypeWarning, prob.Reason, "Validate", prob.Message)
	}
	p.condition(dtnflowv1alpha1.ConditionPlanned, metav1.ConditionFalse, prob.Reason, prob.Message)
	if !prob.Blocking {
		return nil // no node to place new agents on; the node watch wakes us
	}
	p.clear(dtnflowv1alpha1.ConditionProbing, prob.Reason, prob.Message)
	p.clear(dtnflowv1alpha1.ConditionTransferring, prob.Reason, prob.Message)
	p.st.Stripes = nil
	if p.st.Progress != nil {
		p.st.Progress = progressFrom(p.st.Progress, nil, p.st.StartTime, p.now.Time)
	}
	return r.deleteAgents(ctx, p, p.obs.agentPods(), prob.Reason)
}

// reconcileSuspended pauses a job: a Pause directive lets the agents finish the blocks in
// flight; once the coordinator says it paused (or PauseReports intervals passed) the
// agent pods are stopped. Status, plan and the receivers' journals stay, so resuming
// carries on from what was verified.
func (r *TransferJobReconciler) reconcileSuspended(ctx context.Context, p *pass) error {
	obs := p.obs
	if !meta.IsStatusConditionTrue(p.st.Conditions, dtnflowv1alpha1.ConditionSuspended) {
		p.condition(dtnflowv1alpha1.ConditionSuspended, metav1.ConditionTrue, ReasonPausing, "spec.suspend is true: waiting for the agents to finish the blocks in flight")
		p.event(corev1.EventTypeNormal, ReasonPausing, "Suspend", "Pausing the agents")
	}
	pods := obs.agentPods()
	if len(pods) > 0 {
		coord := obs.coordinator
		pause := contract.Directive{Mode: contract.ModePause}
		current := directiveOf(coord)
		paused := coord == nil || coord.Status.Phase != corev1.PodRunning ||
			(obs.report != nil && obs.report.Phase == contract.PhasePaused && current != nil && current.Mode == contract.ModePause && obs.report.Generation >= current.Generation)
		since := meta.FindStatusCondition(p.st.Conditions, dtnflowv1alpha1.ConditionSuspended).LastTransitionTime.Time
		deadline := since.Add(PauseReports * r.ReportInterval)
		if !paused && p.now.Time.Before(deadline) {
			if err := r.syncDirective(ctx, p, pause, coord.Labels[contract.LabelPlanHash]); err != nil {
				return err
			}
			p.requeue(deadline.Sub(p.now.Time))
			return nil
		}
		if err := r.deleteAgents(ctx, p, pods, ReasonSuspended); err != nil {
			return err
		}
	}
	p.condition(dtnflowv1alpha1.ConditionSuspended, metav1.ConditionTrue, ReasonSuspended, "spec.suspend is true: agents stopped; what was verified is kept and resuming carries on from it")
	p.clear(dtnflowv1alpha1.ConditionProbing, ReasonSuspended, "the job is suspended")
	p.clear(dtnflowv1alpha1.ConditionTransferring, ReasonSuspended, "the job is suspended")
	p.st.Stripes = nil
	if p.st.Progress != nil {
		p.st.Progress = progressFrom(p.st.Progress, nil, p.st.StartTime, p.now.Time)
	}
	return nil
}

// probeAndPlan makes the first plan: at once in Fixed mode; from a fresh PathProfile and
// the dataset's listing when the planner needs no probe; otherwise from the samples
// stripe 0 takes on the job's own data while it transfers (a Transfer directive with
// a probe: the first byte does not wait for the plan). Stripe 0 starts with the
// coordinator in every case, so that the plan finds it running. It reports whether a
// plan now exists.
func (r *TransferJobReconciler) probeAndPlan(ctx context.Context, p *pass) (bool, error) {
	job, obs, rep := p.job, p.obs, p.obs.report
	if rep != nil && len(rep.Samples) > 0 {
		p.st.Samples = samplesFromReport(p.st.Samples, rep.Samples)
	}
	probe := r.Planner.ProbeDirective(ProbeRequest{Job: job, Profile: obs.profile, Now: p.now.Time,
		NICBitsPerSecond: min(obs.endpoints.Source.Spec.NICBitsPerSecond, obs.endpoints.Destination.Spec.NICBitsPerSecond)})
	if probe != nil && othersOnPath(p) && planning.Fresh(obs.profile, p.now.Time) {
		// A fresh profile that another probe left incomplete (its job's data ran out
		// under it, or the job failed) is what the path's jobs plan from: a probe of
		// its rest would measure a share of the path, not the path, and made the jobs
		// waiting on a cold path probe it one after another (bench-sharing: four 1 GiB
		// jobs created together started 3, 15, 25 and 36 s after their creation).
		probe = nil
	}
	if probe != nil {
		if wait, err := r.waitForPathProbe(ctx, p); err != nil || wait {
			return false, err
		}
	}
	if probe == nil {
		// Fixed mode, or a fresh profile: no probe, but the plan's size classes need
		// the dataset, which the coordinator lists as it starts.
		if rep != nil && rep.Dataset != nil {
			return r.makePlan(p, rep.Dataset), nil
		}
		why := fmt.Sprintf("PathProfile %s is fresh, so the path is not probed", PathProfileNameFor(job))
		if job.Spec.Tuning.Mode == dtnflowv1alpha1.TuningFixed {
			why = "spec.tuning.mode is Fixed, so the path is not probed"
		}
		if r.waitForStripeSlot(p) {
			return false, nil
		}
		if err := r.syncPods(ctx, p, r.probeLayout(p, true), nil); err != nil {
			return false, err
		}
		if obs.coordinator != nil {
			p.condition(dtnflowv1alpha1.ConditionProbing, metav1.ConditionTrue, ReasonListingDataset, why+"; waiting for the coordinator to list the dataset")
		}
		p.condition(dtnflowv1alpha1.ConditionPlanned, metav1.ConditionFalse, ReasonListingDataset, "waiting for the dataset's listing")
		return false, nil
	}
	want := r.Planner.ProbeTransferDirective(job, probe)
	current := directiveOf(obs.coordinator)
	if obs.remote.isSource() {
		current = obs.remote.remoteDirective()
	}
	if rep != nil && rep.Probe == contract.PhaseProbed && current != nil && sameDirective(current, &want) && rep.Generation >= current.Generation {
		planned := r.makePlan(p, rep.Dataset)
		if planned {
			r.learnFromProbe(ctx, p)
		}
		return planned, nil
	}
	if r.waitForStripeSlot(p) {
		return false, nil
	}
	if err := r.syncPods(ctx, p, r.probeLayout(p, true), &want); err != nil {
		return false, err
	}
	if obs.coordinator != nil || obs.remote.isSource() {
		reason, msg := ReasonProbing, fmt.Sprintf("measuring the path on the job's own data with stripe 0: %d sample(s) so far", len(p.st.Samples))
		event := "Transferring on one stripe and probing the path on the job's own data"
		if known := len(want.Probe.Known); known > 0 && len(p.st.Samples) == 0 {
			// A warm job whose profile's stream curve is unfinished: nothing is measured
			// yet, and nothing will be when the dataset is too small to repay a sample
			// (the plan then comes from the profile, ProbeSkipped).
			reason = ReasonContinuingProfile
			msg = fmt.Sprintf("PathProfile %s holds %d sample(s) of the path that leave its stream curve unfinished: stripe 0 moves the job's data and measures the rest if the dataset can repay a sample", PathProfileNameFor(job), known)
			event = fmt.Sprintf("Transferring on one stripe, continuing PathProfile %s's unfinished probe", PathProfileNameFor(job))
		}
		if !meta.IsStatusConditionTrue(p.st.Conditions, dtnflowv1alpha1.ConditionProbing) {
			p.event(corev1.EventTypeNormal, reason, "Probe", event)
		}
		p.condition(dtnflowv1alpha1.ConditionProbing, metav1.ConditionTrue, reason, msg)
	}
	p.condition(dtnflowv1alpha1.ConditionPlanned, metav1.ConditionFalse, ReasonProbing, "waiting for the probe")
	if rep != nil && rep.Phase == contract.PhaseTransferring {
		r.progress(p)
		p.condition(dtnflowv1alpha1.ConditionTransferring, metav1.ConditionTrue, ReasonProbing,
			fmt.Sprintf("moving the dataset on stripe 0 while probing, at %s; %d%% done", p.st.Progress.Rate, p.st.Progress.Percent))
	}
	return false, nil
}

// progress brings status.progress up to the coordinator's report.
func (r *TransferJobReconciler) progress(p *pass) {
	prev := p.st.Progress
	p.st.Progress = progressFrom(prev, p.obs.report, p.st.StartTime, p.now.Time)
	p.st.Channels = channelStatusFrom(p.st.Channels, p.obs.report)
	if prev != nil {
		p.bytesMoved = p.st.Progress.BytesDone - prev.BytesDone
	} else {
		p.bytesMoved = p.st.Progress.BytesDone
	}
}

// makePlan asks the planner for a plan and records it; a planner error is a condition,
// not a failure of the job (a node or a profile may yet change the answer).
func (r *TransferJobReconciler) makePlan(p *pass, dataset *contract.Dataset) bool {
	plan, err := r.Planner.Plan(r.planRequest(p, dataset))
	if err != nil {
		msg := fmt.Sprintf("no plan: %v", err)
		p.condition(dtnflowv1alpha1.ConditionPlanned, metav1.ConditionFalse, ReasonPlanFailed, msg)
		p.event(corev1.EventTypeWarning, ReasonPlanFailed, "Plan", msg)
		p.requeue(4 * r.ReportInterval)
		return false
	}
	stampPlanHash(&plan, p.job)
	p.st.Plan = &plan
	r.rescale.set(p.job.UID, r.Planner.RescaleStateAfterPlan(p.now.Time, &plan, leastSampleRTT(p.obs.report)))
	p.timing(func(t *dtnflowv1alpha1.TransferTimings) **int64 { return &t.PlanMilliseconds }, p.at)
	reason, probeReason := ReasonPlanned, ReasonProbeComplete
	if p.job.Spec.Tuning.Mode == dtnflowv1alpha1.TuningFixed {
		reason, probeReason = ReasonFixedTuning, ReasonProbeSkipped
	} else if len(p.st.Samples) == 0 {
		probeReason = ReasonProbeSkipped
	}
	msg := describePlan(&plan)
	p.condition(dtnflowv1alpha1.ConditionPlanned, metav1.ConditionTrue, reason, msg)
	p.clear(dtnflowv1alpha1.ConditionProbing, probeReason, "the plan is made")
	p.event(corev1.EventTypeNormal, reason, "Plan", msg)
	return true
}

// stripeSlotRetry is how often a job waiting for a free stripe slot looks again (a
// departing job's pods are not events of this job).
const stripeSlotRetry = 5 * time.Second

// waitForStripeSlot holds a job that has no stripe yet while one of its sides has no
// usable node with a stripe slot free of other jobs (maxStripesPerNode): its first
// stripe would only add pods the node cannot run, and pods that do run would hold CPU
// and ports that jobs already planned there need — 200 jobs started at once on the
// local cluster deadlocked so, each holding a probe stripe none could plan beyond. The
// job waits holding no pods (Planned False, NoFreeStripeSlot) and looks again every
// stripeSlotRetry; a job that holds a stripe keeps it (planNodes counts it as its own).
func (r *TransferJobReconciler) waitForStripeSlot(p *pass) bool {
	obs := p.obs
	if len(obs.senders)+len(obs.receivers) > 0 {
		return false
	}
	full := func(ep *dtnflowv1alpha1.TransferEndpoint, nodes []nodeView) string {
		limit, usable := int(ep.Spec.MaxStripesPerNode), 0
		for _, n := range nodes {
			if !n.Usable() {
				continue
			}
			usable++
			if limit <= 0 || n.StripesOfOthers(p.job.UID) < limit {
				return ""
			}
		}
		if usable == 0 {
			return "" // no usable node at all: the layout and planner say so
		}
		return fmt.Sprintf("every usable node of TransferEndpoint %s runs its maxStripesPerNode (%d) stripes of other jobs", ep.Name, limit)
	}
	why := full(obs.endpoints.Source, obs.endpoints.SourceNodes)
	if why == "" && obs.endpoints.Destination.Spec.ExternalAddress == "" {
		why = full(obs.endpoints.Destination, obs.endpoints.DestinationNodes)
	}
	if why == "" {
		return false
	}
	p.condition(dtnflowv1alpha1.ConditionPlanned, metav1.ConditionFalse, ReasonNoFreeStripeSlot, why+"; waiting for one to free")
	p.requeue(stripeSlotRetry)
	return true
}

// planRequest gathers what the planner plans from.
func (r *TransferJobReconciler) planRequest(p *pass, dataset *contract.Dataset) PlanRequest {
	obs := p.obs
	if dataset == nil && obs.report != nil {
		dataset = obs.report.Dataset
	}
	return PlanRequest{
		Job:                 p.job,
		Samples:             p.st.Samples,
		Profile:             obs.profile,
		SourceNodes:         planNodes(obs.endpoints.Source, obs.endpoints.SourceNodes, p.job),
		DestinationNodes:    planNodes(obs.endpoints.Destination, obs.endpoints.DestinationNodes, p.job),
		ExternalDestination: obs.endpoints.Destination.Spec.ExternalAddress != "",
		Dataset:             dataset,
		RTT:                 rttOf(obs.report),
		Now:                 p.now.Time,
		ShareBitsPerSecond:  p.share.planShare(),
		TimeLeft:            timeLeft(obs.report),
	}
}

// timeLeft is how long the data a report has left takes at its current rate (0: no
// report, no rate, or nothing said of the totals).
func timeLeft(rep *contract.Report) time.Duration {
	if rep == nil || rep.BitsPerSecond <= 0 || rep.BytesTotal <= 0 {
		return 0
	}
	left := max(rep.BytesTotal-rep.BytesDone, 0)
	return time.Duration(float64(left) * 8 / float64(rep.BitsPerSecond) * float64(time.Second))
}

// planNodes are the usable nodes of a side as the planner sees them.
func planNodes(ep *dtnflowv1alpha1.TransferEndpoint, nodes []nodeView, job *dtnflowv1alpha1.TransferJob) []PlanNode {
	var out []PlanNode
	for _, n := range nodes {
		if !n.Usable() {
			continue
		}
		placed := n.StripesOfOthers(job.UID)
		if own, limit := n.StripesByJob[job.UID], int(ep.Spec.MaxStripesPerNode); own > 0 && limit > 0 {
			// the slots the job holds are its own, however many others crowd the node
			// (a node over its limit by others' probe stripes must not strand it)
			placed = min(placed, max(limit-own, 0))
		}
		pn := PlanNode{
			Name:             n.Name,
			NICBitsPerSecond: ep.Spec.NICBitsPerSecond,
			PlacedStripes:    placed,
			MaxStripes:       int(ep.Spec.MaxStripesPerNode),
			// what other jobs' plans hold of the node (the sharing view)
			OthersBitsPerSecond: n.OthersBitsPerSecond,
			OthersMillicores:    n.OthersMillicores,
			// keep the probe stripe (and any running stripe) where it is when another
			// node would carry no more
			Preferred: n.StripesByJob[job.UID] > 0,
		}
		if ep.Spec.CPUBudgetPerNode != nil {
			pn.CPUBudgetMillicores = ep.Spec.CPUBudgetPerNode.MilliValue()
		}
		if ep.Spec.DiskBitsPerSecond != nil {
			pn.DiskBitsPerSecond = *ep.Spec.DiskBitsPerSecond
		}
		if n.nicBitsPerSecond > 0 {
			pn.NICBitsPerSecond = n.nicBitsPerSecond
		}
		if n.cpuBudgetMillicores > 0 {
			pn.CPUBudgetMillicores = n.cpuBudgetMillicores
		}
		if n.maxStripes > 0 {
			pn.MaxStripes = int(n.maxStripes)
		}
		out = append(out, pn)
	}
	return out
}

// run keeps a planned job going: re-plans first (tuning changed, a node lost, the
// rescale policy), then pods and directive to the plan, then progress.
func (r *TransferJobReconciler) run(ctx context.Context, p *pass) error {
	job, obs := p.job, p.obs
	rep := obs.report
	p.newReport = rep != nil && !rep.Time.IsZero() &&
		(p.st.Progress == nil || p.st.Progress.LastUpdateTime == nil || apiTime(rep.Time).After(p.st.Progress.LastUpdateTime.Time))

	if p.st.Plan.Hash != planHash(p.st.Plan, job) {
		r.replanForTuning(p)
	}
	r.moveOffLostNodes(p)
	r.followShare(p)
	if job.Spec.Tuning.Mode != dtnflowv1alpha1.TuningFixed && p.newReport && rep.Phase == contract.PhaseTransferring {
		req := RescaleRequest{Job: job, Plan: p.st.Plan, Report: rep, Now: p.now.Time,
			SourceNodes:         planNodes(obs.endpoints.Source, obs.endpoints.SourceNodes, job),
			DestinationNodes:    planNodes(obs.endpoints.Destination, obs.endpoints.DestinationNodes, job),
			ExternalDestination: obs.endpoints.Destination.Spec.ExternalAddress != "", ShareBitsPerSecond: p.share.planShare()}
		decision, state := r.Planner.Rescale(r.rescale.get(job.UID), req)
		r.rescale.set(job.UID, state)
		if decision.Plan != nil {
			next := *decision.Plan
			stampPlanHash(&next, job)
			p.replan(&next, decision.Reason, decision.Message)
		}
	}

	plan := p.st.Plan
	directive := r.Planner.TransferDirective(job, plan)
	if err := r.syncPods(ctx, p, r.planLayout(p), &directive); err != nil {
		return err
	}

	r.progress(p)
	r.learnAggregate(ctx, p)
	reason := ReasonStartingAgents
	if rep != nil && rep.Phase == contract.PhaseTransferring {
		reason = ReasonTransferring
	}
	running := 0
	for _, s := range p.st.Stripes {
		if s.State == dtnflowv1alpha1.StripeRunning {
			running++
		}
	}
	p.plannedHolds()
	p.condition(dtnflowv1alpha1.ConditionTransferring, metav1.ConditionTrue, reason,
		fmt.Sprintf("%d of %d stripes running at %s; %d%% done", running, stripeCount(plan), p.st.Progress.Rate, p.st.Progress.Percent))
	return nil
}

// plannedHolds says Planned=True while the job's plan is the one its spec asks for
// (else the Planned condition says why tuning is not met, and stays).
func (p *pass) plannedHolds() {
	if plan := p.st.Plan; plan != nil && plan.Hash == planHash(plan, p.job) {
		p.condition(dtnflowv1alpha1.ConditionPlanned, metav1.ConditionTrue, plannedReason(p.job), describePlan(plan))
	}
}

func plannedReason(job *dtnflowv1alpha1.TransferJob) string {
	if job.Spec.Tuning.Mode == dtnflowv1alpha1.TuningFixed {
		return ReasonFixedTuning
	}
	return ReasonPlanned
}

// replan records a change of plan in status.replans, as an Event and in the metrics.
func (p *pass) replan(to *dtnflowv1alpha1.TransferPlan, reason, message string) {
	from := shapeOf(p.st.Plan)
	p.st.Plan = to
	if len(message) > 1024 {
		message = message[:1021] + "..."
	}
	if len(reason) > 64 {
		reason = reason[:64]
	}
	p.st.Replans = appendReplan(p.st.Replans, dtnflowv1alpha1.Replan{Time: p.now, Reason: reason, Message: message, From: from, To: shapeOf(to)})
	p.replanReasons = append(p.replanReasons, reason)
	p.event(corev1.EventTypeNormal, reason, "Replan", fmt.Sprintf("%s → %s: %s", describeShape(from), describeShape(shapeOf(to)), message))
}

// replanForTuning re-plans within changed spec.tuning (limits, fixed values, mode).
// When no plan fits the new tuning, the job carries on with its current plan, says so
// in its Planned condition, and tries again every pass (a node may come back); the
// current plan's hash, made under the old tuning, keeps the attempt going.
func (r *TransferJobReconciler) replanForTuning(p *pass) {
	plan, err := r.Planner.Plan(r.planRequest(p, nil))
	if err != nil {
		msg := fmt.Sprintf("spec.tuning changed but no plan fits it: %v; the current plan goes on", err)
		if c := meta.FindStatusCondition(p.st.Conditions, dtnflowv1alpha1.ConditionPlanned); c == nil || c.Reason != ReasonPlanFailed || c.Message != msg {
			p.event(corev1.EventTypeWarning, ReasonPlanFailed, "Plan", msg)
		}
		p.condition(dtnflowv1alpha1.ConditionPlanned, metav1.ConditionFalse, ReasonPlanFailed, msg)
		return
	}
	stampPlanHash(&plan, p.job)
	p.replan(&plan, ReasonTuningChanged, "spec.tuning changed: re-planned within it; "+describePlan(&plan))
	r.rescale.forget(p.job.UID)
}

// moveOffLostNodes replaces the plan's nodes that are no longer Ready (or were cordoned)
// by spare usable nodes of the same side, fewest stripes first; with no spare left, the
// job is re-planned on the nodes that remain.
func (r *TransferJobReconciler) moveOffLostNodes(p *pass) {
	obs, plan := p.obs, p.st.Plan
	src, srcLost := replaceLost(plan.SourceNodes, obs.endpoints.SourceNodes, p.job)
	dst, dstLost := replaceLost(plan.DestinationNodes, obs.endpoints.DestinationNodes, p.job)
	if len(srcLost)+len(dstLost) == 0 {
		return
	}
	lost := append(append([]string(nil), srcLost...), dstLost...)
	if src != nil && (len(plan.DestinationNodes) == 0 || dst != nil) {
		next := plan.DeepCopy()
		next.SourceNodes = src
		if len(plan.DestinationNodes) > 0 {
			next.DestinationNodes = dst
		}
		stampPlanHash(next, p.job)
		p.replan(next, ReasonNodeNotReady, fmt.Sprintf("node(s) %v are not Ready or not schedulable: their stripes move to %v", lost, moved(plan, next)))
		return
	}
	next, err := r.Planner.Plan(r.planRequest(p, nil))
	if err != nil {
		p.event(corev1.EventTypeWarning, ReasonPlanFailed, "Plan", fmt.Sprintf("node(s) %v lost and no new plan: %v", lost, err))
		return
	}
	stampPlanHash(&next, p.job)
	p.replan(&next, ReasonNodeNotReady, fmt.Sprintf("node(s) %v are not Ready or not schedulable and no spare node is left: re-planned on the nodes that remain", lost))
}

// replaceLost returns the node list with every unusable node replaced by a spare usable
// one (nil when there are not enough spares), and the names of the lost nodes.
func replaceLost(planned []string, side []nodeView, job *dtnflowv1alpha1.TransferJob) ([]string, []string) {
	usable := map[string]bool{}
	for _, n := range side {
		if n.Usable() {
			usable[n.Name] = true
		}
	}
	var lost []string
	inPlan := map[string]bool{}
	for _, n := range planned {
		inPlan[n] = true
		if !usable[n] {
			lost = append(lost, n)
		}
	}
	if len(lost) == 0 {
		return planned, nil
	}
	var spares []nodeView
	for _, n := range side {
		if n.Usable() && !inPlan[n.Name] {
			spares = append(spares, n)
		}
	}
	sort.SliceStable(spares, func(i, j int) bool { return spares[i].StripesOfOthers(job.UID) < spares[j].StripesOfOthers(job.UID) })
	if len(spares) < len(lost) {
		return nil, lost
	}
	out := make([]string, len(planned))
	next := 0
	for i, n := range planned {
		if usable[n] {
			out[i] = n
			continue
		}
		out[i] = spares[next].Name
		next++
	}
	return out, lost
}

func moved(from, to *dtnflowv1alpha1.TransferPlan) []string {
	old := map[string]bool{}
	for _, n := range append(append([]string(nil), from.SourceNodes...), from.DestinationNodes...) {
		old[n] = true
	}
	var out []string
	for _, n := range append(append([]string(nil), to.SourceNodes...), to.DestinationNodes...) {
		if !old[n] {
			out = append(out, n)
		}
	}
	return out
}

// complete ends a job whose coordinator reports every file verified — or every file it
// could read, when it skipped some at the source (PartiallyComplete: never Complete). A
// cold job whose data all arrived before its probe ended is planned from the samples it
// took, so that the PathProfile learns the path's model for the next job.
func (r *TransferJobReconciler) complete(ctx context.Context, p *pass) error {
	rep := p.obs.report
	if p.st.Plan == nil && p.job.Spec.Tuning.Mode != dtnflowv1alpha1.TuningFixed {
		if len(rep.Samples) > 0 {
			p.st.Samples = samplesFromReport(p.st.Samples, rep.Samples)
		}
		if len(p.st.Samples) > 0 {
			r.makePlan(p, rep.Dataset)
		}
	}
	// a job that ends in the pass after a wait (a peer's API server back with the job's
	// end) does not reach run, which would have said so
	p.plannedHolds()
	completed := p.at
	if !rep.Time.IsZero() {
		completed = rep.Time // the coordinator's word, before the watch and this pass
	}
	// The run's average from its start as its timings count it to its Complete, not
	// from status.startTime to this pass: both of those are whole seconds, which on the
	// demo's six-second job said 367 and 428 Mbit/s where it moved 384–402.
	runStarted := metav1.NewTime(runStart(p.job.CreationTimestamp.Time, p.st))
	p.st.Progress = progressFrom(p.st.Progress, rep, &runStarted, completed)
	p.st.Channels = channelStatusFrom(p.st.Channels, rep)
	p.st.Progress.CurrentBitsPerSecond, p.st.Progress.Rate = 0, formatRate(0)
	p.bytesMoved = p.st.Progress.BytesDone
	if prev := p.job.Status.Progress; prev != nil {
		p.bytesMoved -= prev.BytesDone
	}
	msg := fmt.Sprintf("%d files, %d bytes at the destination and verified; %s on average", p.st.Progress.FilesDone, p.st.Progress.BytesDone, formatRate(p.st.Progress.AverageBitsPerSecond))
	if nm := notMovedMessage(p.st.Progress, p.st.NotMoved); nm != "" {
		msg += "; " + nm
	}
	eventType, eventReason := corev1.EventTypeNormal, ReasonComplete
	if rep.Phase == contract.PhasePartiallyComplete {
		msg = partialMessage(p.st.Progress, p.st.SkippedFiles) + "; " + msg
		p.condition(dtnflowv1alpha1.ConditionPartiallyComplete, metav1.ConditionTrue, ReasonSourceFilesSkipped, msg)
		eventType, eventReason = corev1.EventTypeWarning, ReasonSourceFilesSkipped
	} else {
		p.condition(dtnflowv1alpha1.ConditionComplete, metav1.ConditionTrue, ReasonVerified, msg)
	}
	p.clear(dtnflowv1alpha1.ConditionTransferring, ReasonComplete, "the transfer is complete")
	p.clear(dtnflowv1alpha1.ConditionProbing, ReasonComplete, "the transfer is complete")
	p.st.CompletionTime = &p.now
	p.timing(func(t *dtnflowv1alpha1.TransferTimings) **int64 { return &t.CompleteMilliseconds }, completed)
	p.st.Stripes = nil
	p.event(eventType, eventReason, "Complete", msg)
	if err := r.learn(ctx, p); err != nil {
		// The profile only speeds up later jobs; the job itself is done.
		logf.FromContext(ctx).Error(err, "Could not update the PathProfile", "pathProfile", PathProfileNameFor(p.job))
		p.event(corev1.EventTypeWarning, "PathProfileNotUpdated", "Learn", err.Error())
	}
	r.rescale.forget(p.job.UID)
	r.archiveLogs(ctx, p, p.obs.agentPods(), agentlogs.ReasonFinished)
	if err := r.deleteAgents(ctx, p, p.obs.agentPods(), ReasonComplete); err != nil {
		return err
	}
	return r.expire(ctx, p)
}

// fail ends a job as Failed.
func (r *TransferJobReconciler) fail(ctx context.Context, p *pass, reason, message string) error {
	p.condition(dtnflowv1alpha1.ConditionFailed, metav1.ConditionTrue, reason, message)
	p.clear(dtnflowv1alpha1.ConditionTransferring, ReasonFailed, "the job failed")
	p.clear(dtnflowv1alpha1.ConditionProbing, ReasonFailed, "the job failed")
	p.st.CompletionTime = &p.now
	p.st.Stripes = nil
	if p.st.Progress != nil {
		p.st.Progress = progressFrom(p.st.Progress, nil, p.st.StartTime, p.now.Time)
		p.st.Progress.ETASeconds, p.st.Progress.ETA = nil, ""
	}
	p.event(corev1.EventTypeWarning, reason, "Fail", message)
	r.rescale.forget(p.job.UID)
	r.archiveLogs(ctx, p, p.obs.agentPods(), agentlogs.ReasonFinished)
	if err := r.deleteAgents(ctx, p, p.obs.agentPods(), reason); err != nil {
		return err
	}
	return r.expire(ctx, p)
}

// describePlan writes a plan for people.
func describePlan(plan *dtnflowv1alpha1.TransferPlan) string {
	s := fmt.Sprintf("%s; CPU %dm per sender, %dm per receiver", describeShape(shapeOf(plan)), plan.SourceCPUMillicores, plan.DestinationCPUMillicores)
	if plan.PredictedBitsPerSecond > 0 {
		s += fmt.Sprintf("; predicted %s", formatRate(plan.PredictedBitsPerSecond))
		if plan.BindingResource != "" {
			s += fmt.Sprintf(", bound by %s", plan.BindingResource)
		}
	}
	if plan.PathBitsPerSecond > 0 {
		s += fmt.Sprintf("; the path carries %s as far as the samples show", formatRate(plan.PathBitsPerSecond))
	}
	if m := plan.Model; m != nil {
		s += fmt.Sprintf("; stream model %s, %s per stripe at %d stream(s)", m.Name, formatRate(m.PeakBitsPerSecond), m.OptimalStreams)
		if m.Reason != "" {
			s += ": " + m.Reason
		}
	}
	return s
}

// planHash identifies a plan's decisions (planning.Hash: nodes, stripes, streams,
// buffer, CPU, size classes) together with the spec.tuning they were made under, so
// that a change of tuning is seen from the status alone, even after a restart.
func planHash(plan *dtnflowv1alpha1.TransferPlan, job *dtnflowv1alpha1.TransferJob) string {
	tuning, err := json.Marshal(job.Spec.Tuning)
	if err != nil {
		panic(fmt.Sprintf("encoding spec.tuning: %v", err))
	}
	return shortHash(planning.Hash(*plan)+string(tuning), 16)
}

// stampPlanHash sets a plan's hash for the job's current tuning.
func stampPlanHash(plan *dtnflowv1alpha1.TransferPlan, job *dtnflowv1alpha1.TransferJob) {
	plan.Hash = planHash(plan, job)
}

// expire deletes a finished job once ttlSecondsAfterFinished has passed, or asks to be
// woken then.
func (r *TransferJobReconciler) expire(ctx context.Context, p *pass) error {
	ttl := p.job.Spec.TTLSecondsAfterFinished
	if ttl == nil || p.st.CompletionTime == nil || keptAfterFinish(p.st) {
		return nil
	}
	at := p.st.CompletionTime.Add(time.Duration(*ttl) * time.Second)
	if left := at.Sub(p.now.Time); left > 0 {
		p.requeue(left)
		return nil
	}
	return r.deleteJob(ctx, p)
}
