package controllers

import (
	"sort"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/planning"
	"github.com/dtnflow/dtnflow/optimizer"
)

// Planner is everything the TransferJob reconciler asks of the optimizer. The
// reconciler only gathers observations and applies answers; every decision about
// probing, plans and rescaling is the planner's. NewPlanner is the one the manager
// uses: controllers/planning, the pure adapter over optimizer/.
type Planner interface {
	// ProbeDirective says how to probe the job's path, or nil when no probe is needed
	// (Fixed mode, or a fresh profile that already covers the path).
	ProbeDirective(in ProbeRequest) *contract.ProbeDirective

	// ProbeTransferDirective is the directive of a cold job before its plan: transfer
	// at once on one stripe with one stream and probe as the probe directive says on
	// the job's own data (generation left 0 for the caller).
	ProbeTransferDirective(job *dtnflowv1alpha1.TransferJob, probe *contract.ProbeDirective) contract.Directive

	// Plan plans the job from what is known.
	Plan(in PlanRequest) (dtnflowv1alpha1.TransferPlan, error)

	// TransferDirective is the transfer directive that carries a plan to the agents
	// (generation left 0 for the caller).
	TransferDirective(job *dtnflowv1alpha1.TransferJob, plan *dtnflowv1alpha1.TransferPlan) contract.Directive

	// Rescale runs one round of the rescale policy for a running job. state is the
	// job's policy memory (nil the first time, or after a restart); the returned state
	// replaces it. A nil plan in the decision means hold.
	Rescale(state any, in RescaleRequest) (RescaleDecision, any)

	// RescaleStateAfterPlan is the rescale policy's memory of a job whose first plan
	// was made at now: the plan counts as a change made then, so that the policy lets
	// it settle and cools down before judging it (the reports of the probe on the
	// job's data, and of the plan's stripes starting, say nothing of the plan yet) —
	// unless the path moves away from the plan's predicted rate meanwhile. baseRTT is
	// the least round trip the probe's samples saw (0: unknown).
	RescaleStateAfterPlan(now time.Time, plan *dtnflowv1alpha1.TransferPlan, baseRTT time.Duration) any

	// Learn is the PathProfile status after a job finished on the path.
	Learn(profile *dtnflowv1alpha1.PathProfile, job *dtnflowv1alpha1.TransferJob, now time.Time) dtnflowv1alpha1.PathProfileStatus
}

// PlanNode is one node a side may use, as the planner sees it.
type PlanNode = planning.Node

// ProbeRequest is what a probe is planned from.
type ProbeRequest struct {
	Job     *dtnflowv1alpha1.TransferJob
	Profile *dtnflowv1alpha1.PathProfile
	Now     time.Time
	// NICBitsPerSecond is the smaller NIC capacity of the two sides.
	NICBitsPerSecond int64
}

// PlanRequest is what a plan is made from.
type PlanRequest struct {
	Job     *dtnflowv1alpha1.TransferJob
	Samples []dtnflowv1alpha1.ProbeSample
	// Profile is the path's PathProfile (fresh or not; the planner decides).
	Profile                       *dtnflowv1alpha1.PathProfile
	SourceNodes, DestinationNodes []PlanNode
	// ExternalDestination is set when the destination is an agent outside the
	// cluster: DestinationNodes is then empty and the destination side does not bind.
	ExternalDestination bool
	Dataset             *contract.Dataset
	// RTT is the path's round-trip time as the stripes measure it; 0 when unknown.
	RTT time.Duration
	Now time.Time
	// ShareBitsPerSecond is the job's share when it is held to it; 0 when not.
	ShareBitsPerSecond int64
	// TimeLeft is how long the data left takes at the job's current rate (0: unknown).
	TimeLeft time.Duration
}

// RescaleRequest is one round of the rescale policy.
type RescaleRequest struct {
	Job                           *dtnflowv1alpha1.TransferJob
	Plan                          *dtnflowv1alpha1.TransferPlan
	Report                        *contract.Report
	SourceNodes, DestinationNodes []PlanNode
	ExternalDestination           bool
	Now                           time.Time
	// ShareBitsPerSecond is the job's share when it is held to it; 0 when not.
	ShareBitsPerSecond int64
}

