package mover

import (
	"errors"
	"fmt"
	"io/fs"
	"strconv"
	"syscall"
	"time"

	"github.com/dtnflow/dtnflow/agent/fsname"
	"github.com/dtnflow/dtnflow/agent/fsroot"
	"github.com/dtnflow/dtnflow/agent/journal"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/parallel"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// A receiver's control connection: setting up a session, the sender's control frames,
// the stats it hears every 250 ms, and the summary and manifest it asks for.

func (r *Receiver) serveControl(c *wire.Conn, rd *wire.Reader, hello wire.Hello, helloFlags wire.Flags) {
	w := c.Writer()
	h, meta, err := rd.Next()
	if err != nil || h.Type != wire.TypeSession {
		if wire.IsIntegrity(err) {
			metrics.IntegrityFailures.Inc()
		}
		return
	}
	s := &rsession{id: hello.Session, r: r, ctrl: w, ctrlConn: c, chunks: map[uint64]*rchunk{}, conns: map[*wire.Conn]struct{}{c: {}},
		done: make(chan struct{}), memMore: make(chan struct{}, 1), dirs: newDirCache(r.Root, true)}
	if err := wire.DecodeJSON(meta, &s.cfg); err != nil {
		return
	}
	switch {
	case s.cfg.Encrypt && (helloFlags|h.Flags)&wire.FlagEncrypted != wire.FlagEncrypted:
		return // an encrypted session that did not start encrypted: not our sender
	case s.cfg.Encrypt:
		if w.SetEncrypt(true) != nil {
			return
		}
	case r.RequireEncryption:
		w.WriteJSON(wire.TypeError, wire.ErrorMsg{Error: "this receiver moves data only encrypted: run the job with in-flight mode Encrypted"})
		return
	}
	if !s.cfg.Memory {
		if s.job, err = r.job(s.cfg.Job); err != nil {
			w.WriteJSON(wire.TypeError, refusal(err))
			return
		}
		if s.cfg.BlockSize <= 0 || s.cfg.BlockSize > wire.MaxData {
			s.cfg.BlockSize = DefaultBlockSize
		}
		// A digest this receiver does not know (a sender newer than it, or a
		// mistyped name) is refused by name here, before any file is digested.
		if _, err := NewDigest(s.cfg.Checksum); err != nil {
			w.WriteJSON(wire.TypeError, wire.ErrorMsg{Error: "this receiver cannot verify the job: " + err.Error()})
			return
		}
	}
	r.mu.Lock()
	if r.sessions == nil {
		r.sessions = map[uint64]*rsession{}
	}
	r.sessions[s.id] = s
	r.mu.Unlock()
	defer func() {
		close(s.done)
		s.dead.Store(true)
		r.mu.Lock()
		delete(r.sessions, s.id)
		r.mu.Unlock()
		if s.job != nil {
			// Whatever arrived is journaled now, not at the next tick: the sender that
			// left (or was killed) resumes at once and must not send it again.
			s.job.commit.journalBlocks()
		}
		s.mu.Lock()
		for id, ch := range s.chunks {
			ch.release()
			delete(s.chunks, id)
		}
		for dc := range s.conns {
			if dc != c {
				dc.Close() // the data streams end with their session
			}
		}
		s.mu.Unlock()
	}()
	limits := r.socketLimits()
	s.send(wire.TypeSessionOK, wire.SessionOK{Receiver: r.ID, Limits: &limits})
	go s.statsLoop()
	if err := s.readControl(rd); err != nil && wire.IsIntegrity(err) {
		s.abort(fmt.Errorf("control connection: %w", err))
	}
}

// readControl serves a session's control frames until the connection ends or a frame
// breaks the protocol.
func (s *rsession) readControl(rd *wire.Reader) error {
	for {
		h, meta, err := rd.Next()
		if err != nil {
			return err
		}
		if err := s.checkEncrypted(h); err != nil {
			return err
		}
		switch h.Type {
		case wire.TypeSummaryQuery:
			s.sendSummary()
		case wire.TypeManifestAsk:
			var m wire.ManifestQuery
			if err := wire.DecodeJSON(meta, &m); err != nil {
				return err
			}
			go s.sendManifest(m)
		case wire.TypeChunkOpen:
			var m wire.ChunkOpen
			if err := wire.DecodeJSON(meta, &m); err != nil {
				return err
			}
			s.openChunk(m)
		case wire.TypeChunkEnd:
			var m wire.ChunkEnd
			if err := wire.DecodeJSON(meta, &m); err != nil {
				return err
			}
			s.endChunk(m)
		case wire.TypeFinalize:
			var m wire.Finalize
			if err := wire.DecodeJSON(meta, &m); err != nil {
				return err
			}
			go s.finalize(m)
		case wire.TypeFlush:
			if s.job != nil {
				s.job.commit.flush()
			}
			s.send(wire.TypeFlushed, struct{}{})
		case wire.TypeMemEnd:
			var m wire.MemEnd
			if err := wire.DecodeJSON(meta, &m); err != nil {
				return err
			}
			go s.memEnd(m.Bytes)
		default:
			return fmt.Errorf("%w: frame type %d on a control connection", wire.ErrFrame, h.Type)
		}
	}
}

func (s *rsession) stats() wire.PeerStats {
	return wire.PeerStats{Bytes: s.r.bytes.Load(), MemBytes: s.memBytes.Load(), CPUSeconds: metrics.CPUSeconds(), UnixNano: time.Now().UnixNano()}
}

// memEnd answers as soon as a memory-to-memory run's bytes have all arrived.
func (s *rsession) memEnd(total int64) {
	deadline := time.NewTimer(time.Minute)
	defer deadline.Stop()
	for s.memBytes.Load() < total {
		select {
		case <-s.memMore:
		case <-deadline.C:
			return
		case <-s.done:
			return
		}
	}
	s.send(wire.TypeStats, s.stats())
}

func (s *rsession) statsLoop() {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		s.send(wire.TypeStats, s.stats())
		select {
		case <-s.done:
			return
		case <-t.C:
		}
	}
}

