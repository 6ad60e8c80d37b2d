package cluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// printerColumns are the printer columns of the TransferJob CRD as the cluster has it.
func printerColumns(ctx context.Context, g Gomega) string {
	out, err := cluster.Kubectl(ctx, "get", "crd", "transferjobs.dtnflow.io", "-o", "jsonpath={.spec.versions[0].additionalPrinterColumns[*].name}")
	g.Expect(err).NotTo(HaveOccurred())
	return out
}

// testChartUpgrade upgrades the release to a chart whose TransferJob CRD has changed, as
// the next release's will, and back: `helm upgrade` must carry the CRD change both ways
// (Helm never upgrades files under crds/, so the chart renders its CRDs as templates),
// keep the endpoints and their status, and leave the manager available.
func testChartUpgrade(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	next := filepath.Join(t.TempDir(), "dtnflow")
	g.Expect(os.CopyFS(next, os.DirFS(framework.ChartDir()))).To(Succeed())
	crdFile := filepath.Join(next, "files", "crds", "dtnflow.io_transferjobs.yaml")
	crd, err := os.ReadFile(crdFile)
	g.Expect(err).NotTo(HaveOccurred())
	changed := strings.Replace(string(crd), "  - additionalPrinterColumns:\n", "  - additionalPrinterColumns:\n    - jsonPath: .spec.suspend\n      name: UpgradedColumn\n      type: boolean\n", 1)
	g.Expect(changed).NotTo(Equal(string(crd)), "the CRD file has no printer columns to add to")
	g.Expect(os.WriteFile(crdFile, []byte(changed), 0o644)).To(Succeed())
	g.Expect(printerColumns(ctx, g)).NotTo(ContainSubstring("UpgradedColumn"))

	upgrade := func(chart string) {
		t.Helper()
		start := time.Now()
		out, err := cluster.Helm(ctx, "upgrade", framework.ReleaseName, chart, "--namespace", framework.ReleaseNamespace, "--reuse-values", "--wait", "--timeout", "3m")
		g.Expect(err).NotTo(HaveOccurred(), out)
		t.Logf("helm upgrade to %s in %s", chart, time.Since(start).Round(time.Second))
		g.Eventually(func(g Gomega) {
			d, err := managerDeployment(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			available := false
			for _, c := range d.Status.Conditions {
				available = available || (c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue)
			}
			g.Expect(available).To(BeTrue())
			var eps dtnflowv1alpha1.TransferEndpointList
			g.Expect(cluster.Client.List(ctx, &eps)).To(Succeed())
			g.Expect(eps.Items).To(HaveLen(2), "the endpoints outlive the upgrade")
		}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())
	}
	upgrade(next)
	g.Eventually(func(g Gomega) { g.Expect(printerColumns(ctx, g)).To(ContainSubstring("UpgradedColumn")) }).WithTimeout(30 * time.Second).Should(Succeed())
	upgrade(framework.ChartDir())
	g.Eventually(func(g Gomega) { g.Expect(printerColumns(ctx, g)).NotTo(ContainSubstring("UpgradedColumn")) }).WithTimeout(30 * time.Second).Should(Succeed())
	keep, err := cluster.Kubectl(ctx, "get", "crd", "transferjobs.dtnflow.io", "-o", `jsonpath={.metadata.annotations.helm\.sh/resource-policy}`)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(keep).To(Equal("keep"), "an uninstall would delete every TransferJob with its CRD")
}
