package controllers

import (
	"fmt"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// The API server checks each object on its own; what it cannot check is a job against
// the endpoints it names, which are cluster-scoped, owned by the cluster's admins and may
// change at any time. These checks run on every pass, before any pod exists, so that a
// job that may not run never starts one, and a job whose access is withdrawn stops.

// Reasons of the Planned condition when a job cannot run against its endpoints.
const (
	ReasonEndpointNotFound      = "EndpointNotFound"
	ReasonNamespaceNotAllowed   = "NamespaceNotAllowed"
	ReasonDestinationReadOnly   = "DestinationReadOnly"
	ReasonExternalSourceRefused = "ExternalSourceUnsupported"
	ReasonNoReadyNodes          = "NoReadyNodes"
	ReasonDestinationInSource   = "DestinationInsideSource"
)

// jobProblem is why a job cannot run now: a condition reason and a message naming the
// field of the job or endpoint involved.
type jobProblem struct {
	Reason  string
	Message string
	// Blocking problems withdraw access: the job's agent pods are stopped. Others (no
	// Ready node) only keep new pods from starting.
	Blocking bool
	// peerQueue is set when the problem is that the peer site queues the job's other
	// side (ReasonRemoteQueued): its place there.
	peerQueue *dtnflowv1alpha1.TransferQueue
}

// jobEndpoints is what validateJob reads: the two endpoints (nil when absent), the
// job's namespace and the usable nodes of each side.
type jobEndpoints struct {
	Source, Destination           *dtnflowv1alpha1.TransferEndpoint
	Namespace                     *corev1.Namespace
	SourceNodes, DestinationNodes []nodeView
}

// validateJob returns the first problem that keeps the job from running, or nil.
func validateJob(job *dtnflowv1alpha1.TransferJob, in jobEndpoints) *jobProblem {
	sides := []struct {
		field string
		name  string
		ep    *dtnflowv1alpha1.TransferEndpoint
	}{
		{"spec.source.endpoint", job.Spec.Source.Endpoint, in.Source},
		{"spec.destination.endpoint", job.Spec.Destination.Endpoint, in.Destination},
	}
	for _, s := range sides {
		if s.ep == nil {
			return &jobProblem{Reason: ReasonEndpointNotFound, Blocking: true,
				Message: fmt.Sprintf("%s: TransferEndpoint %q not found", s.field, s.name)}
		}
		if ok, err := namespaceAllowed(s.ep.Spec.NamespaceSelector, in.Namespace); !ok {
			msg := fmt.Sprintf("%s: namespace %q is not selected by spec.namespaceSelector of TransferEndpoint %q", s.field, job.Namespace, s.name)
			if err != nil {
				msg = fmt.Sprintf("%s: spec.namespaceSelector of TransferEndpoint %q is invalid: %v", s.field, s.name, err)
			}
			return &jobProblem{Reason: ReasonNamespaceNotAllowed, Message: msg, Blocking: true}
		}
	}
	if i, ok := destinationInsideSource(job); ok {
		return &jobProblem{Reason: ReasonDestinationInSource, Blocking: true,
			Message: fmt.Sprintf("spec.destination.path: %q lies in spec.source.paths[%d] %q on the same TransferEndpoint %q: every run would copy again what the runs before copied into it, one level deeper",
				job.Spec.Destination.Path, i, job.Spec.Source.Paths[i], job.Spec.Destination.Endpoint)}
	}
	if in.Destination.Spec.Storage.ReadOnly {
		return &jobProblem{Reason: ReasonDestinationReadOnly, Blocking: true,
			Message: fmt.Sprintf("spec.destination.endpoint: TransferEndpoint %q has spec.storage.readOnly set and can only be a source", job.Spec.Destination.Endpoint)}
	}
	if in.Source.Spec.ExternalAddress != "" {
		return &jobProblem{Reason: ReasonExternalSourceRefused, Blocking: true,
			Message: fmt.Sprintf("spec.source.endpoint: TransferEndpoint %q has spec.externalAddress; an agent outside the cluster can only receive, so it cannot be a source", job.Spec.Source.Endpoint)}
	}
	if countUsable(in.SourceNodes) == 0 {
		return &jobProblem{Reason: ReasonNoReadyNodes,
			Message: fmt.Sprintf("spec.source.endpoint: TransferEndpoint %q has no Ready, schedulable node matching its spec.nodeSelector", job.Spec.Source.Endpoint)}
	}
	if in.Destination.Spec.ExternalAddress == "" && countUsable(in.DestinationNodes) == 0 {
		return &jobProblem{Reason: ReasonNoReadyNodes,
			Message: fmt.Sprintf("spec.destination.endpoint: TransferEndpoint %q has no Ready, schedulable node matching its spec.nodeSelector", job.Spec.Destination.Endpoint)}
	}
	return nil
}

// destinationInsideSource finds the source path a job's destination lies in, on one
// endpoint: a file lands at the destination path joined with its path under the root,
// so with a destination at or under a source path (or a source path of the whole
// root), the next run lists the copies too and copies them one level deeper — a
// scheduled or re-applied job fills the storage. A destination at the root puts each
// file on itself, which copies nothing again.
func destinationInsideSource(job *dtnflowv1alpha1.TransferJob) (int, bool) {
	src, dst := job.Spec.Source, job.Spec.Destination
	if src.Endpoint != dst.Endpoint || src.Site != dst.Site {
		return 0, false
	}
	d := path.Clean(string(dst.Path))
	if d == "." || d == "" {
		return 0, false
	}
	for i, p := range src.Paths {
		s := path.Clean(string(p))
		if s == "." || d == s || strings.HasPrefix(d, s+"/") {
			return i, true
		}
	}
	return 0, false
}

// namespaceAllowed says whether an endpoint's namespaceSelector selects ns. A nil
// selector selects nothing (the API requires one; {} selects everything).
func namespaceAllowed(sel *metav1.LabelSelector, ns *corev1.Namespace) (bool, error) {
	if sel == nil || ns == nil {
		return false, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return false, err
	}
	return s.Matches(labels.Set(ns.Labels)), nil
}

func countUsable(nodes []nodeView) int {
	n := 0
	for _, nd := range nodes {
		if nd.Usable() {
			n++
		}
	}
	return n
}
