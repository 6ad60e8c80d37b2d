package controllers

import (
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// This file builds what a job's agents authenticate with: the shared secret every agent
// proves to its peers, and the coordinator's identity, which may read and patch its own
// pod and nothing else. Senders and receivers get no token at all.

// secretBytes is the size of a job's shared secret.
const secretBytes = 32

// childMeta is the metadata of a non-pod child of a job: its name, the job's labels and
// the job as controlling owner (so the garbage collector removes it with the job).
func childMeta(job *dtnflowv1alpha1.TransferJob, name string, role contract.Role) metav1.ObjectMeta {
	labels := map[string]string{
		contract.LabelManagedBy: contract.ManagedByValue,
		contract.LabelJob:       JobLabelValue(job.Name),
	}
	if role != "" {
		labels[contract.LabelRole] = string(role)
	}
	return metav1.ObjectMeta{
		Name:            name,
		Namespace:       job.Namespace,
		Labels:          labels,
		OwnerReferences: []metav1.OwnerReference{controllerRefOf(job)},
	}
}

// buildJobSecret builds the job's Secret with fresh random bytes.
func buildJobSecret(job *dtnflowv1alpha1.TransferJob) (*corev1.Secret, error) {
	secret := make([]byte, secretBytes)
	if _, err := rand.Read(secret); err != nil {
		return nil, fmt.Errorf("reading random bytes for the job secret: %w", err)
	}
	return &corev1.Secret{
		ObjectMeta: childMeta(job, SecretName(job.Name), ""),
		Type:       corev1.SecretTypeOpaque,
		Immutable:  ptr.To(true),
		Data:       map[string][]byte{contract.SecretKey: secret},
	}, nil
}

// buildCoordinatorServiceAccount builds the coordinator's ServiceAccount.
func buildCoordinatorServiceAccount(job *dtnflowv1alpha1.TransferJob) *corev1.ServiceAccount {
	return &corev1.ServiceAccount{
		ObjectMeta: childMeta(job, CoordinatorAccountName(job.Name), contract.RoleCoordinator),
	}
}

// buildCoordinatorRole builds the Role that lets the coordinator get and watch its own
// pod (to read its directive, and hear of a new one at once) and patch it (to write
// its report) — by name, nothing more. A watch of one pod by name (a field selector
// on metadata.name) is authorized against resourceNames like a GET.
func buildCoordinatorRole(job *dtnflowv1alpha1.TransferJob) *rbacv1.Role {
	return &rbacv1.Role{
		ObjectMeta: childMeta(job, CoordinatorAccountName(job.Name), contract.RoleCoordinator),
		Rules: []rbacv1.PolicyRule{{
			APIGroups:     []string{""},
			Resources:     []string{"pods"},
			ResourceNames: []string{CoordinatorPodName(job.Name)},
			Verbs:         []string{"get", "watch", "patch"},
		}},
	}
}

// buildCoordinatorRoleBinding binds the coordinator's Role to its ServiceAccount.
func buildCoordinatorRoleBinding(job *dtnflowv1alpha1.TransferJob) *rbacv1.RoleBinding {
	name := CoordinatorAccountName(job.Name)
	return &rbacv1.RoleBinding{
		ObjectMeta: childMeta(job, name, contract.RoleCoordinator),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: job.Namespace}},
	}
}
