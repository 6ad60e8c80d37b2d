package mover

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dtnflow/dtnflow/agent/wire"
)

func setBufferControl(bytes int64) func(network, address string, c syscall.RawConn) error {
	return func(network, address string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, int(bytes))
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, int(bytes))
		})
	}
}

func fdatasync(f *os.File) error { return unix.Fdatasync(int(f.Fd())) }

// setTimes sets f's access and modification times to t through its descriptor
// (utimensat with no path, as futimens does): one call, where os.Root.Chtimes
// resolves the name again, link by link.
func setTimes(f *os.File, t time.Time) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	at := unix.NsecToTimespec(t.UnixNano())
	ts := [2]unix.Timespec{at, at} // access and modification
	var errno syscall.Errno
	if err := c.Control(func(fd uintptr) {
		_, _, errno = unix.Syscall6(unix.SYS_UTIMENSAT, fd, 0, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	}); err != nil {
		return err
	}
	if errno != 0 {
		return &os.PathError{Op: "futimens", Path: f.Name(), Err: errno}
	}
	return nil
}

// syncfs makes everything written on f's file system durable, in one call.
func syncfs(f *os.File) error { return unix.Syncfs(int(f.Fd())) }

// hostSocketLimits are ReadSocketLimits, read once: the sysctls do not change under a
// running agent, and a sender reports them with every probe sample.
var hostSocketLimits = sync.OnceValue(ReadSocketLimits)

// ReadSocketLimits reads this host's (this network namespace's) TCP socket buffer
// limits from /proc/sys; what cannot be read is 0.
func ReadSocketLimits() wire.SocketLimits {
	third := func(name string) int64 {
		b, err := os.ReadFile("/proc/sys/net/ipv4/" + name)
		if err != nil {
			return 0
		}
		f := strings.Fields(string(b))
		if len(f) != 3 {
			return 0
		}
		v, _ := strconv.ParseInt(f[2], 10, 64)
		return v
	}
	one := func(path string) int64 {
		b, err := os.ReadFile("/proc/sys/net/" + path)
		if err != nil {
			return 0
		}
		v, _ := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		return v
	}
	l := wire.SocketLimits{SndAutotuneMax: third("tcp_wmem"), SndMax: one("core/wmem_max"), RcvMax: one("core/rmem_max")}
	if one("ipv4/tcp_moderate_rcvbuf") != 0 {
		l.RcvAutotuneMax = third("tcp_rmem")
	}
	return l
}
