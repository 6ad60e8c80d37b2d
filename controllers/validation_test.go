package controllers

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
