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
	conn net.Conn // for the addresses a read's error names
	raw  syscall.RawConn
	br   *bufio.Reader

	mu   sync.Mutex
	pipe [2]int
	// pipeCap is what the pipe holds once made (its size as the kernel set it).
	pipeCap int64

	// The reader's side (one goroutine): due is how many bytes of the frame in hand the
	// peer has yet to deliver to the socket, lowWater the socket's SO_RCVLOWAT as last
	// set (the kernel's default is 1).
	due      int64
	lowWater int
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
	return &zeroCopy{conn: c, raw: raw, pipe: [2]int{-1, -1}, lowWater: 1}
}

// owe says how many bytes of the frame in hand have yet to come from the socket.
func (z *zeroCopy) owe(n int64) { z.due = n }

// delivered counts n bytes read from the socket against what is owed.
func (z *zeroCopy) delivered(n int64) { z.due -= n }

// maxLowWater bounds the low-water mark: a block's worth. One loopback stream moved 40
// Gbit/s waking at every segment and 55–65 at a mark of 512 KiB to 2 MiB (a reader
// reading 1 MiB at a time, 2026-11-30), with less CPU at both ends: fewer wake-ups.
const maxLowWater = 1 << 20

// awaitDue sets the socket's low-water mark to the bytes the reader is owed (due,
// within maxLowWater), so that the socket wakes the reader once they are there instead
// of at every segment. It is called with the socket's descriptor just before the reader
// waits, and only then: a read that does not wait returns what the socket holds
// whatever the mark, so a mark set at every read (four system calls a frame, a quarter
// of what a small file cost the receiver) bought nothing where the reader is behind the
// wire. The mark is never more than the peer has committed to send: a mark past the end
// of what comes would leave the reader asleep until the peer closes. It is also never
// more than a quarter of the socket's receive buffer: a mark whose room in memory (the
// mark over the ratio of the segments' payload to the memory they take) passes the
// buffer makes the kernel grow the buffer and clamp the TCP window to the mark
// (tcp_set_rcvlowat), which would hold back a long path's window until autotuning grows
// the buffer past it. A quarter leaves room for segments that take up to four times
// their payload; an eighth cost one loopback stream 14–17 % of its rate in an A/B run
// (its buffer grows to 18 MB, but not at once). Autotuning grows the buffer, and the
// mark follows. A mark left from an earlier wait does nothing to reads that do not wait,
// and is set again before the next wait. Failing to set it only costs wake-ups.
func (z *zeroCopy) awaitDue(fd int) {
	want := int(min(max(z.due, 1), maxLowWater))
	if want == z.lowWater {
		return
	}
	if want > 1 {
		rcvbuf, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
		if err != nil {
			return
		}
		want = max(1, min(want, rcvbuf/4))
		if want == z.lowWater {
			return
		}
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_RCVLOWAT, want) == nil {
		z.lowWater = want
	}
}

// read reads the socket into p, what a net.Conn's Read does, setting the low-water mark
// (awaitDue) only when the socket has nothing and the reader is about to wait.
func (z *zeroCopy) read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	var n int
	rerr, err := z.rawRead(true, func(fd int) (err error) {
		for {
			if n, err = unix.Read(fd, p); err != unix.EINTR {
				return err
			}
		}
	})
	switch {
	case err != nil:
		return 0, err
	case rerr != nil:
		local := z.conn.LocalAddr()
		return 0, &net.OpError{Op: "read", Net: local.Network(), Source: local, Addr: z.conn.RemoteAddr(), Err: os.NewSyscallError("read", rerr)}
	case n == 0:
		return 0, io.EOF
	}
	z.delivered(int64(n))
	return n, nil
}

