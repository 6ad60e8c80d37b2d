// Package cluster is dtnflow's end-to-end test on a real local cluster (hack/cluster):
// two DTN sites, each node in its own network namespace with its own containerd and
// kubelet, joined through the WAN emulator of test/wanem. TestMain starts the cluster,
// installs the chart with Helm and creates the two TransferEndpoints, as a user would;
// the tests then move real files with TransferJobs and check them byte for byte, kill
// agents, change the WAN under running jobs, and send invalid jobs. The cluster is
// removed at the end, also when a test fails (and `make test-e2e` runs
// hack/cluster/down.sh once more in case this process itself dies).
//
// Environment: DTN_E2E_REUSE=1 uses a cluster that is already up (make cluster-up) and
// leaves it running; DTN_E2E_KEEP=1 keeps the cluster this run started;
// DTN_MANAGER_REPLICAS=2 installs two manager replicas (on two nodes of site A: start
// the cluster with DTN_NODES_PER_SITE=2), as make test-chaos does for leader failover.
package cluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
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

// cluster is the running cluster every test uses.
var cluster *framework.Cluster

// jobNamespace is where the tests' TransferJobs live; the endpoints allow it by label.
const jobNamespace = "e2e"

// Named timeouts of the waits below.
const (
	setupTimeout     = 6 * time.Minute
	endpointsTimeout = 2 * time.Minute
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)
	interrupted := make(chan struct{})
	go func() {
		<-signals
		fmt.Fprintln(os.Stderr, "e2e: interrupted")
		close(interrupted)
		cancel()
	}()
	reuse := os.Getenv("DTN_E2E_REUSE") == "1"
	keep := reuse || os.Getenv("DTN_E2E_KEEP") == "1"
	if err := os.MkdirAll(framework.ArtifactsDir(""), 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logFile, err := os.Create(filepath.Join(framework.ArtifactsDir(""), "cluster-up-down.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer logFile.Close()
	log := io.MultiWriter(os.Stderr, logFile)

	start := time.Now()
	if reuse {
		cluster, err = framework.Load(framework.Dir())
	} else {
		cluster, err = framework.Up(ctx, log)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		if !reuse { // up.sh cleans up after itself, unless it was killed
			_ = framework.Down(context.Background(), log)
		}
		return 1
	}
	fmt.Fprintf(log, "e2e: cluster up in %s\n", time.Since(start).Round(time.Second))
	var downOnce sync.Once
	down := func() {
		downOnce.Do(func() {
			if keep {
				fmt.Fprintf(log, "e2e: leaving the cluster running (hack/cluster/down.sh removes it)\n")
				return
			}
			downCtx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			if err := framework.Down(downCtx, log); err != nil {
				fmt.Fprintln(os.Stderr, "e2e: taking the cluster down:", err)
			}
		})
	}
	defer down()
	// Interrupted (Ctrl-C, a CI runner stopping the job): take the cluster down, then
	// exit, rather than leave it running or let the tests carry on.
	go func() {
		<-interrupted
		down()
		os.Exit(130)
	}()

	setupStart := time.Now()
	if err := setup(ctx, log); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: setting up dtnflow on the cluster:", err)
		cluster.DumpDiagnostics(context.Background(), framework.ArtifactsDir("setup"))
		return 1
	}
	fmt.Fprintf(log, "e2e: dtnflow installed and both endpoints Ready in %s\n", time.Since(setupStart).Round(time.Second))
	return m.Run()
}

// setup does what a user does after getting a cluster: helm install, then the two
// TransferEndpoints, then a namespace that the endpoints allow.
func setup(ctx context.Context, log io.Writer) error {
	ctx, cancel := context.WithTimeout(ctx, setupTimeout)
	defer cancel()
	var extra []string
	if n := os.Getenv("DTN_MANAGER_REPLICAS"); n != "" {
		extra = append(extra, "--set", "manager.replicas="+n)
	}
	out, err := cluster.InstallDtnflow(ctx, extra...)
	fmt.Fprint(log, out)
	if err != nil {
		return err
	}
	endpoints, err := readEndpoints(cluster.Endpoints)
	if err != nil {
		return err
	}
	for _, ep := range endpoints {
		if err := cluster.Client.Create(ctx, ep); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating TransferEndpoint %s: %w", ep.Name, err)
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: jobNamespace, Labels: map[string]string{"dtnflow.io/transfers": "allowed"}}}
	if err := cluster.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return wait.PollUntilContextTimeout(ctx, time.Second, endpointsTimeout, true, func(ctx context.Context) (bool, error) {
		for _, ep := range endpoints {
			var got dtnflowv1alpha1.TransferEndpoint
			if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(ep), &got); err != nil {
				return false, nil
			}
			if !meta.IsStatusConditionTrue(got.Status.Conditions, "Ready") {
				return false, nil
			}
		}
		return true, nil
	})
}

// readEndpoints decodes the TransferEndpoints hack/cluster/up.sh wrote for the cluster.
func readEndpoints(path string) ([]*dtnflowv1alpha1.TransferEndpoint, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []*dtnflowv1alpha1.TransferEndpoint
	for _, doc := range splitYAML(b) {
		ep := &dtnflowv1alpha1.TransferEndpoint{}
		if err := yaml.UnmarshalStrict(doc, ep); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, ep)
	}
	if len(out) != 2 {
		return nil, fmt.Errorf("%s holds %d TransferEndpoints, want 2", path, len(out))
	}
	return out, nil
}

func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range bytesSplit(b, "\n---") {
		if len(trimComments(d)) > 0 {
			docs = append(docs, d)
		}
	}
	return docs
}

// managerDeployment is the manager's Deployment as the chart names it.
func managerDeployment(ctx context.Context) (*appsv1.Deployment, error) {
	var d appsv1.Deployment
	err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: framework.ReleaseNamespace, Name: framework.ReleaseName + "-manager"}, &d)
	return &d, err
}
