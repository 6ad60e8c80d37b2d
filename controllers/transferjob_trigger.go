package controllers

import (
	"fmt"
	"time"

	"github.com/robfig/cron/v3"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// Recurring jobs (spec.trigger). A run is the ordinary life of a job, from Pending to
// Complete, PartiallyComplete or Failed; when it has ended and a trigger fires, the status is started
// afresh for the next run, keeping only what spans runs (the run count and history, the
// schedule's cursor, the manual trigger acted on, the missed count). The agents find the
// files verified by earlier runs in the receivers' journals — the journal is named after
// the source paths and destination, not the job or the run — so a run moves only what is
// missing or changed at the destination. A run never starts while another goes on.

// Reasons of the Scheduled condition and of run Events.
const (
	ReasonScheduled       = "Scheduled"
	ReasonInvalidSchedule = "InvalidSchedule"
	ReasonRunStarted      = "RunStarted"
	ReasonRunsMissed      = "RunsMissed"
)

// maxRuns is how many finished runs status.runs keeps (the API's bound).
const maxRuns = 16

// maxScheduleSteps bounds how many scheduled times one pass walks over (an "@every 1s"
// schedule after a long absence); the count of missed runs stops there.
const maxScheduleSteps = 100_000

// runStep is what one pass decides about a recurring job's runs.
type runStep struct {
	// start is the trigger of a run to start now; "" starts none.
	start dtnflowv1alpha1.RunTrigger
	// missed is how many scheduled times this pass skipped.
	missed int64
	// next is the schedule's next time (nil without a schedule).
	next *metav1.Time
	// due is the scheduled time a run starts for, when the schedule starts one.
	due *metav1.Time
	// manual is status.lastManualTrigger after the pass.
	manual string
	// scheduleErr says why spec.trigger.schedule cannot be used.
	scheduleErr error
}

// stepRuns decides, from the trigger, the status the pass computed and the time,
// whether a run starts and what the schedule skipped. A scheduled time that comes while
// a run goes on (or while the job is suspended) starts nothing; one that comes between
// runs starts one, and any earlier ones that passed unserved count as missed; a new
// manual value starts a run as soon as none goes on.
func stepRuns(trig *dtnflowv1alpha1.TransferTrigger, suspended bool, st *dtnflowv1alpha1.TransferJobStatus, now time.Time) runStep {
	out := runStep{manual: st.LastManualTrigger}
	idle := finished(st) && !suspended
	if trig.Schedule != "" {
		sched, err := cron.ParseStandard(trig.Schedule)
		if err != nil {
			out.scheduleErr = err
		} else {
			cursor := now // runTriggers sets LastRunTime before asking
			if st.LastRunTime != nil {
				cursor = st.LastRunTime.Time
			}
			next := sched.Next(cursor)
			if st.NextRunTime != nil {
				next = st.NextRunTime.Time
			}
			if !now.Before(next) {
				passed, after := timesUntil(sched, next, now)
				switch {
				case idle:
					out.start, out.missed = dtnflowv1alpha1.RunSchedule, passed-1
					due := apiTime(next)
					out.due = &due
				case !suspended:
					out.missed = passed
				}
				next = after
			}
			t := apiTime(next)
			out.next = &t
		}
	}
	if out.start == "" && idle && trig.Manual != "" && trig.Manual != st.LastManualTrigger {
		out.start = dtnflowv1alpha1.RunManual
	}
	if out.start != "" {
		out.manual = trig.Manual // a run that starts serves a manual request too
	}
	return out
}

// timesUntil counts the schedule's times from first (one of them) to now inclusive, and
// returns the first time after now. It stops counting at maxScheduleSteps.
func timesUntil(sched cron.Schedule, first, now time.Time) (int64, time.Time) {
	n, t := int64(0), first
	for !t.After(now) {
		n++
		if n == maxScheduleSteps {
			return n, sched.Next(now)
		}
		t = sched.Next(t)
	}
	return n, t
}

// runRecord is the history entry of a run that has just finished.
func runRecord(st *dtnflowv1alpha1.TransferJobStatus, now metav1.Time) dtnflowv1alpha1.TransferRun {
	rec := dtnflowv1alpha1.TransferRun{Number: max(st.Run, 1), Trigger: st.RunTrigger, Result: resultOf(st), CompletionTime: now}
	if rec.Trigger == "" {
		rec.Trigger = dtnflowv1alpha1.RunCreated
	}
	cond := meta.FindStatusCondition(st.Conditions, string(rec.Result)) // the condition named as the result
	if cond != nil {
		rec.Reason, rec.Message = contract.Cut(cond.Reason, 64), contract.Cut(cond.Message, 1024)
	}
	switch {
	case st.LastRunTime != nil:
		rec.StartTime = *st.LastRunTime
	case st.StartTime != nil:
		rec.StartTime = *st.StartTime
	default:
		rec.StartTime = now
	}
	if st.CompletionTime != nil {
		rec.CompletionTime = *st.CompletionTime
	}
	if p := st.Progress; p != nil {
		rec.FilesDone, rec.BytesDone = max(p.FilesDone, 0), max(p.BytesDone, 0)
	}
	return rec
}

// appendRun adds a finished run to the history, keeping the newest maxRuns.
func appendRun(runs []dtnflowv1alpha1.TransferRun, r dtnflowv1alpha1.TransferRun) []dtnflowv1alpha1.TransferRun {
	runs = append(runs, r)
	if len(runs) > maxRuns {
		runs = append([]dtnflowv1alpha1.TransferRun(nil), runs[len(runs)-maxRuns:]...)
	}
	return runs
}

// nextRunStatus is the status a new run starts from: what spans runs, nothing else.
func nextRunStatus(prev *dtnflowv1alpha1.TransferJobStatus, trigger dtnflowv1alpha1.RunTrigger, now metav1.Time) dtnflowv1alpha1.TransferJobStatus {
	next := dtnflowv1alpha1.TransferJobStatus{
		ObservedGeneration: prev.ObservedGeneration,
		Run:                prev.Run + 1,
		RunTrigger:         trigger,
		LastRunTime:        &now,
		NextRunTime:        prev.NextRunTime,
		LastManualTrigger:  prev.LastManualTrigger,
		MissedRuns:         prev.MissedRuns,
		Runs:               prev.Runs,
	}
	if c := meta.FindStatusCondition(prev.Conditions, dtnflowv1alpha1.ConditionScheduled); c != nil {
		next.Conditions = []metav1.Condition{*c}
	}
	return next
}

// runTriggers is the pass's step for a recurring job; Reconcile calls it after
// reconcile, before the status write. It numbers the first run, records a run that has
// just finished, and starts the next one when a trigger fires.
func (r *TransferJobReconciler) runTriggers(p *pass) {
	trig := p.job.Spec.Trigger
	if trig == nil {
		meta.RemoveStatusCondition(&p.st.Conditions, dtnflowv1alpha1.ConditionScheduled)
		p.st.NextRunTime = nil
		return
	}
	if p.st.Run == 0 { // the first run started with the job
		p.st.Run, p.st.RunTrigger, p.st.LastManualTrigger = 1, dtnflowv1alpha1.RunCreated, trig.Manual
		p.st.LastRunTime = p.st.StartTime
		if p.st.LastRunTime == nil {
			p.st.LastRunTime = &p.now
		}
	}
	justFinished := finished(p.st) && !finished(&p.job.Status)
	if justFinished {
		p.st.Runs = appendRun(p.st.Runs, runRecord(p.st, p.now))
	}
	step := stepRuns(trig, p.job.Spec.Suspend, p.st, p.now.Time)
	if justFinished && step.start != "" {
		// The run's end is written first, so that it is seen; the next pass starts the
		// next run: the schedule's cursor stays on the time due, the manual value untaken.
		if step.start == dtnflowv1alpha1.RunSchedule {
			step.next, step.missed = step.due, 0
		}
		step.start, step.manual = "", p.st.LastManualTrigger
		p.requeue(time.Millisecond)
	}
	switch {
	case step.scheduleErr != nil:
		msg := fmt.Sprintf("spec.trigger.schedule %q is not a cron schedule: %v", trig.Schedule, step.scheduleErr)
		if c := meta.FindStatusCondition(p.st.Conditions, dtnflowv1alpha1.ConditionScheduled); c == nil || c.Reason != ReasonInvalidSchedule {
			p.event(corev1.EventTypeWarning, ReasonInvalidSchedule, "Schedule", msg)
		}
		p.condition(dtnflowv1alpha1.ConditionScheduled, metav1.ConditionFalse, ReasonInvalidSchedule, msg)
	case step.next != nil:
		p.condition(dtnflowv1alpha1.ConditionScheduled, metav1.ConditionTrue, ReasonScheduled,
			fmt.Sprintf("spec.trigger.schedule %q: the next run starts at %s", trig.Schedule, step.next.UTC().Format(time.RFC3339)))
		p.requeue(step.next.Sub(p.now.Time))
	default:
		meta.RemoveStatusCondition(&p.st.Conditions, dtnflowv1alpha1.ConditionScheduled)
	}
	p.st.NextRunTime = step.next
	if step.missed > 0 {
		p.st.MissedRuns += step.missed
		p.missedRuns += step.missed
		p.event(corev1.EventTypeWarning, ReasonRunsMissed, "Schedule",
			fmt.Sprintf("%d scheduled run(s) of spec.trigger.schedule skipped: run %d was still going (runs never overlap) or the controller was away", step.missed, p.st.Run))
	}
	p.st.LastManualTrigger = step.manual
	if step.start == "" {
		return
	}
	*p.st = nextRunStatus(p.st, step.start, p.now)
	p.runsStarted = append(p.runsStarted, string(step.start))
	p.event(corev1.EventTypeNormal, ReasonRunStarted, "Run", fmt.Sprintf("Run %d started (%s); files verified by earlier runs are not sent again", p.st.Run, step.start))
	p.requeue(time.Millisecond) // the next pass begins it
}
