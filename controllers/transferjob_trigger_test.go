package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/robfig/cron/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

var day0 = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

func hm(h, m int) time.Time {
	return day0.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute)
}

func mt(t time.Time) *metav1.Time { v := metav1.NewTime(t); return &v }

func TestStepRuns(t *testing.T) {
	running := func() *dtnflowv1alpha1.TransferJobStatus {
		return &dtnflowv1alpha1.TransferJobStatus{Run: 2, LastRunTime: mt(hm(6, 0)), NextRunTime: mt(hm(12, 0)),
			Conditions: []metav1.Condition{{Type: dtnflowv1alpha1.ConditionTransferring, Status: metav1.ConditionTrue}}}
	}
	idle := func() *dtnflowv1alpha1.TransferJobStatus {
		st := running()
		st.Conditions = []metav1.Condition{{Type: dtnflowv1alpha1.ConditionComplete, Status: metav1.ConditionTrue}}
		return st
	}
	every6h := &dtnflowv1alpha1.TransferTrigger{Schedule: "0 */6 * * *"}
	tests := map[string]struct {
		trig      *dtnflowv1alpha1.TransferTrigger
		st        *dtnflowv1alpha1.TransferJobStatus
		suspended bool
		now       time.Time
		start     dtnflowv1alpha1.RunTrigger
		missed    int64
		next      time.Time // zero: no schedule
		manual    string
	}{
		"idle, not yet due":                 {every6h, idle(), false, hm(11, 59), "", 0, hm(12, 0), ""},
		"idle, due":                         {every6h, idle(), false, hm(12, 0), dtnflowv1alpha1.RunSchedule, 0, hm(18, 0), ""},
		"idle, due three times over":        {every6h, idle(), false, hm(25, 0), dtnflowv1alpha1.RunSchedule, 2, hm(30, 0), ""},
		"running, due":                      {every6h, running(), false, hm(12, 1), "", 1, hm(18, 0), ""},
		"running, due twice":                {every6h, running(), false, hm(18, 0), "", 2, hm(24, 0), ""},
		"suspended, due: skipped uncounted": {every6h, idle(), true, hm(12, 0), "", 0, hm(18, 0), ""},
		"no cursor yet: from the last run":  {every6h, &dtnflowv1alpha1.TransferJobStatus{Run: 1, LastRunTime: mt(hm(0, 10))}, false, hm(1, 0), "", 0, hm(6, 0), ""},
		"descriptor":                        {&dtnflowv1alpha1.TransferTrigger{Schedule: "@every 90m"}, idle(), false, hm(12, 0), dtnflowv1alpha1.RunSchedule, 0, hm(13, 30), ""},
		"time zone":                         {&dtnflowv1alpha1.TransferTrigger{Schedule: "CRON_TZ=Europe/Paris 0 13 * * *"}, &dtnflowv1alpha1.TransferJobStatus{Run: 1, LastRunTime: mt(hm(0, 10))}, false, hm(1, 0), "", 0, hm(12, 0), ""},
		"manual, idle":                      {&dtnflowv1alpha1.TransferTrigger{Manual: "a"}, idle(), false, hm(13, 0), dtnflowv1alpha1.RunManual, 0, time.Time{}, "a"},
		"manual, running: waits":            {&dtnflowv1alpha1.TransferTrigger{Manual: "a"}, running(), false, hm(13, 0), "", 0, time.Time{}, ""},
		"manual, suspended: waits":          {&dtnflowv1alpha1.TransferTrigger{Manual: "a"}, idle(), true, hm(13, 0), "", 0, time.Time{}, ""},
		"manual, already served":            {&dtnflowv1alpha1.TransferTrigger{Manual: "a"}, func() *dtnflowv1alpha1.TransferJobStatus { s := idle(); s.LastManualTrigger = "a"; return s }(), false, hm(13, 0), "", 0, time.Time{}, "a"},
		"both due: the schedule serves the manual request": {&dtnflowv1alpha1.TransferTrigger{Schedule: "0 */6 * * *", Manual: "b"}, idle(), false, hm(12, 0), dtnflowv1alpha1.RunSchedule, 0, hm(18, 0), "b"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := stepRuns(tc.trig, tc.suspended, tc.st, tc.now)
			if got.scheduleErr != nil {
				t.Fatal(got.scheduleErr)
			}
			if got.start != tc.start || got.missed != tc.missed || got.manual != tc.manual {
				t.Errorf("start %q missed %d manual %q; want %q, %d, %q", got.start, got.missed, got.manual, tc.start, tc.missed, tc.manual)
			}
			switch {
			case tc.next.IsZero() && got.next != nil:
				t.Errorf("next %v without a schedule", got.next)
			case !tc.next.IsZero() && (got.next == nil || !got.next.Time.Equal(tc.next)):
				t.Errorf("next %v, want %v", got.next, tc.next)
			}
		})
	}
	if got := stepRuns(&dtnflowv1alpha1.TransferTrigger{Schedule: "61 * * * *"}, false, idle(), hm(12, 0)); got.scheduleErr == nil {
		t.Errorf("an invalid schedule parsed")
	}
}

