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
// 40 s there, time for two kills and the recoveries between them.
const killedWANRate = 60_000_000

// testAgentKilledMidTransfer kills agents of a running job two ways — the receiver's
// process is SIGKILLed in its container (a crash: the pod fails), and later a sender
// pod is deleted with no grace period (a pod that vanishes) — and checks that the job
// still completes with every file identical, the killed agents counted against its
// backoff limit.
func testAgentKilledMidTransfer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// Many 16 MiB files rather than a few large ones, so that verified progress moves in
	// small steps and the kills land early in the transfer.
	spec := framework.DatasetSpec{Seed: 3, Large: 16, LargeBytes: 16 << 20, Medium: 4, Small: 100, Empty: 1}
	source := dataset(t, "e2e/killed", spec)
	// A slower path, so that the job is still moving data when its agents die.
	fullRate := cluster.WAN.RateBitsPerSecond
	g.Expect(cluster.SetWANRate(ctx, killedWANRate)).To(Succeed())
	t.Cleanup(func() { _ = cluster.SetWANRate(context.Background(), fullRate) })
	job := newJob("killed", "e2e/killed", "incoming/killed")
	dest := createJob(ctx, t, job)

	// running waits for a running pod of role other than the one of UID not (a
	// replacement), and returns it.
	running := func(role contract.Role, not types.UID) corev1.Pod {
		var victim corev1.Pod
		g.Eventually(func(g Gomega) {
			pods, err := agentPods(ctx, job, role)
			g.Expect(err).NotTo(HaveOccurred())
			found := false
			for _, p := range pods {
				if p.UID != not && p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
					victim, found = p, true
				}
			}
			g.Expect(found).To(BeTrue(), "no running %s pod", role)
		}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
		return victim
	}
	watchProgress(ctx, t, job)

	atKill := waitForProgress(ctx, g, job, 0.10, transferTimeout)
	receiver := running(contract.RoleReceiver, "")
	n, err := cluster.KillContainer(&receiver, receiver.Spec.Containers[0].Name)
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("SIGKILLed the %d process(es) of receiver %s on %s at %d%%", n, receiver.Name, receiver.Spec.NodeName, atKill.Status.Progress.Percent)

	// The second kill does not wait for verified progress: how soon the job reports
	// more after a crash is not what this step checks, and a job that reported its
	// next progress late was too far along for a second kill (a fresh clone's CI run).
	// The killed stripe's data cannot all arrive without a receiver, so a replacement
	// comes up while the job is still transferring, and its sender is deleted then.
	replacement := running(contract.RoleReceiver, receiver.UID)
	sender := running(contract.RoleSender, "")
	now, err := getJob(ctx, job)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(now.Status.State).To(Equal(dtnflowv1alpha1.StateTransferring), "the job while receiver %s replaced %s: %s", replacement.Name, receiver.UID, describeConditions(now))
	g.Expect(cluster.Client.Delete(ctx, &sender, client.GracePeriodSeconds(0))).To(Succeed())
	t.Logf("deleted sender pod %s on %s at %d%% (grace period 0), with the replacement receiver running", sender.Name, sender.Spec.NodeName, now.Status.Progress.Percent)

	done := waitForState(ctx, g, job, dtnflowv1alpha1.StateComplete, transferTimeout)
	expectIdentical(t, source, dest)
	expectCompleteStatus(g, done, spec)
	g.Expect(done.Status.AgentFailures).To(BeNumerically(">=", 1), "the crashed receiver counts as an agent failure")
	t.Logf("agentFailures %d; %d re-plan(s)", done.Status.AgentFailures, len(done.Status.Replans))
}
