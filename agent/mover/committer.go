package mover

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/dtnflow/dtnflow/agent/fsname"
	"github.com/dtnflow/dtnflow/agent/journal"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// commitItem is verified data waiting to be made durable, journaled and, for a whole
// file, renamed to its final name.
type commitItem struct {
	session *rsession
	unit    uint64  // small file or finalize: the sender's unit id
	chunk   *rchunk // chunk: the chunk
	file    *os.File
	tmp     string
	final   string
	// dir, when set, is the file's directory, and tmpBase and finalBase its names in it.
	dir                *cachedDir
	tmpBase, finalBase string
	key                journal.Key
	mode               uint32
	digest             string
	// ino is the temporary file's inode, which the final name takes (0: look it up).
	ino       uint64
	bytes     int64
	chunkOnly bool // record the chunk as verified (C)
	finalize  bool // record the file as final (R) and rename it
	openReply *wire.ChunkOpened
	flushed   chan struct{}
	// claimed is the small file's path claimed in the job (rjob.claim), released once
	// the item is committed or failed.
	claimed string
}

// journalEvery is how often the blocks of large chunks written since the last time are
// made durable and journaled. What a receiver killed with SIGKILL (or a machine that
// loses power) had written but not journaled is sent again: at most this long of the
// stripe's rate. 100 ms against the 1 s it was cut what five receiver kills cost from
// 10.5–18.4 % of a 940 MB dataset at 400 Mbit/s to 1.5–2.0 % (250 ms: 2.6–4.2 %;
// docs/benchmarks.md, make bench-resend); a 2 GiB file to disk at full speed showed
// no cost from the extra fdatasyncs of pages that are being written anyway.
const journalEvery = 100 * time.Millisecond

// committer batches durability: one syncfs (or a few fdatasyncs) and one journal
// fdatasync cover every file and chunk verified since the last batch, so small files
// cost no fsync each.
type committer struct {
	r   *Receiver
	j   *rjob
	in  chan *commitItem
	dir *os.File

	mu      sync.Mutex
	tracked map[*rchunk]bool
	// blocksMu orders the journal's block records with the resets of chunks that
	// failed their digest: a record of blocks read before a reset and appended after
	// it would make the next open skip the damaged blocks again. A reset waits for a
	// round of records and their syncs (it is rare; the records come every 100 ms).
	blocksMu sync.Mutex
}

func newCommitter(r *Receiver, j *rjob) *committer {
	c := &committer{r: r, j: j, in: make(chan *commitItem, 4096), tracked: map[*rchunk]bool{}}
	c.dir, _ = r.Root.Open(".")
	go c.loop()
	return c
}

func (c *committer) add(it *commitItem) { c.in <- it }

// track makes the committer journal a chunk's durable blocks every second, so that a
// crash in the middle of a large chunk does not lose what was written.
func (c *committer) track(ch *rchunk) {
	c.mu.Lock()
	c.tracked[ch] = true
	ch.mu.Lock()
	ch.refs++
	ch.mu.Unlock()
	c.mu.Unlock()
}

// writtenElsewhere is what the other copies of ch's chunk (the same file version,
// index and block size, in sessions that took it before) have written, durable or not.
func (c *committer) writtenElsewhere(ch *rchunk) journal.Ranges {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out journal.Ranges
	for other := range c.tracked {
		if !other.copyOf(ch) {
			continue
		}
		other.mu.Lock()
		if !other.retired {
			for _, rg := range other.have {
				out.Add(rg[0], rg[1])
			}
		}
		other.mu.Unlock()
	}
	return out
}

// discardCopies stops the writes of the other copies of ch's chunk and forgets what
// they wrote: ch failed its digest, and the damaged bytes may be any copy's — a block
// changed in flight where nothing checks data (HeadersOnly), written by a session that
// broke before the chunk's end. Counted again (writtenElsewhere), those blocks would be
// skipped by every resend, and every resend would fail the same way.
func (c *committer) discardCopies(ch *rchunk) {
	c.mu.Lock()
	var copies []*rchunk
	for other := range c.tracked {
		if other.copyOf(ch) {
			copies = append(copies, other)
		}
	}
	c.mu.Unlock()
	for _, other := range copies {
		other.retire()
		other.forget()
	}
}

func (c *committer) untrack(ch *rchunk) {
	c.mu.Lock()
	if c.tracked[ch] {
		delete(c.tracked, ch)
		c.mu.Unlock()
		ch.release()
		return
	}
	c.mu.Unlock()
}

// flush waits until everything queued so far is committed and the file system synced
// (so renames are durable too).
func (c *committer) flush() {
	done := make(chan struct{})
	c.in <- &commitItem{flushed: done}
	<-done
}

func (c *committer) loop() {
	tick := time.NewTicker(journalEvery)
	defer tick.Stop()
	for {
		var batch []*commitItem
		select {
		case it := <-c.in:
			batch = append(batch, it)
		drain:
			for len(batch) < 2048 {
				select {
				case it := <-c.in:
					batch = append(batch, it)
				default:
					break drain
				}
			}
			c.commit(batch)
		case <-tick.C:
			c.journalBlocks()
		}
	}
}

