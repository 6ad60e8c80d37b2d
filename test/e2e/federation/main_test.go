// Package federation is dtnflow's end-to-end test of a site pair: the local cluster in
// two-cluster mode (DTN_CLUSTERS=2 hack/cluster/up.sh): site A and site B each with its
// own control plane, its own DTN node and its own dtnflow installed by Helm, joined only
// through the WAN emulator. TestMain brings the sites up, installs dtnflow at each,
// creates each site's TransferEndpoint, and pairs the sites as their admins would
// (hack/pair-sites.sh, the steps of docs/site-pairing.md); TestSitePair then moves real
// files both ways, sends jobs site B does not allow, kills agents at each site,
// restarts site B's API server and revokes the pairing under a running job, checking
// every file's SHA-256 and owner.
//
// DTN_E2E_REUSE=1 uses running sites (and leaves them); DTN_E2E_KEEP=1 keeps them.
package federation

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// siteA is site A's cluster (where the jobs live); siteB is site B's, which serves one
// side of each job.
var siteA, siteB *framework.Cluster

const (
	// jobNamespace is where the jobs live at A; site B's TransferPeer allows it.
	jobNamespace = "e2e"
	// peerNamespace is the namespace at B where A's RemoteTransfers and agents live.
	peerNamespace = "peer-site-a"
	// siteBName is the RemoteSite at A; peerName the TransferPeer at B.
	siteBName = "site-b"
	peerName  = "site-a"
	// grantedIn and grantedOut are the paths at B that A may write and read.
	grantedIn  = "incoming/site-a"
	grantedOut = "outgoing"
)

const (
	setupTimeout     = 8 * time.Minute
	endpointsTimeout = 2 * time.Minute
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	interrupted := make(chan struct{})
	go func() {
		<-signals
		close(interrupted)
		cancel()
	}()
	reuse := os.Getenv("DTN_E2E_REUSE") == "1"
	keep := reuse || os.Getenv("DTN_E2E_KEEP") == "1"
	if err := os.MkdirAll(framework.ArtifactsDir("federation"), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logFile, err := os.Create(filepath.Join(framework.ArtifactsDir("federation"), "cluster-up-down.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer logFile.Close()
	log := io.MultiWriter(os.Stderr, logFile)

	os.Setenv("DTN_CLUSTERS", "2")
	start := time.Now()
	if reuse {
		siteA, err = framework.Load(framework.Dir())
	} else {
		siteA, err = framework.Up(ctx, log)
	}
	if err == nil {
		siteB, err = siteA.SiteB()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		if !reuse {
			_ = framework.Down(context.Background(), log)
		}
		return 1
	}
	fmt.Fprintf(log, "e2e: two sites up in %s\n", time.Since(start).Round(time.Second))
	var downOnce sync.Once
	down := func() {
		downOnce.Do(func() {
			if keep {
				fmt.Fprintf(log, "e2e: leaving the sites running (hack/cluster/down.sh removes them)\n")
				return
			}
			downCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := framework.Down(downCtx, log); err != nil {
				fmt.Fprintln(os.Stderr, "e2e: taking the sites down:", err)
			}
		})
	}
	defer down()
	go func() {
		<-interrupted
		down()
		os.Exit(130)
	}()
	setupStart := time.Now()
	if err := setup(ctx, log); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: setting up the site pair:", err)
		dump("setup")
		return 1
	}
	fmt.Fprintf(log, "e2e: dtnflow installed at both sites and the sites paired in %s\n", time.Since(setupStart).Round(time.Second))
	return m.Run()
}

// setup does what each site's admin does: helm install dtnflow with the site's own
// values, create the site's TransferEndpoint and the namespaces, then pair the sites.
func setup(ctx context.Context, log io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	for _, s := range []struct {
		c    *framework.Cluster
		site string
	}{{siteA, "site-a"}, {siteB, "site-b"}} {
		out, err := s.c.InstallAtSite(ctx, s.site)
		fmt.Fprint(log, out)
		if err != nil {
			return fmt.Errorf("installing dtnflow at %s: %w", s.site, err)
		}
		eps, err := readEndpoints(s.c.Endpoints)
		if err != nil {
			return err
		}
		for _, ep := range eps {
			if err := s.c.Client.Create(ctx, ep); err != nil && !apierrors.IsAlreadyExists(err) {
				return fmt.Errorf("creating TransferEndpoint %s: %w", ep.Name, err)
			}
		}
		if err := waitEndpointsReady(ctx, s.c, eps); err != nil {
			return err
		}
	}
	for _, ns := range []string{jobNamespace, "e2e-other"} {
		obj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"dtnflow.io/transfers": "allowed"}}}
		if err := siteA.Client.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	// site B's storage: what A may read, and where A may write, belong to B's owner —
	// every folder on the way too (incoming/ is where the one-cluster e2e's jobs write
	// as B's owner, on the same storage)
	b := siteA.Site("site-b")
	for _, dir := range []string{grantedIn, grantedOut} {
		p := b.Storage
		for _, part := range strings.Split(dir, "/") {
			p = filepath.Join(p, part)
			if err := os.MkdirAll(p, 0o755); err != nil {
				return err
			}
			if err := os.Chown(p, int(b.Owner.User), int(b.Owner.Group)); err != nil {
				return err
			}
		}
	}
	return pair(ctx, log)
}

// pair pairs the sites as both admins would (framework.PairSites: hack/pair-sites.sh).
func pair(ctx context.Context, log io.Writer) error {
	peer := &dtnflowv1alpha1.TransferPeer{
		ObjectMeta: metav1.ObjectMeta{Name: peerName},
		Spec: dtnflowv1alpha1.TransferPeerSpec{Namespace: peerNamespace, RemoteNamespaces: []string{jobNamespace},
			Grants: []dtnflowv1alpha1.TransferGrant{
				{Endpoint: "site-b", Access: dtnflowv1alpha1.GrantWrite, Paths: []dtnflowv1alpha1.RelativePath{grantedIn}},
				{Endpoint: "site-b", Access: dtnflowv1alpha1.GrantRead, Paths: []dtnflowv1alpha1.RelativePath{grantedOut}},
			}},
	}
	return siteA.PairSites(ctx, siteB, peer, siteBName, framework.ArtifactsDir("federation"), log)
}

func readEndpoints(path string) ([]*dtnflowv1alpha1.TransferEndpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	ep := &dtnflowv1alpha1.TransferEndpoint{}
	if err := yaml.Unmarshal(b, ep); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return []*dtnflowv1alpha1.TransferEndpoint{ep}, nil
}

func waitEndpointsReady(ctx context.Context, c *framework.Cluster, eps []*dtnflowv1alpha1.TransferEndpoint) error {
	return wait.PollUntilContextTimeout(ctx, time.Second, endpointsTimeout, true, func(ctx context.Context) (bool, error) {
		for _, ep := range eps {
			var got dtnflowv1alpha1.TransferEndpoint
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(ep), &got); err != nil {
				return false, nil
			}
			if !meta.IsStatusConditionTrue(got.Status.Conditions, "Ready") {
				return false, nil
			}
		}
		return true, nil
	})
}

// dump writes both sites' diagnostics into test/e2e/_artifacts/<name>/{site-a,site-b}.
func dump(name string) {
	siteA.DumpDiagnostics(context.Background(), filepath.Join(framework.ArtifactsDir(name), "site-a"))
	if siteB != nil {
		siteB.DumpDiagnostics(context.Background(), filepath.Join(framework.ArtifactsDir(name), "site-b"))
	}
}
