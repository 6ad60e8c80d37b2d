package framework

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ArtifactsDir is where a failed test leaves what it saw: test/e2e/_artifacts/<name>
// (git-ignored).
func ArtifactsDir(name string) string {
	return filepath.Join(RepoRoot(), "test", "e2e", "_artifacts", strings.ReplaceAll(name, "/", "_"))
}

// DumpDiagnostics writes what a person needs to understand a failure into dir: every
// object of dtnflow and every pod, the events, the manager's and the agents' logs,
// the WAN's counters and the cluster components' logs' tails. Best effort: a failure
// to collect one thing does not stop the others.
func (c *Cluster) DumpDiagnostics(ctx context.Context, dir string) {
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return
	}
	write := func(name, content string, err error) {
		if err != nil {
			content += "\nERROR: " + err.Error()
		}
		_ = os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644)
	}
	for name, args := range map[string][]string{
		"pods.txt":               {"get", "pods", "-A", "-o", "wide"},
		"nodes.yaml":             {"get", "nodes", "-o", "yaml"},
		"transferjobs.yaml":      {"get", "transferjobs", "-A", "-o", "yaml"},
		"transferendpoints.yaml": {"get", "transferendpoints", "-o", "yaml"},
		"pathprofiles.yaml":      {"get", "pathprofiles", "-o", "yaml"},
		"events.txt":             {"get", "events", "-A", "--sort-by=.lastTimestamp"},
		"pods.yaml":              {"get", "pods", "-A", "-o", "yaml"},
		"deployments.yaml":       {"get", "deployments", "-A", "-o", "yaml"},
	} {
		out, err := c.Kubectl(ctx, args...)
		write(name, out, err)
	}
	out, err := c.Kubectl(ctx, "get", "pods", "-A", "-o", "jsonpath={range .items[*]}{.metadata.namespace}/{.metadata.name}{\"\\n\"}{end}")
	if err == nil {
		for _, pod := range strings.Fields(out) {
			ns, name, _ := strings.Cut(pod, "/")
			logs, err := c.Kubectl(ctx, "logs", "-n", ns, name, "--all-containers", "--tail=2000")
			write("logs-"+ns+"-"+name+".txt", logs, err)
			prev, err := c.Kubectl(ctx, "logs", "-n", ns, name, "--all-containers", "--previous", "--tail=500")
			if err == nil && prev != "" {
				write("logs-"+ns+"-"+name+"-previous.txt", prev, nil)
			}
		}
	}
	if stats, err := c.WANStats(ctx); err == nil {
		b, _ := json.MarshalIndent(stats, "", "  ")
		write("wan-stats.json", string(b), nil)
	}
	logs, _ := filepath.Glob(filepath.Join(c.Dir, "logs", "*.log"))
	for _, l := range logs {
		b, err := os.ReadFile(l)
		if err != nil {
			continue
		}
		if len(b) > 256<<10 {
			b = b[len(b)-256<<10:]
		}
		write("component-"+filepath.Base(l), string(b), nil)
	}
	fmt.Fprintf(os.Stderr, "diagnostics written to %s\n", dir)
}
