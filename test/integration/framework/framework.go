// Package framework starts a real kube-apiserver and etcd (envtest) for the integration
// tests, with dtnflow's CRDs installed. The binaries are built from source by
// hack/build-kube.sh because the usual envtest download is unreachable on our machines;
// the Makefile exports KUBEBUILDER_ASSETS.
package framework

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// Env is a running API server with the CRDs installed.
type Env struct {
	Config  *rest.Config
	Client  client.Client
	Scheme  *k8sruntime.Scheme
	testEnv *envtest.Environment
}

// RepoRoot is the repository's top folder, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// NewScheme returns a scheme with the built-in types and dtnflow's.
func NewScheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := dtnflowv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Codecs decodes YAML manifests into the types of NewScheme.
func Codecs(s *k8sruntime.Scheme) serializer.CodecFactory { return serializer.NewCodecFactory(s) }

// Start starts etcd and kube-apiserver and installs the CRDs from config/crd/bases.
// It fails with a clear message when KUBEBUILDER_ASSETS is not set, because running the
// integration tests without an API server would prove nothing.
func Start() (*Env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, fmt.Errorf("KUBEBUILDER_ASSETS is not set: run the integration tests with 'make test-integration', which builds kube-apiserver and etcd into .cache and sets it")
	}
	scheme := NewScheme()
	testEnv := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                scheme,
	}
	cfg, err := testEnv.Start()
	if err != nil {
		return nil, fmt.Errorf("starting kube-apiserver and etcd from %s: %w", os.Getenv("KUBEBUILDER_ASSETS"), err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		_ = testEnv.Stop()
		return nil, err
	}
	return &Env{Config: cfg, Client: c, Scheme: scheme, testEnv: testEnv}, nil
}

// Stop stops the API server and etcd.
func (e *Env) Stop() error { return e.testEnv.Stop() }

// KubeConfig is a kubeconfig file's content that reaches the API server as its admin,
// for programs (the kubectl plugin) that load one the way kubectl does.
func (e *Env) KubeConfig() []byte { return e.testEnv.KubeConfig }
