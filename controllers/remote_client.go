package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// This file is how the manager reaches a peer site: a client built from the kubeconfig
// the peer issued (a RemoteSite's Secret in the manager's namespace), and what a failed
// call means for the jobs that depend on it.

// KubeconfigKey is the key of a RemoteSite's Secret that holds the kubeconfig.
const KubeconfigKey = "kubeconfig"

// remoteTimeout bounds each call to a peer's API server: a peer that does not answer
// must not hold a reconcile worker for long.
const remoteTimeout = 10 * time.Second

// Reasons a peer site cannot be used now.
const (
	ReasonRemoteSiteNotFound      = "RemoteSiteNotFound"
	ReasonRemoteCredentialInvalid = "RemoteCredentialInvalid"
	ReasonRemoteUnauthorized      = "RemoteUnauthorized"
	ReasonRemoteForbidden         = "RemoteForbidden"
	ReasonRemoteUnreachable       = "RemoteUnreachable"
	ReasonRemoteRefused           = "RemoteRefused"
	ReasonWaitingForRemote        = "WaitingForRemote"
	ReasonRemoteConnected         = "Connected"
)

// remoteClients builds and keeps one client per RemoteSite, rebuilt when the Secret
// changes (a new credential) or the site's spec does.
type remoteClients struct {
	// reader reads the Secret past the cache: the manager may get Secrets in its own
	// namespace only, and lists or watches none.
	reader    client.Reader
	scheme    *runtime.Scheme
	namespace string
	// newClient builds a client from a kubeconfig; tests replace it.
	newClient func(kubeconfig []byte, scheme *runtime.Scheme) (client.Client, error)

	mu    sync.Mutex
	cache map[string]cachedRemote
}

type cachedRemote struct {
	secretVersion string
	generation    int64
	client        client.Client
}

func newRemoteClients(reader client.Reader, scheme *runtime.Scheme, namespace string) *remoteClients {
	return &remoteClients{reader: reader, scheme: scheme, namespace: namespace, newClient: clientFromKubeconfig, cache: map[string]cachedRemote{}}
}

// clientFromKubeconfig is a client for the cluster a kubeconfig names, each call bounded
// by remoteTimeout.
func clientFromKubeconfig(kubeconfig []byte, scheme *runtime.Scheme) (client.Client, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.Timeout = remoteTimeout
	cfg.QPS, cfg.Burst = 20, 40
	return client.New(cfg, client.Options{Scheme: scheme})
}

// errCredential marks a credential that cannot be used at all (no Secret, no key, not
// a kubeconfig): the site's admin must fix it.
var errCredential = errors.New("remote site credential")

// get returns the client of a RemoteSite.
func (c *remoteClients) get(ctx context.Context, site *dtnflowv1alpha1.RemoteSite) (client.Client, error) {
	if c.namespace == "" {
		return nil, fmt.Errorf("%w: the manager does not know its namespace (POD_NAMESPACE), where RemoteSite secrets live", errCredential)
	}
	var secret corev1.Secret
	key := types.NamespacedName{Namespace: c.namespace, Name: site.Spec.KubeconfigSecret}
	if err := c.reader.Get(ctx, key, &secret); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("%w: Secret %s named by spec.kubeconfigSecret of RemoteSite %s not found", errCredential, key, site.Name)
		}
		return nil, fmt.Errorf("reading Secret %s: %w", key, err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.cache[site.Name]; ok && e.secretVersion == secret.ResourceVersion && e.generation == site.Generation {
		return e.client, nil
	}
	kc, ok := secret.Data[KubeconfigKey]
	if !ok {
		return nil, fmt.Errorf("%w: Secret %s has no key %q", errCredential, key, KubeconfigKey)
	}
	cl, err := c.newClient(kc, c.scheme)
	if err != nil {
		return nil, fmt.Errorf("%w: Secret %s key %q: %v", errCredential, key, KubeconfigKey, err)
	}
	c.cache[site.Name] = cachedRemote{secretVersion: secret.ResourceVersion, generation: site.Generation, client: cl}
	return cl, nil
}

// remoteProblem says what a failed call to a peer means: a reason, a message naming the
// site, and whether it withdraws access (the credential is refused or unusable: the
// job's agents stop) or only delays (the peer's API server or the link is down: what
// runs goes on, and the job resumes when the peer answers).
func remoteProblem(site string, err error) *jobProblem {
	switch {
	case errors.Is(err, errCredential):
		return &jobProblem{Reason: ReasonRemoteCredentialInvalid, Blocking: true, Message: err.Error()}
	case apierrors.IsUnauthorized(err):
		return &jobProblem{Reason: ReasonRemoteUnauthorized, Blocking: true,
			Message: fmt.Sprintf("site %s refused this site's credential (401 Unauthorized): it was revoked at %s (its TransferPeer deleted) or has expired", site, site)}
	case apierrors.IsForbidden(err):
		return &jobProblem{Reason: ReasonRemoteForbidden, Blocking: true,
			Message: fmt.Sprintf("site %s forbids what this site asked (403): %v", site, err)}
	default:
		return &jobProblem{Reason: ReasonRemoteUnreachable,
			Message: fmt.Sprintf("site %s's API server cannot be reached (%v): the agents that run go on, and the job resumes when it answers", site, err)}
	}
}