func (c *committer) syncData(batch []*commitItem) error {
	var fds []*os.File
	for _, it := range batch {
		switch {
		case it.file != nil:
			fds = append(fds, it.file)
		case it.chunk != nil:
			it.chunk.mu.Lock()
			if it.chunk.f != nil {
				fds = append(fds, it.chunk.f)
			}
			it.chunk.mu.Unlock()
		}
	}
	if len(fds) > 4 && c.dir != nil {
		return syncfs(c.dir)
	}
	for _, f := range fds {
		if err := fdatasync(f); err != nil {
			return err
		}
	}
	return nil
}

func (c *committer) commit(batch []*commitItem) {
	var flushes []chan struct{}
	items := batch[:0]
	for _, it := range batch {
		if it.flushed != nil {
			flushes = append(flushes, it.flushed)
		} else {
			items = append(items, it)
		}
	}
	defer func() {
		if len(flushes) > 0 {
			c.journalBlocks()
			if c.dir != nil {
				syncfs(c.dir)
			}
			for _, f := range flushes {
				close(f)
			}
		}
	}()
	if len(items) == 0 {
		return
	}
	results := map[*rsession][]wire.Result{}
	resultOf := func(it *commitItem) wire.Result {
		if it.chunk != nil && it.openReply == nil {
			return wire.Result{Chunk: it.chunk.open.ID, Bytes: it.bytes}
		}
		return wire.Result{Unit: it.unit, Bytes: it.bytes}
	}
	// answer gives an item's verdict to its session. A resumed chunk's rename answers
	// the ChunkOpened its sender waits for, failed or not: a Result in its place (as a
	// failed sync or journal sent before) answered nothing the sender had asked, and
	// the sender waited for the ChunkOpened until its session ended.
	answer := func(it *commitItem, res wire.Result) {
		if it.openReply == nil {
			results[it.session] = append(results[it.session], res)
			return
		}
		reply := *it.openReply
		reply.Verified = res.OK
		if !res.OK {
			reply.Error, reply.Fatal = res.Error, res.Fatal
		}
		it.session.send(wire.TypeChunkOpened, reply)
	}
	if err := c.syncData(items); err != nil {
		for _, it := range items {
			res := resultOf(it)
			res.Error, res.Fatal = describeWriteError("syncing", it.final, err), isFatal(err)
			answer(it, res)
			if it.file != nil {
				it.file.Close()
			}
		}
		c.send(results, items)
		return
	}
	var recs []journal.Record
	for _, it := range items {
		base := journal.Record{Path: fsname.Path(it.key.Path), Size: it.key.Size, MtimeNs: it.key.MtimeNs}
		if it.chunk != nil {
			r := base
			r.Kind, r.ChunkSize, r.Index, r.BlockSize, r.Digest = journal.KindChunk, it.chunk.open.ChunkSize, it.chunk.open.Index, it.chunk.open.BlockSize, it.digest
			recs = append(recs, r)
		}
		if it.finalize {
			r := base
			r.Kind, r.Mode, r.Run, r.Ino = journal.KindFinal, it.mode, it.session.cfg.Run, c.inodeOf(it)
			if it.chunk == nil || it.chunk.open.Chunks == 1 {
				r.Digest = it.digest
			}
			recs = append(recs, r)
		}
	}
	c.j.journal.Append(recs...)
	if err := c.j.journal.Sync(); err != nil {
		for _, it := range items {
			res := resultOf(it)
			res.Error, res.Fatal = describeWriteError("journaling", it.final, err), isFatal(err)
			answer(it, res)
		}
		c.send(results, items)
		return
	}
	c.j.state.Apply(recs...)
	for _, it := range items {
		res := resultOf(it)
		res.OK = true
		if it.finalize {
			if err := c.rename(it); err != nil {
				res.OK, res.Error = false, describeWriteError("renaming", it.final, err)
				if errors.Is(err, errDestinationIsDirectory) {
					res.Error = destinationIsDirectory(it.final)
				}
			} else {
				c.r.files.Add(1)
				metrics.FilesTotal.WithLabelValues("receiver").Inc()
			}
		} else if it.file != nil {
			it.file.Close()
		}
		answer(it, res)
	}
	c.send(results, items)
}

// inodeOf is the inode of the temporary file an item renames to its final name.
func (c *committer) inodeOf(it *commitItem) uint64 {
	switch {
	case !c.r.keepsInodes():
		return 0
	case it.ino != 0:
		return it.ino
	case it.chunk != nil && it.chunk.ino != 0:
		return it.chunk.ino
	}
	fi, err := c.r.Root.Lstat(it.tmp) // a file of several chunks: one look per file
	if err != nil {
		return 0 // unknown: the final check compares size and mtime only
	}
	return inode(fi)
}

