package cluster

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/cmd/kubectl-dtnflow/app"
	"github.com/dtnflow/dtnflow/controllers"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// recurringDataset is the recurring job's dataset (about 70 MiB).
var recurringDataset = framework.DatasetSpec{Seed: 7, Large: 2, LargeBytes: 32 << 20, Medium: 4, Small: 120, Empty: 1}

// plugin runs `kubectl dtnflow ARGS` against the cluster, as a user with its kubeconfig.
func plugin(ctx context.Context, args ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	code := app.Run(ctx, &app.Options{Kubeconfig: cluster.Kubeconfig, Out: &out, Err: &errOut, Terminal: ptr.To(false)}, args)
	return code, out.String(), errOut.String()
}

// testPluginAndRecurringRuns is the user's tools on the real cluster. A recurring job
// (spec.trigger.manual) runs; while its agents run, `kubectl dtnflow logs` reads them
// through the kubelets, and once it completes what the manager kept of them; get,
// describe and plot show it; `rerun`
// starts run 2, `watch` follows it to its end, and the WAN carries next to nothing of
// the dataset again, since the receivers' journals already hold every file.
func testPluginAndRecurringRuns(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	source := dataset(t, "e2e/recurring", recurringDataset)
	job := newJob("recurring", "e2e/recurring", "incoming/recurring")
	job.Spec.Trigger = &dtnflowv1alpha1.TransferTrigger{Manual: "first"}
	dest := createJob(ctx, t, job)

	coordinator := controllers.CoordinatorPodName(job.Name)
	g.Eventually(func(g Gomega) {
		j, err := getJob(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		stopIfEnded(j, "before its agents' logs could be read")
		code, out, errOut := plugin(ctx, "logs", "-n", jobNamespace, job.Name, "--role", "coordinator")
		g.Expect(code).To(Equal(0), errOut)
		g.Expect(out).To(ContainSubstring("[" + coordinator + "] "))
		g.Expect(out).To(ContainSubstring("Listed the dataset"))
	}).WithTimeout(3 * time.Minute).WithPolling(time.Second).Should(Succeed())
	first := waitForState(ctx, g, job, dtnflowv1alpha1.StateComplete, transferTimeout)
	expectIdentical(t, source, dest)
	g.Expect(first.Status.Run).To(Equal(int64(1)))
	g.Expect(first.Status.Runs).To(HaveLen(1))
	// The agents are deleted as the job ends; logs then prints what the manager kept of
	// theirs, read through the kubelets just before (the job's <job>-agent-logs).
	g.Eventually(func(g Gomega) {
		code, out, errOut := plugin(ctx, "logs", "-n", jobNamespace, job.Name, "--role", "coordinator")
		g.Expect(code).To(Equal(0), errOut)
		g.Expect(out).To(ContainSubstring("[" + coordinator + "] --- kept at "))
		g.Expect(out).To(ContainSubstring("when the job ended"))
		g.Expect(out).To(ContainSubstring("Listed the dataset"))
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	code, out, errOut := plugin(ctx, "get", "-n", jobNamespace, job.Name)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(And(ContainSubstring(job.Name), ContainSubstring("Complete"), ContainSubstring("100%")))
	code, out, errOut = plugin(ctx, "describe", "-n", jobNamespace, job.Name)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(And(ContainSubstring("Plan:"), ContainSubstring("Runs (the latest 1):"), ContainSubstring("Events:")))
	file := filepath.Join(framework.ArtifactsDir(t.Name()), "recurring.png")
	g.Expect(os.MkdirAll(filepath.Dir(file), 0o755)).To(Succeed())
	code, _, errOut = plugin(ctx, "plot", "-n", jobNamespace, job.Name, "-o", file)
	g.Expect(code).To(Equal(0), errOut)
	f, err := os.Open(file)
	g.Expect(err).NotTo(HaveOccurred())
	img, err := png.Decode(f)
	f.Close()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(img.Bounds().Dx()).To(Equal(1200))
	g.Expect(img.Bounds().Dy()).To(Equal(900))

	// Run 2: nothing changed at the source, so almost nothing crosses the WAN.
	wanBefore, wanErr := cluster.WANStats(ctx)
	code, out, errOut = plugin(ctx, "rerun", "-n", jobNamespace, job.Name)
	g.Expect(code).To(Equal(0), errOut)
	g.Expect(out).To(ContainSubstring("the next run starts now"))
	g.Eventually(func(g Gomega) {
		j, err := getJob(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(j.Status.Run).To(Equal(int64(2)))
	}).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(Succeed())
	watchCtx, cancel := context.WithTimeout(ctx, transferTimeout)
	defer cancel()
	code, out, errOut = plugin(watchCtx, "watch", "-n", jobNamespace, job.Name)
	g.Expect(code).To(Equal(0), "watch: %s\n%s", errOut, out)
	t.Logf("kubectl dtnflow watch of run 2:\n%s", out)
	second := waitForState(ctx, g, job, dtnflowv1alpha1.StateComplete, time.Minute)
	g.Expect(second.Status.Run).To(Equal(int64(2)))
	g.Expect(second.Status.Runs).To(HaveLen(2))
	g.Expect(second.Status.Runs[1].Trigger).To(Equal(dtnflowv1alpha1.RunManual))
	g.Expect(second.Status.Runs[1].Result).To(Equal(dtnflowv1alpha1.RunComplete))
	expectIdentical(t, source, dest)
	if wanErr == nil {
		wanAfter, err := cluster.WANStats(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		moved := wanAfter.AtoB.DeliveredBytes - wanBefore.AtoB.DeliveredBytes
		t.Logf("run 2 carried %d bytes A→B over the WAN for a %d-byte dataset", moved, recurringDataset.Bytes())
		g.Expect(moved).To(BeNumerically("<", recurringDataset.Bytes()/20), "run 2 sent the dataset again")
	}
}
