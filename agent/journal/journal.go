// Package journal is the receiver's durable record of what is verified. Each receiver
// process appends to its own file under <root>/.dtnflow/<job>/ (several receivers of
// one job may share a destination file system); readers take the union of all files.
//
// A file is a sequence of records, each `u32 length | u32 CRC32C | JSON`. A record is
// appended only after the data it describes is durable (fsync or syncfs), and the
// journal itself is fdatasync'ed before anyone is told; a torn tail (a crash in the
// middle of an append) fails its length or CRC check and is ignored.
//
// Records:
//
//	B  blocks [start,end) of chunk i of a file are durable in its temporary file
//	C  chunk i of a file is complete and verified
//	R  the file is complete and verified; it is being (or has been) renamed to its
//	   final name. Recovery redoes the rename if the temporary file is still there.
//	X  chunk i failed end-to-end verification: forget the blocks recorded for it
//
// Every record carries the file's destination path, source size and source mtime; a
// source that changed between runs does not match old records.
package journal

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/dtnflow/dtnflow/agent/fsname"
	"github.com/dtnflow/dtnflow/agent/fsroot"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// Dir is the directory, relative to the destination root, that holds the journals of
// all jobs.
const Dir = fsroot.JournalDir

// maxRecord bounds one record.
const maxRecord = 1 << 20

// Kind of a record.
const (
	KindBlocks = "B"
	KindChunk  = "C"
	KindFinal  = "R"
	KindReset  = "X" // a chunk failed verification: forget its blocks
	// KindLost: a file made final is no longer at its final name and is being
	// received again: forget that it was final and its chunks (they described a
	// temporary file that the rename consumed).
	KindLost = "L"
)

// Key identifies a version of a file: destination path, source size and mtime.
type Key struct {
	Path    string
	Size    int64
	MtimeNs int64
}

// Record is one journal entry.
type Record struct {
	Kind      string      `json:"t"`
	Path      fsname.Path `json:"p"`
	Size      int64       `json:"s"`
	MtimeNs   int64       `json:"m"`
	ChunkSize int64       `json:"cs,omitempty"`
	Index     int32       `json:"i,omitempty"`
	BlockSize int64       `json:"bs,omitempty"`
	Ranges    [][2]int64  `json:"r,omitempty"`
	Mode      uint32      `json:"mode,omitempty"`
	Digest    string      `json:"d,omitempty"`
	// Run is the run of the job that wrote a final record (R), so that the end of
	// that run can tell what it made final.
	Run string `json:"run,omitempty"`
	// Ino is the final file's inode (R; 0: not known, from an older receiver). A file
	// another writer renamed onto the name since — another job's version of the same
	// size and mtime — is another inode.
	Ino uint64 `json:"ino,omitempty"`
	// At is when the record was written (Unix nanoseconds; 0 in the journals of
	// receivers older than it). A job's journals are one file per receiver process,
	// read file after file, so a reader meets records out of the order they were
	// written: a final record of a run hours ago, in another stripe's file, read after
	// this run's records of the same file version. At orders them (State.apply).
	At int64 `json:"at,omitempty"`
}

// Key returns the record's file key.
func (r Record) Key() Key { return Key{Path: string(r.Path), Size: r.Size, MtimeNs: r.MtimeNs} }

// JobDir is the journal directory of a job, relative to the root.
func JobDir(job string) string { return path.Join(Dir, job) }

// Writer appends to one journal file. Append only buffers; Sync writes and fdatasyncs.
type Writer struct {
	mu  sync.Mutex
	f   *os.File
	buf []byte
}

// Create opens a new journal file name in the job's directory under root.
func Create(root *os.Root, job, name string) (*Writer, error) {
	dir := JobDir(job)
	if err := root.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating journal directory %s: %w", dir, err)
	}
	f, err := root.OpenFile(path.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("creating journal %s: %w", name, err)
	}
	return &Writer{f: f}, nil
}

// Append adds records to the pending batch, each stamped with the time (Record.At)
// unless it has one.
func (w *Writer) Append(recs ...Record) {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now().UnixNano()
	for _, r := range recs {
		if r.At == 0 {
			r.At = now
		}
		b, _ := json.Marshal(r)
		w.buf = binary.BigEndian.AppendUint32(w.buf, uint32(len(b)))
		w.buf = binary.BigEndian.AppendUint32(w.buf, crc32.Update(0, castagnoli, b))
		w.buf = append(w.buf, b...)
	}
}

