package controllers

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// TestRunStart: a job's timings are measured from the manager's first sight of the run
// when that is the better instant — the creation timestamp has whole seconds, and the
// demo's "first byte 2.1 s after creation" was 7 s from kubectl apply to Complete where
// Complete read 7.8 s — and from the creation when the manager saw the job late.
func TestRunStart(t *testing.T) {
	created := time.Date(2026, 11, 25, 10, 0, 7, 0, time.UTC) // the API's truncated second
	seen := func(d time.Duration, run int64) *dtnflowv1alpha1.TransferJobStatus {
		at := metav1.NewMicroTime(created.Add(d))
		return &dtnflowv1alpha1.TransferJobStatus{Run: run, Timings: &dtnflowv1alpha1.TransferTimings{FirstSeenTime: &at}}
	}
	tests := map[string]struct {
		st   *dtnflowv1alpha1.TransferJobStatus
		want time.Time
	}{
		"no sight recorded (an older manager)":          {&dtnflowv1alpha1.TransferJobStatus{}, created},
		"seen within the creation's second":             {seen(870*time.Millisecond, 0), created.Add(870 * time.Millisecond)},
		"the first run of a recurring job, as promptly": {seen(40*time.Millisecond, 1), created.Add(40 * time.Millisecond)},
		"seen a second or more later: the wait counts":  {seen(1500*time.Millisecond, 0), created},
		"seen before the creation (clocks apart)":       {seen(-300*time.Millisecond, 0), created},
		"a later run starts when it is seen":            {seen(3*time.Hour, 2), created.Add(3 * time.Hour)},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := runStart(created, tc.st); !got.Equal(tc.want) {
				t.Errorf("runStart = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestFirstSightAndTimings: the first pass of a run records when it saw the run, to the
// microsecond, once; a milestone is then measured from it; a finished job or one with
// timings already keeps what it has.
func TestFirstSightAndTimings(t *testing.T) {
	created := time.Date(2026, 11, 25, 10, 0, 7, 0, time.UTC)
	job := &dtnflowv1alpha1.TransferJob{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
	firstPass := created.Add(612345678 * time.Nanosecond)
	p := newPass(job, firstPass)
	p.firstSight()
	if p.st.Timings == nil || p.st.Timings.FirstSeenTime == nil || !p.st.Timings.FirstSeenTime.Time.Equal(created.Add(612345*time.Microsecond)) {
		t.Fatalf("timings %+v: want the first sight at %v, to the microsecond", p.st.Timings, created.Add(612345*time.Microsecond))
	}
	job.Status = *p.st
	later := newPass(job, created.Add(5*time.Second))
	later.firstSight()
	if !later.st.Timings.FirstSeenTime.Equal(p.st.Timings.FirstSeenTime) {
		t.Errorf("first sight moved to %v", later.st.Timings.FirstSeenTime)
	}
	later.timing(func(t *dtnflowv1alpha1.TransferTimings) **int64 { return &t.FirstByteMilliseconds }, created.Add(1912345*time.Microsecond))
	if got := later.st.Timings.FirstByteMilliseconds; got == nil || *got != 1300 {
		t.Errorf("first byte %v ms, want 1300 (1.912 s after the creation's second, 1.3 s after the first sight)", got)
	}

	done := &dtnflowv1alpha1.TransferJob{ObjectMeta: job.ObjectMeta}
	meta.SetStatusCondition(&done.Status.Conditions, metav1.Condition{Type: dtnflowv1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: "Verified"})
	d := newPass(done, created.Add(time.Hour))
	d.firstSight()
	if d.st.Timings != nil {
		t.Errorf("a finished job got timings %+v", d.st.Timings)
	}
	old := &dtnflowv1alpha1.TransferJob{ObjectMeta: job.ObjectMeta, Status: dtnflowv1alpha1.TransferJobStatus{Timings: &dtnflowv1alpha1.TransferTimings{FirstByteMilliseconds: new(int64(1200))}}}
	o := newPass(old, created.Add(time.Minute))
	o.firstSight()
	if o.st.Timings.FirstSeenTime != nil {
		t.Error("a job with timings from a manager that recorded no sight got one: its other milestones would be measured from another instant")
	}
}
