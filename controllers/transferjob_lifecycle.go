package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/agentlogs"
	"github.com/dtnflow/dtnflow/controllers/metrics"
)

// The beginning and end of a job's children: the objects its agents authenticate with,
// what is left when it finishes, what is swept when it is deleted, and what the path's
// PathProfile learns from it.

// ensureAuth creates what the job's agents authenticate with: the shared secret, and
// the coordinator's ServiceAccount, Role and RoleBinding. The manager never reads them
// back — it may create Secrets but not read any, which is what least privilege asks of
// an operator that runs in every namespace — so "already exists" is success, and a job
// whose objects were made is remembered in memory. The memory is dropped when an agent
// fails (a deleted Secret would make its replacement fail too) and by a restart; either
// way the next pass creates what is missing.
func (r *TransferJobReconciler) ensureAuth(ctx context.Context, p *pass) error {
	job := p.job
	if _, ok := r.authReady.Load(job.UID); ok {
		return nil
	}
	objs := []client.Object{buildCoordinatorServiceAccount(job), buildCoordinatorRole(job), buildCoordinatorRoleBinding(job)}
	var secret *corev1.Secret
	if _, side, _ := remoteOf(job); side == "" { // a job with a peer: ensureRemoteAuth
		var err error
		if secret, err = buildJobSecret(job); err != nil {
			return err
		}
		objs = append(objs, secret)
	}
	for _, obj := range objs {
		err := r.Client.Create(ctx, obj)
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", obj, obj.GetName(), err)
		}
		if obj == client.Object(secret) && err == nil {
			// the bytes the job's agents prove, for the warm agents it claims; a Secret
			// that already existed holds other bytes, unknown here
			r.jobSecrets.Store(job.UID, secret.Data[contract.SecretKey])
		}
	}
	r.authReady.Store(job.UID, struct{}{})
	return nil
}

// reconcileFinished keeps a finished job's agents stopped and deletes the job when its
// ttlSecondsAfterFinished has passed.
func (r *TransferJobReconciler) reconcileFinished(ctx context.Context, p *pass) error {
	p.obs = &observed{senders: map[int32]*corev1.Pod{}, receivers: map[int32]*corev1.Pod{}, leaving: map[string]bool{}}
	if err := r.observePods(ctx, p.job, p.obs); err != nil {
		return err
	}
	r.archiveLogs(ctx, p, p.obs.agentPods(), agentlogs.ReasonFinished) // left by a pass that ended before deleting them
	if err := r.deleteAgents(ctx, p, p.obs.agentPods(), "finished"); err != nil {
		return err
	}
	if _, side, _ := remoteOf(p.job); side != "" && !r.releaseRemote(ctx, p) {
		p.requeue(30 * time.Second) // the peer could not be told: its side is released later
	}
	if len(p.obs.leaving) == 0 {
		r.forget(p.job.UID) // nothing of it runs any more
	}
	return r.expire(ctx, p)
}

// deleteJob deletes a job whose ttlSecondsAfterFinished has passed; the garbage
// collector takes what it owns.
func (r *TransferJobReconciler) deleteJob(ctx context.Context, p *pass) error {
	if err := r.recordExpired(ctx, p); err != nil {
		return err // kept until the record is written: without it a GitOps tool's copy would run again
	}
	err := r.Client.Delete(ctx, p.job, client.Preconditions{UID: &p.job.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the job after spec.ttlSecondsAfterFinished: %w", err)
	}
	logf.FromContext(ctx).Info("Deleted the job: spec.ttlSecondsAfterFinished passed", "ttlSecondsAfterFinished", *p.job.Spec.TTLSecondsAfterFinished)
	return nil
}

// sweep removes the agent pods a deleted job left. Owner references let the garbage
// collector remove everything a job owns on a cluster; the sweep makes it immediate for
// the pods, which hold host ports and CPU on DTN nodes, and covers clusters (such as a
// bare test API server) that run no collector. Secrets and RBAC objects are left to the
// collector: the manager may not read or delete them. The sweep first confirms through
// the API server itself that the job is gone — a new job of the same name keeps its own
// pods.
func (r *TransferJobReconciler) sweep(ctx context.Context, key types.NamespacedName) error {
	metrics.ForgetJob(key.Namespace, key.Name)
	if r.remotes != nil {
		var live dtnflowv1alpha1.TransferJob
		if err := r.APIReader.Get(ctx, key, &live); err == nil || apierrors.IsNotFound(err) {
			r.sweepRemote(ctx, key, live.UID)
		}
	}
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingFields{IndexPodOwnerJob: key.Name}); err != nil {
		return err
	}
	if len(pods.Items) == 0 {
		return nil
	}
	var live dtnflowv1alpha1.TransferJob
	var liveUID types.UID
	switch err := r.APIReader.Get(ctx, key, &live); {
	case err == nil:
		liveUID = live.UID
	case !apierrors.IsNotFound(err):
		return err
	}
	swept := 0
	for i := range pods.Items {
		pod := &pods.Items[i]
		owner := controllerUID(pod)
		if owner == "" || owner == liveUID {
			continue
		}
		if err := r.Client.Delete(ctx, pod, client.Preconditions{UID: &pod.UID}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting pod %s left by deleted TransferJob %s: %w", podKey(pod), key, err)
		}
		r.forget(owner)
		swept++
	}
	if swept > 0 {
		logf.FromContext(ctx).Info("Swept the agent pods a deleted job left", "transferJob", klog.KRef(key.Namespace, key.Name), "pods", swept)
	}
	return nil
}

// learn records what the job taught about its path in the path's PathProfile, creating
// the profile the first time the path is used.
func (r *TransferJobReconciler) learn(ctx context.Context, p *pass) error {
	job := p.job.DeepCopy()
	job.Status = *p.st.DeepCopy()
	profile := p.obs.profile
	if profile == nil {
		profile = &dtnflowv1alpha1.PathProfile{
			ObjectMeta: metav1.ObjectMeta{
				Name:   PathProfileNameFor(job),
				Labels: map[string]string{contract.LabelManagedBy: contract.ManagedByValue},
			},
			Spec: dtnflowv1alpha1.PathProfileSpec{SourceEndpoint: job.Spec.Source.Endpoint, DestinationEndpoint: job.Spec.Destination.Endpoint},
		}
		if err := r.Client.Create(ctx, profile); err != nil {
			if !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating PathProfile %s: %w", profile.Name, err)
			}
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(profile), profile); err != nil {
				return err
			}
		}
	}
	// Two jobs on one path may finish together: on a conflict, learn again from the
	// profile as the other one left it.
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		patch := client.MergeFromWithOptions(profile.DeepCopy(), client.MergeFromWithOptimisticLock{})
		profile.Status = r.Planner.Learn(profile, job, p.now.Time)
		err := r.Client.Status().Patch(ctx, profile, patch)
		if apierrors.IsConflict(err) {
			if gerr := r.APIReader.Get(ctx, client.ObjectKeyFromObject(profile), profile); gerr != nil {
				return gerr
			}
		}
		if err != nil {
			return fmt.Errorf("writing the status of PathProfile %s: %w", profile.Name, err)
		}
		return nil
	})
}