// Sync writes the pending batch and makes it durable.
func (w *Writer) Sync() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.buf) == 0 {
		return nil
	}
	if _, err := w.f.Write(w.buf); err != nil {
		return fmt.Errorf("writing journal: %w", err)
	}
	w.buf = w.buf[:0]
	if err := fdatasync(w.f); err != nil {
		return fmt.Errorf("syncing journal: %w", err)
	}
	return nil
}

// Close closes the file.
func (w *Writer) Close() error { return w.f.Close() }

// ChunkState is what is known of one chunk.
type ChunkState struct {
	Verified  bool
	BlockSize int64
	Have      Ranges
	// Digest is the chunk's verified digest (hex), when the job verifies.
	Digest string
}

// FileState is what is known of one version of a file.
type FileState struct {
	Final     bool
	Mode      uint32
	Digest    string
	Run       string // the run that made it final
	Ino       uint64 // the final file's inode, 0 when not known (Record.Ino)
	ChunkSize int64
	Chunks    map[int32]*ChunkState
	// decidedAt is the time (Record.At) of the latest final or lost record applied,
	// lostAt of the latest lost one: an older record read after them is not applied.
	decidedAt, lostAt int64
}

// State is the union of a job's journals, read incrementally.
type State struct {
	mu      sync.Mutex
	root    *os.Root
	dir     string
	offsets map[string]int64
	// own is the journal file this process writes and applies itself (Own).
	own   string
	files map[Key]*FileState
}

// NewState returns an empty view of job's journals under root; call Refresh to read.
func NewState(root *os.Root, job string) *State {
	return &State{root: root, dir: JobDir(job), offsets: map[string]int64{}, files: map[Key]*FileState{}}
}

// Own says that this process writes the journal file name and applies each record it
// makes durable with Apply: Refresh no longer reads that file. Re-reading it decoded
// every record of this process again, all of a job's records at its final check.
func (s *State) Own(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.own = name
}

// Refresh reads whatever was appended to any journal file of the job since the last
// call, except the file this process owns.
func (s *State) Refresh() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	// O_DIRECTORY: whatever else sits at the directory's name (a FIFO, which an open
	// for reading waits on) is refused at once
	d, err := s.root.OpenFile(s.dir, os.O_RDONLY|syscall.O_DIRECTORY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("opening journal directory %s: %w", s.dir, err)
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("listing journals: %w", err)
	}
	sort.Strings(names)
	for _, n := range names {
		if !strings.HasSuffix(n, ".log") || n == s.own {
			continue
		}
		if err := s.readFile(n); err != nil {
			return err
		}
	}
	return nil
}

// readFile reads what journal name holds past what was read of it before. Anything
// but a regular file there is no journal of ours and is passed over: it is opened
// without waiting (O_NONBLOCK, which a regular file's reads ignore), since a FIFO
// put at the name would hold an open for reading until some writer came.
func (s *State) readFile(name string) error {
	f, err := s.root.OpenFile(path.Join(s.dir, name), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return fmt.Errorf("opening journal %s: %w", name, err)
	}
	defer f.Close()
	off := s.offsets[name]
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() || fi.Size() <= off {
		return err
	}
	data := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(data, off); err != nil && err != io.EOF {
		return fmt.Errorf("reading journal %s: %w", name, err)
	}
	used := Decode(data, s.apply)
	s.offsets[name] = off + int64(used)
	return nil
}

// Decode applies every whole, intact record at the start of data and returns how many
// bytes they took. It stops at the first torn or damaged record.
func Decode(data []byte, apply func(Record)) int {
	pos := 0
	for len(data)-pos >= 8 {
		n := int(binary.BigEndian.Uint32(data[pos:]))
		if n > maxRecord || len(data)-pos-8 < n {
			break
		}
		body := data[pos+8 : pos+8+n]
		if crc32.Update(0, castagnoli, body) != binary.BigEndian.Uint32(data[pos+4:]) {
			break
		}
		var r Record
		if json.Unmarshal(body, &r) != nil {
			break
		}
		apply(r)
		pos += 8 + n
	}
	return pos
}

