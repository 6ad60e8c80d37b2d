package cluster

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// killedWANRate is the WAN's rate while agents are killed: the dataset takes about
// 25 s there.
const killedWANRate = 100_000_000

// testAgentKilledMidTransfer kills agent pods of a running job — a receiver, whose
// verified blocks live in its journal, and later a sender, whose leased work must go
// back to the others — and checks that the job still completes with every file
// identical, counting the failures against its backoff limit.
func testAgentKilledMidTransfer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	spec := framework.DatasetSpec{Seed: 3, Large: 3, LargeBytes: 80 << 20, Medium: 4, Small: 100, Empty: 1}
	source := dataset(t, "e2e/killed", spec)
	// A slower path, so that the job is still moving data when its agents die.
	fullRate := cluster.WAN.RateBitsPerSecond
	g.Expect(cluster.SetWANRate(ctx, killedWANRate)).To(Succeed())
	t.Cleanup(func() { _ = cluster.SetWANRate(context.Background(), fullRate) })
	job := newJob("killed", "e2e/killed", "incoming/killed")
	dest := createJob(ctx, t, job)

	kill := func(role contract.Role) types.UID {
		var victim corev1.Pod
		g.Eventually(func(g Gomega) {
			pods, err := agentPods(ctx, job, role)
			g.Expect(err).NotTo(HaveOccurred())
			running := 0
			for _, p := range pods {
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					victim = p
					running++
				}
			}
			g.Expect(running).To(BeNumerically(">=", 1), "no running %s pod", role)
		}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		// grace period 0: the kubelet kills the container at once (SIGKILL)
		g.Expect(cluster.Client.Delete(ctx, &victim, client.GracePeriodSeconds(0))).To(Succeed())
		t.Logf("killed %s pod %s on %s", role, victim.Name, victim.Spec.NodeName)
		return victim.UID
	}

	waitForProgress(ctx, g, job, 0.15, transferTimeout)
	killedReceiver := kill(contract.RoleReceiver)
	atKill, err := getJob(ctx, job)
	g.Expect(err).NotTo(HaveOccurred())
	// the job carries on: more bytes verified than when the receiver died
	g.Eventually(func(g Gomega) {
		now, err := getJob(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(now.Status.Progress.BytesDone).To(BeNumerically(">", atKill.Status.Progress.BytesDone+spec.Bytes()/20))
	}).WithTimeout(transferTimeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	now, err := getJob(ctx, job)
	g.Expect(err).NotTo(HaveOccurred())
	if now.Status.State == dtnflowv1alpha1.StateTransferring && now.Status.Progress.Percent < 90 {
		kill(contract.RoleSender)
	} else {
		t.Logf("the job is at %d%% (%s); not killing a sender as well", now.Status.Progress.Percent, now.Status.State)
	}

	done := waitForState(ctx, g, job, dtnflowv1alpha1.StateComplete, transferTimeout)
	expectIdentical(t, source, dest)
	expectCompleteStatus(g, done, spec)
	g.Expect(done.Status.AgentFailures).To(BeNumerically(">=", 1), "the killed pods count as agent failures")
	pods, err := agentPods(ctx, job, contract.RoleReceiver)
	g.Expect(err).NotTo(HaveOccurred())
	for _, p := range pods {
		g.Expect(p.UID).NotTo(Equal(killedReceiver), "the killed receiver is gone")
	}
}
