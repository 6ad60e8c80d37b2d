package wire

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// zeroCopy is a kernel socket's state for the zero-copy paths: its raw descriptor, the
// reader's buffer, and a pipe for splicing, made when first needed.
type zeroCopy struct {
	raw syscall.RawConn
	br  *bufio.Reader

	mu   sync.Mutex
	pipe [2]int
}

// pipeSize is what one splice moves at most: a 1 MiB block in one go.
const pipeSize = 1 << 20

func newZeroCopy(c net.Conn) *zeroCopy {
	sc, ok := c.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return nil
	}
	return &zeroCopy{raw: raw, pipe: [2]int{-1, -1}}
}

func (z *zeroCopy) close() {
	if z == nil {
		return
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.pipe[0] >= 0 {
		unix.Close(z.pipe[0])
		unix.Close(z.pipe[1])
		z.pipe = [2]int{-1, -1}
	}
}

// sendMore writes b with MSG_MORE, so that the kernel holds it for the data behind it.
func (z *zeroCopy) sendMore(b []byte) error {
	for len(b) > 0 {
		var n int
		var serr error
		err := z.raw.Write(func(fd uintptr) bool {
			n, serr = unix.SendmsgN(int(fd), b, nil, nil, unix.MSG_MORE)
			return serr != unix.EAGAIN
		})
		if err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// sendfile sends n bytes of f from off, page cache to socket.
func (z *zeroCopy) sendfile(f *os.File, off int64, n int) error {
	src, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var srcFD int
	src.Control(func(fd uintptr) { srcFD = int(fd) })
	for n > 0 {
		var k int
		var serr error
		err := z.raw.Write(func(fd uintptr) bool {
			k, serr = unix.Sendfile(int(fd), srcFD, &off, n)
			return serr != unix.EAGAIN
		})
		if err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
		if k == 0 {
			return io.ErrUnexpectedEOF // the file is shorter than it was listed
		}
		n -= k
	}
	return nil
}

// splice moves n bytes from the socket through the pipe into dst at off (off < 0: at
// dst's own position, for a sink).
func (z *zeroCopy) splice(dst *os.File, off, n int64) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.pipe[0] < 0 {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return err
		}
		unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, pipeSize) // best effort: a smaller pipe moves less per call
		z.pipe = p
	}
	dc, err := dst.SyscallConn()
	if err != nil {
		return err
	}
	var dstFD int
	dc.Control(func(fd uintptr) { dstFD = int(fd) })
	for n > 0 {
		var moved int64
		var serr error
		err := z.raw.Read(func(fd uintptr) bool {
			moved, serr = unix.Splice(int(fd), nil, z.pipe[1], nil, int(min(n, pipeSize)), unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
			return serr != unix.EAGAIN
		})
		if err == nil {
			err = serr
		}
		if err != nil {
			return err
		}
		if moved == 0 {
			return io.ErrUnexpectedEOF
		}
		n -= moved
		for moved > 0 {
			var k int64
			var werr error
			if off >= 0 {
				k, werr = unix.Splice(z.pipe[0], nil, dstFD, &off, int(moved), unix.SPLICE_F_MOVE)
			} else {
				k, werr = unix.Splice(z.pipe[0], nil, dstFD, nil, int(moved), unix.SPLICE_F_MOVE)
			}
			if werr == unix.EINTR {
				continue
			}
			if werr != nil {
				z.drain() // the pipe must be empty for the next frame
				return werr
			}
			if k == 0 {
				z.drain()
				return errors.New("wire: splice into the file moved nothing")
			}
			moved -= k
		}
	}
	return nil
}

// drain empties the pipe after a failed splice into the file.
func (z *zeroCopy) drain() {
	unix.Close(z.pipe[0])
	unix.Close(z.pipe[1])
	z.pipe = [2]int{-1, -1}
}
