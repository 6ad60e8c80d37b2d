// Package framework drives the local two-site cluster of hack/cluster from Go tests: it
// starts and stops it through the same scripts `make demo` uses, reads what they
// recorded in cluster.json, installs dtnflow with Helm, and changes the emulated WAN
// while jobs run. The scripts own the cluster's lifecycle (so that `make demo-down`
// and a crashed test clean up the same way); this package only reads their state.
package framework

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/wanem"
)

// Node is one node of a site, as hack/cluster/up.sh made it.
type Node struct {
	Name         string `json:"name"`
	IP           string `json:"ip"`
	ManagementIP string `json:"managementIP"`
	Netns        string `json:"netns"`
	CgroupParent string `json:"cgroupParent"`
}

// Site is one of the two DTN sites.
type Site struct {
	Name             string `json:"name"`
	Storage          string `json:"storage"`
	NICBitsPerSecond int64  `json:"nicBitsPerSecond"`
	CPUMillicores    int64  `json:"cpuMillicores"`
	// Owner is who the site's agents run as (its endpoint's spec.storage.owner).
	Owner struct {
		User  int64 `json:"user"`
		Group int64 `json:"group"`
	} `json:"owner"`
	RouterNetns string `json:"routerNetns"`
	LAN         string `json:"lan"`
	Nodes       []Node `json:"nodes"`
}

// WAN is the emulated link between the sites' routers.
type WAN struct {
	Mode              string  `json:"mode"`
	RateBitsPerSecond int64   `json:"rateBitsPerSecond"`
	DelayMillis       int64   `json:"delayMillis"`
	Loss              float64 `json:"loss"`
	Control           string  `json:"control"`
}

// Cluster is a running local cluster: cluster.json plus clients.
type Cluster struct {
	Dir        string `json:"dir"`
	Kubeconfig string `json:"kubeconfig"`
	KubectlBin string `json:"kubectl"`
	APIServer  struct {
		Host string `json:"host"`
		Port int    `json:"port"`
	} `json:"apiServer"`
	Sites      []Site `json:"sites"`
	WAN        WAN    `json:"wan"`
	AgentPorts struct {
		First int32 `json:"first"`
		Last  int32 `json:"last"`
	} `json:"agentPorts"`
	Images struct {
		Pause   string `json:"pause"`
		Manager string `json:"manager"`
		Agent   string `json:"agent"`
	} `json:"images"`
	Endpoints string `json:"endpoints"`
	// Peer is site B's own cluster in two-cluster mode (DTN_CLUSTERS=2); nil otherwise.
	Peer *PeerCluster `json:"peer,omitempty"`

	Config    *rest.Config         `json:"-"`
	Client    client.Client        `json:"-"`
	Clientset kubernetes.Interface `json:"-"`
}

// PeerCluster is site B's cluster as up.sh recorded it.
type PeerCluster struct {
	Kubeconfig string `json:"kubeconfig"`
	APIServer  struct {
		Host string `json:"host"`
		Port int    `json:"port"`
	} `json:"apiServer"`
	// WANAPIServer is host:port of site B's API server on site B's LAN: where site A
	// reaches it, across the WAN.
	WANAPIServer string `json:"wanAPIServer"`
	Endpoints    string `json:"endpoints"`
}

// SiteB is site B's cluster in two-cluster mode, with its own clients, kubeconfig, API
// server and endpoints file, and everything else (sites, WAN, images) shared.
func (c *Cluster) SiteB() (*Cluster, error) {
	if c.Peer == nil {
		return nil, fmt.Errorf("not a two-cluster local cluster (DTN_CLUSTERS=2 hack/cluster/up.sh)")
	}
	b := *c
	b.Peer = nil
	b.Kubeconfig, b.Endpoints = c.Peer.Kubeconfig, c.Peer.Endpoints
	b.APIServer.Host, b.APIServer.Port = c.Peer.APIServer.Host, c.Peer.APIServer.Port
	if err := b.connect(); err != nil {
		return nil, err
	}
	return &b, nil
}