// apply applies a record in the order it was written (Record.At), whatever the order it
// is read in: a final or lost record older than the latest of either applied says
// nothing any more (a run made the file final, a later run found it gone and made it
// final again: the first run's final record, read last, must not stand), nor does a
// chunk record older than the latest lost one (it described a temporary file that
// the rename consumed). Records without a time come from receivers older than the
// stamp and count as older than every stamped one.
func (s *State) apply(r Record) {
	fs := s.files[r.Key()]
	if fs == nil {
		fs = &FileState{Chunks: map[int32]*ChunkState{}}
		s.files[r.Key()] = fs
	}
	switch r.Kind {
	case KindFinal, KindLost:
		if r.At < fs.decidedAt {
			return
		}
		fs.decidedAt = r.At
	default:
		if r.At < fs.lostAt {
			return
		}
	}
	switch r.Kind {
	case KindFinal:
		fs.Final, fs.Mode, fs.Digest, fs.Run, fs.Ino = true, r.Mode, r.Digest, r.Run, r.Ino
	case KindLost:
		fs.Final, fs.Digest, fs.Run, fs.ChunkSize, fs.Ino = false, "", "", 0, 0
		fs.Chunks = map[int32]*ChunkState{}
		fs.lostAt = r.At
	case KindReset:
		if fs.ChunkSize == r.ChunkSize {
			delete(fs.Chunks, r.Index)
		}
	case KindChunk, KindBlocks:
		if fs.ChunkSize != r.ChunkSize {
			// A different chunking: the old chunk records do not describe these chunks.
			fs.ChunkSize = r.ChunkSize
			fs.Chunks = map[int32]*ChunkState{}
		}
		cs := fs.Chunks[r.Index]
		if cs == nil || cs.BlockSize != r.BlockSize && r.Kind == KindBlocks {
			cs = &ChunkState{BlockSize: r.BlockSize}
			fs.Chunks[r.Index] = cs
		}
		if r.Kind == KindChunk {
			cs.Verified, cs.Digest = true, r.Digest
		}
		for _, rg := range r.Ranges {
			cs.Have.Add(rg[0], rg[1])
		}
	}
}

// Apply records what this process itself just made durable, so it need not re-read
// its own journal. A record without a time gets the present one: it was just
// written, stamped within microseconds of it (Writer.Append).
func (s *State) Apply(recs ...Record) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := time.Now().UnixNano()
	for _, r := range recs {
		if r.At == 0 {
			r.At = now
		}
		s.apply(r)
	}
}

// File returns a copy of what is known of a file version (nil if nothing).
func (s *State) File(k Key) *FileState {
	s.mu.Lock()
	defer s.mu.Unlock()
	fs := s.files[k]
	if fs == nil {
		return nil
	}
	c := *fs
	c.Chunks = make(map[int32]*ChunkState, len(fs.Chunks))
	for i, ch := range fs.Chunks {
		cc := *ch
		cc.Have = append(Ranges(nil), ch.Have...)
		c.Chunks[i] = &cc
	}
	return &c
}

// Each calls fn for every known file version, in no particular order.
func (s *State) Each(fn func(Key, *FileState)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.files {
		fn(k, v)
	}
}

// Ranges is a sorted set of disjoint half-open integer ranges.
type Ranges [][2]int64

// Add inserts [a, b).
func (r *Ranges) Add(a, b int64) {
	if a >= b {
		return
	}
	out := (*r)[:0:0]
	placed := false
	for _, x := range *r {
		switch {
		case x[1] < a:
			out = append(out, x)
		case b < x[0]:
			if !placed {
				out = append(out, [2]int64{a, b})
				placed = true
			}
			out = append(out, x)
		default:
			a, b = min(a, x[0]), max(b, x[1])
		}
	}
	if !placed {
		out = append(out, [2]int64{a, b})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	*r = out
}

// Contains reports whether i is in the set.
func (r Ranges) Contains(i int64) bool {
	j := sort.Search(len(r), func(k int) bool { return r[k][1] > i })
	return j < len(r) && r[j][0] <= i
}

// Count is the number of integers in the set.
func (r Ranges) Count() int64 {
	var n int64
	for _, x := range r {
		n += x[1] - x[0]
	}
	return n
}
