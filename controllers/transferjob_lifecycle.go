package controllers

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/metrics"
)

// The beginning and end of a job's children: the objects its agents authenticate with,
// what is left when it finishes, what is swept when it is deleted, and what the path's
// PathProfile learns from it.

// ensureAuth creates what the job's agents authenticate with, when missing: the shared
// secret, and the coordinator's ServiceAccount, Role and RoleBinding.
func (r *TransferJobReconciler) ensureAuth(ctx context.Context, p *pass) error {
	job := p.job
	key := func(name string) types.NamespacedName {
		return types.NamespacedName{Namespace: job.Namespace, Name: name}
	}
	children := []struct {
		existing client.Object
		name     string
		build    func() (client.Object, error)
	}{
		{&corev1.Secret{}, SecretName(job.Name), func() (client.Object, error) { return buildJobSecret(job) }},
		{&corev1.ServiceAccount{}, CoordinatorAccountName(job.Name), func() (client.Object, error) { return buildCoordinatorServiceAccount(job), nil }},
		{&rbacv1.Role{}, CoordinatorAccountName(job.Name), func() (client.Object, error) { return buildCoordinatorRole(job), nil }},
		{&rbacv1.RoleBinding{}, CoordinatorAccountName(job.Name), func() (client.Object, error) { return buildCoordinatorRoleBinding(job), nil }},
	}
	for _, c := range children {
		err := r.Client.Get(ctx, key(c.name), c.existing)
		if err == nil {
			continue
		}
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("reading %T %s: %w", c.existing, c.name, err)
		}
		obj, err := c.build()
		if err != nil {
			return err
		}
		if err := r.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating %T %s: %w", obj, c.name, err)
		}
	}
	return nil
}

// reconcileFinished keeps a finished job's agents stopped and deletes the job when its
// ttlSecondsAfterFinished has passed.
func (r *TransferJobReconciler) reconcileFinished(ctx context.Context, p *pass) error {
	p.obs = &observed{senders: map[int32]*corev1.Pod{}, receivers: map[int32]*corev1.Pod{}, leaving: map[string]bool{}}
	if err := r.observePods(ctx, p.job, p.obs); err != nil {
		return err
	}
	if err := r.deleteAgents(ctx, p, p.obs.agentPods(), "finished"); err != nil {
		return err
	}
	return r.expire(ctx, p)
}

// deleteJob deletes a job whose ttlSecondsAfterFinished has passed; the garbage
// collector takes what it owns.
func (r *TransferJobReconciler) deleteJob(ctx context.Context, p *pass) error {
	err := r.Client.Delete(ctx, p.job, client.Preconditions{UID: &p.job.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting the job after spec.ttlSecondsAfterFinished: %w", err)
	}
	logf.FromContext(ctx).Info("Deleted the job: spec.ttlSecondsAfterFinished passed", "ttlSecondsAfterFinished", *p.job.Spec.TTLSecondsAfterFinished)
	return nil
}

// sweep removes what a deleted job left. Owner references let the garbage collector do
// this on a cluster; the sweep makes it immediate (agent pods hold host ports and CPU)
// and covers clusters, such as a bare test API server, that run no collector. It first
// confirms through the API server itself that the job is gone — a new job of the same
// name keeps its own children.
func (r *TransferJobReconciler) sweep(ctx context.Context, key types.NamespacedName) error {
	metrics.ForgetJob(key.Namespace, key.Name)
	var pods corev1.PodList
	if err := r.Client.List(ctx, &pods, client.InNamespace(key.Namespace), client.MatchingFields{IndexPodOwnerJob: key.Name}); err != nil {
		return err
	}
	jobLabels := client.MatchingLabels{contract.LabelJob: JobLabelValue(key.Name), contract.LabelManagedBy: contract.ManagedByValue}
	var secrets corev1.SecretList
	var accounts corev1.ServiceAccountList
	var roles rbacv1.RoleList
	var bindings rbacv1.RoleBindingList
	var leftovers []client.Object
	for _, l := range []client.ObjectList{&secrets, &accounts, &roles, &bindings} {
		if err := r.Client.List(ctx, l, client.InNamespace(key.Namespace), jobLabels); err != nil {
			return err
		}
	}
	for i := range pods.Items {
		leftovers = append(leftovers, &pods.Items[i])
	}
	for i := range secrets.Items {
		leftovers = append(leftovers, &secrets.Items[i])
	}
	for i := range accounts.Items {
		leftovers = append(leftovers, &accounts.Items[i])
	}
	for i := range roles.Items {
		leftovers = append(leftovers, &roles.Items[i])
	}
	for i := range bindings.Items {
		leftovers = append(leftovers, &bindings.Items[i])
	}
	if len(leftovers) == 0 {
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
	for _, o := range leftovers {
		owner := controllerUID(o)
		if owner == "" || owner == liveUID {
			continue
		}
		uid := o.GetUID()
		if err := r.Client.Delete(ctx, o, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting %T %s/%s left by deleted TransferJob %s: %w", o, o.GetNamespace(), o.GetName(), key, err)
		}
		r.exp.Forget(owner)
		r.rescale.forget(owner)
		swept++
	}
	if swept > 0 {
		logf.FromContext(ctx).Info("Swept what a deleted job left", "transferJob", klog.KRef(key.Namespace, key.Name), "objects", swept)
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
