package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

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
	// newWatcher builds the client that watches a peer's RemoteTransfers (no timeout:
	// a watch is one long call); nil watches nothing.
	newWatcher func(kubeconfig []byte, scheme *runtime.Scheme) (client.WithWatch, error)
	// changed receives, for each change of a RemoteTransfer at a peer, the job here it
	// serves (its spec.origin): the job's pass runs as soon as the peer's side moves,
	// not at its next look (RemotePoll).
	changed chan event.TypedGenericEvent[*dtnflowv1alpha1.TransferJob]

	mu    sync.Mutex
	cache map[string]cachedRemote
	// runCtx is the manager's: watches run within it (nil before the manager starts).
	runCtx context.Context
}

type cachedRemote struct {
	secretVersion string
	generation    int64
	client        client.Client
	// stopWatch ends the watch of this credential's peer namespace; nil when none runs.
	stopWatch context.CancelFunc
}

func newRemoteClients(reader client.Reader, scheme *runtime.Scheme, namespace string) *remoteClients {
	return &remoteClients{reader: reader, scheme: scheme, namespace: namespace, newClient: clientFromKubeconfig, newWatcher: watcherFromKubeconfig,
		changed: make(chan event.TypedGenericEvent[*dtnflowv1alpha1.TransferJob], 64), cache: map[string]cachedRemote{}}
}

// Start runs with the manager: watches of peers start within its context from then on,
// and end with it.
func (c *remoteClients) Start(ctx context.Context) error {
	c.mu.Lock()
	c.runCtx = ctx
	c.mu.Unlock()
	<-ctx.Done()
	return nil
}

// watcherFromKubeconfig is the watching client of a kubeconfig: no overall timeout.
func watcherFromKubeconfig(kubeconfig []byte, scheme *runtime.Scheme) (client.WithWatch, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme})
}

// watchRemote follows the RemoteTransfers of a peer namespace until ctx ends and turns
// each change into an event for the job it serves; a watch that ends or fails is made
// again, after a pause that grows to 30 s while the peer does not answer.
func (c *remoteClients) watchRemote(ctx context.Context, wc client.WithWatch, site, namespace string) {
	log := ctrl.Log.WithName("remote-watch").WithValues("site", site, "namespace", namespace)
	pause := time.Second
	for ctx.Err() == nil {
		w, err := wc.Watch(ctx, &dtnflowv1alpha1.RemoteTransferList{}, client.InNamespace(namespace))
		if err != nil {
			log.V(1).Info("Watching the peer's RemoteTransfers failed; trying again", "error", err.Error(), "after", pause)
			select {
			case <-ctx.Done():
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, 30*time.Second)
			continue
		}
		pause = time.Second
		for ev := range w.ResultChan() {
			rt, ok := ev.Object.(*dtnflowv1alpha1.RemoteTransfer)
			if !ok || rt.Spec.Origin.Name == "" {
				continue
			}
			job := &dtnflowv1alpha1.TransferJob{ObjectMeta: metav1.ObjectMeta{Namespace: rt.Spec.Origin.Namespace, Name: rt.Spec.Origin.Name}}
			select {
			case c.changed <- event.TypedGenericEvent[*dtnflowv1alpha1.TransferJob]{Object: job}:
			case <-ctx.Done():
				w.Stop()
				return
			}
		}
	}
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
		if e.stopWatch == nil {
			// made before the manager ran its runnables (a first pass can come before
			// Start): the watch starts now
			e.stopWatch = c.startWatch(secret.Data[KubeconfigKey], site)
			c.cache[site.Name] = e
		}
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
	if old := c.cache[site.Name]; old.stopWatch != nil {
		old.stopWatch() // the credential or the site changed: watch with the new one
	}
	c.cache[site.Name] = cachedRemote{secretVersion: secret.ResourceVersion, generation: site.Generation, client: cl,
		stopWatch: c.startWatch(kc, site)}
	return cl, nil
}

// startWatch starts the watch of a site's peer namespace with a kubeconfig and returns
// what stops it; nil when it cannot start yet (before the manager's Start) or at all.
// The caller holds c.mu.
func (c *remoteClients) startWatch(kubeconfig []byte, site *dtnflowv1alpha1.RemoteSite) context.CancelFunc {
	if c.runCtx == nil || c.newWatcher == nil || len(kubeconfig) == 0 {
		return nil
	}
	wc, err := c.newWatcher(kubeconfig, c.scheme)
	if err != nil {
		return nil
	}
	ctx, cancel := context.WithCancel(c.runCtx)
	go c.watchRemote(ctx, wc, site.Name, site.Spec.Namespace)
	return cancel
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
