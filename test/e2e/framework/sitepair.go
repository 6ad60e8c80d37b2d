package framework

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"

	"sigs.k8s.io/yaml"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// InstallAtSite installs dtnflow with Helm into one site's cluster of a two-cluster
// local cluster, its manager on that site's node.
func (c *Cluster) InstallAtSite(ctx context.Context, site string) (string, error) {
	return c.InstallDtnflow(ctx, "--set", `manager.nodeSelector.dtnflow\.io/site=`+site)
}

// PairSites pairs site A (c) with site B (b) as their admins would, through
// hack/pair-sites.sh (docs/site-pairing.md): peer is applied at B, the credential it
// issues goes to A as a kubeconfig naming B's API server on B's LAN (across the WAN), and
// A gets RemoteSite siteName. The TransferPeer's YAML and the kubeconfig are kept in dir.
func (c *Cluster) PairSites(ctx context.Context, b *Cluster, peer *dtnflowv1alpha1.TransferPeer, siteName, dir string, log io.Writer) error {
	if c.Peer == nil {
		return fmt.Errorf("not a two-cluster local cluster")
	}
	peer.TypeMeta.APIVersion, peer.TypeMeta.Kind = dtnflowv1alpha1.GroupVersion.String(), "TransferPeer"
	y, err := yaml.Marshal(peer)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	file := filepath.Join(dir, "transferpeer.yaml")
	if err := os.WriteFile(file, y, 0o644); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(RepoRoot(), "hack", "pair-sites.sh"),
		"--serving-kubeconfig", b.Kubeconfig, "--server", "https://"+c.Peer.WANAPIServer,
		"--transferpeer", file, "--peer-kubeconfig", c.Kubeconfig, "--site", siteName, "--out", dir)
	cmd.Env = append(os.Environ(), "KUBECTL="+c.KubectlBin)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("hack/pair-sites.sh: %w", err)
	}
	return nil
}
