package mover

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dtnflow/dtnflow/agent/fsname"
	"github.com/dtnflow/dtnflow/agent/fsroot"
	"github.com/dtnflow/dtnflow/agent/journal"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// Receiver writes what senders send under its root. One receiver process serves any
// number of stripe sessions, of any number of jobs.
type Receiver struct {
	Root   *os.Root
	Stripe int32
	// ID names this process's journal file; unique per process start.
	ID  string
	Log *slog.Logger
	// MaxFileSize is the largest file accepted (0: DefaultMaxFileSize).
	MaxFileSize int64
	// RequireEncryption refuses sessions that do not encrypt (a site's receiver for
	// other sites).
	RequireEncryption bool
	// Confine, when not "", is the one directory (relative to Root) this receiver
	// writes under: a path elsewhere is refused, whatever the sender asks (a site's
	// receiver for another site's job, confined to the path that site was granted).
	Confine string

	mu       sync.Mutex
	sessions map[uint64]*rsession
	jobs     map[string]*rjob

	bytes    atomic.Int64
	files    atomic.Int64
	sessionN atomic.Int64

	limitsOnce sync.Once
	limits     wire.SocketLimits

	sinkOnce sync.Once
	devNull  *os.File
}

// sink is /dev/null, where memory-to-memory data goes (nil if it cannot be opened).
func (r *Receiver) sink() *os.File {
	r.sinkOnce.Do(func() { r.devNull, _ = os.OpenFile(os.DevNull, os.O_WRONLY, 0) })
	return r.devNull
}

func (r *Receiver) maxFileSize() int64 {
	if r.MaxFileSize > 0 {
		return r.MaxFileSize
	}
	return DefaultMaxFileSize
}

// socketLimits are this host's socket buffer limits, read once.
func (r *Receiver) socketLimits() wire.SocketLimits {
	r.limitsOnce.Do(func() { r.limits = ReadSocketLimits() })
	return r.limits
}

// receiveBufferHelps says whether a data stream's requested buffer should become its
// SO_RCVBUF. Only where it reaches beyond what receive autotuning reaches (or
// autotuning is off): a fixed receive buffer below that ceiling can only cap the
// window, and one set on a connection that is already receiving (the data stream's
// first frame says the size, after the handshake) can leave the window stuck near
// its initial size — measured here at 16–75 Mbit/s against 800 with autotuning, on a
// 1 Gbit/s, 50 ms path. The sender's SO_SNDBUF, set before it connects, is what a
// fixed buffer changes then.
func receiveBufferHelps(bytes int64, l wire.SocketLimits) bool {
	if bytes <= 0 {
		return false
	}
	if l.RcvAutotuneMax <= 0 {
		return true
	}
	eff := bytes
	if l.RcvMax > 0 {
		eff = min(bytes, l.RcvMax)
	}
	return 2*eff > l.RcvAutotuneMax
}

// Status is the receiver's JSON status.
type ReceiverStatus struct {
	Role       string  `json:"role"`
	Stripe     int32   `json:"stripe"`
	Sessions   int     `json:"sessions"`
	Bytes      int64   `json:"bytes"`
	Files      int64   `json:"files"`
	CPUSeconds float64 `json:"cpuSeconds"`
}

// Status reports the receiver's totals.
func (r *Receiver) Status() any {
	r.mu.Lock()
	n := len(r.sessions)
	r.mu.Unlock()
	return ReceiverStatus{Role: "receiver", Stripe: r.Stripe, Sessions: n, Bytes: r.bytes.Load(), Files: r.files.Load(), CPUSeconds: metrics.CPUSeconds()}
}

