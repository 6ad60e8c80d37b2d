package optimizer

import (
	"os/exec"
	"strings"
	"testing"
)

// The optimizer is a pure library: neither it nor anything it imports may pull in a
// Kubernetes client or the API types (which bring controller-runtime).
func TestNoKubernetesDependencies(t *testing.T) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Skip("go command not in PATH")
	}
	out, err := exec.Command(goBin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{"sigs.k8s.io/controller-runtime", "k8s.io/client-go", "github.com/dtnflow/dtnflow/api/", "k8s.io/apimachinery"}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(pkg, f) {
				t.Errorf("optimizer depends on %s", pkg)
			}
		}
	}
}
