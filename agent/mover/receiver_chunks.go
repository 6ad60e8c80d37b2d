package mover

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"sync"

	"github.com/dtnflow/dtnflow/agent/fsname"
	"github.com/dtnflow/dtnflow/agent/fsroot"
	"github.com/dtnflow/dtnflow/agent/journal"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// The chunks of large files: opened, written block by block from the data streams,
// verified, and the file finalized once its last chunk is in.

// finalOrLost answers for a file version the journal says was made final: true when it
// is at its final name (its rename redone if a crash came before it); false when it is
// lost and must be received again, which the journal is told (KindLost) before any
// chunk of it is opened, so that later chunks neither redo a rename of the temporary
// file being written nor count the old chunks as verified.
func (s *rsession) finalOrLost(key journal.Key) bool {
	j := s.job
	j.finalMu.Lock()
	defer j.finalMu.Unlock()
	if fst := j.state.File(key); fst == nil || !fst.Final {
		return false // lost, as another chunk found first
	}
	if s.redoRename(key) {
		return true
	}
	lost := journal.Record{Kind: journal.KindLost, Path: fsname.Path(key.Path), Size: key.Size, MtimeNs: key.MtimeNs}
	j.journal.Append(lost)
	j.state.Apply(lost)
	return false
}

// rchunk is a chunk being received.
type rchunk struct {
	open    wire.ChunkOpen
	key     journal.Key
	tmp     string
	f       *os.File
	ino     uint64 // f's inode
	nblocks int64
	// writeLock is held while a block goes into the file (rjob.writeLock).
	writeLock *sync.Mutex

	mu       sync.Mutex
	have     journal.Ranges // blocks written (durable or not)
	journal  journal.Ranges // blocks recorded in the journal
	ended    bool
	digest   []byte
	finished bool
	refs     int
	// writing counts the block writes under way; retired marks a copy of the chunk
	// whose file version another copy has made final (committer.retireCopies): none of
	// its blocks are written any more. A copy left behind by a stalled session — whose
	// connections deliver their last blocks when the path comes back — would otherwise
	// write into the file after it took its final name and its mtime.
	writing int
	idle    sync.Cond
	retired bool
	// blockDigests are the digests of the blocks that arrived in this session, by
	// index, when the job verifies on arrival (nil otherwise).
	blockDigests [][]byte
}

func (c *rchunk) release() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.refs--
	if c.refs <= 0 && c.f != nil {
		c.f.Close()
		c.f = nil
	}
}

