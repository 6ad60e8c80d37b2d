package controllers

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

func TestValidateJob(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "physics", Labels: map[string]string{"dtnflow.io/allowed": "true"}}}
	ready := []nodeView{{Name: "n1", Ready: true}}
	notReady := []nodeView{{Name: "n1", Ready: false}, {Name: "n2", Ready: true, Unschedulable: true}}
	tests := map[string]struct {
		mutate       func(*jobEndpoints)
		wantReason   string
		wantBlocking bool
		wantInMsg    string
	}{
		"valid": {mutate: func(*jobEndpoints) {}},
		"missing source": {
			mutate: func(in *jobEndpoints) { in.Source = nil }, wantReason: ReasonEndpointNotFound, wantBlocking: true,
			wantInMsg: `spec.source.endpoint: TransferEndpoint "site-a" not found`,
		},
		"missing destination": {
			mutate: func(in *jobEndpoints) { in.Destination = nil }, wantReason: ReasonEndpointNotFound, wantBlocking: true,
			wantInMsg: `spec.destination.endpoint: TransferEndpoint "site-b" not found`,
		},
		"namespace not selected": {
			mutate: func(in *jobEndpoints) {
				in.Destination.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "astro"}}
			},
			wantReason: ReasonNamespaceNotAllowed, wantBlocking: true,
			wantInMsg: `spec.destination.endpoint: namespace "physics" is not selected by spec.namespaceSelector of TransferEndpoint "site-b"`,
		},
		"namespace selected by label": {
			mutate: func(in *jobEndpoints) {
				in.Source.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"dtnflow.io/allowed": "true"}}
			},
		},
		"invalid selector": {
			mutate: func(in *jobEndpoints) {
				in.Source.Spec.NamespaceSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bogus"}}}
			},
			wantReason: ReasonNamespaceNotAllowed, wantBlocking: true, wantInMsg: "is invalid",
		},
		"namespace unknown": {
			mutate: func(in *jobEndpoints) { in.Namespace = nil }, wantReason: ReasonNamespaceNotAllowed, wantBlocking: true,
		},
		"read-only destination": {
			mutate:     func(in *jobEndpoints) { in.Destination.Spec.Storage.ReadOnly = true },
			wantReason: ReasonDestinationReadOnly, wantBlocking: true, wantInMsg: "spec.storage.readOnly",
		},
		"read-only source is fine": {
			mutate: func(in *jobEndpoints) { in.Source.Spec.Storage.ReadOnly = true },
		},
		"external source": {
			mutate:     func(in *jobEndpoints) { in.Source.Spec.ExternalAddress = "dtn.example.org:47000" },
			wantReason: ReasonExternalSourceRefused, wantBlocking: true,
		},
		"external destination needs no nodes": {
			mutate: func(in *jobEndpoints) {
				in.Destination.Spec.ExternalAddress = "dtn.example.org:47000"
				in.DestinationNodes = nil
			},
		},
		"no ready source node": {
			mutate:     func(in *jobEndpoints) { in.SourceNodes = notReady },
			wantReason: ReasonNoReadyNodes, wantInMsg: `spec.source.endpoint: TransferEndpoint "site-a" has no Ready`,
		},
		"no destination node": {
			mutate:     func(in *jobEndpoints) { in.DestinationNodes = nil },
			wantReason: ReasonNoReadyNodes, wantInMsg: "spec.destination.endpoint",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			in := jobEndpoints{
				Source: testEndpoint("site-a", "/srv/a", ""), Destination: testEndpoint("site-b", "/srv/b", ""),
				Namespace: ns, SourceNodes: ready, DestinationNodes: ready,
			}
			tc.mutate(&in)
			prob := validateJob(testJob(), in)
			if tc.wantReason == "" {
				if prob != nil {
					t.Fatalf("unexpected problem %+v", prob)
				}
				return
			}
			if prob == nil || prob.Reason != tc.wantReason || prob.Blocking != tc.wantBlocking || !strings.Contains(prob.Message, tc.wantInMsg) {
				t.Fatalf("problem %+v; want reason %s, blocking %v, message containing %q", prob, tc.wantReason, tc.wantBlocking, tc.wantInMsg)
			}
		})
	}
}

// TestValidateJobRefusesADestinationInsideItsSource: on one endpoint, a destination at
// or under a source path (or under a source of the whole root) would take every run's
// copies into the next run's listing; the job is stopped before any pod, naming both
// fields. Other endpoints, other sites, a destination at the root, and paths that only
// share a prefix are fine.
func TestValidateJobRefusesADestinationInsideItsSource(t *testing.T) {
	tests := []struct {
		name      string
		endpoint  string // the destination's; the source is site-a
		site      string // the destination's; the source's is ""
		paths     []dtnflowv1alpha1.RelativePath
		dest      dtnflowv1alpha1.RelativePath
		wantIndex int // -1: no problem
	}{
		{"under a source path", "site-a", "", []dtnflowv1alpha1.RelativePath{"other", "runs"}, "runs/copy", 1},
		{"the source path itself", "site-a", "", []dtnflowv1alpha1.RelativePath{"runs"}, "runs", 0},
		{"written otherwise", "site-a", "", []dtnflowv1alpha1.RelativePath{"./runs/"}, "runs//0427/./copy", 0},
		{"a source of the whole root", "site-a", "", []dtnflowv1alpha1.RelativePath{"."}, "copy", 0},
		{"a prefix that is not a directory", "site-a", "", []dtnflowv1alpha1.RelativePath{"runs"}, "runs-copy", -1},
		{"the source inside the destination", "site-a", "", []dtnflowv1alpha1.RelativePath{"data/runs"}, "data", -1},
		{"the root as destination", "site-a", "", []dtnflowv1alpha1.RelativePath{"runs"}, "", -1},
		{"another endpoint", "site-b", "", []dtnflowv1alpha1.RelativePath{"runs"}, "runs/copy", -1},
		{"another site's endpoint of that name", "site-a", "lab-2", []dtnflowv1alpha1.RelativePath{"runs"}, "runs/copy", -1},
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "physics"}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			job := testJob()
			job.Spec.Source.Endpoint, job.Spec.Source.Paths = "site-a", tc.paths
			job.Spec.Destination.Endpoint, job.Spec.Destination.Site, job.Spec.Destination.Path = tc.endpoint, tc.site, tc.dest
			ep := testEndpoint(tc.endpoint, "/srv/x", "")
			in := jobEndpoints{Source: testEndpoint("site-a", "/srv/a", ""), Destination: ep, Namespace: ns,
				SourceNodes: []nodeView{{Name: "n1", Ready: true}}, DestinationNodes: []nodeView{{Name: "n1", Ready: true}}}
			in.Source.Spec.NamespaceSelector, in.Destination.Spec.NamespaceSelector = &metav1.LabelSelector{}, &metav1.LabelSelector{}
			prob := validateJob(job, in)
			if tc.wantIndex < 0 {
				if prob != nil {
					t.Fatalf("unexpected problem %+v", prob)
				}
				return
			}
			want := fmt.Sprintf("spec.destination.path: %q lies in spec.source.paths[%d] %q", tc.dest, tc.wantIndex, tc.paths[tc.wantIndex])
			if prob == nil || prob.Reason != ReasonDestinationInSource || !prob.Blocking || !strings.Contains(prob.Message, want) {
				t.Fatalf("problem %+v; want %s, blocking, naming %q", prob, ReasonDestinationInSource, want)
			}
		})
	}
}
