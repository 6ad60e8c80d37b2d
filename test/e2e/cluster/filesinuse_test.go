package cluster

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// filesInUseWANRate slows the path so that the first job is still moving data while
// the second is looked at: its 64 MiB take about ten seconds.
const filesInUseWANRate = 60_000_000

// testFilesInUse runs two jobs that write the same files, created a moment apart: the
// second waits, Queued with reason FilesInUse and no pods, as long as the first moves
// data, then runs once the first is Complete; the copy is the source's, file for file.
func testFilesInUse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	source := dataset(t, "e2e/overlap", framework.DatasetSpec{Seed: 11, Large: 4, LargeBytes: 16 << 20, Small: 40})
	fullRate := cluster.WAN.RateBitsPerSecond
	g.Expect(cluster.SetWANRate(ctx, filesInUseWANRate)).To(Succeed())
	t.Cleanup(func() { _ = cluster.SetWANRate(context.Background(), fullRate) })

	first := newJob("overlap-first", "e2e/overlap", "incoming/overlap")
	dest := createJob(ctx, t, first)
	second := newJob("overlap-second", "e2e/overlap", "incoming/overlap")
	// created as createJob would, but without emptying the destination the first
	// job is writing
	g.Expect(cluster.Client.Create(ctx, second)).To(Succeed())
	t.Cleanup(func() {
		_ = cluster.Client.Delete(context.Background(), second, client.PropagationPolicy(metav1.DeletePropagationBackground))
	})

	waitForProgress(ctx, g, first, 0.2, transferTimeout)
	g.Eventually(func(g Gomega) {
		now, err := getJob(ctx, second)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(now.Status.State).To(Equal(dtnflowv1alpha1.StateQueued), "%s", describeConditions(now))
		g.Expect(now.Status.Queue).NotTo(BeNil())
		g.Expect(now.Status.Queue.Reason).To(Equal(controllers.ReasonFilesInUse))
		g.Expect(now.Status.Queue.Message).To(HavePrefix("waits for the files of TransferJob " + jobNamespace + "/overlap-first: it writes incoming/overlap/e2e/overlap"))
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	for _, role := range []contract.Role{contract.RoleCoordinator, contract.RoleSender, contract.RoleReceiver} {
		pods, err := agentPods(ctx, second, role)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(pods).To(BeEmpty(), "the waiting job has %s pods", role)
	}
	running, err := getJob(ctx, first)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(running.Status.State).To(Equal(dtnflowv1alpha1.StateTransferring), "the first job ended before the second was seen waiting: %s", describeConditions(running))

	done := waitForState(ctx, g, first, dtnflowv1alpha1.StateComplete, transferTimeout)
	after := waitForState(ctx, g, second, dtnflowv1alpha1.StateComplete, transferTimeout)
	t.Logf("first Complete at %s; second Complete at %s, %d files verified",
		done.Status.CompletionTime.UTC().Format("15:04:05.000"), after.Status.CompletionTime.UTC().Format("15:04:05.000"), after.Status.Progress.FilesDone)
	expectIdentical(t, source, dest)
}
