package wire

import (
	"fmt"
	"io"
	"os"
	"sync"
)

// Zero-copy paths. A frame whose data is neither under its tag nor checked in flight
// (FlagDataOutsideTag|FlagDataUnchecked: in-flight mode HeadersOnly) needs no pass over
// its data in user space, so the kernel moves it: sendfile from the source file to the
// socket (WriteFrameFile), splice from the socket through a pipe into the destination
// file (SpliceData). Where the kernel offers neither (another OS, a connection that is
// not a kernel socket) the same calls copy through a buffer.

// WriteFrameFile writes a frame whose data is n bytes of f at off, which must be outside
// the frame's tag (flags has FlagDataOutsideTag).
func (w *Writer) WriteFrameFile(t Type, flags Flags, meta []byte, f *os.File, off int64, n int) error {
	h := Header{Type: t, Flags: flags, MetaLen: uint32(len(meta)), DataLen: uint32(n)}
	if err := h.Check(); err != nil || flags&FlagDataOutsideTag == 0 || !t.bulk() {
		return fmt.Errorf("wire: refusing to write file-backed frame type %d flags %#x (meta %d, data %d): %v", t, flags, len(meta), n, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.encrypt {
		return fmt.Errorf("wire: a file-backed frame cannot be encrypted (in-flight modes HeadersOnly and Encrypted exclude each other)")
	}
	w.buf = w.buf[:HeaderSize]
	PutHeader(w.buf, h)
	w.buf = append(w.buf, meta...)
	tag := w.mac.sum(w.tag[:0], w.buf[:HeaderSize], meta, nil, false, false)
	if w.zc != nil {
		if err := w.zc.sendMore(w.buf); err != nil {
			return err
		}
		if err := w.zc.sendfile(f, off, n); err != nil {
			return err
		}
	} else {
		if _, err := w.w.Write(w.buf); err != nil {
			return err
		}
		if _, err := io.Copy(w.w, io.NewSectionReader(f, off, int64(n))); err != nil {
			return err
		}
	}
	_, err := w.w.Write(tag)
	return err
}

// SpliceData moves the current frame's data into dst at off and checks the frame's
// tag. The data must be outside the tag (FlagDataOutsideTag): nothing in user space
// looks at it. What the read buffer already holds of it is written from there; the
// rest goes from the socket through a pipe into the file.
//
// lock, when not nil, is held while bytes go into dst (and only then, not while the
// socket is read): the writers of one file take turns in user space, where a parked
// goroutine costs nothing, instead of spinning on the file's lock in the kernel.
func (r *Reader) SpliceData(dst *os.File, off int64, lock sync.Locker) error {
	if lock == nil {
		lock = noLock{}
	}
	if !r.tagDue || r.cur.Flags&FlagDataOutsideTag == 0 || r.cur.Flags&FlagEncrypted != 0 {
		return fmt.Errorf("wire: SpliceData on a frame whose data is under its tag (type %d)", r.cur.Type)
	}
	n := r.pending
	r.pending = 0
	if err := r.moveData(dst, off, n, lock); err != nil {
		r.tagDue = false
		return unexpected(err)
	}
	return r.finish(nil)
}

// socketReader is the kernel socket under a Reader's buffer: it reads the socket
// itself (zeroCopy.read), so that it can set the socket's low-water mark to what the
// frame in hand still owes just before it waits, and it counts what each read delivered
// against that.
type socketReader struct{ zc *zeroCopy }

func (s socketReader) Read(p []byte) (int, error) { return s.zc.read(p) }

// noLock is the lock of a destination nobody else writes (a sink).
type noLock struct{}

func (noLock) Lock()   {}
func (noLock) Unlock() {}

// moveData moves n bytes of the current frame's data into dst at off (off < 0: dst has
// no offsets, a sink such as /dev/null).
func (r *Reader) moveData(dst *os.File, off, n int64, lock sync.Locker) error {
	if r.zc == nil || r.zc.br == nil {
		src := io.LimitReader(r.r, n)
		var err error
		var k int64
		if off < 0 {
			k, err = io.Copy(dst, src)
		} else {
			k, err = io.Copy(io.NewOffsetWriter(dst, off), src)
		}
		if err == nil && k < n {
			err = io.ErrUnexpectedEOF
		}
		return err
	}
	if b := min(int64(r.zc.br.Buffered()), n); b > 0 {
		p, _ := r.zc.br.Peek(int(b))
		var err error
		lock.Lock()
		if off < 0 {
			_, err = dst.Write(p)
		} else {
			_, err = dst.WriteAt(p, off)
			off += b
		}
		lock.Unlock()
		if err != nil {
			return err
		}
		r.zc.br.Discard(int(b))
		n -= b
	}
	if n == 0 {
		return nil
	}
	return r.zc.splice(dst, off, n, lock)
}