// sendManifest answers a ManifestQuery: every file version the job's journals say is
// final, with its digests and whether it is at its final name now (Lstat: a regular
// file of the journaled size and mtime). A temporary file left next to a final one (a
// second copy that lost the race to the final name) is debris: it is removed and
// counted.
func (s *rsession) sendManifest(q wire.ManifestQuery) {
	if s.job == nil {
		return
	}
	parts, ok := s.job.sharedManifest(q, s.done, func() []wire.Manifest { return s.buildManifest(q) })
	if !ok {
		return
	}
	for _, part := range parts {
		s.send(wire.TypeManifest, part)
	}
}

// buildManifest looks at every file the job's journals say is final and returns the
// manifest's parts, packed when the query asks for it.
func (s *rsession) buildManifest(q wire.ManifestQuery) []wire.Manifest {
	j := s.job
	j.commit.flush() // what is verified is journaled and renamed before it is listed
	j.state.Refresh()
	var keys []journal.Key
	var states []*journal.FileState
	j.state.Each(func(k journal.Key, fs *journal.FileState) {
		if fs.Final {
			keys = append(keys, k)
			states = append(states, fs)
		}
	})
	var parts []wire.Manifest
	var out wire.Manifest
	// The manifest is the proof that each file is at its final name: every directory
	// is resolved afresh from the root for it (one open per directory), not taken from
	// a cache that may hold a directory since moved away from that name.
	fresh := newDirCache(s.r.Root, false)
	lstat := func(p string) (fs.FileInfo, error) {
		dirName, base := split(p)
		dir, err := fresh.get(dirName)
		if err != nil {
			return nil, err
		}
		return dir.Lstat(base)
	}
	// The files are looked at on every core: the senders wait for this answer, and
	// the look (one fstatat each) was most of it.
	const lstatPerWorker = 256
	infos, errs := make([]fs.FileInfo, len(keys)), make([]error, len(keys))
	parallel.Each(len(keys), lstatPerWorker, func(i int) { infos[i], errs[i] = lstat(keys[i].Path) })
	// The final files in place, by directory: what is left of their temporary files
	// is debris, found with one listing per directory.
	finals := map[string][]string{}
	for i, k := range keys {
		fs := states[i]
		mf := wire.ManifestFile{Path: fsname.Path(k.Path), Size: k.Size, MtimeNs: k.MtimeNs, Digest: fs.Digest, ThisRun: q.Run != "" && fs.Run == q.Run}
		if len(fs.Chunks) > 0 && mf.Digest == "" {
			n := int32(0)
			for idx := range fs.Chunks {
				n = max(n, idx+1)
			}
			mf.Chunks = make([]string, n)
			for idx, cs := range fs.Chunks {
				mf.Chunks[idx] = cs.Digest
			}
		}
		fi, err := infos[i], errs[i]
		if err != nil && s.redoRename(k) {
			fi, err = lstat(k.Path) // a rename a crash interrupted, finished now
		}
		switch {
		case err != nil:
			mf.Problem = "missing at its final name: " + fsname.Message(err)
		case !fi.Mode().IsRegular():
			mf.Problem = "not a regular file at its final name"
		case fi.Size() != k.Size || fsroot.MtimeNs(fi) != k.MtimeNs:
			mf.Problem = fmt.Sprintf("at its final name with size %d and mtime %d, journaled %d and %d (changed since, or another version)", fi.Size(), fsroot.MtimeNs(fi), k.Size, k.MtimeNs)
		case !sameFile(fi, fs):
			mf.Problem = "at its final name is another file of the same size and mtime (inode " + strconv.FormatUint(inode(fi), 10) + ", journaled " + strconv.FormatUint(fs.Ino, 10) + "): another writer's version replaced it"
		}
		if mf.Problem == "" {
			dirName, _ := split(k.Path)
			finals[dirName] = append(finals[dirName], k.Path)
		}
		out.Files = append(out.Files, mf)
		if len(out.Files) >= 10000 {
			parts = append(parts, s.manifestPart(out, q.Packed))
			out = wire.Manifest{}
		}
	}
	for dirName, paths := range finals {
		out.Debris += removeDebris(fresh, dirName, paths, s.cfg.Job)
	}
	out.Last = true
	return append(parts, s.manifestPart(out, q.Packed))
}

