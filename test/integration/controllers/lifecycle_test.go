package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
)

// probeSamples are what the test's coordinator reports from its probe: one stripe at
// 1, 2, 4 and 8 streams (the LONI numbers of the OPT_B case study), the sender using
// less CPU than the receiver, as Liu et al. found on their path.
func probeSamples(at time.Time) []contract.Sample {
	rates := []int64{903_410_000, 954_840_000, 990_910_000, 953_430_000}
	var out []contract.Sample
	for i, streams := range []int32{1, 2, 4, 8} {
		out = append(out, contract.Sample{Streams: streams, BitsPerSecond: rates[i],
			SourceMillicores: 150 + rates[i]/4_000_000, DestinationMillicores: 300 + rates[i]/2_000_000,
			Time: at.Add(time.Duration(i) * 5 * time.Second)})
	}
	return out
}

var dataset = &contract.Dataset{Files: 40, Bytes: 40 << 30, Buckets: []contract.SizeBucket{{Log2: 30, Files: 40, Bytes: 40 << 30}}}

// probe plays the coordinator through the probe: it waits for the cold job's first
// directive (transfer on one stripe, probing on the job's own data) and the probe
// stripe, starts the pods and reports the samples, the data moving meanwhile.
func probe(t *testing.T, clk interface{ Now() time.Time }, job *dtnflowv1alpha1.TransferJob) {
	t.Helper()
	eventually(t, func(g Gomega) {
		pods := runAll(g, job)
		g.Expect(pods.coordinator).NotTo(BeNil())
		g.Expect(pods.senders).To(HaveLen(1))
		g.Expect(pods.receivers).To(HaveLen(1))
		d := directive(g, job)
		g.Expect(d.Mode).To(Equal(contract.ModeTransfer))
		g.Expect(d.Probe).NotTo(BeNil())
		report(g, job, contract.Report{Generation: d.Generation, Phase: contract.PhaseTransferring, Probe: contract.PhaseProbed, Time: clk.Now(),
			Dataset: dataset, Samples: probeSamples(clk.Now().Add(-time.Minute)), BytesTotal: dataset.Bytes, FilesTotal: dataset.Files,
			BytesDone: 1 << 30, FilesDone: 1})
	})
}

// startTransfer waits for the plan's pods, starts them and returns the plan. A job that
// does not probe (Fixed mode, a fresh profile) is first shown the dataset, as its
// coordinator reports it on starting.
func startTransfer(t *testing.T, job *dtnflowv1alpha1.TransferJob) *dtnflowv1alpha1.TransferPlan {
	t.Helper()
	var plan *dtnflowv1alpha1.TransferPlan
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		if pods := runAll(g, job); j.Status.Plan == nil && pods.coordinator != nil && pods.coordinator.Annotations[contract.AnnotationDirective] == "" {
			report(g, job, contract.Report{Phase: contract.PhaseStarting, Time: time.Now(), Dataset: dataset,
				BytesTotal: dataset.Bytes, FilesTotal: dataset.Files})
		}
		g.Expect(j.Status.Plan).NotTo(BeNil())
		plan = j.Status.Plan
		n := int(int32(len(plan.SourceNodes)) * plan.StripesPerNode)
		pods := runAll(g, job)
		g.Expect(pods.senders).To(HaveLen(n))
		if len(plan.DestinationNodes) == 0 {
			n = 0 // an external destination: no receiver pods
		}
		g.Expect(pods.receivers).To(HaveLen(n))
		for _, p := range pods.all {
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}
		for _, p := range pods.senders {
			g.Expect(p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()).To(Equal(plan.SourceCPUMillicores), "sender %s", p.Name)
		}
		for _, p := range pods.receivers {
			g.Expect(p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()).To(Equal(plan.DestinationCPUMillicores), "receiver %s", p.Name)
		}
		d := directive(g, job)
		g.Expect(d.Mode).To(Equal(contract.ModeTransfer))
		g.Expect(d.Probe).To(BeNil(), "the plan's directive ends the probe")
	})
	return plan
}

