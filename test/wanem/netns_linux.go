package wanem

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"
)

// NetnsPath turns a namespace reference into a path: "" is the caller's own network
// namespace (the host, for a process started from a shell), a name is one made by `ip
// netns add` (/run/netns/<name>), and an absolute path (/proc/<pid>/ns/net, a bind
// mount) is used as it is.
func NetnsPath(ns string) string {
	switch {
	case ns == "":
		return ""
	case filepath.IsAbs(ns):
		return ns
	}
	return filepath.Join("/run/netns", ns)
}

// InNetns runs fn on an OS thread that has entered the network namespace ns (see
// NetnsPath). Sockets and TUN devices fn opens belong to ns and stay there when the
// thread goes back: a test can listen in one namespace and dial from another.
func InNetns(ns string, fn func() error) error { return inNetns(ns, fn) }

func inNetns(ns string, fn func() error) error {
	path := NetnsPath(ns)
	if path == "" {
		return fn()
	}
	target, err := unix.Open(path, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("network namespace %s: %w", ns, err)
	}
	defer unix.Close(target)

	runtime.LockOSThread()
	orig, err := unix.Open("/proc/thread-self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("own network namespace: %w", err)
	}
	defer unix.Close(orig)
	if err := unix.Setns(target, unix.CLONE_NEWNET); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("enter network namespace %s: %w", ns, err)
	}
	defer func() {
		// A thread that cannot go back stays locked, so the runtime retires it with
		// the goroutine instead of reusing it in the wrong namespace.
		if unix.Setns(orig, unix.CLONE_NEWNET) == nil {
			runtime.UnlockOSThread()
		}
	}()
	return fn()
}

// IPCommand is the `ip` command line that runs in namespace ns (through nsenter, which
// accepts any namespace path, unlike `ip -n`).
func IPCommand(ns string, args ...string) *exec.Cmd {
	return NetnsCommand(ns, "ip", args...)
}

// NetnsCommand is a command that runs in network namespace ns and in no other
// namespace of it (unlike `ip netns exec`, which also remounts /sys).
func NetnsCommand(ns string, name string, args ...string) *exec.Cmd {
	path := NetnsPath(ns)
	if path == "" {
		return exec.Command(name, args...)
	}
	return exec.Command("nsenter", append([]string{"--net=" + path, "--", name}, args...)...)
}

// run runs cmd and folds its output into the error.
func run(cmd *exec.Cmd) error {
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w: %s", strings.Join(cmd.Args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// CanEmulate reports why this process cannot build emulated links, or nil: it needs to
// be root (CAP_NET_ADMIN and CAP_SYS_ADMIN for setns) and to have /dev/net/tun.
func CanEmulate() error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("not root: the emulator creates TUN devices and enters network namespaces")
	}
	f, err := os.OpenFile("/dev/net/tun", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("no usable TUN device: %w", err)
	}
	f.Close()
	for _, tool := range []string{"ip", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s not found (iproute2, util-linux): %w", tool, err)
		}
	}
	return nil
}