// connect builds the clients from the kubeconfig.
func (c *Cluster) connect() error {
	var err error
	if c.Config, err = clientcmd.BuildConfigFromFlags("", c.Kubeconfig); err != nil {
		return err
	}
	c.Config.QPS, c.Config.Burst = 50, 100
	if c.Client, err = client.New(c.Config, client.Options{Scheme: Scheme()}); err != nil {
		return err
	}
	c.Clientset, err = kubernetes.NewForConfig(c.Config)
	return err
}

// RestartControlPlane stops one of the API servers (component "kube-apiserver", or
// "kube-apiserver-b" for site B's in two-cluster mode) for down, then starts it again with
// the command line and network namespace it had, recording the new process for
// hack/cluster/down.sh as up.sh does.
func (c *Cluster) RestartControlPlane(ctx context.Context, component string, down time.Duration) error {
	pidsFile := filepath.Join(c.Dir, "run", "pids")
	b, err := os.ReadFile(pidsFile)
	if err != nil {
		return err
	}
	pid := 0
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 2 && f[0] == component {
			fmt.Sscan(f[1], &pid)
		}
	}
	if pid == 0 {
		return fmt.Errorf("no %s in %s", component, pidsFile)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return fmt.Errorf("%s (pid %d) is not running: %w", component, pid, err)
	}
	netns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid))
	if err != nil {
		return err
	}
	nsName := ""
	entries, _ := os.ReadDir("/run/netns")
	for _, e := range entries {
		var st syscall.Stat_t
		if syscall.Stat("/run/netns/"+e.Name(), &st) == nil && fmt.Sprintf("net:[%d]", st.Ino) == netns {
			nsName = e.Name()
		}
	}
	if nsName == "" {
		return fmt.Errorf("the network namespace of %s (%s) is none of /run/netns", component, netns)
	}
	args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return err
	}
	for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
		time.Sleep(100 * time.Millisecond) // the process's own exit: nothing to wait on but it
	}
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(down):
	}
	logf, err := os.OpenFile(filepath.Join(c.Dir, "logs", component+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer logf.Close()
	nsArgs := append([]string{"--net=/run/netns/" + nsName}, args...) // args[0]: the component, built by hack/build-kube.sh
	cmd := exec.Command("nsenter", nsArgs...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s again: %w", component, err)
	}
	f, err := os.OpenFile(pidsFile, os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s %d\n", component, cmd.Process.Pid)
	go cmd.Wait() //nolint:errcheck // reaped when it ends; down.sh stops it
	return err
}

// RepoRoot is the repository's top folder.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", "..", ".."))
}

// Dir is the cluster's state folder: $DTN_CLUSTER_DIR or .local-cluster.
func Dir() string {
	if d := os.Getenv("DTN_CLUSTER_DIR"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), ".local-cluster")
}

// Up starts the cluster with hack/cluster/up.sh (which takes down what a previous run
// left first) and loads it. The script's output goes to log. On failure the script has
// already removed what it started.
func Up(ctx context.Context, log io.Writer) (*Cluster, error) {
	if err := script(ctx, log, "hack/cluster/up.sh"); err != nil {
		return nil, fmt.Errorf("starting the local cluster: %w", err)
	}
	return Load(Dir())
}

// Down removes everything the cluster started (hack/cluster/down.sh) and fails when
// anything is left behind.
func Down(ctx context.Context, log io.Writer) error {
	return script(ctx, log, "hack/cluster/down.sh")
}

func script(ctx context.Context, log io.Writer, path string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(RepoRoot(), path), args...)
	cmd.Env = append(os.Environ(), "DTN_CLUSTER_DIR="+Dir())
	cmd.Stdout, cmd.Stderr = log, log
	// Cancelled: SIGTERM, so that up.sh's trap takes down what it started.
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 2 * time.Minute
	return cmd.Run()
}

