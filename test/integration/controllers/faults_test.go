package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
)

// fixedSpec is a Fixed-mode job (no probe): 2 nodes × 2 stripes × 4 streams.
func fixedSpec(src, dst site) dtnflowv1alpha1.TransferJobSpec {
	spec := jobSpec(src, dst)
	spec.Tuning = dtnflowv1alpha1.TransferTuning{Mode: dtnflowv1alpha1.TuningFixed, Fixed: &dtnflowv1alpha1.FixedTuning{
		Nodes: 2, StripesPerNode: 2, StreamsPerStripe: 4, Concurrency: 4, Pipelining: 8}}
	return spec
}

// transferring starts a Fixed-mode job and plays kubelet and coordinator until the job
// is Transferring with every stripe Running.
func transferring(t *testing.T, clk interface{ Now() time.Time }, job *dtnflowv1alpha1.TransferJob) *dtnflowv1alpha1.TransferPlan {
	t.Helper()
	plan := startTransfer(t, job)
	eventually(t, func(g Gomega) {
		runAll(g, job)
		report(g, job, contract.Report{Generation: directive(g, job).Generation, Phase: contract.PhaseTransferring, Time: clk.Now(),
			BytesDone: 1 << 30, BytesTotal: 40 << 30, FilesTotal: 40, BitsPerSecond: 2e9})
		j := getJob(g, job)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateTransferring))
		// the report taken in, not only the pods running (a test that suspends next
		// would otherwise find no progress: a paused job reads no more reports)
		g.Expect(progressOf(g, j).BytesDone).To(BeNumerically(">=", int64(1<<30)))
		g.Expect(j.Status.Stripes).To(HaveLen(int(int32(len(plan.SourceNodes)) * plan.StripesPerNode)))
		for _, s := range j.Status.Stripes {
			g.Expect(s.State).To(Equal(dtnflowv1alpha1.StripeRunning), "stripe %s", s.Name)
		}
	})
	return plan
}

// TestAgentPodsReplaced checks that a deleted (vanished) pod and a failed pod are each
// replaced under the same name and counted, and that one failure more than
// spec.backoffLimit fails the job with BackoffLimitExceeded and stops its agents.
func TestAgentPodsReplaced(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	spec := fixedSpec(src, dst)
	spec.BackoffLimit = ptr.To[int32](2)
	job := createJob(t, ns, "faulty", spec)
	transferring(t, clk, job)

	var before agentPods
	eventually(t, func(g Gomega) { before = listAgents(g, job) })

	// A sender vanishes (deleted by someone, its node lost): replaced, counted once.
	victim := before.senders[1]
	if err := env.Client.Delete(context.Background(), victim); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) {
		pods := listAgents(g, job)
		g.Expect(pods.senders[1]).NotTo(BeNil())
		g.Expect(pods.senders[1].UID).NotTo(Equal(victim.UID))
		g.Expect(pods.senders[1].Spec.Containers[0].Args).To(Equal(victim.Spec.Containers[0].Args), "the replacement connects to the same peers")
		g.Expect(getJob(g, job).Status.AgentFailures).To(Equal(int32(1)))
	})
	consistently(t, func(g Gomega) { g.Expect(getJob(g, job).Status.AgentFailures).To(Equal(int32(1))) })
	eventually(t, func(g Gomega) { runAll(g, job) })

	// A receiver fails: deleted, replaced, counted once.
	eventually(t, func(g Gomega) { setPhase(g, listAgents(g, job).receivers[0], corev1.PodFailed) })
	eventually(t, func(g Gomega) {
		pods := listAgents(g, job)
		g.Expect(pods.receivers[0]).NotTo(BeNil())
		g.Expect(pods.receivers[0].Status.Phase).NotTo(Equal(corev1.PodFailed))
		j := getJob(g, job)
		g.Expect(j.Status.AgentFailures).To(Equal(int32(2)))
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateTransferring))
	})
	eventually(t, func(g Gomega) { runAll(g, job) })

	// The coordinator fails: a third failure, more than backoffLimit 2.
	eventually(t, func(g Gomega) { setPhase(g, listAgents(g, job).coordinator, corev1.PodFailed) })
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateFailed))
		c := condition(j, dtnflowv1alpha1.ConditionFailed)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(controllers.ReasonBackoffLimitExceeded))
		g.Expect(c.Message).To(ContainSubstring("spec.backoffLimit (2)"))
		g.Expect(j.Status.CompletionTime).NotTo(BeNil())
		g.Expect(listAgents(g, job).all).To(BeEmpty())
	})
}

