package cluster

import (
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
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
// second waits, Queued with reason FilesInUse (and an Event saying so) and no pods,
// while the first moves data, and is admitted only once the first is Complete; the
// copy is the source's, file for file, and both jobs name the two entries of the
// source that are not files (status.notMoved).
func testFilesInUse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	source := dataset(t, "e2e/overlap", framework.DatasetSpec{Seed: 11, Large: 4, LargeBytes: 16 << 20, Small: 40})
	// beside the files, what the listing does not move: a symlinked directory and a
	// FIFO, which the jobs must name in their status (and which the copy's check, of
	// regular files, leaves out)
	subdirs, err := os.ReadDir(source)
	g.Expect(err).NotTo(HaveOccurred())
	var linkTo string
	for _, e := range subdirs {
		if e.IsDir() {
			linkTo = e.Name()
			break
		}
	}
	g.Expect(linkTo).NotTo(BeEmpty(), "the dataset has no folder to link to")
	g.Expect(os.Symlink(linkTo, filepath.Join(source, "linked"))).To(Succeed())
	g.Expect(syscall.Mkfifo(filepath.Join(source, "fifo"), 0o644)).To(Succeed())
	notMoved := []dtnflowv1alpha1.FailedFile{{Path: "e2e/overlap/fifo", Error: "not a regular file"},
		{Path: "e2e/overlap/linked", Error: "symlinked directory not followed"}}
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

	// The first job's data take ten seconds at this rate: the second is seen waiting
	// long before they are through. What holds on every run is checked after both end.
	g.Eventually(func(g Gomega) {
		now, err := getJob(ctx, second)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(now.Status.State).To(Equal(dtnflowv1alpha1.StateQueued), "%s", describeConditions(now))
		g.Expect(now.Status.Queue).NotTo(BeNil())
		g.Expect(now.Status.Queue.Reason).To(Equal(controllers.ReasonFilesInUse))
		g.Expect(now.Status.Queue.Message).To(HavePrefix("waits for the files of TransferJob " + jobNamespace + "/overlap-first: it writes incoming/overlap/e2e/overlap"))
	}).WithTimeout(30 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	var podsWhileQueued int
	for _, role := range []contract.Role{contract.RoleCoordinator, contract.RoleSender, contract.RoleReceiver} {
		pods, err := agentPods(ctx, second, role)
		g.Expect(err).NotTo(HaveOccurred())
		podsWhileQueued += len(pods)
	}
	if running, err := getJob(ctx, first); err == nil && running.Status.State == dtnflowv1alpha1.StateTransferring {
		g.Expect(podsWhileQueued).To(BeZero(), "the waiting job has pods while the first transfers")
	}

	done := waitForState(ctx, g, first, dtnflowv1alpha1.StateComplete, transferTimeout)
	after := waitForState(ctx, g, second, dtnflowv1alpha1.StateComplete, transferTimeout)
	// the second was admitted no sooner than the first was Complete (one manager's
	// clock), after waiting for its files
	admitted := meta.FindStatusCondition(after.Status.Conditions, dtnflowv1alpha1.ConditionQueued)
	g.Expect(admitted).NotTo(BeNil())
	g.Expect(admitted.Reason).To(Equal(controllers.ReasonAdmitted))
	g.Expect(admitted.LastTransitionTime.Time).To(BeTemporally(">=", done.Status.CompletionTime.Time), "admitted before the first job ended")
	var events eventsv1.EventList
	g.Expect(cluster.Client.List(ctx, &events, client.InNamespace(jobNamespace))).To(Succeed())
	g.Expect(events.Items).To(ContainElement(And(
		HaveField("Regarding.Name", second.Name), HaveField("Reason", controllers.ReasonFilesInUse), HaveField("Action", "Queue"))))
	for _, j := range []*dtnflowv1alpha1.TransferJob{done, after} {
		g.Expect(j.Status.NotMoved).To(Equal(notMoved), "TransferJob %s", j.Name)
		g.Expect(j.Status.Progress.EntriesNotMoved).To(Equal(int64(2)), "TransferJob %s", j.Name)
		g.Expect(meta.FindStatusCondition(j.Status.Conditions, dtnflowv1alpha1.ConditionComplete).Message).To(
			HaveSuffix("; 2 entries at the source are not files and were not moved, the first e2e/overlap/fifo: not a regular file; status.notMoved lists them"))
	}
	t.Logf("first Complete at %s; second Complete at %s, %d files verified",
		done.Status.CompletionTime.UTC().Format("15:04:05.000"), after.Status.CompletionTime.UTC().Format("15:04:05.000"), after.Status.Progress.FilesDone)
	expectIdentical(t, source, dest)
}
