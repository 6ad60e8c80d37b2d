package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// The serving site's half of a site pair. A TransferPeer becomes a credential: a
// ServiceAccount in the peer's namespace, a Role that lets it manage RemoteTransfers
// there and create their job secrets (nothing else: it cannot read a Secret, start a
// pod or see another namespace), the RoleBinding, and a token Secret the site's admin
// hands to the peer once. All four are owned by the TransferPeer, so deleting it
// revokes the token (the garbage collector deletes the ServiceAccount, and the API
// server then refuses its token) and the RemoteTransfer controller stops the peer's
// transfers here.

// TransferPeerReconciler makes the credential of each TransferPeer.
type TransferPeerReconciler struct {
	Client client.Client
	Clock  clock.PassiveClock
}

// PeerAccountName is the name of a peer's ServiceAccount, Role and RoleBinding.
func PeerAccountName(peer string) string {
	return truncateWithHash("dtnflow-peer-"+peer, 63-len("-token"))
}

// PeerTokenSecretName is the name of the Secret that holds a peer's token.
func PeerTokenSecretName(peer string) string { return PeerAccountName(peer) + "-token" }

// peerRules are what a peer's credential may do in its namespace: manage the
// RemoteTransfers of its jobs, read their status, and create their job secrets.
var peerRules = []rbacv1.PolicyRule{
	{APIGroups: []string{dtnflowv1alpha1.GroupVersion.Group}, Resources: []string{"remotetransfers"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
	{APIGroups: []string{dtnflowv1alpha1.GroupVersion.Group}, Resources: []string{"remotetransfers/status"}, Verbs: []string{"get"}},
	{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"create"}},
}

// +kubebuilder:rbac:groups=dtnflow.io,resources=transferpeers,verbs=get;list;watch
// +kubebuilder:rbac:groups=dtnflow.io,resources=transferpeers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=dtnflow.io,resources=remotetransfers,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=dtnflow.io,resources=remotetransfers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets;serviceaccounts,verbs=create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=create

// Reconcile creates what a TransferPeer's credential is made of ("already exists" is
// success: the manager never reads them back) and says so in its status.
func (r *TransferPeerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var peer dtnflowv1alpha1.TransferPeer
	if err := r.Client.Get(ctx, req.NamespacedName, &peer); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if peer.DeletionTimestamp != nil {
		return ctrl.Result{}, nil
	}
	st := peer.Status.DeepCopy()
	now := apiTime(r.Clock.Now())
	ready := metav1.Condition{Type: dtnflowv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: "CredentialIssued", ObservedGeneration: peer.Generation, LastTransitionTime: now,
		Message: fmt.Sprintf("ServiceAccount %s/%s may manage RemoteTransfers in %s; its token is in Secret %s", peer.Spec.Namespace, PeerAccountName(peer.Name), peer.Spec.Namespace, PeerTokenSecretName(peer.Name))}
	var createErr error
	for _, obj := range peerCredential(&peer) {
		if err := r.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			createErr = fmt.Errorf("creating %T %s/%s: %w", obj, obj.GetNamespace(), obj.GetName(), err)
			ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, "CredentialNotIssued", createErr.Error()
			if apierrors.IsNotFound(err) {
				ready.Reason = "NamespaceNotFound"
				ready.Message = fmt.Sprintf("spec.namespace: namespace %q does not exist; create it (Pod Security level privileged) for the peer", peer.Spec.Namespace)
			}
			break
		}
	}
	meta.SetStatusCondition(&st.Conditions, ready)
	st.ObservedGeneration = peer.Generation
	st.ServiceAccount, st.CredentialSecret = PeerAccountName(peer.Name), PeerTokenSecretName(peer.Name)
	if !equality.Semantic.DeepEqual(*st, peer.Status) {
		patch := client.MergeFrom(peer.DeepCopy())
		peer.Status = *st
		if err := r.Client.Status().Patch(ctx, &peer, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	if createErr != nil {
		// a namespace that appears later is not watched: look again
		return ctrl.Result{RequeueAfter: 10 * time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// peerCredential builds the ServiceAccount, Role, RoleBinding and token Secret of a
// peer, each owned by the TransferPeer.
func peerCredential(peer *dtnflowv1alpha1.TransferPeer) []client.Object {
	name, ns := PeerAccountName(peer.Name), peer.Spec.Namespace
	om := func(n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: ns,
			Labels:          map[string]string{"app.kubernetes.io/managed-by": "dtnflow", "dtnflow.io/peer": JobLabelValue(peer.Name)},
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(peer, dtnflowv1alpha1.GroupVersion.WithKind("TransferPeer"))}}
	}
	token := om(PeerTokenSecretName(peer.Name))
	token.Annotations = map[string]string{corev1.ServiceAccountNameKey: name}
	return []client.Object{
		&corev1.ServiceAccount{ObjectMeta: om(name)},
		&rbacv1.Role{ObjectMeta: om(name), Rules: peerRules},
		&rbacv1.RoleBinding{ObjectMeta: om(name),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: ns}}},
		&corev1.Secret{ObjectMeta: token, Type: corev1.SecretTypeServiceAccountToken},
	}
}

// SetupWithManager registers the TransferPeer reconciler.
func (r *TransferPeerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("transferpeer").
		For(&dtnflowv1alpha1.TransferPeer{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// RemoteSiteReconciler checks each RemoteSite's credential against the peer's API
// server (a list of RemoteTransfers in its namespace, which the credential allows) and
// says what it found in the Connected condition, every minute and on each change.
type RemoteSiteReconciler struct {
	Client  client.Client
	Clock   clock.PassiveClock
	remotes *remoteClients
}

// remoteSiteRecheck is how often a RemoteSite's connection is checked again.
const remoteSiteRecheck = time.Minute

// +kubebuilder:rbac:groups=dtnflow.io,resources=remotesites,verbs=get;list;watch
// +kubebuilder:rbac:groups=dtnflow.io,resources=remotesites/status,verbs=get;update;patch

// Reconcile checks one RemoteSite.
func (r *RemoteSiteReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var site dtnflowv1alpha1.RemoteSite
	if err := r.Client.Get(ctx, req.NamespacedName, &site); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	cond := metav1.Condition{Type: dtnflowv1alpha1.ConditionConnected, Status: metav1.ConditionTrue, Reason: ReasonRemoteConnected,
		ObservedGeneration: site.Generation, LastTransitionTime: apiTime(r.Clock.Now()),
		Message: fmt.Sprintf("the peer's API server accepts the credential in namespace %s", site.Spec.Namespace)}
	cl, err := r.remotes.get(ctx, &site)
	if err == nil {
		var list dtnflowv1alpha1.RemoteTransferList
		err = cl.List(ctx, &list, client.InNamespace(site.Spec.Namespace), client.Limit(1))
	}
	if err != nil {
		prob := remoteProblem(site.Name, err)
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, prob.Reason, prob.Message
	}
	st := site.Status.DeepCopy()
	if prev := meta.FindStatusCondition(st.Conditions, cond.Type); prev != nil && prev.Status == cond.Status && prev.Reason == cond.Reason {
		cond.LastTransitionTime = prev.LastTransitionTime
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	st.ObservedGeneration = site.Generation
	if !equality.Semantic.DeepEqual(*st, site.Status) {
		patch := client.MergeFrom(site.DeepCopy())
		site.Status = *st
		if err := r.Client.Status().Patch(ctx, &site, patch); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	return ctrl.Result{RequeueAfter: remoteSiteRecheck}, nil
}

// SetupWithManager registers the RemoteSite reconciler.
func (r *RemoteSiteReconciler) SetupWithManager(mgr ctrl.Manager, remotes *remoteClients) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	r.remotes = remotes
	return ctrl.NewControllerManagedBy(mgr).
		Named("remotesite").
		For(&dtnflowv1alpha1.RemoteSite{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}