// HandleConn serves one authenticated connection.
func (r *Receiver) HandleConn(c *wire.Conn) {
	defer c.Close()
	// A small buffer: bulk data is read straight into its destination, and only what
	// the header read brings along is copied once more.
	rd := c.Reader(16 << 10)
	h, meta, err := rd.Next()
	if err != nil || h.Type != wire.TypeHello {
		if wire.IsIntegrity(err) {
			metrics.IntegrityFailures.Inc()
		}
		return
	}
	var hello wire.Hello
	if wire.DecodeJSON(meta, &hello) != nil {
		return
	}
	switch hello.Role {
	case wire.RoleControl:
		r.serveControl(c, rd, hello, h.Flags)
	case wire.RoleData:
		if receiveBufferHelps(hello.BufferBytes, r.socketLimits()) {
			if tc, ok := c.NetConn().(*net.TCPConn); ok {
				tc.SetReadBuffer(int(hello.BufferBytes))
			}
		}
		r.serveData(c, rd, hello, h.Flags)
	}
}

// rjob is one job as this receiver process sees it.
type rjob struct {
	name    string
	state   *journal.State
	journal *journal.Writer
	commit  *committer

	busyMu sync.Mutex
	busy   map[string]chan struct{} // small files on their way to their final name

	// finalMu makes a chunk's look at a file made final (still at its final name,
	// or its rename redone, or else lost) one step, so that no chunk of a lost file
	// takes another chunk's temporary file, being written, for a crash's leftover.
	finalMu sync.Mutex
}

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

// lstat stats a path through the session's directory cache when its directory is
// there (one syscall, not a walk from the root), without creating anything.
func (s *rsession) lstat(p string) (fs.FileInfo, error) {
	dirName, base := split(p)
	if dir := s.dirs.cached(dirName); dir != nil {
		return dir.Lstat(base)
	}
	return s.r.Root.Lstat(p)
}

// claim waits until no other copy of the small file at path is on its way to its final
// name in this job, then claims it (false: done closed first). The same file can
// arrive twice: a stripe that leaves gives its unfinished files back and another
// sends them again while the first copies may still be in the receiver's hands; both
// write the same temporary name, so they take turns, and the second finds the first
// finished (alreadyDone).
func (j *rjob) claim(path string, done <-chan struct{}) bool {
	for {
		j.busyMu.Lock()
		ch, held := j.busy[path]
		if !held {
			if j.busy == nil {
				j.busy = map[string]chan struct{}{}
			}
			j.busy[path] = make(chan struct{})
			j.busyMu.Unlock()
			return true
		}
		j.busyMu.Unlock()
		select {
		case <-ch:
		case <-done:
			return false
		}
	}
}

// release gives a claimed path up.
func (j *rjob) release(path string) {
	j.busyMu.Lock()
	defer j.busyMu.Unlock()
	if ch := j.busy[path]; ch != nil {
		close(ch)
		delete(j.busy, path)
	}
}

func (r *Receiver) job(name string) (*rjob, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if j := r.jobs[name]; j != nil {
		if _, err := r.Root.Lstat(journal.JobDir(name)); err == nil {
			return j, nil
		}
		// Someone removed the job's journal: forget it here too and start afresh.
		j.journal.Close()
		delete(r.jobs, name)
	}
	if _, err := fsroot.Clean(name, false); err != nil || path.Base(name) != name {
		return nil, fmt.Errorf("job name %q refused", name)
	}
	st := journal.NewState(r.Root, name)
	if err := st.Refresh(); err != nil {
		return nil, err
	}
	jw, err := journal.Create(r.Root, name, r.ID+".log")
	if err != nil {
		return nil, err
	}
	j := &rjob{name: name, state: st, journal: jw}
	j.commit = newCommitter(r, j)
	if r.jobs == nil {
		r.jobs = map[string]*rjob{}
	}
	r.jobs[name] = j
	return j, nil
}

// rsession is one stripe session: a control connection and its data streams.
type rsession struct {
	id   uint64
	r    *Receiver
	cfg  wire.Session
	job  *rjob
	ctrl *wire.Writer
	// dirs holds the destination's directories this session has opened. It is the
	// session's, not the job's: a receiver that stays up across runs must not write
	// into, or count files as done in, a directory an earlier run opened that has since
	// been moved or removed; each session resolves its directories afresh by name.
	dirs *dirCache

	mu       sync.Mutex
	ctrlConn *wire.Conn
	chunks   map[uint64]*rchunk
	conns    map[*wire.Conn]struct{} // the control connection and the data streams
	done     chan struct{}
	dead     atomic.Bool

	memBytes atomic.Int64
	memMore  chan struct{}
}

