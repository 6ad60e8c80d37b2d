package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
)

// TestSuspendAndResume checks that suspend pauses the agents through the directive,
// stops their pods once the coordinator says it paused, keeps the plan and progress, and
// that resuming starts the same plan again where the transfer left off.
func TestSuspendAndResume(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	job := createJob(t, ns, "pausable", fixedSpec(src, dst))
	plan := transferring(t, clk, job)

	updateJob(t, job, func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Suspend = true })
	// First the directive: Pause, with the agents still running.
	var pause contract.Directive
	eventually(t, func(g Gomega) {
		pause = directive(g, job)
		g.Expect(pause.Mode).To(Equal(contract.ModePause))
		j := getJob(g, job)
		g.Expect(reason(j, dtnflowv1alpha1.ConditionSuspended)).To(Equal(controllers.ReasonPausing))
		g.Expect(listAgents(g, job).senders).To(HaveLen(4))
	})
	// The coordinator pauses: the pods go, the state stays.
	clk.Step(reportInterval)
	eventually(t, func(g Gomega) {
		if listAgents(g, job).coordinator != nil {
			report(g, job, contract.Report{Generation: pause.Generation, Phase: contract.PhasePaused, Time: clk.Now(),
				BytesDone: 12 << 30, BytesTotal: 40 << 30, FilesDone: 12, FilesTotal: 40})
		}
		g.Expect(listAgents(g, job).all).To(BeEmpty())
		j := getJob(g, job)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateSuspended))
		g.Expect(reason(j, dtnflowv1alpha1.ConditionSuspended)).To(Equal(controllers.ReasonSuspended))
		g.Expect(j.Status.Plan).To(Equal(plan))
		g.Expect(progressOf(g, j).BytesDone).To(BeNumerically(">=", int64(1<<30)))
		g.Expect(progressOf(g, j).CurrentBitsPerSecond).To(BeZero())
		g.Expect(j.Status.AgentFailures).To(BeZero(), "stopping agents on purpose is no failure")
	})
	consistently(t, func(g Gomega) { g.Expect(listAgents(g, job).all).To(BeEmpty()) })

	// Resume: the same plan, a transfer directive, every stripe back.
	updateJob(t, job, func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Suspend = false })
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		c := condition(j, dtnflowv1alpha1.ConditionSuspended)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(controllers.ReasonResumed))
		g.Expect(planOf(g, j).Hash).To(Equal(plan.Hash))
		pods := runAll(g, job)
		g.Expect(pods.senders).To(HaveLen(4))
		g.Expect(pods.receivers).To(HaveLen(4))
		g.Expect(directive(g, job).Mode).To(Equal(contract.ModeTransfer))
		g.Expect(j.Status.AgentFailures).To(BeZero())
	})
}

// TestSuspendWithoutAnAnswer checks that a coordinator that never confirms the pause
// does not hold a suspension forever: after a few report intervals the pods go anyway.
func TestSuspendWithoutAnAnswer(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	job := createJob(t, ns, "deaf", fixedSpec(src, dst))
	transferring(t, clk, job)
	updateJob(t, job, func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Suspend = true })
	eventually(t, func(g Gomega) { g.Expect(directive(g, job).Mode).To(Equal(contract.ModePause)) })
	consistently(t, func(g Gomega) { g.Expect(listAgents(g, job).senders).To(HaveLen(4)) })
	clk.Step(controllers.PauseReports*reportInterval + 1)
	// The requeue that ends the wait runs on the real clock; a pod event brings it now.
	eventually(t, func(g Gomega) {
		if pods := listAgents(g, job); pods.coordinator != nil {
			report(g, job, contract.Report{Generation: 1, Phase: contract.PhaseTransferring, Time: clk.Now()})
		}
		g.Expect(listAgents(g, job).all).To(BeEmpty())
		g.Expect(getJob(g, job).Status.State).To(Equal(dtnflowv1alpha1.StateSuspended))
	})
}

// TestLimitsChangedMidRun checks that lowering spec.tuning.limits on a running job
// re-plans within them, records why, and removes the stripes the new plan drops.
func TestLimitsChangedMidRun(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	spec := fixedSpec(src, dst)
	job := createJob(t, ns, "limited", spec)
	plan := transferring(t, clk, job)
	if plan.StripesPerNode != 2 {
		t.Fatalf("plan has %d stripes per node, want 2", plan.StripesPerNode)
	}

	updateJob(t, job, func(j *dtnflowv1alpha1.TransferJob) {
		j.Spec.Tuning.Fixed.StripesPerNode = 1
		j.Spec.Tuning.Limits = &dtnflowv1alpha1.TuningLimits{MaxStripesPerNode: ptr.To[int32](1), MaxBitsPerSecond: ptr.To[int64](1_000_000_000)}
	})
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(planOf(g, j).StripesPerNode).To(Equal(int32(1)))
		g.Expect(j.Status.Replans).NotTo(BeEmpty())
		last := j.Status.Replans[len(j.Status.Replans)-1]
		g.Expect(last.Reason).To(Equal(controllers.ReasonTuningChanged))
		g.Expect(last.From.Stripes).To(Equal(int32(4)))
		g.Expect(last.To.Stripes).To(Equal(int32(2)))
		pods := listAgents(g, job)
		g.Expect(pods.senders).To(HaveLen(2))
		g.Expect(pods.receivers).To(HaveLen(2))
		d := directive(g, job)
		g.Expect(d.Stripes).To(Equal(int32(2)))
		g.Expect(d.MaxBitsPerSecond).To(Equal(int64(1_000_000_000)))
		g.Expect(j.Status.ObservedGeneration).To(Equal(j.Generation))
		g.Expect(j.Status.AgentFailures).To(BeZero(), "removing stripes on purpose is no failure")
	})
}

// TestTuningThatCannotBeMet checks that a change of tuning no plan can meet (more fixed
// nodes than the site has) leaves the running plan alone with a clear condition, and
// takes effect once the site can meet it.
func TestTuningThatCannotBeMet(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{nodes: 2}), newSite(t, "dst", siteOptions{nodes: 3})
	ns := createNamespace(t, nil)
	job := createJob(t, ns, "greedy", fixedSpec(src, dst))
	plan := transferring(t, clk, job)

	updateJob(t, job, func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Tuning.Fixed.Nodes = 3 })
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		c := condition(j, dtnflowv1alpha1.ConditionPlanned)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(controllers.ReasonPlanFailed))
		g.Expect(c.Message).To(ContainSubstring("spec.tuning.fixed.nodes is 3"))
		g.Expect(planOf(g, j).SourceNodes).To(Equal(plan.SourceNodes), "the running plan was changed")
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateTransferring))
		g.Expect(listAgents(g, job).senders).To(HaveLen(4))
	})

	// A third source node joins the site: the tuning is met.
	grown := newSite(t, "extra", siteOptions{nodes: 1})
	relabel(t, grown.nodes[0], src.name)
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(planOf(g, j).SourceNodes).To(HaveLen(3))
		g.Expect(reason(j, dtnflowv1alpha1.ConditionPlanned)).To(Equal(controllers.ReasonFixedTuning))
		g.Expect(j.Status.Replans).NotTo(BeEmpty())
		g.Expect(j.Status.Replans[len(j.Status.Replans)-1].Reason).To(Equal(controllers.ReasonTuningChanged))
		g.Expect(listAgents(g, job).senders).To(HaveLen(6))
	})
}