// retireCopies stops every other copy of the chunks of a file about to take its final
// name from writing into it (rchunk.retire).
func (c *committer) retireCopies(it *commitItem) {
	c.mu.Lock()
	var copies []*rchunk
	for ch := range c.tracked {
		if ch != it.chunk && ch.tmp == it.tmp {
			copies = append(copies, ch)
		}
	}
	c.mu.Unlock()
	for _, ch := range copies {
		ch.retire()
	}
}

// errDestinationIsDirectory: a file's final name is a directory's.
var errDestinationIsDirectory = errors.New("destination path is a directory")

// destinationIsDirectory is the result's message for a file whose final name is a
// directory's, before the write (alreadyDone) or at the rename.
func destinationIsDirectory(p string) string {
	return fmt.Sprintf("%s: %s", errDestinationIsDirectory, fsname.Show(p))
}

func (c *committer) rename(it *commitItem) error {
	c.retireCopies(it)
	root, tmp, final := c.r.Root, it.tmp, it.final
	rename := root.Rename
	if it.dir != nil {
		root, tmp, final, rename = it.dir.Root, it.tmpBase, it.finalBase, it.dir.rename
	}
	mt := time.Unix(0, it.key.MtimeNs)
	mode := os.FileMode(it.mode).Perm()
	var err error
	if it.file != nil {
		it.file.Chmod(mode)
		err = setTimes(it.file, mt)
		it.file.Close()
	} else {
		root.Chmod(tmp, mode)
		err = root.Chtimes(tmp, mt, mt)
	}
	if err == nil {
		err = rename(tmp, final)
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		// A directory took the file's name after the receiver decided to write it
		// (rsession.presumedAbsent): nothing can be renamed there, so the temporary
		// file goes too.
		if fi, lerr := root.Lstat(final); lerr == nil && fi.IsDir() {
			root.Remove(tmp)
			return errDestinationIsDirectory
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		// Another copy of the same file (a duplicate sent by another stripe, or a
		// one-chunk file's chunk sent twice) took the final name first: the content is
		// the same version of the file (same path, size and mtime), so what is left is
		// its mode and mtime, which this copy's writes may have touched.
		if fi, lerr := root.Lstat(final); lerr == nil && fi.Mode().IsRegular() && fi.Size() == it.key.Size {
			root.Chmod(final, mode)
			return root.Chtimes(final, mt, mt)
		}
	}
	return err
}

func (c *committer) send(results map[*rsession][]wire.Result, items []*commitItem) {
	for _, it := range items {
		if it.claimed != "" {
			c.j.release(it.claimed)
		}
		if it.chunk != nil {
			c.untrack(it.chunk)
			it.session.mu.Lock()
			if it.session.chunks[it.chunk.open.ID] == it.chunk {
				delete(it.session.chunks, it.chunk.open.ID)
				it.chunk.release()
			}
			it.session.mu.Unlock()
		}
	}
	for s, rs := range results {
		s.send(wire.TypeResult, wire.Results{Results: rs})
	}
}

// journalBlocks records the blocks of large chunks written since the last call, after
// making them durable.
func (c *committer) journalBlocks() {
	c.mu.Lock()
	chunks := make([]*rchunk, 0, len(c.tracked))
	for ch := range c.tracked {
		chunks = append(chunks, ch)
	}
	c.mu.Unlock()
	// Held from the read of a chunk's blocks to their record: a reset (resetChunk)
	// comes wholly before or wholly after.
	c.blocksMu.Lock()
	defer c.blocksMu.Unlock()
	var recs []journal.Record
	for _, ch := range chunks {
		ch.mu.Lock()
		f := ch.f
		have := append(journal.Ranges(nil), ch.have...)
		fresh := have.Count() > ch.journal.Count()
		ch.mu.Unlock()
		if !fresh || f == nil || fdatasync(f) != nil {
			continue
		}
		ch.mu.Lock()
		ch.journal = have
		ch.mu.Unlock()
		recs = append(recs, journal.Record{Kind: journal.KindBlocks, Path: fsname.Path(ch.key.Path), Size: ch.key.Size, MtimeNs: ch.key.MtimeNs,
			ChunkSize: ch.open.ChunkSize, Index: ch.open.Index, BlockSize: ch.open.BlockSize, Ranges: have})
	}
	if len(recs) == 0 {
		return
	}
	c.j.journal.Append(recs...)
	if c.j.journal.Sync() == nil {
		c.j.state.Apply(recs...)
	}
}

// resetChunk forgets a chunk that failed its digest — its blocks, every other copy's,
// and the journal's record of them — so that the next open starts from nothing.
func (c *committer) resetChunk(ch *rchunk) {
	c.blocksMu.Lock()
	defer c.blocksMu.Unlock()
	ch.forget()
	c.discardCopies(ch)
	// The journal too, or a resumed chunk would skip the blocks again.
	reset := journal.Record{Kind: journal.KindReset, Path: fsname.Path(ch.key.Path), Size: ch.key.Size, MtimeNs: ch.key.MtimeNs, ChunkSize: ch.open.ChunkSize, Index: ch.open.Index}
	c.j.journal.Append(reset)
	c.j.journal.Sync()
	c.j.state.Apply(reset)
}
