package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
)

// TestWarmStartSkipsTheProbe runs a job to completion, then a second job on the same
// path: the PathProfile the first one taught is fresh, so the second starts without a
// probe, from the stored model, as soon as its coordinator has listed the dataset.
func TestWarmStartSkipsTheProbe(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)

	cold := createJob(t, ns, "cold", jobSpec(src, dst))
	probe(t, clk, cold)
	coldPlan := startTransfer(t, cold)
	clk.Step(reportInterval)
	eventually(t, func(g Gomega) {
		if getJob(g, cold).Status.State != dtnflowv1alpha1.StateComplete {
			report(g, cold, contract.Report{Generation: directive(g, cold).Generation, Phase: contract.PhaseComplete, Time: clk.Now(),
				BytesDone: dataset.Bytes, BytesTotal: dataset.Bytes, FilesDone: dataset.Files, FilesTotal: dataset.Files})
		}
		j := getJob(g, cold)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateComplete))
		g.Expect(reason(j, dtnflowv1alpha1.ConditionComplete)).To(Equal(controllers.ReasonVerified))
		g.Expect(progressOf(g, j).Percent).To(Equal(int32(100)))
		g.Expect(listAgents(g, cold).all).To(BeEmpty())
		var profile dtnflowv1alpha1.PathProfile
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Name: controllers.PathProfileName(src.name, dst.name)}, &profile)).To(Succeed())
		g.Expect(profile.Spec.SourceEndpoint).To(Equal(src.name))
		g.Expect(profile.Status.Model).To(Equal(coldPlan.Model))
		g.Expect(profile.Status.Samples).To(HaveLen(4))
		g.Expect(profile.Status.ContributingJobs).To(Equal([]string{ns + "/cold"}))
	})

	warm := createJob(t, ns, "warm", jobSpec(src, dst))
	eventually(t, func(g Gomega) {
		j := getJob(g, warm)
		c := condition(j, dtnflowv1alpha1.ConditionProbing)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(controllers.ReasonListingDataset))
		pods := listAgents(g, warm)
		g.Expect(pods.coordinator).NotTo(BeNil())
		g.Expect(pods.coordinator.Annotations).NotTo(HaveKey(contract.AnnotationDirective), "a probe directive was given")
		// stripe 0 starts with the coordinator (every plan has it), so that the plan
		// finds it running; it moves nothing before the plan's directive
		g.Expect(pods.senders).To(HaveLen(1))
		g.Expect(pods.receivers).To(HaveLen(1))
	})
	plan := startTransfer(t, warm)
	eventually(t, func(g Gomega) {
		j := getJob(g, warm)
		g.Expect(j.Status.Samples).To(BeEmpty(), "the warm job took samples of its own")
		g.Expect(plan.Model).To(Equal(coldPlan.Model))
		g.Expect(meta.FindStatusCondition(j.Status.Conditions, dtnflowv1alpha1.ConditionProbing).Reason).To(Equal(controllers.ReasonProbeSkipped))
	})
}

