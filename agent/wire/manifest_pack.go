package wire

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dtnflow/dtnflow/agent/fsname"
)

// The packed form of a manifest's files. A receiver's manifest lists every file the
// job made final and crosses the path at the very end of the job, while the senders
// wait for it: for 20 000 small files, 1.5 MB of JSON (about 75 bytes a file), sent
// on a control connection whose window is back at its initial size after a job of
// small messages (three round trips more than the data needs), and encoded and
// decoded path by path (each path is its own JSON value, to carry names that are not
// UTF-8). Packed, each file is its fields in binary — lengths and integers as
// varints, names as their bytes — and the part is deflated at the fastest level:
// about a seventh of the JSON, in a few milliseconds.
//
// Layout, before deflate: the file count (uvarint), then for each file its path,
// size (varint), mtime (varint), a flags byte (bit 0: ThisRun), digest, chunk count
// (uvarint) and chunk digests, and problem; every string as its length (uvarint) and
// bytes. Nothing may follow the last file.

// MaxPackedManifestBytes bounds what one packed part may inflate to: a part of a
// receiver's manifest holds at most 10 000 files (far less than this), and a peer's
// packed bytes must not make the reader allocate without bound.
const MaxPackedManifestBytes = 64 << 20

// manifestThisRun is the flags byte's bit for ManifestFile.ThisRun.
const manifestThisRun = 1

// PackManifestFiles encodes files in the packed form.
func PackManifestFiles(files []ManifestFile) ([]byte, error) {
	var raw []byte
	raw = binary.AppendUvarint(raw, uint64(len(files)))
	for _, f := range files {
		raw = appendString(raw, string(f.Path))
		raw = binary.AppendVarint(raw, f.Size)
		raw = binary.AppendVarint(raw, f.MtimeNs)
		var flags byte
		if f.ThisRun {
			flags |= manifestThisRun
		}
		raw = append(raw, flags)
		raw = appendString(raw, f.Digest)
		raw = binary.AppendUvarint(raw, uint64(len(f.Chunks)))
		for _, c := range f.Chunks {
			raw = appendString(raw, c)
		}
		raw = appendString(raw, f.Problem)
	}
	var out bytes.Buffer
	zw, err := flate.NewWriter(&out, flate.BestSpeed)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// Pack moves the part's files into Packed.
func (m *Manifest) Pack() error {
	if len(m.Files) == 0 {
		return nil
	}
	b, err := PackManifestFiles(m.Files)
	if err != nil {
		return err
	}
	m.Files, m.Packed = nil, b
	return nil
}

// Unpack moves a packed part's files back into Files. A part with files both packed
// and not is an ErrFrame.
func (m *Manifest) Unpack() error {
	if len(m.Packed) == 0 {
		return nil
	}
	if len(m.Files) > 0 {
		return fmt.Errorf("%w: a manifest part with files both packed and not", ErrFrame)
	}
	files, err := UnpackManifestFiles(m.Packed)
	if err != nil {
		return err
	}
	m.Files, m.Packed = files, nil
	return nil
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// UnpackManifestFiles decodes the packed form. Anything that is not exactly what
// PackManifestFiles makes — bad deflate data, a length past the end, bytes after the
// last file, more than MaxPackedManifestBytes once inflated — is an ErrFrame.
func UnpackManifestFiles(packed []byte) ([]ManifestFile, error) {
	zr := flate.NewReader(bytes.NewReader(packed))
	defer zr.Close()
	raw, err := io.ReadAll(io.LimitReader(zr, MaxPackedManifestBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: packed manifest: %v", ErrFrame, err)
	}
	if len(raw) > MaxPackedManifestBytes {
		return nil, fmt.Errorf("%w: packed manifest inflates past %d bytes", ErrFrame, MaxPackedManifestBytes)
	}
	d := manifestDecoder{b: raw}
	n := d.uvarint()
	// Every file takes at least 7 bytes (five empty lengths, two integers, flags): a
	// count beyond that is a lie, not a reason to allocate.
	if d.err == nil && n > uint64(len(d.b))/7 {
		d.fail("file count %d for %d bytes", n, len(d.b))
	}
	var files []ManifestFile
	if d.err == nil {
		files = make([]ManifestFile, 0, n)
	}
	for i := uint64(0); i < n && d.err == nil; i++ {
		var f ManifestFile
		f.Path = fsname.Path(d.string())
		f.Size = d.varint()
		f.MtimeNs = d.varint()
		flags := d.byte()
		if flags&^manifestThisRun != 0 {
			d.fail("unknown flags %#x", flags)
		}
		f.ThisRun = flags&manifestThisRun != 0
		f.Digest = d.string()
		chunks := d.uvarint()
		if d.err == nil && chunks > uint64(len(d.b)) {
			d.fail("chunk count %d for %d bytes", chunks, len(d.b))
		}
		if d.err == nil && chunks > 0 {
			f.Chunks = make([]string, chunks)
			for c := range f.Chunks {
				f.Chunks[c] = d.string()
			}
		}
		// A problem is text for messages and the job's status, as JSON would have
		// carried it: valid UTF-8.
		f.Problem = strings.ToValidUTF8(d.string(), "\uFFFD")
		files = append(files, f)
	}
	if d.err == nil && len(d.b) > 0 {
		d.fail("%d bytes after the last file", len(d.b))
	}
	if d.err != nil {
		return nil, d.err
	}
	return files, nil
}

// manifestDecoder reads the packed form; the first error sticks.
type manifestDecoder struct {
	b   []byte
	err error
}

var errShort = errors.New("ends early")

func (d *manifestDecoder) fail(format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: packed manifest: %s", ErrFrame, fmt.Sprintf(format, args...))
	}
}

func (d *manifestDecoder) uvarint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("%v", errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *manifestDecoder) varint() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("%v", errShort)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *manifestDecoder) byte() byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("%v", errShort)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *manifestDecoder) string() string {
	n := d.uvarint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.fail("a string of %d bytes with %d left", n, len(d.b))
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}