func (s *rsession) send(t wire.Type, v any) {
	if s.dead.Load() {
		return
	}
	if err := s.ctrl.WriteJSON(t, v); err != nil {
		s.dead.Store(true)
	}
}

// abort ends a session whose frames can no longer be trusted: the sender hears why (and
// that it may retry), what arrived intact before is journaled so that it is not sent
// again, and every connection of the session is closed.
func (s *rsession) abort(why error) {
	if !s.dead.Load() {
		metrics.IntegrityFailures.Inc()
		s.r.Log.Warn("Ending a session: a frame failed its integrity check", "session", s.id, "err", why.Error())
		// A sender that no longer reads must not hold this goroutine.
		s.ctrlConn.SetWriteDeadline(time.Now().Add(5 * time.Second))
		s.ctrl.WriteJSON(wire.TypeError, wire.ErrorMsg{Error: "receiver: " + why.Error(), Integrity: true})
	}
	s.dead.Store(true)
	if s.job != nil {
		s.job.commit.journalBlocks()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for c := range s.conns {
		c.Close()
	}
}

// addConn registers a data stream with its session; false if the session has ended.
func (s *rsession) addConn(c *wire.Conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead.Load() {
		return false
	}
	s.conns[c] = struct{}{}
	return true
}

func (s *rsession) dropConn(c *wire.Conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.conns, c)
}

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
			w.WriteJSON(wire.TypeError, wire.ErrorMsg{Error: fsname.Message(err)})
			return
		}
		if s.cfg.BlockSize <= 0 || s.cfg.BlockSize > wire.MaxData {
			s.cfg.BlockSize = DefaultBlockSize
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

// checkEncrypted refuses a clear frame in a session that asked for encryption: the
// sender's own code never sends one, so it was not the sender.
func (s *rsession) checkEncrypted(h wire.Header) error {
	if s.cfg.Encrypt && h.Flags&wire.FlagEncrypted == 0 {
		return fmt.Errorf("%w: a clear frame (type %d) in an encrypted session", wire.ErrAuth, h.Type)
	}
	return nil
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

func (r *Receiver) session(id uint64) *rsession {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessions[id]
}

var (
	memCounter      = metrics.BytesTotal.WithLabelValues("memory")
	receivedCounter = metrics.BytesTotal.WithLabelValues("received")
)

func (r *Receiver) serveData(c *wire.Conn, rd *wire.Reader, hello wire.Hello, helloFlags wire.Flags) {
	s := r.session(hello.Session)
	if s == nil || s.cfg.Encrypt && helloFlags&wire.FlagEncrypted == 0 || !s.addConn(c) {
		return
	}
	defer s.dropConn(c)
	// A frame that fails its check or breaks the protocol ends the session (abort):
	// nothing in it, nor in the frames after it on this stream, can be trusted, and a
	// stream left reading a damaged length would wait forever.
	if err := s.readData(rd); err != nil && wire.IsIntegrity(err) {
		s.abort(fmt.Errorf("data stream %d: %w", hello.Stream, err))
	}
}

// checkCRC checks the CRC32C of a frame whose data is outside its tag (in-flight mode
// Checksum); a mismatch is damage in flight, like a tag that does not match.
func checkCRC(h wire.Header, crc uint32, data []byte) error {
	if h.Flags&wire.FlagDataOutsideTag != 0 && h.Flags&wire.FlagDataUnchecked == 0 && wire.CRC32C(data) != crc {
		return fmt.Errorf("%w: CRC32C of a frame's data (type %d)", wire.ErrAuth, h.Type)
	}
	return nil
}

// onArrival says the session verifies blocks and small files as they arrive.
func (s *rsession) onArrival() bool { return s.cfg.Verify && s.cfg.VerifyMode == wire.VerifyOnArrival }

// readData reads a data stream's frames until it ends or one breaks the protocol.
func (s *rsession) readData(rd *wire.Reader) error {
	r := s.r
	var bh *blockHasher
	if s.onArrival() {
		bh = newBlockHasher(s.cfg.Checksum)
	}
	var buf []byte
	grow := func(n uint32) []byte {
		if cap(buf) < int(n) {
			buf = make([]byte, n) // n ≤ the session's block size, checked by the caller
		}
		return buf[:n]
	}
	limit := uint32(s.cfg.BlockSize)
	if s.cfg.Memory {
		limit = wire.MaxData
	}
	for {
		h, meta, err := rd.Next()
		if err != nil {
			return err
		}
		if err := s.checkEncrypted(h); err != nil {
			return err
		}
		if h.DataLen > limit {
			return fmt.Errorf("%w: frame of %d bytes over the session's block size %d", wire.ErrFrame, h.DataLen, limit)
		}
		switch h.Type {
		case wire.TypeMem:
			if _, err := wire.ParseMemMeta(meta); err != nil {
				return err
			}
			if h.Flags&wire.FlagDataOutsideTag != 0 && r.sink() != nil {
				// Generated bytes nothing checks: into /dev/null without a copy.
				if err := rd.SpliceData(r.sink(), -1); err != nil {
					return err
				}
			} else if err := rd.ReadData(grow(h.DataLen)); err != nil {
				return err
			}
			n := int64(h.DataLen)
			r.bytes.Add(n)
			s.memBytes.Add(n)
			select {
			case s.memMore <- struct{}{}:
			default:
			}
			memCounter.Add(float64(n))
		case wire.TypeBlock:
			m, err := wire.ParseBlockMeta(meta)
			if err != nil {
				return err
			}
			if h.Flags&wire.FlagDataUnchecked != 0 && bh == nil {
				if err := s.spliceBlock(m, h, rd); err != nil {
					return err
				}
				continue
			}
			data := grow(h.DataLen)
			if err := rd.ReadData(data); err != nil {
				return err
			}
			if err := checkCRC(h, m.CRC, data); err != nil {
				return err
			}
			if err := s.block(m, data, bh); err != nil {
				return err
			}
		case wire.TypeFile:
			m, err := wire.ParseFileMeta(meta)
			if err != nil {
				return err
			}
			if m.Size != uint64(h.DataLen) {
				return fmt.Errorf("%w: file frame of %d bytes announces %d", wire.ErrFrame, h.DataLen, m.Size)
			}
			data := grow(h.DataLen)
			if err := rd.ReadData(data); err != nil {
				return err
			}
			if err := checkCRC(h, m.CRC, data); err != nil {
				return err
			}
			s.smallFile(m, data)
		default:
			return fmt.Errorf("%w: frame type %d on a data stream", wire.ErrFrame, h.Type)
		}
	}
}

// ---- small files ----

func (s *rsession) result(res wire.Result) {
	s.send(wire.TypeResult, wire.Results{Results: []wire.Result{res}})
}

func (s *rsession) smallFile(m wire.FileMeta, data []byte) {
	r := s.r
	res := wire.Result{Unit: m.Unit}
	r.bytes.Add(int64(len(data)))
	receivedCounter.Add(float64(len(data)))
	p, err := r.destinationPath(fsname.Path(m.Path))
	if err != nil {
		res.Error = fsname.Message(err)
		s.result(res)
		return
	}
	key := journal.Key{Path: p, Size: int64(m.Size), MtimeNs: m.MtimeNs}
	if !s.job.claim(p, s.done) {
		return
	}
	committing := false
	defer func() {
		if !committing {
			s.job.release(p)
		}
	}()
	if done, msg := s.alreadyDone(key, m.Digest, data); done || msg != "" {
		res.OK, res.Skipped, res.Error = done, done, msg
		s.result(res)
		return
	}
	tmp := TempName(p, s.cfg.Job)
	dirName, base := split(p)
	_, tmpBase := split(tmp)
	dir, err := s.dirs.get(dirName)
	if err != nil {
		res.Error = fsname.Message(fsroot.Explain(p, fmt.Errorf("creating directory %s: %w", fsname.Show(dirName), err)))
		res.Fatal, res.Retry = isFatal(err), isTransient(err)
		s.result(res)
		return
	}
	f, err := dir.OpenFile(tmpBase, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		// The directory was removed while this session held it: resolve it again by
		// name (recreating it) rather than fail every file that belongs there.
		s.dirs.forget(dirName)
		if dir, err = s.dirs.get(dirName); err == nil {
			f, err = dir.OpenFile(tmpBase, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
		}
	}
	if err != nil {
		res.Error = fsname.Message(fsroot.Explain(p, fmt.Errorf("creating %s: %w", fsname.Show(tmp), err)))
		res.Fatal, res.Retry = isFatal(err), isTransient(err)
		s.result(res)
		return
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		res.Error, res.Fatal, res.Retry = describeWriteError("writing", p, err), isFatal(err), isTransient(err)
		s.result(res)
		return
	}
	digest := ""
	if m.Flags&wire.FileVerify != 0 {
		h, _ := NewDigest(s.cfg.Checksum)
		if s.onArrival() {
			h.Write(data) // what arrived, as handed to the file system
		} else if err := readBack(f, 0, int64(len(data)), data, h); err != nil {
			f.Close()
			res.Error = fmt.Sprintf("reading back %s: %s", fsname.Show(p), fsname.Message(err))
			s.result(res)
			return
		}
		sum := h.Sum(nil)
		if !bytes.Equal(sum, m.Digest) {
			f.Close()
			metrics.VerifyFailures.Inc()
			res.Retry, res.Error = true, "end-to-end digest mismatch on "+fsname.Show(p)
			s.result(res)
			return
		}
		digest = hex.EncodeToString(sum)
	}
	committing = true
	s.job.commit.add(&commitItem{
		session: s, unit: m.Unit, file: f, tmp: tmp, final: p, key: key, dir: dir, tmpBase: tmpBase, finalBase: base,
		mode: m.Mode, digest: digest, bytes: int64(len(data)), finalize: true, claimed: p,
	})
}

// readBack reads [off, off+n) of f through buf into h.
func readBack(f *os.File, off, n int64, buf []byte, h hash.Hash) error {
	for n > 0 {
		k := int64(len(buf))
		if k > n {
			k = n
		}
		got, err := f.ReadAt(buf[:k], off)
		if got > 0 {
			h.Write(buf[:got])
		}
		if int64(got) < k {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return err
		}
		off += k
		n -= k
	}
	return nil
}

// alreadyDone decides what to do with a destination path before writing it: done
// (journal says so, or IfDifferent found the same content), or an error message
// (Never), or neither (write it).
//
// srcDigest is the source's digest when the sender sent one (it verifies); otherwise
// data, the file's bytes as they arrived under their frame's check, stands for the
// source, so that IfDifferent needs no digest from a sender that does not verify.
func (s *rsession) alreadyDone(key journal.Key, srcDigest, data []byte) (bool, string) {
	r, j := s.r, s.job
	if fs := j.state.File(key); fs != nil && fs.Final {
		if s.redoRename(key) {
			return true, ""
		}
	}
	fi, err := s.lstat(key.Path)
	if err != nil {
		return false, ""
	}
	if fi.IsDir() {
		return false, fmt.Sprintf("destination path is a directory: %s", fsname.Show(key.Path))
	}
	// Another receiver of this job may have finished it: look again before refusing.
	j.state.Refresh()
	if fs := j.state.File(key); fs != nil && fs.Final && s.redoRename(key) {
		return true, ""
	}
	switch s.cfg.Overwrite {
	case "Always":
		return false, ""
	case "Never":
		return false, fmt.Sprintf("destination file exists: %s (overwrite: Never)", fsname.Show(key.Path))
	default: // IfDifferent
		if fi.Size() != key.Size || len(srcDigest) == 0 && data == nil {
			return false, ""
		}
		if len(srcDigest) == 0 {
			h, _ := NewDigest(s.cfg.Checksum)
			h.Write(data)
			srcDigest = h.Sum(nil)
		}
		f, err := r.Root.Open(key.Path)
		if err != nil {
			return false, ""
		}
		defer f.Close()
		h, _ := NewDigest(s.cfg.Checksum)
		buf := make([]byte, min(key.Size, 1<<20)+1)
		if readBack(f, 0, key.Size, buf, h) != nil || !bytes.Equal(h.Sum(nil), srcDigest) {
			return false, ""
		}
		j.journal.Append(journal.Record{Kind: journal.KindFinal, Path: fsname.Path(key.Path), Size: key.Size, MtimeNs: key.MtimeNs, Mode: uint32(fi.Mode().Perm()), Digest: hex.EncodeToString(srcDigest), Run: s.cfg.Run})
		j.journal.Sync()
		return true, ""
	}
}

// redoRename finishes a rename that a crash interrupted after its journal record; it
// reports whether the file is now at its final name with the right size.
func (s *rsession) redoRename(key journal.Key) bool {
	r := s.r
	tmp := TempName(key.Path, s.cfg.Job)
	if fi, err := r.Root.Lstat(tmp); err == nil && fi.Size() == key.Size {
		fs := s.job.state.File(key)
		r.Root.Chmod(tmp, fs2mode(fs))
		mt := time.Unix(0, key.MtimeNs)
		r.Root.Chtimes(tmp, mt, mt)
		if err := r.Root.Rename(tmp, key.Path); err != nil {
			return false
		}
	}
	fi, err := r.Root.Stat(key.Path)
	return err == nil && fi.Size() == key.Size
}

func fs2mode(fs *journal.FileState) fs.FileMode {
	if fs == nil || fs.Mode == 0 {
		return 0o644
	}
	return os.FileMode(fs.Mode).Perm()
}

// ---- chunks of large files ----

// rchunk is a chunk being received.
type rchunk struct {
	open    wire.ChunkOpen
	key     journal.Key
	tmp     string
	f       *os.File
	nblocks int64

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
	if err != nil {
		failOS(fsname.Message(fsroot.Explain(p, fmt.Errorf("creating %s: %w", fsname.Show(c.tmp), err))), err)
		return
	}
	if fi, err := f.Stat(); err == nil && fi.Size() > m.FileSize {
		f.Truncate(m.FileSize) // left over from another version of the file
	}
	c.f = f
	s.mu.Lock()
	s.chunks[m.ID] = c
	s.mu.Unlock()
	j.commit.track(c)
	for _, rg := range c.have {
		reply.Have = append(reply.Have, rg)
	}
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
	c, idx, off, f, err := s.blockAt(m, int64(len(data)))
	if err != nil {
		return err
	}
	_, err = f.WriteAt(data, off)
	c.wrote()
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
func (s *rsession) spliceBlock(m wire.BlockMeta, h wire.Header, rd *wire.Reader) error {
	c, idx, off, f, err := s.blockAt(m, int64(h.DataLen))
	if err != nil {
		return err
	}
	err = rd.SpliceData(f, off)
	c.wrote()
	if err != nil {
		if !wire.IsIntegrity(err) && !errors.Is(err, io.ErrUnexpectedEOF) {
			s.result(wire.Result{Chunk: m.Chunk, Error: describeWriteError("writing", c.key.Path, err), Fatal: isFatal(err), Retry: isTransient(err)})
		}
		return err
	}
	s.blockWritten(c, idx, int64(h.DataLen), nil)
	return nil
}

// blockAt says where a block of n bytes goes — its chunk, index, offset and file — or
// why it does not belong anywhere (after its frame passed the check: a peer that breaks
// the protocol).
func (s *rsession) blockAt(m wire.BlockMeta, n int64) (*rchunk, int64, int64, *os.File, error) {
	c := s.chunk(m.Chunk)
	if c == nil {
		return nil, 0, 0, nil, fmt.Errorf("%w: block for unknown chunk %d", wire.ErrFrame, m.Chunk)
	}
	if m.Offset > math.MaxInt64 {
		return nil, 0, 0, nil, fmt.Errorf("%w: block offset %d", wire.ErrFrame, m.Offset)
	}
	off := int64(m.Offset)
	rel := off - c.open.Offset
	if rel < 0 || rel%c.open.BlockSize != 0 || rel >= c.open.Length {
		return nil, 0, 0, nil, fmt.Errorf("%w: block at %d outside chunk %d [%d, +%d)", wire.ErrFrame, off, m.Chunk, c.open.Offset, c.open.Length)
	}
	if want := min(c.open.BlockSize, c.open.Length-rel); n != want {
		return nil, 0, 0, nil, fmt.Errorf("%w: block at %d of %d bytes, want %d", wire.ErrFrame, off, n, want)
	}
	c.mu.Lock()
	f := c.f
	if c.retired {
		f = nil
	}
	if f != nil {
		c.writing++
	}
	c.mu.Unlock()
	if f == nil {
		return nil, 0, 0, nil, errors.New("chunk closed")
	}
	return c, rel / c.open.BlockSize, off, f, nil
}

// wrote ends a block write that blockAt allowed.
func (c *rchunk) wrote() {
	c.mu.Lock()
	c.writing--
	if c.writing == 0 && c.idle.L != nil {
		c.idle.Broadcast()
	}
	c.mu.Unlock()
}

// retire stops the copy's block writes, waiting for those under way.
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

// blockWritten records a block written at its place, with its digest when the job
// verifies on arrival, and starts the chunk's verification once it is complete.
func (s *rsession) blockWritten(c *rchunk, idx, n int64, d []byte) {
	s.r.bytes.Add(n)
	receivedCounter.Add(float64(n))
	c.mu.Lock()
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
			c.mu.Lock()
			c.have, c.journal, c.finished, c.ended = nil, nil, false, false
			clear(c.blockDigests)
			c.mu.Unlock()
			// Forget the journaled blocks too, or a resumed chunk would skip them again.
			s.job.journal.Append(journal.Record{Kind: journal.KindReset, Path: fsname.Path(c.key.Path), Size: c.key.Size, MtimeNs: c.key.MtimeNs, ChunkSize: c.open.ChunkSize, Index: c.open.Index})
			s.job.journal.Sync()
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

// ---- manifest ----

// sendManifest answers a ManifestQuery: every file version the job's journals say is
// final, with its digests and whether it is at its final name now (Lstat: a regular
// file of the journaled size and mtime). A temporary file left next to a final one (a
// second copy that lost the race to the final name) is debris: it is removed and
// counted.
func (s *rsession) sendManifest(q wire.ManifestQuery) {
	if s.job == nil {
		return
	}
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
	// The temporary names of the final files in place, by directory: what is left of
	// them is debris, found with one listing per directory.
	temps := map[string]map[string]bool{}
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
		fi, err := lstat(k.Path)
		if err != nil && s.redoRename(k) {
			fi, err = lstat(k.Path) // a rename a crash interrupted, finished now
		}
		switch {
		case err != nil:
			mf.Problem = "missing at its final name: " + fsname.Message(err)
		case !fi.Mode().IsRegular():
			mf.Problem = "not a regular file at its final name"
		case fi.Size() != k.Size || fi.ModTime().UnixNano() != k.MtimeNs:
			mf.Problem = fmt.Sprintf("at its final name with size %d and mtime %d, journaled %d and %d (changed since, or another version)", fi.Size(), fi.ModTime().UnixNano(), k.Size, k.MtimeNs)
		}
		if mf.Problem == "" {
			dirName, _ := split(k.Path)
			_, tmpBase := split(TempName(k.Path, s.cfg.Job))
			if temps[dirName] == nil {
				temps[dirName] = map[string]bool{}
			}
			temps[dirName][tmpBase] = true
		}
		out.Files = append(out.Files, mf)
		if len(out.Files) >= 10000 {
			s.send(wire.TypeManifest, out)
			out = wire.Manifest{}
		}
	}
	for dirName, names := range temps {
		out.Debris += removeDebris(fresh, dirName, names)
	}
	out.Last = true
	s.send(wire.TypeManifest, out)
}

// removeDebris removes, from directory dirName, the temporary files named in temps (the
// temporaries of final files: a copy that lost the race to the final name, or a crash
// between a rename and the next run). One listing of the directory, not a removal
// attempt per file.
func removeDebris(dirs *dirCache, dirName string, temps map[string]bool) int64 {
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
	var n int64
	for _, name := range names {
		if temps[name] && dir.Remove(name) == nil {
			n++
		}
	}
	return n
}

// ---- summary ----

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
