package mover

import (
	"fmt"
	"hash/fnv"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path"
	"sync"
	"sync/atomic"
	"time"

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

	inodesOnce sync.Once
	inodesKept bool
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

	// writeLocks serialize the block writes into one file (writeLock): the chunks of
	// a large file arrive on several streams at once, and each write into the file
	// takes its lock in the kernel, where the writers that wait spin on the CPU.
	writeLocks [writeLockCount]sync.Mutex

	// manifests are the manifests being built, by query (sharedManifest).
	manifestMu sync.Mutex
	manifests  map[wire.ManifestQuery]*manifestBuild
}

// writeLockCount is how many write locks a job has: files share one by their name's
// hash, and a few more files than a stripe's concurrency rarely share one.
const writeLockCount = 64

// writeLock is the lock the block writes into the file at tmp take.
func (j *rjob) writeLock(tmp string) *sync.Mutex {
	h := fnv.New32a()
	io.WriteString(h, tmp)
	return &j.writeLocks[h.Sum32()%writeLockCount]
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
	st.Own(r.ID + ".log") // every record this process journals, it applies itself
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

// checkEncrypted refuses a clear frame in a session that asked for encryption: the
// sender's own code never sends one, so it was not the sender.
func (s *rsession) checkEncrypted(h wire.Header) error {
	if s.cfg.Encrypt && h.Flags&wire.FlagEncrypted == 0 {
		return fmt.Errorf("%w: a clear frame (type %d) in an encrypted session", wire.ErrAuth, h.Type)
	}
	return nil
}

func (r *Receiver) session(id uint64) *rsession {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sessions[id]
}
