package plugin

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestInstalledAsKubectlPlugin builds kubectl-dtnflow, puts it on PATH as a user would,
// and runs it through the real kubectl (built by hack/build-kube.sh next to the API
// server), which finds plugins on PATH by their kubectl- prefix.
func TestInstalledAsKubectlPlugin(t *testing.T) {
	kubectl := kubectlBin()
	if _, err := os.Stat(kubectl); err != nil {
		t.Fatalf("kubectl is not next to the API server: %v", err)
	}
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", filepath.Join(dir, "kubectl-dtnflow"), "github.com/dtnflow/dtnflow/cmd/kubectl-dtnflow")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the plugin: %v\n%s", err, out)
	}
	ns := namespace(t)
	createJob(t, ns, "run-0427")

	cmd := exec.Command(kubectl, "dtnflow", "get", "-n", ns) // the plugin reads $KUBECONFIG
	cmd.Env = append(os.Environ(), "PATH="+dir+string(os.PathListSeparator)+os.Getenv("PATH"), "KUBECONFIG="+kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl dtnflow get: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "run-0427") || !strings.Contains(string(out), "2/4 stripes") {
		t.Errorf("kubectl dtnflow get printed:\n%s", out)
	}
	list := exec.Command(kubectl, "plugin", "list")
	list.Env = cmd.Env
	if out, err := list.CombinedOutput(); !strings.Contains(string(out), filepath.Join(dir, "kubectl-dtnflow")) {
		t.Errorf("kubectl plugin list (%v) does not list it:\n%s", err, out)
	}
}

// kubectlBin is the kubectl built by hack/build-kube.sh next to the API server.
func kubectlBin() string { return filepath.Join(os.Getenv("KUBEBUILDER_ASSETS"), "kubectl") }
