package controllers

import (
	"context"
	"fmt"
	"math"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/planning"
	"github.com/dtnflow/dtnflow/optimizer"
)

// The steps of a pass that deal with other jobs (sharing.go has the view they act on):
// admission or the queue, the share a plan is made for and re-plans that follow it,
// one prober per cold path, and what the path's PathProfile learns of its capacity.

// admit computes the job's sharing view and either admits the job (it goes on with
// the pass) or queues it: a Queued condition, its place in status.queue, and no pods.
// It reports whether the pass goes on.
func (r *TransferJobReconciler) admit(ctx context.Context, p *pass) (bool, error) {
	view, prob, err := r.shareViewFor(ctx, p)
	if err != nil {
		return false, err
	}
	if prob != nil {
		return false, r.reconcileBlocked(ctx, p, prob)
	}
	p.share = view
	p.st.Sharing = sharingStatus(view)
	p.st.Sharing.Fairness = p.job.Spec.Tuning.Fairness
	if p.st.Sharing.Fairness == "" {
		p.st.Sharing.Fairness = dtnflowv1alpha1.FairnessDefault
	}
	for i := range p.obs.endpoints.SourceNodes {
		n := &p.obs.endpoints.SourceNodes[i]
		n.OthersBitsPerSecond, n.OthersMillicores = view.loads[n.Name].bitsPerSecond, view.loads[n.Name].millicores
	}
	for i := range p.obs.endpoints.DestinationNodes {
		n := &p.obs.endpoints.DestinationNodes[i]
		n.OthersBitsPerSecond, n.OthersMillicores = view.loads[n.Name].bitsPerSecond, view.loads[n.Name].millicores
	}
	if p.st.Plan == nil {
		// the first plan will be made for this many jobs on the path
		r.sharing.setPlannedWith(p.job.UID, int32(view.jobsOnPath))
	}
	if view.admission.Admitted {
		if c := meta.FindStatusCondition(p.st.Conditions, dtnflowv1alpha1.ConditionQueued); c != nil && c.Status == metav1.ConditionTrue {
			p.event(corev1.EventTypeNormal, ReasonAdmitted, "Admit", fmt.Sprintf("Admitted after waiting since %s", c.LastTransitionTime.UTC().Format("15:04:05")))
		}
		p.condition(dtnflowv1alpha1.ConditionQueued, metav1.ConditionFalse, ReasonAdmitted,
			fmt.Sprintf("admitted with priority %d; %d job(s) on the path", view.priority, view.jobsOnPath))
		p.st.Queue = nil
		return true, nil
	}
	return false, r.reconcileQueued(ctx, p)
}

// reconcileQueued keeps a job that is not admitted waiting: its place and reason in
// status, and no pods (a job preempted while running has its agents stopped; its
// receivers' journals keep what was verified, so it resumes from there).
func (r *TransferJobReconciler) reconcileQueued(ctx context.Context, p *pass) error {
	a := p.share.admission
	reason := waitReason(meta.FindStatusCondition(p.st.Conditions, dtnflowv1alpha1.ConditionQueued), a)
	return r.queue(ctx, p, reason, a.Position, p.share.waitMessage)
}

// waitReason is why a job, or a peer's side, that is not admitted waits: the
// admission's reason, or Preempted while it waits because it was preempted, until it
// runs again (prev is its Queued condition before this pass).
func waitReason(prev *metav1.Condition, a optimizer.Admission) string {
	if prev != nil && prev.Status == metav1.ConditionTrue && prev.Reason == ReasonPreempted {
		return ReasonPreempted
	}
	return queueReason(a)
}

// queueEntry is the status.queue of one that waits at position for reason, since it
// began waiting (prev's since, else now).
func queueEntry(prev *dtnflowv1alpha1.TransferQueue, reason string, position int, message string, now metav1.Time) *dtnflowv1alpha1.TransferQueue {
	since := now
	if prev != nil && prev.Since != nil {
		since = *prev.Since
	}
	return &dtnflowv1alpha1.TransferQueue{Position: int32(min(max(position, 1), math.MaxInt32)), Reason: reason,
		Message: contract.Cut(message, 1024), Since: &since}
}

// queue keeps a job waiting for a reason at a position: the Queued condition, its place
// in status.queue, and no pods.
func (r *TransferJobReconciler) queue(ctx context.Context, p *pass, reason string, position int, message string) error {
	prev := meta.FindStatusCondition(p.st.Conditions, dtnflowv1alpha1.ConditionQueued)
	if prev == nil || prev.Status != metav1.ConditionTrue || prev.Reason != reason {
		p.event(corev1.EventTypeNormal, reason, "Queue", message)
	}
	p.condition(dtnflowv1alpha1.ConditionQueued, metav1.ConditionTrue, reason, message)
	p.st.Queue = queueEntry(p.st.Queue, reason, position, message, p.now)
	p.clear(dtnflowv1alpha1.ConditionProbing, reason, "the job is queued")
	p.clear(dtnflowv1alpha1.ConditionTransferring, reason, "the job is queued")
	p.st.Stripes = nil
	if p.st.Progress != nil {
		p.st.Progress = progressFrom(p.st.Progress, nil, p.st.StartTime, p.now.Time)
	}
	if pods := p.obs.agentPods(); len(pods) > 0 {
		return r.deleteAgents(ctx, p, pods, reason)
	}
	return nil
}

