package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// TestManagerRestartCarriesOn stops the manager mid-transfer and starts a new one: the
// new manager adopts the running pods (none is recreated or counted as failed), keeps
// the plan, and carries progress on from the next report.
func TestManagerRestartCarriesOn(t *testing.T) {
	clk := newClock()
	first := startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	job := createJob(t, ns, "durable", fixedSpec(src, dst))
	plan := transferring(t, clk, job)
	var before agentPods
	eventually(t, func(g Gomega) { before = listAgents(g, job) })
	uids := map[string]types.UID{}
	for _, p := range before.all {
		uids[p.Name] = p.UID
	}
	gen := directive(NewWithT(t), job).Generation

	first.stop()
	// While no manager runs, the agents go on and report.
	clk.Step(reportInterval)
	eventually(t, func(g Gomega) {
		report(g, job, contract.Report{Generation: gen, Phase: contract.PhaseTransferring, Time: clk.Now(),
			BytesDone: 20 << 30, BytesTotal: 40 << 30, FilesDone: 20, FilesTotal: 40, BitsPerSecond: 3e9})
	})

	startManager(t, clk, managerOptions{})
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(progressOf(g, j).Percent).To(Equal(int32(50)))
		g.Expect(progressOf(g, j).Rate).To(Equal("3 Gbit/s"))
		g.Expect(j.Status.Plan).To(Equal(plan))
		g.Expect(j.Status.AgentFailures).To(BeZero())
	})
	consistently(t, func(g Gomega) {
		pods := listAgents(g, job)
		g.Expect(pods.all).To(HaveLen(len(uids)))
		for _, p := range pods.all {
			g.Expect(p.UID).To(Equal(uids[p.Name]), "pod %s was recreated", p.Name)
		}
		g.Expect(directive(g, job).Generation).To(Equal(gen), "an unchanged plan was given again")
	})
}

// TestLeaderElection runs two managers with leader election: only the leader acts, and
// when it steps down the other takes over the running job without disturbing it.
func TestLeaderElection(t *testing.T) {
	clk := newClock()
	leader := startManager(t, clk, managerOptions{leaderElection: true, identity: "first"})
	leaseName := "dtnflow-test-" + "testleaderelection"
	eventually(t, func(g Gomega) {
		var lease coordinationv1.Lease
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: leaseName}, &lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
	})
	var holder string
	eventually(t, func(g Gomega) {
		var lease coordinationv1.Lease
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: leaseName}, &lease)).To(Succeed())
		holder = *lease.Spec.HolderIdentity
	})
	follower := startManager(t, clk, managerOptions{leaderElection: true, identity: "second"})
	elected := func(m *testManager) bool {
		select {
		case <-m.mgr.Elected():
			return true
		default:
			return false
		}
	}

	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	job := createJob(t, ns, "elected", fixedSpec(src, dst))
	transferring(t, clk, job)
	var uids []types.UID
	eventually(t, func(g Gomega) {
		for _, p := range listAgents(g, job).all {
			uids = append(uids, p.UID)
		}
	})
	consistently(t, func(g Gomega) {
		g.Expect(elected(leader)).To(BeTrue())
		g.Expect(elected(follower)).To(BeFalse(), "both managers are acting")
	})

	leader.stop() // releases the lease on the way out
	eventually(t, func(g Gomega) {
		var lease coordinationv1.Lease
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: leaseName}, &lease)).To(Succeed())
		g.Expect(lease.Spec.HolderIdentity).NotTo(BeNil())
		g.Expect(*lease.Spec.HolderIdentity).NotTo(Equal(holder))
		g.Expect(*lease.Spec.HolderIdentity).NotTo(BeEmpty())
		g.Expect(elected(follower)).To(BeTrue())
	})
	// The new leader acts on the job: a report moves its progress.
	clk.Step(reportInterval)
	eventually(t, func(g Gomega) {
		report(g, job, contract.Report{Generation: directive(g, job).Generation, Phase: contract.PhaseTransferring, Time: clk.Now(),
			BytesDone: 30 << 30, BytesTotal: 40 << 30, BitsPerSecond: 2e9})
		g.Expect(progressOf(g, getJob(g, job)).Percent).To(Equal(int32(75)))
	})
	eventually(t, func(g Gomega) {
		var now []types.UID
		for _, p := range listAgents(g, job).all {
			now = append(now, p.UID)
		}
		g.Expect(now).To(ConsistOf(uids))
		g.Expect(getJob(g, job).Status.State).To(Equal(dtnflowv1alpha1.StateTransferring))
	})
}
