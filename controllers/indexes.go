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
	// IndexRemoteEndpoint indexes RemoteTransfers by the endpoint of this site they
	// use: a peer's job counts against that endpoint's limits with this site's jobs.
	IndexRemoteEndpoint = "dtnflow.io/remote-endpoint"
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
	if err := indexer.IndexField(ctx, &dtnflowv1alpha1.RemoteTransfer{}, IndexRemoteEndpoint, func(o client.Object) []string {
		return []string{o.(*dtnflowv1alpha1.RemoteTransfer).Spec.Endpoint}
	}); err != nil {
		return err
	}
	return indexer.IndexField(ctx, &dtnflowv1alpha1.TransferJob{}, IndexJobEndpoint, func(o client.Object) []string {
		src, dst := jobEndpointKeys(o.(*dtnflowv1alpha1.TransferJob))
		if src == dst {
			return []string{src}
		}
		return []string{src, dst}
	})
}

// jobEndpointKeys are the keys of a job's endpoints in IndexJobEndpoint and in the
// sharing view: a local endpoint's name, or "site/name" for a peer site's endpoint
// (a '/' is in no object name, so a peer's endpoint never shares with a local one of
// the same name).
func jobEndpointKeys(job *dtnflowv1alpha1.TransferJob) (src, dst string) {
	return endpointKey(job.Spec.Source.Site, job.Spec.Source.Endpoint), endpointKey(job.Spec.Destination.Site, job.Spec.Destination.Endpoint)
}

func endpointKey(site, name string) string {
	if site == "" {
		return name
	}
	return site + "/" + name
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