func TestTimesUntilIsBounded(t *testing.T) {
	sched, err := cron.ParseStandard("@every 1s")
	if err != nil {
		t.Fatal(err)
	}
	n, next := timesUntil(sched, hm(0, 0), hm(24*365, 0))
	if n != maxScheduleSteps || !next.After(hm(24*365, 0)) {
		t.Errorf("a year of seconds: %d counted, next %v", n, next)
	}
	n, next = timesUntil(sched, hm(0, 0), hm(0, 0).Add(9*time.Second))
	if n != 10 || !next.Equal(hm(0, 0).Add(10*time.Second)) {
		t.Errorf("ten seconds: %d counted, next %v", n, next)
	}
}

// simJob plays a recurring job through passes of the reconciler's run step, with the
// reconcile in between reduced to what matters here: a run is transferring until the
// simulation ends it.
type simJob struct {
	t   *testing.T
	r   *TransferJobReconciler
	job *dtnflowv1alpha1.TransferJob
	log []string
}

// pass runs one pass at now; finish ends the current run first (Complete or Failed, as
// reconcile would when the coordinator reports it).
func (s *simJob) pass(now time.Time, finish string) {
	s.t.Helper()
	prevRun := s.job.Status.Run
	wasIdle := finished(&s.job.Status)
	p := newPass(s.job, now)
	switch finish {
	case "Complete":
		p.condition(dtnflowv1alpha1.ConditionTransferring, metav1.ConditionFalse, ReasonComplete, "")
		p.condition(dtnflowv1alpha1.ConditionComplete, metav1.ConditionTrue, ReasonVerified, "40 files verified")
		p.st.CompletionTime = &p.now
		p.st.Progress = &dtnflowv1alpha1.TransferProgress{FilesDone: 40, BytesDone: 40 << 30}
	case "Failed":
		p.condition(dtnflowv1alpha1.ConditionFailed, metav1.ConditionTrue, ReasonTransferFailed, "disk full")
		p.st.CompletionTime = &p.now
	case "":
		if !finished(p.st) && p.st.StartTime == nil {
			p.st.StartTime = &p.now
			p.condition(dtnflowv1alpha1.ConditionTransferring, metav1.ConditionTrue, ReasonTransferring, "")
		}
	}
	s.r.runTriggers(p)
	// Invariants of every pass: a run starts only from an idle job that was idle
	// before this pass (runs never overlap, and a run's end is written before the next
	// begins); numbers go up by one; the history is bounded and ordered.
	if p.st.Run != prevRun && prevRun != 0 {
		if p.st.Run != prevRun+1 || !wasIdle {
			s.t.Fatalf("%s: run %d → %d from a job that was idle=%v", now.Format(time.DateTime), prevRun, p.st.Run, wasIdle)
		}
		s.log = append(s.log, fmt.Sprintf("%s run %d started (%s)", now.Format("15:04"), p.st.Run, p.st.RunTrigger))
	}
	if len(p.st.Runs) > maxRuns {
		s.t.Fatalf("%d runs kept", len(p.st.Runs))
	}
	for i := 1; i < len(p.st.Runs); i++ {
		if p.st.Runs[i].Number <= p.st.Runs[i-1].Number {
			s.t.Fatalf("history out of order: %+v", p.st.Runs)
		}
	}
	s.job.Status = *p.st
}

