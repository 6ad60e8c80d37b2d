package mover

import (
	"io/fs"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// notSentLowWater is the TCP_NOTSENT_LOWAT of a session's data streams: a socket takes
// more bytes only while fewer than this many of those written are still unsent, so
// what waits in the kernel is what the congestion window lets go plus about this
// much. Without it a stream took bytes up to its send buffer (8 MiB at a 4 MiB
// buffer), and the units they belonged to sat there, held by the stripe, while its
// streams sent them at their own pace: the last small files of a job waited behind
// one stripe's slower streams while the others idled (see work). 1 MiB is a block
// (DefaultBlockSize): a writer woken below it has a block's worth of the stream's time
// to write the next. Measured with and without it (docs/benchmarks.md,
// thirty-seventh session): the 4 GiB file on the emulated 1 Gbit/s, 50 ms path and
// the 2 GiB file and the small files on loopback moved as fast.
const notSentLowWater = 1 << 20

// socketControl sets the socket buffers (bytes > 0) and TCP_NOTSENT_LOWAT (lowWater >
// 0); nil when there is neither.
func socketControl(bytes int64, lowWater int) func(network, address string, c syscall.RawConn) error {
	if bytes <= 0 && lowWater <= 0 {
		return nil
	}
	return func(network, address string, c syscall.RawConn) error {
		return c.Control(func(fd uintptr) {
			if bytes > 0 {
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_SNDBUF, int(bytes))
				unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, int(bytes))
			}
			if lowWater > 0 {
				unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_NOTSENT_LOWAT, lowWater)
			}
		})
	}
}

// fdatasync makes f's data durable. It runs on the descriptor held open (Control), not
// on f.Fd()'s number: the committer syncs a chunk's file while its session may be
// closing it, and a number freed by that Close and taken by the next open would sync
// another file and have the journal record the chunk's blocks as durable (go test
// -race on agent/e2e, the agents built with -race, found the two racing).
func fdatasync(f *os.File) error {
	return onDescriptor(f, func(fd int) error { return unix.Fdatasync(fd) })
}

// onDescriptor runs op on f's descriptor, which stays open meanwhile; a closed f is
// an error, op not run.
func onDescriptor(f *os.File, op func(fd int) error) error {
	c, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var opErr error
	if err := c.Control(func(fd uintptr) { opErr = op(int(fd)) }); err != nil {
		return err
	}
	return opErr
}

// setTimes sets f's access and modification times to t through its descriptor
// (utimensat with no path, as futimens does): one call, where os.Root.Chtimes
// resolves the name again, link by link.
func setTimes(f *os.File, t time.Time) error {
	at := unix.NsecToTimespec(t.UnixNano())
	ts := [2]unix.Timespec{at, at} // access and modification
	return onDescriptor(f, func(fd int) error {
		if _, _, errno := unix.Syscall6(unix.SYS_UTIMENSAT, uintptr(fd), 0, uintptr(unsafe.Pointer(&ts)), 0, 0, 0); errno != 0 {
			return &os.PathError{Op: "futimens", Path: f.Name(), Err: errno}
		}
		return nil
	})
}

// syncfs makes everything written on f's file system durable, in one call.
func syncfs(f *os.File) error { return onDescriptor(f, unix.Syncfs) }

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

// descriptor opens the directory's descriptor once (false: it could not be opened, and
// the os.Root does everything).
func (d *cachedDir) descriptor() bool {
	d.once.Do(func() {
		if f, err := d.Root.Open("."); err == nil {
			d.file = f
		}
	})
	return d.file != nil
}

// openFile opens name, one name in d, with one openat on the directory's descriptor:
// no symlink followed (O_NOFOLLOW), and the descriptor handed to os.NewFile blocking,
// so that Go's poller is not asked about it — os.Root.OpenFile sets a regular file
// non-blocking, tries to register it with epoll (which refuses regular files) and sets
// it back: four fcntl and a failing epoll_ctl per file, on both ends of every small
// file. Whatever openat refuses (a symlink in name's place, which os.Root follows while
// it stays inside the root; a missing directory; any error) and any name that is not
// one name go to the os.Root, which resolves them as before and says why they failed.
func (d *cachedDir) openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	if oneName(name) && d.descriptor() {
		fd, err := unix.Openat(int(d.file.Fd()), name, flag|unix.O_NOFOLLOW|unix.O_CLOEXEC, uint32(perm.Perm()))
		runtime.KeepAlive(d.file)
		if err == nil {
			return os.NewFile(uintptr(fd), d.Name()+"/"+name), nil
		}
	}
	return d.Root.OpenFile(name, flag, perm)
}