// sharingStatus is status.sharing from the view.
func sharingStatus(v *shareView) *dtnflowv1alpha1.TransferSharing {
	s := &dtnflowv1alpha1.TransferSharing{Priority: v.priority, JobsOnPath: int32(min(v.jobsOnPath, 100000)),
		PathCapacityBitsPerSecond: roundRate(v.capacity), BoundBy: v.boundBy, Paced: v.share.Paced}
	if !math.IsInf(v.share.BitsPerSecond, 0) {
		s.ShareBitsPerSecond = roundRate(v.share.BitsPerSecond)
	}
	return s
}

func roundRate(x float64) int64 {
	if math.IsNaN(x) || x <= 0 {
		return 0
	}
	return int64(math.Min(math.Round(x), math.MaxInt64))
}

// othersOnPath says whether other admitted jobs share the job's path.
func othersOnPath(p *pass) bool { return p.share != nil && p.share.jobsOnPath > 1 }

// waitForPathProbe keeps a job whose path is cold from probing while another job of
// the path probes it (or is elected to): the job holds no pods, says whom it waits
// for, and plans from the profile the prober teaches once it has planned. It reports
// whether the job waits.
func (r *TransferJobReconciler) waitForPathProbe(ctx context.Context, p *pass) (bool, error) {
	v := p.share
	self := p.job.Namespace + "/" + p.job.Name
	if v == nil || v.prober == "" || v.prober == self {
		return false, nil
	}
	msg := fmt.Sprintf("%s probes the path; this job plans from what it learns, without a probe of its own", v.prober)
	if c := meta.FindStatusCondition(p.st.Conditions, dtnflowv1alpha1.ConditionProbing); c == nil || c.Reason != ReasonWaitingForPathProbe {
		p.event(corev1.EventTypeNormal, ReasonWaitingForPathProbe, "Probe", msg)
	}
	p.condition(dtnflowv1alpha1.ConditionProbing, metav1.ConditionFalse, ReasonWaitingForPathProbe, msg)
	p.condition(dtnflowv1alpha1.ConditionPlanned, metav1.ConditionFalse, ReasonWaitingForPathProbe, msg)
	if pods := p.obs.agentPods(); len(pods) > 0 {
		return true, r.deleteAgents(ctx, p, pods, ReasonWaitingForPathProbe)
	}
	return true, nil
}

// learnFromProbe records a probe's findings in the path's PathProfile as soon as the
// job has planned from them, so that the path's other jobs plan from the profile
// instead of probing the path again.
func (r *TransferJobReconciler) learnFromProbe(ctx context.Context, p *pass) {
	if len(p.st.Samples) == 0 || p.st.Plan == nil || p.st.Plan.Model == nil {
		return
	}
	if err := r.learn(ctx, p); err != nil {
		logf.FromContext(ctx).Error(err, "Could not update the PathProfile from the probe", "pathProfile", PathProfileNameFor(p.job))
		p.event(corev1.EventTypeWarning, "PathProfileNotUpdated", "Learn", err.Error())
	}
}

// followShare re-plans a running job whose share moved by more than shareTolerance (or
// that starts or stops being held to one): OPT_B for the new share in Auto mode; the
// same shape paced to the new share in Fixed mode. The change is a recorded Replan
// whose reason says whether jobs arrived on the path or left it. A job re-plans for its
// share at most once per report interval: the first change is followed at once, and
// while jobs keep arriving or leaving (a burst of hundreds created together) the
// later ones are taken together an interval later, not each on its own.
func (r *TransferJobReconciler) followShare(p *pass) {
	want, have := p.share.planShare(), p.st.Plan.ShareBitsPerSecond
	if !shareMoved(have, want) {
		return
	}
	if last := lastShareReplan(p.st.Replans); last != nil {
		if wait := last.Time.Add(r.ReportInterval).Sub(p.now.Time); wait > 0 {
			p.requeue(wait)
			return
		}
	}
	reason := ReasonShareChanged
	before, known := r.sharing.getPlannedWith(p.job.UID)
	if prev := p.job.Status.Sharing; !known && prev != nil {
		before, known = prev.JobsOnPath, true
	}
	if now := p.st.Sharing; known && now != nil {
		switch {
		case now.JobsOnPath > before:
			reason = ReasonPathJobArrived
		case now.JobsOnPath < before:
			reason = ReasonPathJobLeft
		}
		r.sharing.setPlannedWith(p.job.UID, now.JobsOnPath)
	}
	msg := describeShare(p.st.Sharing, want)
	if p.job.Spec.Tuning.Mode == dtnflowv1alpha1.TuningFixed {
		next := p.st.Plan.DeepCopy()
		next.ShareBitsPerSecond = want
		stampPlanHash(next, p.job)
		p.replan(next, reason, msg+"; spec.tuning.mode is Fixed: the shape stays, the agents pace to the share")
		return
	}
	req := r.planRequest(p, nil)
	next, err := r.Planner.Plan(req)
	if err != nil {
		p.event(corev1.EventTypeWarning, ReasonPlanFailed, "Plan", fmt.Sprintf("%s, but no plan fits it: %v; the current plan goes on", msg, err))
		return
	}
	stampPlanHash(&next, p.job)
	p.replan(&next, reason, msg+"; "+describePlan(&next))
	r.rescale.forget(p.job.UID)
}

