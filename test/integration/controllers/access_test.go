package controllers

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
)

// TestJobRefusedByItsEndpoints checks that a job its endpoints refuse gets a condition
// that says why, naming the field, and no pod at all; and that fixing the cause lets it
// start without touching the job.
func TestJobRefusedByItsEndpoints(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src := newSite(t, "src", siteOptions{})
	restricted := newSite(t, "dst", siteOptions{namespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dtnflow.io/transfers": "allowed"}}})
	readOnly := newSite(t, "ro", siteOptions{readOnly: true})
	ns := createNamespace(t, nil)

	tests := map[string]struct {
		dst        site
		wantReason string
		wantInMsg  string
	}{
		"missing endpoint":      {site{name: "no-such-site"}, controllers.ReasonEndpointNotFound, `spec.destination.endpoint: TransferEndpoint "no-such-site" not found`},
		"forbidden namespace":   {restricted, controllers.ReasonNamespaceNotAllowed, `namespace "` + ns + `" is not selected by spec.namespaceSelector`},
		"read-only destination": {readOnly, controllers.ReasonDestinationReadOnly, "spec.storage.readOnly"},
	}
	jobs := map[string]*dtnflowv1alpha1.TransferJob{}
	for name, tc := range tests {
		jobs[name] = createJob(t, ns, strings.ReplaceAll(name, " ", "-"), jobSpec(src, tc.dst))
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			job := jobs[name]
			eventually(t, func(g Gomega) {
				j := getJob(g, job)
				c := condition(j, dtnflowv1alpha1.ConditionPlanned)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(c.Reason).To(Equal(tc.wantReason))
				g.Expect(c.Message).To(ContainSubstring(tc.wantInMsg))
				g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StatePending))
				g.Expect(j.Status.ObservedGeneration).To(Equal(j.Generation))
			})
			consistently(t, func(g Gomega) {
				g.Expect(listAgents(g, job).all).To(BeEmpty())
			})
		})
	}

	// Labelling the namespace as the endpoint asks lets the refused job start.
	t.Run("namespace labelled later", func(t *testing.T) {
		job := jobs["forbidden namespace"]
		eventually(t, func(g Gomega) {
			var nsObj = getNamespace(g, ns)
			nsObj.Labels = map[string]string{"dtnflow.io/transfers": "allowed"}
			g.Expect(env.Client.Update(context.Background(), nsObj)).To(Succeed())
		})
		eventually(t, func(g Gomega) {
			j := getJob(g, job)
			g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateProbing))
			g.Expect(listAgents(g, job).coordinator).NotTo(BeNil())
		})
	})
}