// rawRead runs op on the socket's descriptor; op finding nothing (EAGAIN) while mayWait
// sets the low-water mark (awaitDue) and waits for the socket to have something, then
// runs op again. opErr is op's last error, err the wait's (a deadline, a closed
// connection).
func (z *zeroCopy) rawRead(mayWait bool, op func(fd int) error) (opErr, err error) {
	err = z.raw.Read(func(fd uintptr) bool {
		opErr = op(int(fd))
		if opErr == unix.EAGAIN && mayWait {
			z.awaitDue(int(fd))
			return false
		}
		return true
	})
	return opErr, err
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
//
// The pipe takes what the socket has until it holds the whole frame's data (a block
// fits in it) or the socket has nothing more for now, and only then goes into the file
// in one splice, within the gate: one turn at the file's write lock per block, not one
// per socket read. Bytes held in the pipe are written out before the socket is waited
// on. Each flush runs with dst's descriptor held (Control), so that a dst closed while
// the socket was waited on fails the flush instead of splicing into whatever file took
// its descriptor number since.
func (z *zeroCopy) splice(dst *os.File, off, n int64, gate Gate) error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.pipe[0] < 0 {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
			return err
		}
		// Best effort: a smaller pipe only moves less per splice.
		size, err := unix.FcntlInt(uintptr(p[1]), unix.F_SETPIPE_SZ, pipeSize)
		if err != nil {
			size, err = unix.FcntlInt(uintptr(p[1]), unix.F_GETPIPE_SZ, 0)
		}
		if err != nil || size <= 0 {
			size = minPipeSize
		}
		z.pipe, z.pipeCap = p, int64(size)
	}
	dc, err := dst.SyscallConn()
	if err != nil {
		return err
	}
	var held int64 // bytes in the pipe, not yet in the file
	for n > 0 || held > 0 {
		if n > 0 && held < z.pipeCap {
			moved, err := z.fill(min(n, z.pipeCap-held), held == 0)
			if err != nil {
				z.drain()
				return err
			}
			n -= moved
			held += moved
			if moved > 0 && n > 0 && held < z.pipeCap {
				continue
			}
		}
		if !gate.Enter() {
			z.drain()
			return ErrDestinationClosed
		}
		var ferr error
		cerr := dc.Control(func(fd uintptr) { ferr = z.flush(int(fd), &off, held) })
		gate.Leave()
		if cerr != nil {
			z.drain()
			return cerr
		}
		if ferr != nil {
			return ferr
		}
		held = 0
	}
	return nil
}

// fill splices up to want bytes from the socket into the pipe. It waits for the socket
// only when mayWait (the pipe holds nothing); otherwise nothing to take for now — a
// socket with nothing more yet, or a pipe out of slots (a slot per socket buffer,
// however small) — is 0 bytes and no error, and the held bytes go into the file first.
func (z *zeroCopy) fill(want int64, mayWait bool) (int64, error) {
	var moved int64
	serr, err := z.rawRead(mayWait, func(fd int) (err error) {
		moved, err = unix.Splice(fd, nil, z.pipe[1], nil, int(want), unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		return err
	})
	switch {
	case err != nil:
		return 0, err
	case serr == unix.EAGAIN:
		return 0, nil
	case serr != nil:
		return 0, serr
	case moved == 0:
		return 0, io.ErrUnexpectedEOF
	}
	z.delivered(moved)
	return moved, nil
}

// minPipeSize is a pipe's size where the kernel says nothing else: sixteen pages.
const minPipeSize = 16 << 12

// flush splices the n bytes the pipe holds into dst at *off (off < 0: at its own
// position), moving *off past them.
func (z *zeroCopy) flush(dstFD int, off *int64, n int64) error {
	for n > 0 {
		var k int64
		var werr error
		if *off >= 0 {
			k, werr = unix.Splice(z.pipe[0], nil, dstFD, off, int(n), unix.SPLICE_F_MOVE)
		} else {
			k, werr = unix.Splice(z.pipe[0], nil, dstFD, nil, int(n), unix.SPLICE_F_MOVE)
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
		n -= k
	}
	return nil
}

// drain empties the pipe after a failed splice into the file.
func (z *zeroCopy) drain() {
	unix.Close(z.pipe[0])
	unix.Close(z.pipe[1])
	z.pipe = [2]int{-1, -1}
}
