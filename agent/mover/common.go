// Package mover moves bytes: the receiver (writes under a root, verifies, keeps the
// journal), the stripe sender (reads under a root, spreads blocks over parallel
// streams, pipelines small files), and the memory-to-memory probe.
package mover

import (
	"crypto/md5"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"path"
	"strings"
	"syscall"

	"github.com/zeebo/blake3"

	"github.com/dtnflow/dtnflow/agent/fsname"
)

// Defaults of the data path.
const (
	DefaultBlockSize = 1 << 20
	// DefaultChunkSize is the unit a large file is leased, verified and resumed in.
	// A stripe holds at most eight chunks at a time (coord.Core's chunk cap), so the
	// chunk decides how late in a file a stripe added by the rescale policy still
	// finds work: at 256 MiB a 4 GiB file's second half was all leased to the stripe
	// already running and an added stripe moved nothing; at 64 MiB it is given work
	// until the last 512 MiB per running stripe. The 2 GiB file on loopback costs the
	// same CPU per GB at either size (docs/benchmarks.md, twenty-eighth session).
	DefaultChunkSize = 64 << 20
)

// NewDigest returns the end-to-end digest named by the API (BLAKE3, SHA256, SHA512,
// MD5). An empty name is SHA256, as it has meant on the wire since before BLAKE3: a
// peer that sends no name hashes with SHA-256.
func NewDigest(name string) (hash.Hash, error) {
	switch strings.ToUpper(name) {
	case "BLAKE3":
		// BLAKE3-256 on the CPU's vector units (AVX2 here: 3.6–4.1 GB/s on one core
		// against SHA-NI's 1.7 for SHA-256, docs/benchmarks.md), with SHA-256's
		// 128-bit collision resistance.
		return blake3.New(), nil
	case "", "SHA256":
		return sha256.New(), nil
	case "SHA512":
		return sha512.New(), nil
	case "MD5":
		return md5.New(), nil
	}
	return nil, fmt.Errorf("unknown checksum %q (want BLAKE3, SHA256, SHA512 or MD5)", name)
}

// TempName is where a file is written until it is verified: a hidden name in the same
// directory (so the final rename stays on one file system), fixed for a job so that a
// restarted receiver finds it again, and unique per file: the name ends with a digest of
// the job and the file's whole base name, so two names that share a long prefix (or
// differ only past the part kept for reading) never share a temporary file. The part of
// the base name kept for reading is cut so that the whole stays within NAME_MAX (255
// bytes) whatever the final name's length.
func TempName(final, job string) string {
	dir, base := path.Split(final)
	sum := sha256.Sum256([]byte(job + "\x00" + base))
	keep := base
	if len(keep) > tempKeep {
		keep = keep[:tempKeep]
	}
	return dir + "." + keep + "." + hex.EncodeToString(sum[:tempDigestBytes]) + tempSuffix
}

const (
	tempSuffix = ".dtnpart"
	// tempDigestBytes of SHA-256 (128 bits) make a collision between two names of a
	// job as unlikely as a collision of the digests the job verifies with.
	tempDigestBytes = 16
	// tempKeep is how much of the base name a temporary name shows: 1 + 200 + 1 + 32 +
	// 8 = 242 bytes at most.
	tempKeep = 200
)

// IsTempName reports whether a file name is one of ours.
func IsTempName(name string) bool { return strings.HasSuffix(name, tempSuffix) }

// isTransient says whether an error is the host's momentary shortage (descriptors,
// memory) rather than anything about the file: the file is tried again.
func isTransient(err error) bool {
	return errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM) ||
		errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR)
}

// SourceError is a failure of one source file itself: it could not be opened or read,
// it vanished, or it changed since it was listed or while it was read. The sender
// reports it as such (wire.UnitResult.Source), so that a job that skips such files
// (--source-errors Skip) lists it and goes on; a momentary shortage of the host
// (descriptors, memory) is never one.
type SourceError struct{ Err error }

func (e *SourceError) Error() string { return e.Err.Error() }
func (e *SourceError) Unwrap() error { return e.Err }

// sourceError marks err as a failure of the source file, unless it is the host's
// momentary shortage.
func sourceError(err error) error {
	if err == nil || isTransient(err) {
		return err
	}
	return &SourceError{Err: err}
}

// isSourceError says whether err is a failure of the source file (SourceError).
func isSourceError(err error) bool {
	var se *SourceError
	return errors.As(err, &se)
}

// isFatal says whether a write error stops the whole job rather than one file.
func isFatal(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, syscall.EROFS)
}

// describeWriteError turns a write error into a message that names the path and, for
// a full disk, says that the job can be resumed.
func describeWriteError(op, p string, err error) string {
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return fmt.Sprintf("destination is full: no space left on device %s %s; free space and run the job again to resume (verified data is kept)", op, fsname.Show(p))
	}
	return fmt.Sprintf("%s %s: %s", op, fsname.Show(p), fsname.Message(err))
}

// notRegular says what is at a name where a regular file was expected.
func notRegular(m fs.FileMode) error {
	kind := "not a file"
	switch {
	case m.IsDir():
		kind = "a directory"
	case m&fs.ModeNamedPipe != 0:
		kind = "a FIFO"
	case m&fs.ModeSocket != 0:
		kind = "a socket"
	case m&fs.ModeDevice != 0:
		kind = "a device"
	case m&fs.ModeSymlink != 0:
		kind = "a symlink"
	}
	return fmt.Errorf("not a regular file (%s)", kind)
}