// RescaleDecision is the policy's answer: a new plan (nil to hold) and why.
type RescaleDecision struct {
	Plan    *dtnflowv1alpha1.TransferPlan
	Reason  string
	Message string
}

// NewPlanner returns the planner over controllers/planning.
func NewPlanner() Planner { return planningPlanner{} }

// planningPlanner maps the Planner interface onto controllers/planning one for one.
type planningPlanner struct{}

func (planningPlanner) ProbeDirective(in ProbeRequest) *contract.ProbeDirective {
	return planning.ProbeDirective(planning.ProbeInput{Tuning: in.Job.Spec.Tuning, Profile: in.Profile, Now: in.Now, NICBitsPerSecond: in.NICBitsPerSecond})
}

func (planningPlanner) ProbeTransferDirective(job *dtnflowv1alpha1.TransferJob, probe *contract.ProbeDirective) contract.Directive {
	return planning.ProbeTransferDirective(probe, job.Spec.Tuning.Limits)
}

func (planningPlanner) Plan(in PlanRequest) (dtnflowv1alpha1.TransferPlan, error) {
	var profile *dtnflowv1alpha1.PathProfileStatus
	if planning.Fresh(in.Profile, in.Now) {
		profile = &in.Profile.Status
	}
	return planning.Plan(planning.Input{Tuning: in.Job.Spec.Tuning, Samples: in.Samples, Profile: profile,
		SourceNodes: in.SourceNodes, DestinationNodes: in.DestinationNodes, ExternalDestination: in.ExternalDestination,
		Dataset: in.Dataset, RTT: in.RTT, ShareBitsPerSecond: in.ShareBitsPerSecond, TimeLeft: in.TimeLeft,
		DataPlane: dataPlane(jobOptions(in.Job))})
}

func (planningPlanner) TransferDirective(job *dtnflowv1alpha1.TransferJob, plan *dtnflowv1alpha1.TransferPlan) contract.Directive {
	return planning.Directive(*plan, job.Spec.Tuning.Limits)
}

func (planningPlanner) Rescale(state any, in RescaleRequest) (RescaleDecision, any) {
	st, _ := state.(*planning.RescaleState)
	d, next := planning.Rescale(st, planning.RescaleInput{Tuning: in.Job.Spec.Tuning, Plan: *in.Plan, Report: *in.Report,
		SourceNodes: in.SourceNodes, DestinationNodes: in.DestinationNodes, ExternalDestination: in.ExternalDestination, Now: in.Now,
		ShareBitsPerSecond: in.ShareBitsPerSecond})
	return RescaleDecision{Plan: d.Plan, Reason: d.Reason, Message: d.Message}, next
}

func (planningPlanner) RescaleStateAfterPlan(now time.Time, plan *dtnflowv1alpha1.TransferPlan, baseRTT time.Duration) any {
	st := optimizer.AfterPlan(now, float64(plan.PredictedBitsPerSecond), float64(plan.PathBitsPerSecond), baseRTT)
	return &st
}

func (planningPlanner) Learn(profile *dtnflowv1alpha1.PathProfile, job *dtnflowv1alpha1.TransferJob, now time.Time) dtnflowv1alpha1.PathProfileStatus {
	var achieved int64
	if job.Status.Progress != nil {
		achieved = job.Status.Progress.AverageBitsPerSecond
	}
	return planning.Learn(profile.Status, job.Namespace+"/"+job.Name, job.Status.Plan, job.Status.Samples, achieved, now)
}

// rttOf is the median round-trip time the report's connected stripes measured; 0 when
// none did.
func rttOf(rep *contract.Report) time.Duration {
	if rep == nil {
		return 0
	}
	var rtts []int64
	for _, s := range rep.Stripes {
		if s.Connected && s.RTTMicros > 0 {
			rtts = append(rtts, s.RTTMicros)
		}
	}
	if len(rtts) == 0 {
		return 0
	}
	sort.Slice(rtts, func(i, j int) bool { return rtts[i] < rtts[j] })
	return time.Duration(rtts[len(rtts)/2]) * time.Microsecond
}

// dataPlane is what the job's agents do to each byte, for the CPU priors.
func dataPlane(o contract.JobOptions) optimizer.DataPlane {
	return optimizer.DataPlane{Verify: o.Verify, Encrypted: o.InFlight == string(dtnflowv1alpha1.InFlightEncrypted)}
}