// Scheme has the built-in types and dtnflow's.
func Scheme() *k8sruntime.Scheme {
	s := k8sruntime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := dtnflowv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// Load reads a running cluster's cluster.json and builds its clients.
func Load(dir string) (*Cluster, error) {
	b, err := os.ReadFile(filepath.Join(dir, "cluster.json"))
	if err != nil {
		return nil, fmt.Errorf("no running local cluster in %s (run hack/cluster/up.sh or make cluster-up): %w", dir, err)
	}
	c := &Cluster{}
	if err := json.Unmarshal(b, c); err != nil {
		return nil, fmt.Errorf("%s/cluster.json: %w", dir, err)
	}
	if err := c.connect(); err != nil {
		return nil, err
	}
	return c, nil
}

// Site returns the site of that name; it panics on a name the cluster does not have,
// which is a bug in the test.
func (c *Cluster) Site(name string) *Site {
	for i := range c.Sites {
		if c.Sites[i].Name == name {
			return &c.Sites[i]
		}
	}
	panic("no site " + name)
}

// Source and Destination are the two sites in the order the tests move data.
func (c *Cluster) Source() *Site      { return &c.Sites[0] }
func (c *Cluster) Destination() *Site { return &c.Sites[1] }

// Kubectl runs kubectl against the cluster and returns its standard output.
func (c *Cluster) Kubectl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.KubectlBin, append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// SetWANRate changes the bottleneck rate of the WAN, both ways, while it runs.
func (c *Cluster) SetWANRate(ctx context.Context, bitsPerSecond int64) error {
	if c.WAN.Mode != "wanem" {
		cmd := exec.CommandContext(ctx, filepath.Join(RepoRoot(), "hack/cluster/wan.sh"), "set", "--rate", fmt.Sprint(bitsPerSecond))
		cmd.Env = append(os.Environ(), "DTN_CLUSTER_DIR="+c.Dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("wan.sh set: %w: %s", err, out)
		}
		c.WAN.RateBitsPerSecond = bitsPerSecond
		return nil
	}
	cfg, err := wanem.NewControlClient(c.WAN.Control).Update(ctx,
		map[string]any{"both": map[string]any{"rateBitsPerSecond": bitsPerSecond}})
	if err != nil {
		return fmt.Errorf("setting the WAN rate to %d bit/s: %w", bitsPerSecond, err)
	}
	if cfg.AtoB.RateBitsPerSecond != bitsPerSecond || cfg.BtoA.RateBitsPerSecond != bitsPerSecond {
		return fmt.Errorf("the WAN emulator kept %d/%d bit/s after asking for %d", cfg.AtoB.RateBitsPerSecond, cfg.BtoA.RateBitsPerSecond, bitsPerSecond)
	}
	c.WAN.RateBitsPerSecond = bitsPerSecond
	return nil
}

// SetWAN changes the whole WAN link, both ways: bottleneck rate, one-way delay, random
// loss and bottleneck queue (0: the emulator's default of one BDP). Only the wanem WAN
// emulates delay and loss.
func (c *Cluster) SetWAN(ctx context.Context, rateBitsPerSecond int64, oneWayDelay time.Duration, loss float64, queueBytes int64) error {
	if c.WAN.Mode != "wanem" {
		if oneWayDelay != 0 || loss != 0 {
			return fmt.Errorf("the %s WAN emulates no delay or loss (DTN_WAN=wanem does)", c.WAN.Mode)
		}
		return c.SetWANRate(ctx, rateBitsPerSecond)
	}
	both := map[string]any{"rateBitsPerSecond": rateBitsPerSecond, "delay": oneWayDelay.String(), "loss": loss, "queueBytes": queueBytes}
	if _, err := wanem.NewControlClient(c.WAN.Control).Update(ctx, map[string]any{"both": both}); err != nil {
		return fmt.Errorf("setting the WAN to %+v: %w", both, err)
	}
	c.WAN.RateBitsPerSecond, c.WAN.DelayMillis, c.WAN.Loss = rateBitsPerSecond, oneWayDelay.Milliseconds(), loss
	return nil
}

// WANStats are the emulator's counters (wanem mode only).
func (c *Cluster) WANStats(ctx context.Context) (wanem.Stats, error) {
	if c.WAN.Mode != "wanem" {
		return wanem.Stats{}, fmt.Errorf("WAN mode %s has no counters", c.WAN.Mode)
	}
	return wanem.NewControlClient(c.WAN.Control).Stats(ctx)
}

// Node returns the node of that name.
func (c *Cluster) Node(name string) (*Node, bool) {
	for i := range c.Sites {
		for j := range c.Sites[i].Nodes {
			if c.Sites[i].Nodes[j].Name == name {
				return &c.Sites[i].Nodes[j], true
			}
		}
	}
	return nil, false
}

// KillContainer sends SIGKILL to every process of a running container of pod, as the
// kernel's OOM killer or a crash would: the processes are found in the container's
// cgroup under its node's cgroup parent, so the kubelet and containerd learn of it only
// the way they learn of a real crash. It returns how many processes it killed.
func (c *Cluster) KillContainer(pod *corev1.Pod, container string) (int, error) {
	procs, err := c.ContainerPIDs(pod, container)
	if err != nil {
		return 0, err
	}
	killed := 0
	for _, pid := range procs {
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			killed++
		}
	}
	return killed, nil
}

