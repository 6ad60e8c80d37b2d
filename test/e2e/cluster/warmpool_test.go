package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
	"github.com/dtnflow/dtnflow/controllers/agentlogs"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// setWarmPools gives both endpoints a warm pool of n agents per node and side in the
// jobs' namespace (n = 0: none).
func setWarmPools(ctx context.Context, g Gomega, n int32) {
	for _, name := range []string{cluster.Source().Name, cluster.Destination().Name} {
		g.Eventually(func(g Gomega) {
			var ep dtnflowv1alpha1.TransferEndpoint
			g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: name}, &ep)).To(Succeed())
			if ep.Spec.AgentPods == nil {
				ep.Spec.AgentPods = &dtnflowv1alpha1.AgentPodSettings{}
			}
			ep.Spec.AgentPods.WarmPool = nil
			if n > 0 {
				ep.Spec.AgentPods.WarmPool = &dtnflowv1alpha1.WarmPool{AgentsPerNode: n, Namespaces: []string{jobNamespace}}
			}
			g.Expect(cluster.Client.Update(ctx, &ep)).To(Succeed())
		}).WithTimeout(30 * time.Second).Should(Succeed())
	}
}

// waitingAgents counts an endpoint's warm agents waiting in the jobs' namespace, and
// those of them running.
func waitingAgents(ctx context.Context, g Gomega, endpoint string) (waiting, running int) {
	var pods corev1.PodList
	g.Expect(cluster.Client.List(ctx, &pods, client.InNamespace(jobNamespace), client.MatchingLabels{contract.LabelWarmPool: endpoint})).To(Succeed())
	for i := range pods.Items {
		p := &pods.Items[i]
		if ref := metav1.GetControllerOf(p); ref == nil || ref.Kind != "TransferEndpoint" || p.DeletionTimestamp != nil {
			continue
		}
		waiting++
		if p.Status.Phase == corev1.PodRunning {
			running++
		}
	}
	return waiting, running
}

// testWarmPool: with both endpoints keeping warm agents, a job's coordinator, first
// sender and receiver are agents the pool started before it (the claim opened, the
// role exec'd in the waiting pod, as the job's archive of agent logs shows), its copy
// is identical, and the pool starts as many again (the endpoints' WarmPoolReady says
// when); without the pool none wait.
func testWarmPool(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	setWarmPools(ctx, g, 2)
	t.Cleanup(func() { setWarmPools(context.Background(), NewWithT(t), 0) })
	sites := map[string]*framework.Site{cluster.Source().Name: cluster.Source(), cluster.Destination().Name: cluster.Destination()}
	ready := func(g Gomega) {
		for name, site := range sites {
			waiting, running := waitingAgents(ctx, g, name)
			want := 2 * 2 * len(nodeNames(site)) // per node: two per side, both sides
			g.Expect(waiting).To(Equal(want), "waiting agents of %s", name)
			g.Expect(running).To(Equal(want), "running agents of %s", name)
			// and the endpoint says so
			var ep dtnflowv1alpha1.TransferEndpoint
			g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: name}, &ep)).To(Succeed())
			g.Expect(ep.Status.WarmPool).To(Equal(&dtnflowv1alpha1.WarmPoolStatus{Wanted: int32(want), Ready: int32(want)}))
			g.Expect(meta.IsStatusConditionTrue(ep.Status.Conditions, controllers.ConditionWarmPoolReady)).To(BeTrue(), "WarmPoolReady of %s", name)
		}
	}
	g.Eventually(ready).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

	// large enough that the job plans before it ends (a probe sample is about 2 s of the
	// path's rate, the plan a pass after it): with 16 MiB it could be Complete first,
	// with no plan to check
	spec := framework.DatasetSpec{Seed: 7, Large: 1, LargeBytes: 256 << 20, Medium: 2, Small: 60, Empty: 1}
	source := dataset(t, "e2e/warm-pool", spec)
	job := newJob("warm-pool", "e2e/warm-pool", "incoming/warm-pool")
	dest := createJob(ctx, t, job)
	done := waitForState(ctx, g, job, dtnflowv1alpha1.StateComplete, transferTimeout)
	expectIdentical(t, source, dest)
	expectCompleteStatus(g, done, spec)
	if tm := done.Status.Timings; tm != nil && tm.FirstByteMilliseconds != nil {
		t.Logf("first byte %d ms after the job's creation", *tm.FirstByteMilliseconds)
	}

	// the archive of the job's agent logs names the pods that ran its agents
	var archive *agentlogs.Archive
	g.Eventually(func(g Gomega) {
		var cm corev1.ConfigMap
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Namespace: jobNamespace, Name: controllers.AgentLogsName(job.Name)}, &cm)).To(Succeed())
		a, err := agentlogs.Decode(cm.Data)
		g.Expect(err).NotTo(HaveOccurred())
		archive = a
	}).WithTimeout(30 * time.Second).Should(Succeed())
	claimed := map[string]bool{}
	for _, r := range archive.Index.Records {
		if !strings.HasPrefix(r.Pod, "dtnflow-warm-") {
			continue
		}
		text := archive.Texts[r.Key]
		g.Expect(text).To(ContainSubstring("msg=Claimed job="+jobNamespace+"/"+job.Name+" role="+r.Role), "pod %s", r.Pod)
		claimed[r.Role+"/"+r.Stripe] = true
	}
	g.Expect(claimed).To(HaveKey("coordinator/"), "the coordinator was a warm agent")
	g.Expect(claimed).To(HaveKey("sender/0"), "the first sender was a warm agent")
	g.Expect(claimed).To(HaveKey("receiver/0"), "the first receiver was a warm agent")
	// and the pool is whole again
	g.Eventually(ready).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())

	setWarmPools(ctx, g, 0)
	g.Eventually(func(g Gomega) {
		for name := range sites {
			waiting, _ := waitingAgents(ctx, g, name)
			g.Expect(waiting).To(BeZero(), "agents of %s still waiting without a pool", name)
		}
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
}
