package cluster

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// testInstall checks what `helm install` and the two TransferEndpoints gave: the manager
// running on a site-A node's host network, holding its leader-election Lease, and each
// endpoint Ready with its node, NIC cap and CPU budget as the cluster was built.
func testInstall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()

	// The Deployment's status is written by the controller-manager after the pod is
	// Ready, so it may lag the readiness the set-up waited for: poll it.
	g.Eventually(func(g Gomega) {
		d, err := managerDeployment(ctx)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(d.Status.AvailableReplicas).To(BeNumerically("==", 1))
		available := false
		for _, c := range d.Status.Conditions {
			available = available || (c.Type == appsv1.DeploymentAvailable && c.Status == corev1.ConditionTrue)
		}
		g.Expect(available).To(BeTrue(), "the manager Deployment is not Available: %+v", d.Status.Conditions)
	}).WithTimeout(time.Minute).WithPolling(time.Second).Should(Succeed())

	var pods corev1.PodList
	g.Expect(cluster.Client.List(ctx, &pods, client.InNamespace(framework.ReleaseNamespace),
		client.MatchingLabels{"app.kubernetes.io/component": "manager"})).To(Succeed())
	g.Expect(pods.Items).To(HaveLen(1))
	pod := pods.Items[0]
	g.Expect(pod.Spec.HostNetwork).To(BeTrue())
	g.Expect(pod.Spec.NodeName).To(Equal(cluster.Source().Nodes[0].Name))
	g.Expect(pod.Status.PodIP).To(Equal(cluster.Source().Nodes[0].IP), "a host-network pod has its node's IP")

	// Leader election: the one replica holds a Lease in the release namespace.
	g.Eventually(func(g Gomega) {
		var leases coordinationv1.LeaseList
		g.Expect(cluster.Client.List(ctx, &leases, client.InNamespace(framework.ReleaseNamespace))).To(Succeed())
		g.Expect(leases.Items).NotTo(BeEmpty())
		g.Expect(leases.Items[0].Spec.HolderIdentity).NotTo(BeNil())
		g.Expect(*leases.Items[0].Spec.HolderIdentity).To(HavePrefix(pod.Spec.NodeName), "the lease holder is the manager pod on %s", pod.Spec.NodeName)
	}).WithTimeout(time.Minute).Should(Succeed())

	for _, site := range cluster.Sites {
		var ep dtnflowv1alpha1.TransferEndpoint
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: site.Name}, &ep)).To(Succeed())
		g.Expect(ep.Status.ReadyNodes).To(BeNumerically("==", len(site.Nodes)), "endpoint %s", site.Name)
		g.Expect(ep.Spec.NICBitsPerSecond).To(Equal(site.NICBitsPerSecond))
		budget := resource.NewMilliQuantity(site.CPUMillicores, resource.DecimalSI)
		g.Expect(ep.Status.Nodes).To(HaveLen(len(site.Nodes)))
		for _, n := range ep.Status.Nodes {
			g.Expect(n.Ready).To(BeTrue(), "node %s of %s", n.Name, site.Name)
			g.Expect(n.CPUBudget).NotTo(BeNil())
			g.Expect(n.CPUBudget.Cmp(*budget)).To(Equal(0), "CPU budget of %s: %s, want %s", n.Name, n.CPUBudget, budget)
			// the node's allocatable CPU is its CFS quota (kubeReserved takes the rest)
			g.Expect(n.AllocatableCPU).NotTo(BeNil())
			g.Expect(n.AllocatableCPU.MilliValue()).To(Equal(site.CPUMillicores), "allocatable CPU of %s", n.Name)
		}
	}
	// The two sites really differ in CPU, so the CPU regression sees two machines.
	g.Expect(cluster.Sites[0].CPUMillicores).NotTo(Equal(cluster.Sites[1].CPUMillicores))
}