func (s *rsession) openChunk(m wire.ChunkOpen) {
	r, j := s.r, s.job
	reply := wire.ChunkOpened{ID: m.ID}
	fail := func(msg string, fatal bool) {
		reply.Error, reply.Fatal = msg, fatal
		s.send(wire.TypeChunkOpened, reply)
	}
	failOS := func(msg string, err error) {
		reply.Retry = isTransient(err)
		fail(msg, isFatal(err))
	}
	p, err := r.destinationPath(m.Path)
	if err != nil {
		fail(fsname.Message(err), false)
		return
	}
	if err := checkChunkOpen(m, s.cfg.BlockSize, s.cfg.ChunkSize, r.maxFileSize()); err != nil {
		fail(fmt.Sprintf("malformed chunk of %s: %v", fsname.Show(p), err), false)
		return
	}
	key := journal.Key{Path: p, Size: m.FileSize, MtimeNs: m.MtimeNs}
	j.state.Refresh()
	fst := j.state.File(key)
	if fst != nil && fst.Final {
		if s.finalOrLost(key) {
			reply.Verified = true
			s.send(wire.TypeChunkOpened, reply)
			return
		}
		fst = j.state.File(key)
	}
	c := &rchunk{open: m, key: key, tmp: TempName(p, s.cfg.Job), nblocks: (m.Length + m.BlockSize - 1) / m.BlockSize, refs: 1}
	c.writeLock = j.writeLock(c.tmp)
	if s.onArrival() {
		c.blockDigests = make([][]byte, c.nblocks)
	}
	// A file made final and since lost at the destination (deleted, or not where its
	// rename put it) is no longer Final here (finalOrLost): its old chunk records are
	// forgotten, and this run's, if any, resume it.
	if fst != nil && !fst.Final && fst.ChunkSize == m.ChunkSize {
		if cs := fst.Chunks[m.Index]; cs != nil {
			if cs.Verified {
				if m.Chunks == 1 {
					// Verified but the crash came before the rename: finish it.
					s.job.commit.add(&commitItem{session: s, chunkOnly: false, finalize: true, tmp: c.tmp, final: p, key: key, mode: m.Mode, openReply: &reply})
					return
				}
				reply.Verified = true
				s.send(wire.TypeChunkOpened, reply)
				return
			}
			if cs.BlockSize == m.BlockSize {
				c.have = append(c.have, cs.Have...)
				c.journal = append(c.journal, cs.Have...)
			}
		}
	}
	// Besides what the journal holds, the chunk has what other copies of it wrote and
	// the journal does not hold yet: a drained stripe's last blocks, read just before
	// its session ended, are journaled as it ends, and the stripe taking the chunk
	// over may ask first.
	for _, rg := range j.commit.writtenElsewhere(c) {
		c.have.Add(rg[0], rg[1])
	}
	if fst == nil || !fst.Final {
		if fi, err := r.Root.Lstat(p); err == nil && fst == nil {
			if fi.IsDir() {
				fail("destination path is a directory: "+p, false)
				return
			}
			if s.cfg.Overwrite == "Never" {
				j.state.Refresh()
				if f2 := j.state.File(key); f2 == nil || !f2.Final {
					fail(fmt.Sprintf("destination file exists: %s (overwrite: Never)", fsname.Show(p)), false)
					return
				}
			}
		}
	}
	if dir := path.Dir(p); dir != "." {
		if err := r.Root.MkdirAll(dir, 0o755); err != nil {
			failOS(fsname.Message(fsroot.Explain(p, fmt.Errorf("creating directory %s: %w", fsname.Show(dir), err))), err)
			return
		}
	}
	f, err := r.Root.OpenFile(c.tmp, os.O_RDWR|os.O_CREATE, 0o600)
	var fi fs.FileInfo
	if err == nil {
		f, fi, err = regularOnly(f) // another writer may have put a FIFO at our name
	}
	if err != nil {
		failOS(fsname.Message(fsroot.Explain(p, fmt.Errorf("creating %s: %w", fsname.Show(c.tmp), err))), err)
		return
	}
	if fi.Size() > m.FileSize {
		f.Truncate(m.FileSize) // left over from another version of the file
	}
	c.f, c.ino = f, inode(fi)
	// What the chunk has is read before the chunk is published: from then on its data
	// streams add to it (a sender may send blocks before the answer reaches it).
	for _, rg := range c.have {
		reply.Have = append(reply.Have, rg)
	}
	s.mu.Lock()
	s.chunks[m.ID] = c
	s.mu.Unlock()
	j.commit.track(c)
	s.send(wire.TypeChunkOpened, reply)
}

func (s *rsession) chunk(id uint64) *rchunk {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.chunks[id]
}

// block writes one block; an error means the session is broken (a block that does not
// belong where it says, after its frame passed the check: a peer that breaks the
// protocol).
func (s *rsession) block(m wire.BlockMeta, data []byte, bh *blockHasher) error {
	c, idx, off, err := s.blockAt(m, int64(len(data)))
	if err != nil {
		return err
	}
	c.writeLock.Lock()
	f, err := c.startWrite()
	if err != nil {
		c.writeLock.Unlock()
		return err
	}
	_, err = f.WriteAt(data, off)
	c.wrote()
	c.writeLock.Unlock()
	if err != nil {
		s.result(wire.Result{Chunk: m.Chunk, Error: describeWriteError("writing", c.key.Path, err), Fatal: isFatal(err), Retry: isTransient(err)})
		return nil
	}
	var d []byte
	if c.blockDigests != nil {
		d = bh.digest(data)
	}
	s.blockWritten(c, idx, int64(len(data)), d)
	return nil
}

// spliceBlock moves a block whose data nothing checks in flight (in-flight mode
// HeadersOnly) from the stream into its chunk's file without a copy through user
// space. A failed write leaves the stream in the middle of a frame: the stream ends.
//
// The block goes in piece by piece as it arrives, each piece a write of its own
// (chunkGate): a copy retired while the stream waits for the rest of a block (a path
// stalled with its connections open) is retired at once, and the rest of the block,
// when it comes, ends the stream instead of going into a file that has since taken its
// final name.
func (s *rsession) spliceBlock(m wire.BlockMeta, h wire.Header, rd *wire.Reader) error {
	c, idx, off, err := s.blockAt(m, int64(h.DataLen))
	if err != nil {
		return err
	}
	c.mu.Lock()
	f := c.f
	c.mu.Unlock()
	if f == nil {
		return errChunkClosed
	}
	err = rd.SpliceData(f, off, chunkGate{c})
	if errors.Is(err, wire.ErrDestinationClosed) {
		return errChunkClosed
	}
	if err != nil {
		if !wire.IsIntegrity(err) && !errors.Is(err, io.ErrUnexpectedEOF) {
			s.result(wire.Result{Chunk: m.Chunk, Error: describeWriteError("writing", c.key.Path, err), Fatal: isFatal(err), Retry: isTransient(err)})
		}
		return err
	}
	s.blockWritten(c, idx, int64(h.DataLen), nil)
	return nil
}