// ContainerPIDs lists the processes of a running container of pod, from the
// container's cgroup under its node's cgroup parent.
func (c *Cluster) ContainerPIDs(pod *corev1.Pod, container string) ([]int, error) {
	node, ok := c.Node(pod.Spec.NodeName)
	if !ok {
		return nil, fmt.Errorf("pod %s/%s is on %q, not a node of the local cluster", pod.Namespace, pod.Name, pod.Spec.NodeName)
	}
	var id string
	for _, s := range pod.Status.ContainerStatuses {
		if s.Name == container {
			_, id, _ = strings.Cut(s.ContainerID, "://")
		}
	}
	if id == "" {
		return nil, fmt.Errorf("pod %s/%s has no running container %s", pod.Namespace, pod.Name, container)
	}
	root := filepath.Join("/sys/fs/cgroup/pids", node.CgroupParent)
	var procs []int
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || d.Name() != id || !strings.Contains(path, "pod"+string(pod.UID)) {
			return nil
		}
		b, err := os.ReadFile(filepath.Join(path, "cgroup.procs"))
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			var pid int
			if _, err := fmt.Sscan(f, &pid); err == nil {
				procs = append(procs, pid)
			}
		}
		return filepath.SkipAll
	})
	if err != nil {
		return nil, err
	}
	if len(procs) == 0 {
		return nil, fmt.Errorf("no processes of container %s of pod %s/%s under %s", id, pod.Namespace, pod.Name, root)
	}
	return procs, nil
}

// UpdateWAN applies a partial update to both directions of the WAN emulator (the
// fields of wanem.Direction by their JSON names, e.g. {"loss": 1} or {"corrupt": 1e-4,
// "corruptUndetected": true}) and returns the emulator's configuration after it.
func (c *Cluster) UpdateWAN(ctx context.Context, both map[string]any) (wanem.Config, error) {
	if c.WAN.Mode != "wanem" {
		return wanem.Config{}, fmt.Errorf("the %s WAN emulates no loss or corruption (DTN_WAN=wanem does)", c.WAN.Mode)
	}
	cfg, err := wanem.NewControlClient(c.WAN.Control).Update(ctx, map[string]any{"both": both})
	if err != nil {
		return cfg, fmt.Errorf("updating the WAN with %v: %w", both, err)
	}
	return cfg, nil
}
