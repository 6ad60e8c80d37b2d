package controllers

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// TestExternalDestination checks a destination served by an agent outside the cluster
// (spec.externalAddress): no receiver pods, and every sender connects there.
func TestExternalDestination(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src := newSite(t, "src", siteOptions{})
	ext := &dtnflowv1alpha1.TransferEndpoint{
		ObjectMeta: metav1.ObjectMeta{Name: unique("remote")},
		Spec: dtnflowv1alpha1.TransferEndpointSpec{
			NodeSelector:      map[string]string{"dtnflow.io/site": "elsewhere"},
			Storage:           dtnflowv1alpha1.EndpointStorage{HostPath: "/srv/remote"},
			NICBitsPerSecond:  10_000_000_000,
			NamespaceSelector: &metav1.LabelSelector{},
			ExternalAddress:   "dtn.remote.example.org:47000",
		},
	}
	if err := env.Client.Create(context.Background(), ext); err != nil {
		t.Fatal(err)
	}
	ns := createNamespace(t, nil)
	job := createJob(t, ns, "outbound", fixedSpec(src, site{name: ext.Name}))
	plan := startTransfer(t, job)
	if len(plan.DestinationNodes) != 0 {
		t.Errorf("plan has destination nodes %v for an external destination", plan.DestinationNodes)
	}
	eventually(t, func(g Gomega) {
		pods := listAgents(g, job)
		g.Expect(pods.receivers).To(BeEmpty())
		g.Expect(pods.senders).To(HaveLen(4))
		for _, p := range pods.senders {
			g.Expect(p.Spec.Containers[0].Args).To(ContainElements("--receiver", "dtn.remote.example.org:47000"))
		}
		j := getJob(g, job)
		for _, s := range j.Status.Stripes {
			g.Expect(s.State).To(Equal(dtnflowv1alpha1.StripeRunning))
			g.Expect(s.DestinationNode).To(BeEmpty())
		}
	})

	// As a source, an external agent is refused: it can only receive.
	refused := createJob(t, ns, "inbound", fixedSpec(site{name: ext.Name}, src))
	eventually(t, func(g Gomega) {
		c := condition(getJob(g, refused), dtnflowv1alpha1.ConditionPlanned)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal("ExternalSourceUnsupported"))
		g.Expect(listAgents(g, refused).all).To(BeEmpty())
	})
}