// TestNodeNotReadyMovesStripes checks that the stripes of a node that goes NotReady move
// to a spare node of the same site, with the re-plan recorded.
func TestNodeNotReadyMovesStripes(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{nodes: 3}), newSite(t, "dst", siteOptions{nodes: 2})
	ns := createNamespace(t, nil)
	job := createJob(t, ns, "mover", fixedSpec(src, dst))
	plan := transferring(t, clk, job)
	lost := plan.SourceNodes[1]
	var spare string
	for _, n := range src.nodes {
		if n != plan.SourceNodes[0] && n != plan.SourceNodes[1] {
			spare = n
		}
	}

	setNodeReady(t, lost, false)
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(planOf(g, j).SourceNodes).To(ConsistOf(plan.SourceNodes[0], spare))
		g.Expect(j.Status.Replans).NotTo(BeEmpty())
		last := j.Status.Replans[len(j.Status.Replans)-1]
		g.Expect(last.Reason).To(Equal(controllers.ReasonNodeNotReady))
		g.Expect(last.Message).To(ContainSubstring(lost))
		pods := listAgents(g, job)
		for _, p := range pods.all {
			g.Expect(pinned(p)).NotTo(Equal(lost), "pod %s still on the lost node", p.Name)
		}
		g.Expect(pods.senders).To(HaveLen(4))
	})
	// Moving stripes off a lost node is not the agents' fault.
	eventually(t, func(g Gomega) { g.Expect(getJob(g, job).Status.AgentFailures).To(BeZero()) })
}

// TestDeletingTheJobCleansUp checks that every child carries the job as controlling
// owner, with blockOwnerDeletion — the garbage collector's cue on a real cluster, which
// this API server lacks — and that the manager stops the agent pods itself as soon as
// the job is deleted, since they hold host ports and CPU. The secret and RBAC objects
// are the collector's: the manager may create them but not read or delete them.
func TestDeletingTheJobCleansUp(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	job := createJob(t, ns, "doomed", fixedSpec(src, dst))
	transferring(t, clk, job)
	j := getJob(NewWithT(t), job)

	children := func(g Gomega, l client.ObjectList) []client.Object {
		g.Expect(env.Client.List(context.Background(), l, client.InNamespace(ns), client.MatchingLabels{contract.LabelJob: "doomed"})).To(Succeed())
		items, err := meta.ExtractList(l)
		g.Expect(err).NotTo(HaveOccurred())
		var out []client.Object
		for _, o := range items {
			out = append(out, o.(client.Object))
		}
		return out
	}
	owned := map[string]client.ObjectList{"pods": &corev1.PodList{}, "secrets": &corev1.SecretList{}, "serviceaccounts": &corev1.ServiceAccountList{},
		"roles": &rbacv1.RoleList{}, "rolebindings": &rbacv1.RoleBindingList{}}
	want := map[string]int{"pods": 4*2 + 1, "secrets": 1, "serviceaccounts": 1, "roles": 1, "rolebindings": 1}
	eventually(t, func(g Gomega) {
		for kind, l := range owned {
			objs := children(g, l)
			g.Expect(objs).To(HaveLen(want[kind]), kind)
			for _, o := range objs {
				ref := metav1.GetControllerOf(o)
				g.Expect(ref).NotTo(BeNil(), "%s %s has no controller", kind, o.GetName())
				g.Expect(ref.UID).To(Equal(j.UID), "%s %s", kind, o.GetName())
				g.Expect(ptr.Deref(ref.BlockOwnerDeletion, false)).To(BeTrue(), "%s %s", kind, o.GetName())
			}
		}
	})

	if err := env.Client.Delete(context.Background(), j); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) { g.Expect(children(g, &corev1.PodList{})).To(BeEmpty()) })
}
