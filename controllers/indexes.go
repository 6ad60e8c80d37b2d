package controllers

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// Field indexes on the manager's cache, so that a reconcile lists what it needs without
// scanning every object of a kind.
const (
	// IndexPodOwnerJob indexes agent pods by the name of the TransferJob that controls
	// them: a job lists its pods through it.
	IndexPodOwnerJob = "dtnflow.io/owner-job"
	// IndexPodNode indexes agent pods by the node they are pinned to (before the
	// scheduler has bound them, too): ports and stripe counts per node come from it.
	IndexPodNode = "dtnflow.io/pinned-node"
	// IndexJobEndpoint indexes TransferJobs by both endpoints they name: a change to an
	// endpoint wakes the jobs that use it.
	IndexJobEndpoint = "dtnflow.io/endpoint"
	// IndexPodOwnerRemote indexes agent pods by the name of the RemoteTransfer that
	// controls them (a peer site's job's side, run here).
	IndexPodOwnerRemote = "dtnflow.io/owner-remote"
)

// SetupIndexes registers the field indexes. The manager calls it once, before the
// controllers start.
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	if err := indexer.IndexField(ctx, &corev1.Pod{}, IndexPodOwnerJob, podOwnerJob); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &corev1.Pod{}, IndexPodOwnerRemote, podOwnerRemote); err != nil {
		return err
	}
	if err := indexer.IndexField(ctx, &corev1.Pod{}, IndexPodNode, func(o client.Object) []string {
		if n := pinnedNode(o.(*corev1.Pod)); n != "" {
			return []string{n}
		}
		return nil
	}); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &dtnflowv1alpha1.TransferJob{}, IndexJobEndpoint, func(o client.Object) []string {
		job := o.(*dtnflowv1alpha1.TransferJob)
		if job.Spec.Source.Endpoint == job.Spec.Destination.Endpoint {
			return []string{job.Spec.Source.Endpoint}
		}
		return []string{job.Spec.Source.Endpoint, job.Spec.Destination.Endpoint}
	})
}

func podOwnerJob(o client.Object) []string {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != "TransferJob" || ref.APIVersion != dtnflowv1alpha1.GroupVersion.String() {
		return nil
	}
	return []string{ref.Name}
}

func podOwnerRemote(o client.Object) []string {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != remoteTransferKind || ref.APIVersion != dtnflowv1alpha1.GroupVersion.String() {
		return nil
	}
	return []string{ref.Name}
}
