package wire

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Zero-copy paths. A frame whose data is neither under its tag nor checked in flight
// (FlagDataOutsideTag|FlagDataUnchecked: in-flight mode HeadersOnly) needs no pass over
// its data in user space, so the kernel moves it: sendfile from the source file to the
// socket (WriteFrameFile), splice from the socket through a pipe into the destination
// file (SpliceData). Where the kernel offers neither (another OS, a connection that is
// not a kernel socket) the same calls copy through a buffer.

// WriteFrameFile writes a frame whose data is n bytes of f at off. Data outside the
// frame's tag (flags has FlagDataOutsideTag) goes from the page cache to the socket.
// Data under the tag is read into the Writer's own buffer and tagged and written from
// there by the caller's goroutine, while the bytes are still in its core's cache (see
// SourceReadError for a read that fails).
func (w *Writer) WriteFrameFile(t Type, flags Flags, meta []byte, f *os.File, off int64, n int) error {
	if flags&FlagDataOutsideTag == 0 {
		return w.writeFrameRead(t, flags, meta, f, off, n)
	}
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

// SourceReadError is WriteFrameFile's error when the file could not be read (or was
// shorter than the frame's data), naming the offset of the read. Nothing of the frame
// was written, so the connection can carry the next frame: the error is the source's,
// not the connection's.
type SourceReadError struct{ Err error }

func (e *SourceReadError) Error() string { return e.Err.Error() }
func (e *SourceReadError) Unwrap() error { return e.Err }

// writeFrameRead reads a frame's data from f into the Writer's buffer, then writes the
// frame with its data under its tag.
func (w *Writer) writeFrameRead(t Type, flags Flags, meta []byte, f *os.File, off int64, n int) error {
	if n < 0 || n > MaxData {
		return fmt.Errorf("wire: refusing to write file-backed frame type %d with %d bytes of data", t, n)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if cap(w.fileBuf) < n {
		w.fileBuf = make([]byte, n)
	}
	data := w.fileBuf[:n]
	if got, err := f.ReadAt(data, off); got < n {
		if err == nil || errors.Is(err, io.EOF) {
			err = fmt.Errorf("the file is shorter than listed (%w)", io.ErrUnexpectedEOF)
		}
		return &SourceReadError{Err: fmt.Errorf("at byte %d: %w", off, err)}
	}
	return w.writeFrameLocked(t, flags, meta, data, false)
}

// SpliceData moves the current frame's data into dst at off and checks the frame's
// tag. The data must be outside the tag (FlagDataOutsideTag): nothing in user space
// looks at it. What the read buffer already holds of it is written from there; the
// rest goes from the socket through a pipe into the file.
//
// gate, when not nil, admits each piece of the data into dst (and is held only while
// the piece is written, never while the socket is waited on): the writers of one file
// take turns in user space, where a parked goroutine costs nothing, instead of spinning
// on the file's lock in the kernel, and whoever closes dst waits for a piece's write,
// not for the peer to send the rest of the frame. A gate that refuses a piece ends the
// data there with ErrDestinationClosed: the stream is left in the middle of the frame.
func (r *Reader) SpliceData(dst *os.File, off int64, gate Gate) error {
	if gate == nil {
		gate = openGate{}
	}
	if !r.tagDue || r.cur.Flags&FlagDataOutsideTag == 0 || r.cur.Flags&FlagEncrypted != 0 {
		return fmt.Errorf("wire: SpliceData on a frame whose data is under its tag (type %d)", r.cur.Type)
	}
	n := r.pending
	r.pending = 0
	if err := r.moveData(dst, off, n, gate); err != nil {
		r.tagDue = false
		if errors.Is(err, ErrDestinationClosed) {
			return err
		}
		return unexpected(err)
	}
	return r.finish(nil)
}

// Gate admits the writes into a destination one piece at a time (SpliceData).
type Gate interface {
	// Enter is called before a piece is written: true lets it be written, and Leave
	// follows the write; false says the destination takes nothing more.
	Enter() bool
	Leave()
}

// ErrDestinationClosed: SpliceData's gate refused a piece of the data.
var ErrDestinationClosed = errors.New("wire: destination closed to further writes")

// socketReader is the kernel socket under a Reader's buffer: it reads the socket
// itself (zeroCopy.read), so that it can set the socket's low-water mark to what the
// frame in hand still owes just before it waits, and it counts what each read delivered
// against that.
type socketReader struct{ zc *zeroCopy }

func (s socketReader) Read(p []byte) (int, error) { return s.zc.read(p) }

// openGate is the gate of a destination nobody else writes or closes (a sink).
type openGate struct{}

func (openGate) Enter() bool { return true }
func (openGate) Leave()      {}

// moveData moves n bytes of the current frame's data into dst at off (off < 0: dst has
// no offsets, a sink such as /dev/null).
func (r *Reader) moveData(dst *os.File, off, n int64, gate Gate) error {
	if r.zc == nil || r.zc.br == nil {
		if r.copyBuf == nil {
			r.copyBuf = make([]byte, copyPieceSize)
		}
		return copyData(dst, off, r.r, n, gate, r.copyBuf)
	}
	if b := min(int64(r.zc.br.Buffered()), n); b > 0 {
		p, _ := r.zc.br.Peek(int(b))
		if err := writePiece(dst, &off, p, gate); err != nil {
			return err
		}
		r.zc.br.Discard(int(b))
		n -= b
	}
	if n == 0 {
		return nil
	}
	return r.zc.splice(dst, off, n, gate)
}

// copyPieceSize is what the copy through user space reads before each write (the
// Reader's copyBuf): a quarter of a usual block, so that whoever closes the
// destination waits for at most that much of a write.
const copyPieceSize = 256 << 10

// copyData copies n bytes of src into dst at off through buf, where the kernel cannot
// splice: read a piece (outside the gate), then write it (within the gate).
func copyData(dst *os.File, off int64, src io.Reader, n int64, gate Gate, buf []byte) error {
	for n > 0 {
		k, err := io.ReadFull(src, buf[:min(n, int64(len(buf)))])
		if k > 0 {
			if werr := writePiece(dst, &off, buf[:k], gate); werr != nil {
				return werr
			}
			n -= int64(k)
		}
		if err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
	}
	return nil
}

// writePiece writes p into dst at *off (off < 0: at dst's own position) within the
// gate, moving *off past it.
func writePiece(dst *os.File, off *int64, p []byte, gate Gate) error {
	if !gate.Enter() {
		return ErrDestinationClosed
	}
	defer gate.Leave()
	if *off < 0 {
		_, err := dst.Write(p)
		return err
	}
	_, err := dst.WriteAt(p, *off)
	*off += int64(len(p))
	return err
}