// lastShareReplan is the latest re-plan that followed a share, nil when none did.
func lastShareReplan(replans []dtnflowv1alpha1.Replan) *dtnflowv1alpha1.Replan {
	for i := len(replans) - 1; i >= 0; i-- {
		switch replans[i].Reason {
		case ReasonPathJobArrived, ReasonPathJobLeft, ReasonShareChanged:
			return &replans[i]
		}
	}
	return nil
}

// shareMoved says whether a plan made for share have should be made again for want.
func shareMoved(have, want int64) bool {
	if have == want {
		return false
	}
	if have == 0 || want == 0 {
		return true
	}
	return math.Abs(float64(want-have)) > shareTolerance*float64(have)
}

// describeShare writes a job's share for people.
func describeShare(s *dtnflowv1alpha1.TransferSharing, want int64) string {
	if s == nil {
		return "share changed"
	}
	jobs := fmt.Sprintf("%d job(s) on the path", s.JobsOnPath)
	if want == 0 {
		return fmt.Sprintf("%s: not held to a share (nobody else shares what bounds it); the path carries %s", jobs, formatRate(s.PathCapacityBitsPerSecond))
	}
	return fmt.Sprintf("%s: share %s of the path's %s at priority %d, bound by %s", jobs, formatRate(want), formatRate(s.PathCapacityBitsPerSecond), s.Priority, s.BoundBy)
}

// aggregateGain is how far the path's jobs must go above the highest aggregate the
// PathProfile holds before it is written again (a write per report of every job on a
// busy path would be most of the manager's writes).
const aggregateGain = 0.02

// learnAggregate records in the path's PathProfile the rate the path's jobs reach
// together when it is the highest measured (by aggregateGain), or the one recorded is
// no longer fresh: it is part of the capacity the path's shares divide.
func (r *TransferJobReconciler) learnAggregate(ctx context.Context, p *pass) {
	pp, prog := p.obs.profile, p.st.Progress
	if !p.newReport || pp == nil || prog == nil || prog.CurrentBitsPerSecond <= 0 || p.share == nil {
		return
	}
	agg := prog.CurrentBitsPerSecond + p.share.othersOnPath
	jobs := int32(1 + p.share.othersReporting)
	c := pp.Status.Capacity
	maxAge := planning.DefaultProfileMaxAge
	if pp.Spec.MaxAgeSeconds != nil {
		maxAge = time.Duration(*pp.Spec.MaxAgeSeconds) * time.Second
	}
	fresh := c != nil && c.HighestAggregateTime != nil && !p.now.After(c.HighestAggregateTime.Add(maxAge))
	if fresh && float64(agg) <= float64(c.HighestAggregateBitsPerSecond)*(1+aggregateGain) {
		return
	}
	profile := pp.DeepCopy()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		patch := client.MergeFromWithOptions(profile.DeepCopy(), client.MergeFromWithOptimisticLock{})
		if profile.Status.Capacity == nil {
			profile.Status.Capacity = &dtnflowv1alpha1.PathCapacityStatus{}
		}
		pc := profile.Status.Capacity
		if pc.HighestAggregateTime != nil && !p.now.After(pc.HighestAggregateTime.Add(maxAge)) && agg <= pc.HighestAggregateBitsPerSecond {
			return nil // another job of the path wrote a higher one meanwhile
		}
		now := p.now
		pc.HighestAggregateBitsPerSecond, pc.HighestAggregateJobs, pc.HighestAggregateTime = agg, jobs, &now
		err := r.Client.Status().Patch(ctx, profile, patch)
		if apierrors.IsConflict(err) {
			if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(profile), profile); gerr != nil {
				return gerr
			}
		}
		return err
	})
	if err != nil {
		logf.FromContext(ctx).Error(err, "Could not record the path's aggregate rate", "pathProfile", pp.Name)
	}
}
