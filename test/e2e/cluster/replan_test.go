package cluster

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// The re-plan scenario: the path runs at replanWANRate while the job probes it and
// settles into its plan, then the bottleneck is halved under it.
const (
	replanWANRate = 80_000_000
	// settleTimeout bounds the wait for the job to be transferring on its plan with no
	// change for settledFor: the rescale policy ignores reports for 15 s after a
	// change and reads the median of the last three (2 s apart).
	settleTimeout = 3 * time.Minute
	settledFor    = 12 * time.Second
	sincePlanned  = 24 * time.Second
	// replanTimeout bounds the wait for the re-plan after the fall: a window of
	// reports, and the policy's 30 s cool-down after an earlier change.
	replanTimeout = 2 * time.Minute
)

// testPathRateHalvedReplans starts a job cold on a path of replanWANRate — so its
// model is the model of this path — waits until it runs steadily on its plan, halves
// the WAN's bottleneck, and checks that the controller re-plans because of it: a new
// entry in status.replans after the fall, with a CamelCase reason and a message, an
// Event with the same reason, and the job completing with identical files once the
// path recovers.
func testPathRateHalvedReplans(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	mib := int64(640)
	if v, err := strconv.ParseInt(os.Getenv("DTN_E2E_REPLAN_MIB"), 10, 64); err == nil && v > 0 {
		mib = v
	}
	// 16 MiB files: with a dozen files in flight, some complete every few seconds, so
	// verified progress moves steadily even on the halved path.
	spec := framework.DatasetSpec{Seed: 4, Large: int(mib / 16), LargeBytes: 16 << 20, Small: 50}
	source := dataset(t, "e2e/replan", spec)
	fullRate := cluster.WAN.RateBitsPerSecond
	g.Expect(cluster.SetWANRate(ctx, replanWANRate)).To(Succeed())
	t.Cleanup(func() { _ = cluster.SetWANRate(context.Background(), fullRate) })
	// Cold, so that the plan's predictions are this path's, not the faster path's.
	g.Expect(deleteProfile(ctx)).To(Succeed())
	job := newJob("replan", "e2e/replan", "incoming/replan")
	dest := createJob(ctx, t, job)

	// Transferring on its plan, no change for a while: the policy has nothing left to
	// correct on this path.
	var steady *dtnflowv1alpha1.TransferJob
	g.Eventually(func(g Gomega) {
		var err error
		steady, err = getJob(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		stopIfEnded(steady, fmt.Sprintf("before it ran steadily on its plan (a larger dataset: DTN_E2E_REPLAN_MIB, now %d)", mib))
		g.Expect(steady.Status.State).To(Equal(dtnflowv1alpha1.StateTransferring))
		planned := meta.FindStatusCondition(steady.Status.Conditions, dtnflowv1alpha1.ConditionPlanned)
		g.Expect(planned).NotTo(BeNil())
		g.Expect(time.Since(planned.LastTransitionTime.Time)).To(BeNumerically(">=", sincePlanned))
		if n := len(steady.Status.Replans); n > 0 {
			g.Expect(time.Since(steady.Status.Replans[n-1].Time.Time)).To(BeNumerically(">=", settledFor))
		}
		g.Expect(steady.Status.Progress).NotTo(BeNil())
		g.Expect(steady.Status.Progress.CurrentBitsPerSecond).To(BeNumerically(">", 0))
	}).WithTimeout(settleTimeout).WithPolling(time.Second).Should(Succeed())

	halved := replanWANRate / 2
	replansBefore := len(steady.Status.Replans)
	halvedAt := metav1.Now()
	g.Expect(cluster.SetWANRate(ctx, int64(halved))).To(Succeed())
	t.Logf("job at %d%%, measuring %d bit/s on %d stripe(s)/node × %d streams after %d re-plan(s); WAN bottleneck %d → %d bit/s",
		steady.Status.Progress.Percent, steady.Status.Progress.CurrentBitsPerSecond,
		steady.Status.Plan.StripesPerNode, steady.Status.Plan.StreamsPerStripe, replansBefore, replanWANRate, halved)

	var replan dtnflowv1alpha1.Replan
	g.Eventually(func(g Gomega) {
		now, err := getJob(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		stopIfEnded(now, fmt.Sprintf("without re-planning after the WAN rate was halved; replans: %+v (a larger dataset: DTN_E2E_REPLAN_MIB, now %d)", now.Status.Replans, mib))
		var after []dtnflowv1alpha1.Replan
		for _, r := range now.Status.Replans {
			if !r.Time.Before(&halvedAt) {
				after = append(after, r)
			}
		}
		g.Expect(after).NotTo(BeEmpty(), "no re-plan since the WAN rate was halved")
		replan = after[0]
	}).WithTimeout(replanTimeout).WithPolling(time.Second).Should(Succeed())
	t.Logf("re-plan %s %s after the fall: %s (%+v → %+v)", replan.Reason, replan.Time.Sub(halvedAt.Time).Round(time.Second), replan.Message, replan.From, replan.To)
	g.Expect(replan.Reason).To(MatchRegexp(`^[A-Z][A-Za-z]+$`), "a CamelCase reason")
	g.Expect(replan.Message).NotTo(BeEmpty())
	g.Expect(replan.From).NotTo(Equal(replan.To), "a re-plan changes the plan's shape")

	// The same reason is in an Event about the job.
	g.Eventually(func(g Gomega) {
		events, err := jobEvents(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		var reasons []string
		for _, e := range events {
			reasons = append(reasons, e.Reason)
		}
		g.Expect(reasons).To(ContainElement(replan.Reason), "Events of the job: %v", reasons)
	}).WithTimeout(30 * time.Second).Should(Succeed())

	// The path recovers; the job finishes with every file intact.
	g.Expect(cluster.SetWANRate(ctx, fullRate)).To(Succeed())
	done := waitForState(ctx, g, job, dtnflowv1alpha1.StateComplete, transferTimeout)
	expectIdentical(t, source, dest)
	expectCompleteStatus(g, done, spec)
}
