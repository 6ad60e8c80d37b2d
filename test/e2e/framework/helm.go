package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Release is where the e2e tests and `make demo` install dtnflow.
const (
	ReleaseName      = "dtnflow"
	ReleaseNamespace = "dtnflow-system"
)

// HelmBinary is the Helm the Makefile installed: $DTN_HELM, or the newest bin/helm-*.
func HelmBinary() (string, error) {
	if h := os.Getenv("DTN_HELM"); h != "" {
		return h, nil
	}
	found, _ := filepath.Glob(filepath.Join(RepoRoot(), "bin", "helm-v*"))
	if len(found) == 0 {
		return "", fmt.Errorf("no Helm: run 'make helm' (or set DTN_HELM)")
	}
	sort.Strings(found)
	return found[len(found)-1], nil
}

// ChartDir is charts/dtnflow.
func ChartDir() string { return filepath.Join(RepoRoot(), "charts", "dtnflow") }

// Helm runs helm against the cluster and returns its standard output.
func (c *Cluster) Helm(ctx context.Context, args ...string) (string, error) {
	helm, err := HelmBinary()
	if err != nil {
		return "", err
	}
	cmd := exec.CommandContext(ctx, helm, append(args, "--kubeconfig", c.Kubeconfig)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// LocalValues are the --set values that point the chart at the images imported into
// the nodes (hack/cluster/values-local.yaml has the rest).
func (c *Cluster) LocalValues() ([]string, error) {
	var set []string
	for _, image := range []struct{ key, ref string }{{"manager", c.Images.Manager}, {"agent", c.Images.Agent}} {
		i := strings.LastIndex(image.ref, ":")
		if image.ref == "" || i < 0 {
			return nil, fmt.Errorf("no %s image was imported into the cluster (hack/images/build.sh %s)", image.key, image.key)
		}
		set = append(set, "--set", image.key+".image.repository="+image.ref[:i], "--set", image.key+".image.tag="+image.ref[i+1:])
	}
	return append(set, "--set", "apiServer.host="+c.APIServer.Host, "--set", fmt.Sprintf("apiServer.port=%d", c.APIServer.Port)), nil
}

// InstallDtnflow installs (or upgrades) the chart as `make demo` does and waits until
// the manager is available.
func (c *Cluster) InstallDtnflow(ctx context.Context, extra ...string) (string, error) {
	set, err := c.LocalValues()
	if err != nil {
		return "", err
	}
	args := append([]string{"upgrade", "--install", ReleaseName, ChartDir(),
		"--namespace", ReleaseNamespace, "--create-namespace",
		"--values", filepath.Join(RepoRoot(), "hack", "cluster", "values-local.yaml"),
		"--wait", "--timeout", "3m"}, set...)
	return c.Helm(ctx, append(args, extra...)...)
}