// openRegular opens name in d for reading only if it is a regular file, and returns
// what it found there. The open does not wait (O_NONBLOCK): a FIFO put at a name that
// was listed as a file, or left at a destination name, would wait in open(2) for a
// writer that never comes, and the session with it. The flag is cleared before anything
// reads the file — it means nothing to a regular file, but os.NewFile would take a
// non-blocking descriptor to Go's poller, at three more system calls per file.
func (d *cachedDir) openRegular(name string) (*os.File, os.FileInfo, error) {
	if !oneName(name) || !d.descriptor() {
		return openRegularAt(d.Root, name)
	}
	fd, err := unix.Openat(int(d.file.Fd()), name, unix.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	runtime.KeepAlive(d.file)
	if err != nil {
		return openRegularAt(d.Root, name) // a symlink, followed while it stays in the root; or why it fails
	}
	if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFL, 0); err != nil {
		unix.Close(fd)
		return nil, nil, err
	}
	return regularOnly(os.NewFile(uintptr(fd), d.Name()+"/"+name))
}

// openRegularAt is openRegular for any path under root, resolved by the os.Root.
func openRegularAt(root *os.Root, name string) (*os.File, os.FileInfo, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|unix.O_NONBLOCK|unix.O_NOCTTY, 0)
	if err != nil {
		return nil, nil, err
	}
	if err := setBlocking(f); err != nil {
		f.Close()
		return nil, nil, err
	}
	return regularOnly(f)
}

// regularOnly returns f and what it is when it is a regular file, else closes it. It
// also checks the receiver's temporary files as they are opened: the names are the
// receiver's own, but another writer of the destination can put something else there
// first — a write into a FIFO waits, once its buffer is full, for a reader that never
// comes, and the rename would make the FIFO the file.
func regularOnly(f *os.File) (*os.File, os.FileInfo, error) {
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = notRegular(fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	return f, fi, nil
}

// keepsInodes says whether the root's file system keeps a file's inode number for as
// long as the file exists, so that a final record can name the file by it (sameFile).
// A FUSE file system may number a file anew each time the kernel looks it up: there a
// final file would seem replaced at every look, and final records keep no inode.
func (r *Receiver) keepsInodes() bool {
	r.inodesOnce.Do(func() {
		f, err := r.Root.Open(".")
		if err != nil {
			return
		}
		defer f.Close()
		var st unix.Statfs_t
		if unix.Fstatfs(int(f.Fd()), &st) == nil {
			r.inodesKept = st.Type != unix.FUSE_SUPER_MAGIC
		}
	})
	return r.inodesKept
}

// finalInode is what a final record keeps of fi's inode: 0 where the file system does
// not keep inode numbers.
func (r *Receiver) finalInode(fi fs.FileInfo) uint64 {
	if !r.keepsInodes() {
		return 0
	}
	return inode(fi)
}

// setBlocking clears O_NONBLOCK on f's descriptor.
func setBlocking(f *os.File) error {
	return onDescriptor(f, func(fd int) error { return unix.SetNonblock(fd, false) })
}

// rename renames from to to, both names in d, with one renameat on the directory's
// descriptor (os.Root.Rename stats the target first, to refuse replacing a directory,
// which renameat refuses too: EISDIR). A failure goes to the os.Root, which tries
// again and says why.
func (d *cachedDir) rename(from, to string) error {
	if oneName(from) && oneName(to) && d.descriptor() {
		err := unix.Renameat(int(d.file.Fd()), from, int(d.file.Fd()), to)
		runtime.KeepAlive(d.file)
		if err == nil {
			return nil
		}
	}
	return d.Root.Rename(from, to)
}
