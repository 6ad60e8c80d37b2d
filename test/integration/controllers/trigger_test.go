package controllers

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
)

// finishRun plays the coordinator reporting the current run Complete, and waits for the
// run to be recorded.
func finishRun(t *testing.T, clk interface{ Now() time.Time }, job *dtnflowv1alpha1.TransferJob, run int64) {
	t.Helper()
	startTransfer(t, job)
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		if j.Status.Run == run && j.Status.State != dtnflowv1alpha1.StateComplete {
			report(g, job, contract.Report{Generation: directive(g, job).Generation, Phase: contract.PhaseComplete, Time: clk.Now(),
				BytesDone: 40 << 30, BytesTotal: 40 << 30, FilesDone: 40, FilesTotal: 40})
		}
		j = getJob(g, job)
		g.Expect(j.Status.Run).To(Equal(run))
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateComplete))
		g.Expect(j.Status.Runs).To(HaveLen(int(run)))
		g.Expect(j.Status.Runs[run-1].Number).To(Equal(run))
		g.Expect(j.Status.Runs[run-1].Result).To(Equal(dtnflowv1alpha1.RunComplete))
		g.Expect(listAgents(g, job).all).To(BeEmpty())
	})
}

// TestRecurringJob runs a job scheduled every six hours on the fake clock: its first
// run, a manual run, a scheduled run, and a scheduled time that finds a run still going.
func TestRecurringJob(t *testing.T) {
	clk := newClock() // 2026-03-01 12:00 UTC
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	spec := jobSpec(src, dst)
	spec.Tuning = dtnflowv1alpha1.TransferTuning{Mode: dtnflowv1alpha1.TuningFixed, Fixed: &dtnflowv1alpha1.FixedTuning{Nodes: 1, StripesPerNode: 1, StreamsPerStripe: 4, Concurrency: 2, Pipelining: 8}}
	spec.Trigger = &dtnflowv1alpha1.TransferTrigger{Schedule: "0 */6 * * *"}
	job := createJob(t, ns, "sync", spec)
	at18 := time.Date(2026, 3, 1, 18, 0, 0, 0, time.UTC)

	// Run 1 starts with the job; the schedule says when the next comes.
	finishRun(t, clk, job, 1)
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(j.Status.NextRunTime).NotTo(BeNil())
		g.Expect(j.Status.NextRunTime.Time).To(BeTemporally("==", at18))
		g.Expect(reason(j, dtnflowv1alpha1.ConditionScheduled)).To(Equal(controllers.ReasonScheduled))
		g.Expect(j.Status.Runs[0].Trigger).To(Equal(dtnflowv1alpha1.RunCreated))
	})

	// A manual trigger: run 2.
	clk.Step(time.Hour)
	updateJob(t, job, func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Trigger.Manual = "now" })
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(j.Status.Run).To(Equal(int64(2)))
		g.Expect(j.Status.RunTrigger).To(Equal(dtnflowv1alpha1.RunManual))
		g.Expect(j.Status.LastManualTrigger).To(Equal("now"))
		g.Expect(j.Status.State).NotTo(Equal(dtnflowv1alpha1.StateComplete))
		g.Expect(listAgents(g, job).coordinator).NotTo(BeNil(), "the new run's coordinator")
	})
	finishRun(t, clk, job, 2)

	// 18:00: the schedule starts run 3.
	clk.SetTime(at18)
	eventually(t, func(g Gomega) {
		poke(g, job) // the manager waits for 18:00 on the real clock
		j := getJob(g, job)
		g.Expect(j.Status.Run).To(Equal(int64(3)))
		g.Expect(j.Status.RunTrigger).To(Equal(dtnflowv1alpha1.RunSchedule))
		g.Expect(j.Status.NextRunTime.Time).To(BeTemporally("==", at18.Add(6*time.Hour)))
	})
	startTransfer(t, job)

	// Midnight comes while run 3 goes on: skipped and counted, run 3 untouched.
	clk.SetTime(at18.Add(6*time.Hour + time.Minute))
	eventually(t, func(g Gomega) {
		poke(g, job)
		j := getJob(g, job)
		g.Expect(j.Status.MissedRuns).To(Equal(int64(1)))
		g.Expect(j.Status.Run).To(Equal(int64(3)))
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateTransferring))
		g.Expect(j.Status.NextRunTime.Time).To(BeTemporally("==", at18.Add(12*time.Hour)))
	})
	finishRun(t, clk, job, 3)
	consistently(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(j.Status.Run).To(Equal(int64(3)), "a missed time starts no run after the fact")
		g.Expect(j.Status.MissedRuns).To(Equal(int64(1)))
	})
	// The metrics (process-wide: other tests' jobs count too) saw the runs, the missed
	// time and how long each run took.
	eventually(t, func(g Gomega) {
		m := gatherMetrics(g)
		g.Expect(m["dtnflow_transferjob_runs_total"]["trigger=Manual"]).To(BeNumerically(">=", 1))
		g.Expect(m["dtnflow_transferjob_runs_total"]["trigger=Schedule"]).To(BeNumerically(">=", 1))
		g.Expect(m["dtnflow_transferjob_missed_runs_total"][""]).To(BeNumerically(">=", 1))
		g.Expect(m["dtnflow_transferjob_duration_seconds"]["result=Complete"]).To(BeNumerically(">=", 3))
		g.Expect(m["dtnflow_transferjob_verified_bytes_total"]["name=sync,namespace="+ns]).To(BeNumerically("==", 3*(40<<30)))
	})
}
