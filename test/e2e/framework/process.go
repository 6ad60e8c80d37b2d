package framework

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The cluster's own processes, as hack/cluster/up.sh started them and recorded them in
// run/pids ("<name> <pid>" lines: etcd, kube-apiserver, kubelet-<node>, ...). Stopping
// one and starting it again with the same command line, in the same namespaces, is how
// the chaos tests restart the control plane or a kubelet; the new PID is appended to
// run/pids, so hack/cluster/down.sh stops it like any other.

// StoppedProcess is a cluster process that StopProcess stopped, with what it takes to
// start it again.
type StoppedProcess struct {
	Name  string
	PID   int
	argv  []string
	env   []string
	dir   string
	netns string
	uts   string
	c     *Cluster
}

// processPID is the PID recorded last for name in run/pids.
func (c *Cluster) processPID(name string) (int, error) {
	f, err := os.Open(filepath.Join(c.Dir, "run", "pids"))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	pid := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 2 && fields[0] == name {
			pid, _ = strconv.Atoi(fields[1])
		}
	}
	if pid == 0 {
		return 0, fmt.Errorf("no process %q in %s/run/pids", name, c.Dir)
	}
	return pid, sc.Err()
}

// processNetns is the network namespace a recorded process runs in: the control
// plane's for etcd and the Kubernetes components, the node's for kubelet-<node> and
// containerd-<node>.
func (c *Cluster) processNetns(name string) (netns, uts string, err error) {
	for _, prefix := range []string{"kubelet-", "containerd-"} {
		if node, ok := strings.CutPrefix(name, prefix); ok {
			n, found := c.Node(node)
			if !found {
				return "", "", fmt.Errorf("process %s: no node %s", name, node)
			}
			return n.Netns, "/run/" + n.Netns + ".uts", nil
		}
	}
	switch name {
	case "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler":
		return ControlPlaneNetns, "", nil
	}
	return "", "", fmt.Errorf("process %s: not one the tests know how to restart", name)
}

// ControlPlaneNetns is the network namespace of etcd and the Kubernetes control plane
// (hack/cluster/lib.sh CP_NETNS).
const ControlPlaneNetns = "dtn-cp"

// StopProcess stops a cluster process (SIGTERM, SIGKILL after 10 s) and returns what
// starts it again.
func (c *Cluster) StopProcess(name string) (*StoppedProcess, error) {
	pid, err := c.processPID(name)
	if err != nil {
		return nil, err
	}
	netns, uts, err := c.processNetns(name)
	if err != nil {
		return nil, err
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || len(cmdline) == 0 {
		return nil, fmt.Errorf("process %s (%d) is not running: %v", name, pid, err)
	}
	if !bytes.Contains(cmdline, []byte(c.Dir+"/")) {
		return nil, fmt.Errorf("process %d is no longer %s (its command line does not name %s)", pid, name, c.Dir)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		return nil, err
	}
	dir, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if err != nil {
		return nil, err
	}
	p := &StoppedProcess{Name: name, PID: pid, argv: split0(cmdline), env: split0(environ), dir: dir, netns: netns, uts: uts, c: c}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return nil, fmt.Errorf("stopping %s (%d): %w", name, pid, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
			deadline = time.Now().Add(10 * time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return p, nil
}

// Start starts the process again with its command line, environment, folder and
// namespaces, appending its output to its log and its PID to run/pids.
func (p *StoppedProcess) Start() error {
	args := []string{"--net=/run/netns/" + p.netns}
	if p.uts != "" {
		args = append(args, "--uts="+p.uts)
	}
	cmd := exec.Command("nsenter", append(args, p.argv...)...)
	cmd.Env, cmd.Dir = p.env, p.dir
	log, err := os.OpenFile(filepath.Join(p.c.Dir, "logs", p.Name+".log"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s again: %w", p.Name, err)
	}
	go func() { _ = cmd.Wait() }() // reap it if it exits while the tests run
	pids, err := os.OpenFile(filepath.Join(p.c.Dir, "run", "pids"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	defer pids.Close()
	_, err = fmt.Fprintf(pids, "%s %d\n", p.Name, cmd.Process.Pid)
	return err
}

func split0(b []byte) []string {
	var out []string
	for _, s := range bytes.Split(bytes.TrimRight(b, "\x00"), []byte{0}) {
		out = append(out, string(s))
	}
	return out
}

// processAlive: the process exists and is not a zombie.
func processAlive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i < 0 || i+2 >= len(b) || b[i+2] != 'Z'
}