// errChunkClosed ends a stream whose block's chunk takes no more writes: its session
// closed it, or another copy made its file final (retire).
var errChunkClosed = errors.New("chunk closed")

// chunkGate admits the pieces of a spliced block into its chunk's file: each under the
// file's write lock, and counted as a write under way (startWrite) only while it is
// written.
type chunkGate struct{ c *rchunk }

func (g chunkGate) Enter() bool {
	g.c.writeLock.Lock()
	if _, err := g.c.startWrite(); err != nil {
		g.c.writeLock.Unlock()
		return false
	}
	return true
}

func (g chunkGate) Leave() {
	g.c.wrote()
	g.c.writeLock.Unlock()
}

// blockAt says where a block of n bytes goes — its chunk, index and offset — or why it
// does not belong anywhere (after its frame passed the check: a peer that breaks the
// protocol).
func (s *rsession) blockAt(m wire.BlockMeta, n int64) (*rchunk, int64, int64, error) {
	c := s.chunk(m.Chunk)
	if c == nil {
		return nil, 0, 0, fmt.Errorf("%w: block for unknown chunk %d", wire.ErrFrame, m.Chunk)
	}
	if m.Offset > math.MaxInt64 {
		return nil, 0, 0, fmt.Errorf("%w: block offset %d", wire.ErrFrame, m.Offset)
	}
	off := int64(m.Offset)
	rel := off - c.open.Offset
	if rel < 0 || rel%c.open.BlockSize != 0 || rel >= c.open.Length {
		return nil, 0, 0, fmt.Errorf("%w: block at %d outside chunk %d [%d, +%d)", wire.ErrFrame, off, m.Chunk, c.open.Offset, c.open.Length)
	}
	if want := min(c.open.BlockSize, c.open.Length-rel); n != want {
		return nil, 0, 0, fmt.Errorf("%w: block at %d of %d bytes, want %d", wire.ErrFrame, off, n, want)
	}
	return c, rel / c.open.BlockSize, off, nil
}

// startWrite counts a write into the chunk's file as under way and returns the file,
// unless the chunk takes no more writes (closed, or retired). wrote ends the write.
func (c *rchunk) startWrite() (*os.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.f == nil || c.retired {
		return nil, errChunkClosed
	}
	c.writing++
	return c.f, nil
}

// wrote ends a write that startWrite allowed.
func (c *rchunk) wrote() {
	c.mu.Lock()
	c.writing--
	if c.writing == 0 && c.idle.L != nil {
		c.idle.Broadcast()
	}
	c.mu.Unlock()
}

// retire stops the copy's block writes, waiting for the one under way: a block's write,
// or a piece of a spliced block (spliceBlock), never the peer.
func (c *rchunk) retire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.retired = true
	if c.idle.L == nil {
		c.idle.L = &c.mu
	}
	for c.writing > 0 {
		c.idle.Wait()
	}
}

// copyOf says c is another copy of o's chunk whose blocks count for o: the same file
// version, index, chunk size and block size, taken by another session (or another
// open) before.
func (c *rchunk) copyOf(o *rchunk) bool {
	return c != o && c.key == o.key && c.open.Index == o.open.Index && c.open.BlockSize == o.open.BlockSize && c.open.ChunkSize == o.open.ChunkSize
}

// forget drops what the chunk holds (its blocks are no longer trusted).
func (c *rchunk) forget() {
	c.mu.Lock()
	c.have, c.journal, c.finished, c.ended = nil, nil, false, false
	clear(c.blockDigests)
	c.mu.Unlock()
}

// blockWritten records a block written at its place, with its digest when the job
// verifies on arrival, and starts the chunk's verification once it is complete.
func (s *rsession) blockWritten(c *rchunk, idx, n int64, d []byte) {
	s.r.bytes.Add(n)
	receivedCounter.Add(float64(n))
	c.mu.Lock()
	if c.retired {
		// Retired while its last piece was written: what it holds no longer counts
		// (the chunk was reset, or the file made final by another copy), and a block
		// added after the reset's forget would be journaled by the next round of
		// records and skipped by every resend.
		c.mu.Unlock()
		return
	}
	if d != nil {
		c.blockDigests[idx] = d
	}
	c.have.Add(idx, idx+1)
	ready := c.ended && !c.finished && c.have.Count() == c.nblocks
	if ready {
		c.finished = true
	}
	c.mu.Unlock()
	if ready {
		go s.verifyChunk(c)
	}
}