// manifestPart is one part of the manifest, its files packed when the query asked for
// it (wire.PackManifestFiles).
func (s *rsession) manifestPart(out wire.Manifest, packed bool) wire.Manifest {
	if packed {
		if err := out.Pack(); err != nil {
			s.r.Log.Warn("Could not pack the manifest; sending it as JSON", "err", err.Error())
		}
	}
	return out
}

// removeDebris removes, from directory dirName, the temporary files of the final files
// at finals (a copy that lost the race to the final name, or a crash between a rename
// and the next run). One listing of the directory, not a removal attempt per file; the
// temporary names (a SHA-256 each) are worked out only for a directory whose listing
// holds one of ours, which after a run without duplicates none does.
func removeDebris(dirs *dirCache, dirName string, finals []string, job string) int64 {
	dir, err := dirs.get(dirName)
	if err != nil {
		return 0
	}
	d, err := dir.Open(".")
	if err != nil {
		return 0
	}
	names, _ := d.Readdirnames(-1)
	d.Close()
	var temps map[string]bool
	var n int64
	for _, name := range names {
		if !IsTempName(name) {
			continue
		}
		if temps == nil {
			temps = make(map[string]bool, len(finals))
			for _, p := range finals {
				_, tmpBase := split(TempName(p, job))
				temps[tmpBase] = true
			}
		}
		if temps[name] && dir.Remove(name) == nil {
			n++
		}
	}
	return n
}

func (s *rsession) sendSummary() {
	j := s.job
	j.state.Refresh()
	var sum wire.Summary
	flush := func(last bool) {
		sum.Last = last
		s.send(wire.TypeSummary, sum)
		sum = wire.Summary{}
	}
	var keys []journal.Key
	var states []*journal.FileState
	j.state.Each(func(k journal.Key, fs *journal.FileState) {
		keys = append(keys, k)
		states = append(states, fs)
	})
	for i, k := range keys {
		fs := states[i]
		if fs.Final {
			if s.redoRename(k) {
				sum.Files = append(sum.Files, wire.DoneFile{Path: fsname.Path(k.Path), Size: k.Size, MtimeNs: k.MtimeNs})
			}
		} else {
			for idx, cs := range fs.Chunks {
				if cs.Verified {
					sum.Chunks = append(sum.Chunks, wire.DoneChunk{Path: fsname.Path(k.Path), Size: k.Size, MtimeNs: k.MtimeNs, ChunkSize: fs.ChunkSize, Index: idx})
				}
			}
		}
		if len(sum.Files)+len(sum.Chunks) >= 10000 {
			flush(false)
		}
	}
	flush(true)
}

// refusal is the receiver's answer to a session it cannot serve: Retry when what it
// lacks is a resource it may have again soon (a flood of connections took its file
// descriptors, memory ran short), so that the sender tries again within its
// --retry-for instead of failing the job.
func refusal(err error) wire.ErrorMsg {
	short := errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE) || errors.Is(err, syscall.ENOMEM)
	return wire.ErrorMsg{Error: fsname.Message(err), Retry: short}
}
