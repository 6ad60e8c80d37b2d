package cluster

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// replanTimeout bounds the wait for a re-plan after the path's rate falls: the rescale
// policy ignores measurements for its settle time after a change and reads the median
// of a window of reports, so it acts tens of seconds after the fall, not at once.
const replanTimeout = 3 * time.Minute

// TestPathRateHalvedReplans halves the path's rate under a running job — the WAN
// bottleneck is set to half the rate the job measured — and checks that the controller
// re-plans, with the reason in status.replans and in an Event, and that the job still
// completes with identical files once the path recovers.
func TestPathRateHalvedReplans(t *testing.T) {
	onFailure(t)
	g := NewWithT(t)
	ctx := context.Background()
	mib := int64(512)
	if v, err := strconv.ParseInt(os.Getenv("DTN_E2E_REPLAN_MIB"), 10, 64); err == nil && v > 0 {
		mib = v
	}
	spec := framework.DatasetSpec{Seed: 4, Large: int(mib / 64), LargeBytes: 64 << 20, Small: 50}
	source := dataset(t, "e2e/replan", spec)
	job := newJob("replan", "e2e/replan", "incoming/replan")
	fullRate := cluster.WAN.RateBitsPerSecond
	t.Cleanup(func() { _ = cluster.SetWANRate(context.Background(), fullRate) })
	dest := createJob(ctx, t, job)

	// Wait for a steady measured rate, then halve the path under it.
	running := waitForProgress(ctx, g, job, 0.05, transferTimeout)
	g.Eventually(func(g Gomega) {
		var err error
		running, err = getJob(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(running.Status.Progress.CurrentBitsPerSecond).To(BeNumerically(">", 0))
	}).WithTimeout(time.Minute).Should(Succeed())
	measured := min(running.Status.Progress.CurrentBitsPerSecond, fullRate)
	halved := measured / 2
	replansBefore := len(running.Status.Replans)
	halvedAt := metav1.Now()
	g.Expect(cluster.SetWANRate(ctx, halved)).To(Succeed())
	t.Logf("job at %d%%, measuring %d bit/s (plan: %d stripes/node × %d streams); WAN bottleneck set to %d bit/s",
		running.Status.Progress.Percent, running.Status.Progress.CurrentBitsPerSecond,
		running.Status.Plan.StripesPerNode, running.Status.Plan.StreamsPerStripe, halved)

	var replan dtnflowv1alpha1.Replan
	g.Eventually(func(g Gomega) {
		now, err := getJob(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		if now.Status.State == dtnflowv1alpha1.StateComplete || now.Status.State == dtnflowv1alpha1.StateFailed {
			StopTrying(fmt.Sprintf("the job ended (%s) without re-planning after the WAN rate was halved; replans: %+v (a larger dataset: DTN_E2E_REPLAN_MIB, now %d)",
				describeConditions(now), now.Status.Replans, mib)).Now()
		}
		var after []dtnflowv1alpha1.Replan
		for _, r := range now.Status.Replans {
			if !r.Time.Before(&halvedAt) {
				after = append(after, r)
			}
		}
		g.Expect(len(now.Status.Replans)).To(BeNumerically(">", replansBefore))
		g.Expect(after).NotTo(BeEmpty(), "no re-plan since the WAN rate was halved")
		replan = after[0]
	}).WithTimeout(replanTimeout).WithPolling(time.Second).Should(Succeed())
	t.Logf("re-plan %s after %s: %s (%+v → %+v)", replan.Reason, replan.Time.Sub(halvedAt.Time).Round(time.Second), replan.Message, replan.From, replan.To)
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