func (s *rsession) endChunk(m wire.ChunkEnd) {
	c := s.chunk(m.ID)
	if c == nil {
		return
	}
	c.mu.Lock()
	c.ended, c.digest = true, m.Digest
	ready := !c.finished && c.have.Count() == c.nblocks
	if ready {
		c.finished = true
	}
	c.mu.Unlock()
	if ready {
		go s.verifyChunk(c)
	}
}

// verifyChunk runs once every block of a chunk is written and its end is known.
func (s *rsession) verifyChunk(c *rchunk) {
	digest := ""
	if s.cfg.Verify && len(c.digest) > 0 {
		sum, err := s.chunkDigest(c)
		if err != nil || !bytes.Equal(sum, c.digest) {
			metrics.VerifyFailures.Inc()
			s.job.commit.resetChunk(c)
			s.result(wire.Result{Chunk: c.open.ID, Retry: true, Error: "end-to-end digest mismatch on " + fsname.Show(c.key.Path)})
			return
		}
		digest = hex.EncodeToString(c.digest)
	}
	s.job.commit.add(&commitItem{session: s, chunk: c, chunkOnly: c.open.Chunks > 1, finalize: c.open.Chunks == 1,
		tmp: c.tmp, final: c.key.Path, key: c.key, mode: c.open.Mode, digest: digest, bytes: c.open.Length})
}

// chunkDigest is the destination's digest of a chunk whose blocks are all written: read
// back, or (on arrival) the digest of its blocks' digests, reading back only the blocks
// that arrived before this session (resumed from the journal).
func (s *rsession) chunkDigest(c *rchunk) ([]byte, error) {
	c.mu.Lock()
	f := c.f
	blocks := append([][]byte(nil), c.blockDigests...)
	c.mu.Unlock()
	if f == nil {
		return nil, errors.New("session closed")
	}
	if !s.onArrival() {
		h, _ := NewDigest(s.cfg.Checksum)
		buf := make([]byte, min(c.open.Length, 4<<20))
		if err := readBack(f, c.open.Offset, c.open.Length, buf, h); err != nil {
			return nil, err
		}
		return h.Sum(nil), nil
	}
	list, _ := NewDigest(s.cfg.Checksum)
	var bh *blockHasher
	var buf []byte
	for i, d := range blocks {
		if d == nil {
			if bh == nil {
				bh, buf = newBlockHasher(s.cfg.Checksum), make([]byte, c.open.BlockSize)
			}
			off := int64(i) * c.open.BlockSize
			n := min(c.open.BlockSize, c.open.Length-off)
			if got, err := f.ReadAt(buf[:n], c.open.Offset+off); int64(got) < n {
				return nil, fmt.Errorf("reading back block %d: %v", i, err)
			}
			d = bh.digest(buf[:n])
		}
		list.Write(d)
	}
	return list.Sum(nil), nil
}

// finalize gives a file of several chunks its final name once every chunk is verified.
func (s *rsession) finalize(m wire.Finalize) {
	res := wire.Result{Unit: m.ID}
	p, err := s.r.destinationPath(m.Path)
	if err != nil {
		res.Error = fsname.Message(err)
		s.result(res)
		return
	}
	if err := checkFinalize(m, s.cfg.BlockSize, s.cfg.ChunkSize, s.r.maxFileSize()); err != nil {
		res.Error = fmt.Sprintf("malformed finalization of %s: %v", fsname.Show(p), err)
		s.result(res)
		return
	}
	key := journal.Key{Path: p, Size: m.FileSize, MtimeNs: m.MtimeNs}
	s.job.state.Refresh()
	fst := s.job.state.File(key)
	if fst != nil && fst.Final && s.redoRename(key) {
		res.OK = true
		s.result(res)
		return
	}
	if fst == nil || fst.ChunkSize != m.ChunkSize {
		res.Error = fmt.Sprintf("finalizing %s: no verified chunks in the journal (is the destination root shared by all receivers of the job?)", fsname.Show(p))
		res.Retry = true
		s.result(res)
		return
	}
	for i := int32(0); i < m.Chunks; i++ {
		if cs := fst.Chunks[i]; cs == nil || !cs.Verified {
			res.Error = fmt.Sprintf("finalizing %s: chunk %d is not verified in the journal", fsname.Show(p), i)
			res.Retry = true
			s.result(res)
			return
		}
	}
	s.job.commit.add(&commitItem{session: s, unit: m.ID, finalize: true, tmp: TempName(p, s.cfg.Job), final: p, key: key, mode: m.Mode})
}