// TestRunSequence follows a job scheduled every six hours through two days: a long run
// that misses a time, manual triggers while idle and while running, a failed run, a
// suspension, and a controller away for most of a day.
func TestRunSequence(t *testing.T) {
	job := &dtnflowv1alpha1.TransferJob{ObjectMeta: metav1.ObjectMeta{Namespace: "physics", Name: "nightly", CreationTimestamp: metav1.NewTime(hm(0, 10))},
		Spec: dtnflowv1alpha1.TransferJobSpec{Trigger: &dtnflowv1alpha1.TransferTrigger{Schedule: "0 */6 * * *"}}}
	s := &simJob{t: t, r: &TransferJobReconciler{}, job: job}
	s.pass(hm(0, 10), "")         // run 1 starts with the job
	s.pass(hm(1, 10), "Complete") // and ends
	s.pass(hm(5, 59), "")         // nothing due
	s.pass(hm(6, 0), "")          // run 2, scheduled
	s.pass(hm(6, 1), "")
	s.pass(hm(12, 0), "")         // due while run 2 goes on: missed
	s.pass(hm(13, 0), "Complete") // run 2 took 7 h
	job.Spec.Trigger.Manual = "first"
	s.pass(hm(14, 0), "") // run 3, manual
	s.pass(hm(14, 1), "")
	job.Spec.Trigger.Manual = "second"
	s.pass(hm(14, 30), "")        // asked while run 3 goes on: waits
	s.pass(hm(15, 0), "Failed")   // run 3 fails; its end is written first
	s.pass(hm(15, 0), "")         // run 4, the waiting manual request
	s.pass(hm(15, 1), "")         //
	s.pass(hm(16, 0), "Complete") // run 4 ends
	job.Spec.Suspend = true
	s.pass(hm(18, 0), "") // due while suspended: skipped, not counted
	job.Spec.Suspend = false
	s.pass(hm(18, 5), "")
	s.pass(hm(24+13, 0), "") // the controller was away: 00:00, 06:00 and 12:00 passed; one run starts, two missed
	s.pass(hm(24+13, 1), "")
	s.pass(hm(24+14, 0), "Complete")

	want := []string{"06:00 run 2 started (Schedule)", "14:00 run 3 started (Manual)", "15:00 run 4 started (Manual)", "13:00 run 5 started (Schedule)"}
	if strings.Join(s.log, "\n") != strings.Join(want, "\n") {
		t.Errorf("runs:\n%s\nwant:\n%s", strings.Join(s.log, "\n"), strings.Join(want, "\n"))
	}
	st := job.Status
	if st.MissedRuns != 3 {
		t.Errorf("missed runs %d, want 3 (12:00 on day one; 00:00 and 06:00 on day two)", st.MissedRuns)
	}
	var results []string
	for _, r := range st.Runs {
		results = append(results, fmt.Sprintf("%d %s %s %s", r.Number, r.Trigger, r.Result, r.CompletionTime.Sub(r.StartTime.Time)))
	}
	wantResults := []string{"1 Created Complete 1h0m0s", "2 Schedule Complete 7h0m0s", "3 Manual Failed 1h0m0s", "4 Manual Complete 1h0m0s", "5 Schedule Complete 1h0m0s"}
	if strings.Join(results, "; ") != strings.Join(wantResults, "; ") {
		t.Errorf("history: %s\nwant:    %s", strings.Join(results, "; "), strings.Join(wantResults, "; "))
	}
	if !st.NextRunTime.Time.Equal(hm(24+18, 0)) || st.LastRunTime == nil || !st.LastRunTime.Time.Equal(hm(24+13, 0)) || st.LastManualTrigger != "second" {
		t.Errorf("next %v, last %v, manual %q", st.NextRunTime, st.LastRunTime, st.LastManualTrigger)
	}
	if c := findCondition(st.Conditions, dtnflowv1alpha1.ConditionScheduled); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "2026-03-02T18:00:00Z") {
		t.Errorf("Scheduled condition %+v", c)
	}
}

func TestRunHistoryBounded(t *testing.T) {
	var runs []dtnflowv1alpha1.TransferRun
	for i := int64(1); i <= 40; i++ {
		runs = appendRun(runs, dtnflowv1alpha1.TransferRun{Number: i})
	}
	if len(runs) != maxRuns || runs[0].Number != 40-maxRuns+1 || runs[len(runs)-1].Number != 40 {
		t.Errorf("kept %d runs, %d to %d", len(runs), runs[0].Number, runs[len(runs)-1].Number)
	}
}

func TestInvalidScheduleStalls(t *testing.T) {
	job := &dtnflowv1alpha1.TransferJob{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(hm(0, 0))},
		Spec: dtnflowv1alpha1.TransferJobSpec{Trigger: &dtnflowv1alpha1.TransferTrigger{Schedule: "0 25 * * *"}}}
	p := newPass(job, hm(1, 0))
	(&TransferJobReconciler{}).runTriggers(p)
	setSummaryConditions(p.st, 1, p.now)
	c := findCondition(p.st.Conditions, dtnflowv1alpha1.ConditionStalled)
	if c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonInvalidSchedule || !strings.Contains(c.Message, "spec.trigger.schedule") {
		t.Errorf("Stalled = %+v", c)
	}
	if len(p.events) != 1 || p.events[0].Reason != ReasonInvalidSchedule {
		t.Errorf("events %+v", p.events)
	}
}