// TestProbePlanTransferComplete follows one job through its whole life: probe, plan,
// pods with per-side CPU pinned to the plan's nodes, progress, completion, the
// PathProfile, cleanup and the TTL.
func TestProbePlanTransferComplete(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{nodes: 2}), newSite(t, "dst", siteOptions{nodes: 2, budget: "8"})
	ns := createNamespace(t, nil)
	spec := jobSpec(src, dst)
	spec.TTLSecondsAfterFinished = ptr.To[int32](0)
	job := createJob(t, ns, "calib", spec)

	// Probing: the coordinator and stripe 0 with probe CPU, and a Probe directive.
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateProbing))
		g.Expect(reason(j, dtnflowv1alpha1.ConditionProbing)).To(Equal(controllers.ReasonProbing))
		pods := listAgents(g, job)
		g.Expect(pods.senders[0]).NotTo(BeNil())
		g.Expect(pods.senders[0].Labels[contract.LabelPlanHash]).To(Equal(controllers.ProbePlanHash))
	})
	// The job's secret and the coordinator's narrow RBAC exist, owned by the job.
	eventually(t, func(g Gomega) {
		ctx := context.Background()
		var secret corev1.Secret
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "calib-auth"}, &secret)).To(Succeed())
		g.Expect(secret.Data[contract.SecretKey]).To(HaveLen(32))
		g.Expect(metav1.IsControlledBy(&secret, getJob(g, job))).To(BeTrue())
		var role rbacv1.Role
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "calib-coordinator"}, &role)).To(Succeed())
		g.Expect(role.Rules).To(Equal([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"},
			ResourceNames: []string{"calib-coordinator"}, Verbs: []string{"get", "watch", "patch"}}}))
		var binding rbacv1.RoleBinding
		g.Expect(env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "calib-coordinator"}, &binding)).To(Succeed())
		g.Expect(binding.Subjects).To(ConsistOf(rbacv1.Subject{Kind: "ServiceAccount", Name: "calib-coordinator", Namespace: ns}))
		pods := listAgents(g, job)
		g.Expect(pods.coordinator.Spec.ServiceAccountName).To(Equal("calib-coordinator"))
		g.Expect(*pods.coordinator.Spec.AutomountServiceAccountToken).To(BeTrue())
		g.Expect(*pods.senders[0].Spec.AutomountServiceAccountToken).To(BeFalse())
		g.Expect(*pods.receivers[0].Spec.AutomountServiceAccountToken).To(BeFalse())
	})

	var probeStripe agentPods
	eventually(t, func(g Gomega) { probeStripe = listAgents(g, job); g.Expect(probeStripe.receivers[0]).NotTo(BeNil()) })
	probe(t, clk, job)
	plan := startTransfer(t, job)
	// The probe's stripe carries on under the plan: resized in place, not restarted.
	eventually(t, func(g Gomega) {
		pods := listAgents(g, job)
		g.Expect(pods.senders[0].UID).To(Equal(probeStripe.senders[0].UID))
		g.Expect(pods.receivers[0].UID).To(Equal(probeStripe.receivers[0].UID))
		g.Expect(pods.senders[0].Labels[contract.LabelPlanHash]).To(Equal(controllers.ProbePlanHash), "the label names the plan the pod was created for")
		for k := int32(1); k < int32(len(pods.senders)); k++ {
			g.Expect(pods.senders[k].Labels[contract.LabelPlanHash]).To(Equal(plan.Hash))
		}
	})

	// The plan's CPU differs per side, and each pod asks for its side's and sits on the
	// plan's node for its stripe; the budgeted destination also gets limits.
	if plan.SourceCPUMillicores == plan.DestinationCPUMillicores {
		t.Errorf("sender and receiver CPU are equal (%dm): the per-side CPU model was not used", plan.SourceCPUMillicores)
	}
	eventually(t, func(g Gomega) {
		pods := listAgents(g, job)
		nodes := int32(len(plan.SourceNodes))
		for k, p := range pods.senders {
			g.Expect(p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()).To(Equal(plan.SourceCPUMillicores), "sender %d", k)
			g.Expect(p.Spec.Containers[0].Resources.Limits).To(BeEmpty(), "the source sets no CPU budget")
			g.Expect(pinned(p)).To(Equal(plan.SourceNodes[k%nodes]))
			g.Expect(p.Spec.HostNetwork).To(BeTrue())
			g.Expect(p.Spec.Containers[0].VolumeMounts[0].ReadOnly).To(BeTrue(), "the source root is read-only")
		}
		for k, p := range pods.receivers {
			g.Expect(p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()).To(Equal(plan.DestinationCPUMillicores), "receiver %d", k)
			g.Expect(p.Spec.Containers[0].Resources.Limits.Cpu().MilliValue()).To(BeNumerically(">=", plan.DestinationCPUMillicores))
			g.Expect(pinned(p)).To(Equal(plan.DestinationNodes[k%nodes]))
			g.Expect(p.Spec.Containers[0].Ports[0].HostPort).To(Equal(p.Spec.Containers[0].Ports[0].ContainerPort))
		}
		g.Expect(metav1.IsControlledBy(pods.coordinator, getJob(g, job))).To(BeTrue())
	})

	// Progress from a report: printer-column fields.
	clk.Step(reportInterval)
	eventually(t, func(g Gomega) {
		d := directive(g, job)
		report(g, job, contract.Report{Generation: d.Generation, Phase: contract.PhaseTransferring, Time: clk.Now(),
			BytesDone: 10 << 30, BytesTotal: 40 << 30, FilesDone: 10, FilesTotal: 40, BitsPerSecond: 941_000_000})
		j := getJob(g, job)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateTransferring))
		g.Expect(j.Status.Progress).NotTo(BeNil())
		g.Expect(progressOf(g, j).Percent).To(Equal(int32(25)))
		g.Expect(progressOf(g, j).Rate).To(Equal("941 Mbit/s"))
		g.Expect(progressOf(g, j).ETA).To(Equal("4m34s"))
		g.Expect(reason(j, dtnflowv1alpha1.ConditionTransferring)).To(Equal(controllers.ReasonTransferring))
		g.Expect(j.Status.ObservedGeneration).To(Equal(j.Generation))
	})

	// Complete: the profile learns, the agents go, and with ttl 0 so does the job.
	clk.Step(reportInterval)
	eventually(t, func(g Gomega) {
		if gone(g, getJobOrNil(job)) {
			return
		}
		report(g, job, contract.Report{Generation: directive(g, job).Generation, Phase: contract.PhaseComplete, Time: clk.Now(),
			BytesDone: 40 << 30, BytesTotal: 40 << 30, FilesDone: 40, FilesTotal: 40})
	})
	eventually(t, func(g Gomega) {
		g.Expect(gone(g, &dtnflowv1alpha1.TransferJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "calib"}})).To(BeTrue())
		g.Expect(listAgents(g, job).all).To(BeEmpty())
		var profile dtnflowv1alpha1.PathProfile
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Name: src.name + "." + dst.name}, &profile)).To(Succeed())
		g.Expect(profile.Status.ContributingJobs).To(ContainElement(ns + "/calib"))
	})
}

// getJobOrNil is a job object to pass to gone.
func getJobOrNil(job *dtnflowv1alpha1.TransferJob) *dtnflowv1alpha1.TransferJob {
	return &dtnflowv1alpha1.TransferJob{ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name}}
}

// pinned is the node a pod's required node affinity admits.
func pinned(p *corev1.Pod) string {
	terms := p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
	return terms[0].MatchFields[0].Values[0]
}
