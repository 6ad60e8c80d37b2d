package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
)

// TestJobsWaitForAFreeStripeSlot: on sites of one node that runs one stripe at a time,
// a second job waits holding no pods (it used to start a probe stripe the node could
// not run, and with 200 jobs at once every job held one and none could plan), says why,
// and starts once the first job is done and its pods are gone.
func TestJobsWaitForAFreeStripeSlot(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src := newSite(t, "src", siteOptions{nodes: 1, maxStripesPerNode: 1})
	dst := newSite(t, "dst", siteOptions{nodes: 1, maxStripesPerNode: 1})
	ns := createNamespace(t, nil)
	// Fixed mode: no path probe to wait for, the first stripe starts with the coordinator
	spec := jobSpec(src, dst)
	spec.Tuning = dtnflowv1alpha1.TransferTuning{Mode: dtnflowv1alpha1.TuningFixed, Fixed: &dtnflowv1alpha1.FixedTuning{Nodes: 1, StripesPerNode: 1, StreamsPerStripe: 4, Concurrency: 2, Pipelining: 8}}
	first := createJob(t, ns, "first", spec)
	startTransfer(t, first)

	second := createJob(t, ns, "second", spec)
	eventually(t, func(g Gomega) {
		j := getJob(g, second)
		c := condition(j, dtnflowv1alpha1.ConditionPlanned)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(controllers.ReasonNoFreeStripeSlot))
		g.Expect(c.Message).To(ContainSubstring("maxStripesPerNode (1)"))
		g.Expect(conditionStatus(j, dtnflowv1alpha1.ConditionReconciling)).To(Equal(metav1.ConditionTrue))
		g.Expect(listAgents(g, second).all).To(BeEmpty())
	})
	consistently(t, func(g Gomega) { g.Expect(listAgents(g, second).all).To(BeEmpty()) })

	// the first job completes and its agents go: the second starts
	eventually(t, func(g Gomega) {
		if getJob(g, first).Status.State != dtnflowv1alpha1.StateComplete {
			report(g, first, contract.Report{Generation: directive(g, first).Generation, Phase: contract.PhaseComplete, Time: clk.Now(),
				BytesDone: 1 << 30, BytesTotal: 1 << 30, FilesDone: 4, FilesTotal: 4})
		}
		g.Expect(getJob(g, first).Status.State).To(Equal(dtnflowv1alpha1.StateComplete))
		g.Expect(listAgents(g, first).all).To(BeEmpty())
	})
	eventually(t, func(g Gomega) {
		g.Expect(reason(getJob(g, second), dtnflowv1alpha1.ConditionPlanned)).NotTo(Equal(controllers.ReasonNoFreeStripeSlot))
	})
	startTransfer(t, second)
}