// TestWarmStartContinuesAnUnfinishedProfile: a cold job whose data ran out before its
// stream curve was finished (1 and 2 streams sampled, the second gaining 20 %: the
// stepper wants 4) leaves a fresh profile that the next job on the path continues from.
// Its probe directive carries the profile's samples at the profile's buffer and asks
// for no buffer stage and no stripe stage, and its Probing condition says it continues
// the profile rather than probes; when its coordinator ends the probe without a sample
// of its own (a dataset too small to repay one), the plan is the profile's, the probe
// said skipped, and the job's status holds no samples. On the e2e's path such a warm
// job once re-measured the profile's one-stream sample and announced a probe.
func TestWarmStartContinuesAnUnfinishedProfile(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	const buffer = 4 << 20
	unfinished := []contract.Sample{
		{Streams: 1, BufferBytes: buffer, BitsPerSecond: 400_000_000, SourceMillicores: 250, DestinationMillicores: 500, Time: clk.Now().Add(-time.Minute)},
		{Streams: 2, BufferBytes: buffer, BitsPerSecond: 480_000_000, SourceMillicores: 270, DestinationMillicores: 540, Time: clk.Now().Add(-50 * time.Second)},
	}

	cold := createJob(t, ns, "cold", jobSpec(src, dst))
	eventually(t, func(g Gomega) {
		pods := runAll(g, cold)
		g.Expect(pods.coordinator).NotTo(BeNil())
		d := directive(g, cold)
		g.Expect(d.Probe).NotTo(BeNil())
		g.Expect(d.Probe.Known).To(BeEmpty(), "a cold probe continues from nothing")
		report(g, cold, contract.Report{Generation: d.Generation, Phase: contract.PhaseTransferring, Probe: contract.PhaseProbed, Time: clk.Now(),
			Dataset: dataset, Samples: unfinished, BytesTotal: dataset.Bytes, FilesTotal: dataset.Files, BytesDone: 1 << 30, FilesDone: 1})
	})
	coldPlan := startTransfer(t, cold)
	completeJob(t, clk, cold)
	eventually(t, func(g Gomega) {
		var profile dtnflowv1alpha1.PathProfile
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Name: controllers.PathProfileName(src.name, dst.name)}, &profile)).To(Succeed())
		g.Expect(profile.Status.Samples).To(HaveLen(2))
		g.Expect(profile.Status.BufferBytes).To(Equal(int64(buffer)))
	})

	warm := createJob(t, ns, "warm", jobSpec(src, dst))
	eventually(t, func(g Gomega) {
		d := directive(g, warm)
		g.Expect(d.Mode).To(Equal(contract.ModeTransfer))
		g.Expect(d.Probe).NotTo(BeNil(), "an unfinished profile: the probe goes on")
		g.Expect(d.Probe.BufferBytes).To(Equal([]int64{buffer}), "the profile's buffer, no buffer stage")
		g.Expect(d.Probe.MaxStripes).To(BeNumerically("<=", 1), "no stripe stage on a profile's probe")
		g.Expect(d.Probe.Known).To(HaveLen(2))
		for i, k := range d.Probe.Known {
			g.Expect(k.Streams).To(Equal(unfinished[i].Streams))
			g.Expect(k.BufferBytes).To(Equal(unfinished[i].BufferBytes))
			g.Expect(k.BitsPerSecond).To(Equal(unfinished[i].BitsPerSecond))
		}
		j := getJob(g, warm)
		g.Expect(reason(j, dtnflowv1alpha1.ConditionProbing)).To(Equal(controllers.ReasonContinuingProfile))
		// the coordinator: its dataset cannot repay a sample, so it ends the probe at once
		report(g, warm, contract.Report{Generation: d.Generation, Phase: contract.PhaseTransferring, Probe: contract.PhaseProbed, Time: clk.Now(),
			Dataset: dataset, BytesTotal: dataset.Bytes, FilesTotal: dataset.Files})
	})
	plan := startTransfer(t, warm)
	eventually(t, func(g Gomega) {
		j := getJob(g, warm)
		g.Expect(j.Status.Samples).To(BeEmpty(), "the warm job took no samples of its own")
		g.Expect(plan.Model).To(Equal(coldPlan.Model), "planned from the profile's model")
		g.Expect(plan.BufferBytes).To(Equal(int64(buffer)))
		g.Expect(reason(j, dtnflowv1alpha1.ConditionProbing)).To(Equal(controllers.ReasonProbeSkipped))
	})
}

// TestEndpointStatus checks the TransferEndpoint status: its nodes with readiness,
// allocatable CPU, budget, NIC and stripes placed, and the Ready condition following
// the nodes.
func TestEndpointStatus(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{nodes: 2, budget: "6"}), newSite(t, "dst", siteOptions{nodes: 2})
	ns := createNamespace(t, nil)
	job := createJob(t, ns, "counted", fixedSpec(src, dst))
	transferring(t, clk, job)
	get := func(g Gomega, name string) *dtnflowv1alpha1.TransferEndpoint {
		var ep dtnflowv1alpha1.TransferEndpoint
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Name: name}, &ep)).To(Succeed())
		return &ep
	}
	eventually(t, func(g Gomega) {
		ep := get(g, src.name)
		g.Expect(ep.Status.ReadyNodes).To(Equal(int32(2)))
		g.Expect(ep.Status.ObservedGeneration).To(Equal(ep.Generation))
		c := meta.FindStatusCondition(ep.Status.Conditions, controllers.ConditionEndpointReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(ep.Status.Nodes).To(HaveLen(2))
		for _, n := range ep.Status.Nodes {
			g.Expect(n.Ready).To(BeTrue())
			g.Expect(n.AllocatableCPU.String()).To(Equal("16"))
			g.Expect(n.CPUBudget.String()).To(Equal("6"))
			g.Expect(n.NICBitsPerSecond).To(Equal(int64(10_000_000_000)))
			g.Expect(n.Stripes).To(Equal(int32(2)), "node %s", n.Name)
		}
		g.Expect(get(g, dst.name).Status.Nodes[0].CPUBudget.String()).To(Equal("16"), "no budget: the allocatable CPU")
	})
	for _, n := range dst.nodes {
		setNodeReady(t, n, false)
	}
	eventually(t, func(g Gomega) {
		ep := get(g, dst.name)
		g.Expect(ep.Status.ReadyNodes).To(BeZero())
		c := meta.FindStatusCondition(ep.Status.Conditions, controllers.ConditionEndpointReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(controllers.ReasonNoReadyNodes))
		// The job waits, saying why, and starts nothing new.
		j := getJob(g, job)
		g.Expect(reason(j, dtnflowv1alpha1.ConditionPlanned)).To(Equal(controllers.ReasonNoReadyNodes))
	})
}
