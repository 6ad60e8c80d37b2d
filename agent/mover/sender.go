package mover

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/dtnflow/dtnflow/agent/auth"
	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/fsname"
	"github.com/dtnflow/dtnflow/agent/fsroot"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// Stripe is one sender: it pulls units from its WorkSource and moves them to its
// receiver over one control connection and N data streams.
type Stripe struct {
	Index    int32
	Receiver string
	Secret   []byte
	Root     *os.Root
	Log      *slog.Logger
	// RetryFor is how long the stripe keeps trying to reach its receiver.
	RetryFor time.Duration
	// StallTimeout ends a session that has work on its way and sees no progress (no
	// result, no byte delivered) for this long, and retries it (0: DefaultStallTimeout).
	StallTimeout time.Duration
	// OnConfig, when set, hears every job configuration the stripe applies (the
	// cluster's probe stripe starts and stops its helper stripes from it).
	OnConfig func(wire.JobConfig)
	// Helpers, when set, reads the helper stripes this stripe runs for a probe sample
	// of several stripes (wire.ProbeRequest.Stripes); the sample is their aggregate.
	Helpers func() []Transport

	bytesSent atomic.Int64
	// integrityFailures counts sessions ended because a frame failed its check, at
	// either end; stalls counts sessions ended for making no progress.
	integrityFailures atomic.Int64
	stalls            atomic.Int64

	// cur is the connected session, for Transport; retiredAcked is what the data
	// streams that have closed had delivered; peerLimits is what the receiver said
	// of its socket buffers.
	cur          atomic.Pointer[ssession]
	retiredAcked atomic.Int64
	peerLimits   atomic.Pointer[wire.SocketLimits]
}

// HelperStripeBase numbers the helper stripes a cluster's probe stripe runs for a
// sample of several stripes (wire.JobConfig.SampleStripes): far above any stripe a
// plan has, so that the coordinator tells them apart.
const HelperStripeBase int32 = 1 << 20

// Transport is what a stripe's data streams have done so far, for measuring it from
// outside (send --auto's probe on the job's own data).
type Transport struct {
	// DeliveredBytes counts what the receiver's TCP acknowledged on every data stream
	// this stripe has had (TCP_INFO bytes_acked): data that arrived, not data written
	// into socket buffers. It only grows.
	DeliveredBytes int64
	// MinRTT is the smallest round-trip time of the current streams (0: unknown).
	MinRTT time.Duration
	// Streams is the number of data streams open now.
	Streams int
	// PeerCPUSeconds is the receiver process's CPU time as it last reported it, and
	// PeerTime when; zero before the first report.
	PeerCPUSeconds float64
	PeerTime       time.Time
	// PeerLimits are the receiver's socket buffer limits, nil when unknown (not yet
	// connected, or an older receiver).
	PeerLimits *wire.SocketLimits
	// Connected says a session with the receiver is up.
	Connected bool
}

// Transport reads the stripe's data streams now.
func (st *Stripe) Transport() Transport {
	t := Transport{PeerLimits: st.peerLimits.Load()}
	s := st.cur.Load()
	if s == nil {
		t.DeliveredBytes = st.retiredAcked.Load()
		return t
	}
	t.Connected = true
	if p := s.peer.Load(); p != nil {
		t.PeerCPUSeconds, t.PeerTime = p.CPUSeconds, time.Unix(0, p.UnixNano)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t.DeliveredBytes = st.retiredAcked.Load()
	for x := range s.live {
		acked, minRTT := x.readAcked()
		t.DeliveredBytes += acked
		if minRTT > 0 && (t.MinRTT == 0 || minRTT < t.MinRTT) {
			t.MinRTT = minRTT
		}
	}
	t.Streams = len(s.streams)
	return t
}

// readAcked reads the stream's bytes_acked (and min RTT); once its connection is
// closed the last value read stands.
func (x *stream) readAcked() (int64, time.Duration) {
	ti := metrics.ReadTCPInfo(x.conn)
	if ti.OK && int64(ti.BytesAcked) > x.acked.Load() {
		x.acked.Store(int64(ti.BytesAcked))
	}
	return x.acked.Load(), ti.MinRTT
}

// retire moves a stream that is closing from the live set into the stripe's total.
func (s *ssession) retire(x *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.live[x]; !ok {
		return
	}
	delete(s.live, x)
	acked, _ := x.readAcked()
	s.st.retiredAcked.Add(acked)
}

var (
	totalSent      atomic.Int64
	totalIntegrity atomic.Int64
	totalStalls    atomic.Int64
	sentCounter    = metrics.BytesTotal.WithLabelValues("sent")
)

// BytesSent is the payload this process has sent over data streams so far.
func BytesSent() int64 { return totalSent.Load() }

// Repairs are how many sessions of this process's stripes ended because a frame failed
// its integrity check, and how many because they stalled; what they carried was sent
// again.
func Repairs() (integrity, stalls int64) { return totalIntegrity.Load(), totalStalls.Load() }

// errFinished ends a session whose job is done.
var errFinished = errors.New("finished")

// FatalError stops the stripe: retrying cannot help.
type FatalError struct{ Msg string }

func (e *FatalError) Error() string { return e.Msg }

// DefaultStallTimeout is how long a session with work on its way may see no progress.
const DefaultStallTimeout = time.Minute

// Retry bounds: a receiver that refuses the secret this many times in a row has
// another secret (one refusal may be a damaged handshake); this many sessions in a
// row that end on a failed integrity check or a stall, none moving any work, mean the
// path corrupts or holds what it carries, and the stripe gives up saying so.
const (
	maxRefusals   = 3
	maxBadSession = 8
)

func (st *Stripe) stallTimeout() time.Duration {
	if st.StallTimeout > 0 {
		return st.StallTimeout
	}
	return DefaultStallTimeout
}

// IntegrityFailures is how many of this stripe's sessions ended because a frame
// failed its integrity check (the frames' data was sent again).
func (st *Stripe) IntegrityFailures() int64 { return st.integrityFailures.Load() }

// Stalls is how many of this stripe's sessions ended for making no progress.
func (st *Stripe) Stalls() int64 { return st.stalls.Load() }

// Run moves units until the job is finished, ctx ends, or the receiver stays
// unreachable for RetryFor.
func (st *Stripe) Run(ctx context.Context, src WorkSource) error {
	var cfg wire.JobConfig
	select {
	case cfg = <-src.Configs():
	case <-ctx.Done():
		return ctx.Err()
	}
	var failingSince time.Time
	backoff := 100 * time.Millisecond
	refusals, bad := 0, 0
	// A receiver never reached yet is most likely starting (its pod was created with
	// this one): try again soon. One that went away may take longer to come back.
	everConnected := false
	for {
		end, err := st.session(ctx, src, &cfg)
		if err == nil || errors.Is(err, errFinished) {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		var fe *FatalError
		if errors.As(err, &fe) || errors.Is(err, ErrSourceLost) {
			return err
		}
		if errors.Is(err, auth.ErrRefused) {
			if refusals++; refusals >= maxRefusals {
				return &FatalError{Msg: fmt.Sprintf("receiver %s: %v", st.Receiver, err)}
			}
		} else {
			refusals = 0
		}
		var ie *IntegrityError
		switch {
		case end.progressed:
			bad = 0
		case errors.As(err, &ie) || errors.Is(err, errStalled):
			if bad++; bad >= maxBadSession {
				return &FatalError{Msg: fmt.Sprintf("stripe %d: %d sessions in a row with receiver %s ended without moving any work (last: %v): the path corrupts, tampers with or holds what it carries",
					st.Index, bad, st.Receiver, err)}
			}
		}
		if end.connected {
			failingSince, backoff, everConnected = time.Time{}, 100*time.Millisecond, true
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if time.Since(failingSince) > st.RetryFor {
			return fmt.Errorf("stripe %d: receiver %s: %w", st.Index, st.Receiver, err)
		}
		st.Log.Warn("Stripe lost its receiver; retrying", "stripe", st.Index, "receiver", st.Receiver, "err", err.Error())
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(backoff*2, MaxRetryBackoff(everConnected))
	}
}

// MaxRetryBackoff is the longest pause between attempts to reach a job's peer (a
// receiver, a coordinator): 250 ms for one never reached yet, which is most likely
// starting (a plan's pods start together: each pause is time the job's first byte may
// wait, and a refused connection costs next to nothing), 5 s for one that went away.
func MaxRetryBackoff(everConnected bool) time.Duration {
	if everConnected {
		return 5 * time.Second
	}
	return 250 * time.Millisecond
}

// flight is a unit on its way.
type flight struct {
	unit     wire.Unit
	attempts int
	chunk    uint64
	opened   chan wire.ChunkOpened
	// digest is the source digest of what was sent, when verifying.
	digest []byte
}

// outFrame is a frame queued for a stream.
type outFrame struct {
	typ     wire.Type
	flags   wire.Flags
	meta    []byte
	metaArr [32]byte
	data    []byte
	buf     *[]byte
	// file, when set, holds the frame's data instead of data: fileLen bytes at
	// fileOff, sent from the page cache (in-flight mode HeadersOnly).
	file    *os.File
	fileOff int64
	fileLen int
	// slots, when set, gets one token back once the frame is on the wire (a chunk's
	// bound on blocks in flight).
	slots chan struct{}
}

// dataLen is the length of the frame's data.
func (f *outFrame) dataLen() int {
	if f.file != nil {
		return f.fileLen
	}
	return len(f.data)
}

var framePool = sync.Pool{New: func() any { return new(outFrame) }}

// ssession is one connected life of a stripe.
type ssession struct {
	st   *Stripe
	src  WorkSource
	cfg  wire.JobConfig
	log  *slog.Logger
	ctx  context.Context
	stop context.CancelFunc
	id   uint64

	ctrl       *wire.Conn
	ctrlW      *wire.Writer
	ctrlReader *wire.Reader
	queue      chan *outFrame
	bufs       chan *[]byte
	nbufs      int // block buffers made
	limiter    *rate.Limiter

	mu        sync.Mutex
	err       error
	flights   map[uint64]*flight // by unit id
	chunks    map[uint64]*flight // by chunk id
	nextChunk uint64
	streams   []*stream
	live      map[*stream]struct{} // streams whose goroutine has not ended: Transport counts them
	retry     chan wire.Unit
	inflight  chan struct{} // one token per unit on its way
	peer      atomic.Pointer[wire.PeerStats]
	flushed   chan struct{}
	// manifested hears the last part of a manifest the session asked for.
	manifested chan struct{}
	dirs       *dirCache
	// progressAt is when the session last moved forward (unix ns); unitsDone counts
	// units the receiver confirmed in this session.
	progressAt atomic.Int64
	unitsDone  atomic.Int64

	workMu      sync.Mutex
	concurrency atomic.Int32
	workers     atomic.Int32
	spawnWorker func(idx int32)
}

// setConcurrency changes the number of units worked on at once.
func (s *ssession) setConcurrency(n int32) {
	n = max(n, 1)
	s.workMu.Lock()
	defer s.workMu.Unlock()
	s.concurrency.Store(n)
	if s.spawnWorker == nil {
		return
	}
	for w := s.workers.Load(); w < n; w++ {
		s.workers.Add(1)
		s.spawnWorker(w)
	}
}

type stream struct {
	idx   int32
	conn  *wire.Conn
	w     *wire.Writer
	bytes atomic.Int64
	quit  chan struct{}
	// for rates
	lastBytes   int64
	lastRetrans uint32
	lastSegs    uint32
	acked       atomic.Int64 // bytes_acked when last read
}

func (s *ssession) fail(err error) {
	s.mu.Lock()
	if s.err == nil {
		s.err = err
	}
	s.mu.Unlock()
	s.stop()
}

// sessionEnd says how a session went.
type sessionEnd struct {
	connected  bool // the receiver accepted the session
	progressed bool // at least one unit was done
}

// IntegrityError ends a session in which a frame failed its check at either end.
type IntegrityError struct{ Err error }

func (e *IntegrityError) Error() string { return "integrity check failed: " + e.Err.Error() }
func (e *IntegrityError) Unwrap() error { return e.Err }

// errStalled ends a session that made no progress for the stall timeout.
var errStalled = errors.New("no progress")

func (st *Stripe) session(ctx context.Context, src WorkSource, cfg *wire.JobConfig) (end sessionEnd, err error) {
	sctx, stop := context.WithCancel(ctx)
	defer stop()
	s := &ssession{st: st, src: src, cfg: *cfg, log: st.Log, ctx: sctx, stop: stop,
		id: randomID(), flights: map[uint64]*flight{}, chunks: map[uint64]*flight{}, retry: make(chan wire.Unit, 1024), flushed: make(chan struct{}, 1), manifested: make(chan struct{}, 1), dirs: newDirCache(st.Root, false),
		live: map[*stream]struct{}{}}
	if err := s.connect(); err != nil {
		return end, err
	}
	defer s.ctrl.Close()
	st.cur.Store(s)
	defer st.cur.CompareAndSwap(s, nil)
	end.connected = true
	s.progressed()
	depth := int(max(s.cfg.Pipelining, 1) * max(s.cfg.Concurrency, 1))
	// Small files are acknowledged only once durable at the destination: keep enough
	// of them unacknowledged that the commit round trip never stalls the pipeline.
	depth = min(max(depth, 256), 4096)
	s.inflight = make(chan struct{}, depth)
	// The block pool and the queue have room for the most streams and files a
	// reconfiguration may ask for; buffers are made as the configuration needs them.
	s.bufs = make(chan *[]byte, maxBlockBuffers)
	s.growBuffers()
	s.queue = make(chan *outFrame, maxBlockBuffers)
	s.limiter = rate.NewLimiter(rate.Inf, int(max(s.cfg.BlockSize, 1)))
	s.setRate(s.cfg.MaxBitsPerSecond)
	if err := s.setStreams(s.cfg.Streams, s.cfg.BufferBytes); err != nil {
		return end, err
	}
	var wg sync.WaitGroup
	wg.Add(4)
	go func() { defer wg.Done(); s.readControl() }()
	go func() { defer wg.Done(); s.sample() }()
	go func() { defer wg.Done(); s.watch() }()
	fetchDone := make(chan error, 1)
	go func() { defer wg.Done(); fetchDone <- s.work() }()
	// Configuration changes and probes while the session runs.
	var result error
loop:
	for {
		select {
		case c := <-src.Configs():
			if c.Generation != cfg.Generation || c.MaxBitsPerSecond != cfg.MaxBitsPerSecond {
				s.reconfigure(c)
			}
			*cfg = c
			if st.OnConfig != nil {
				st.OnConfig(c)
			}
		case p := <-src.Probes():
			if p.OnData {
				// A sample of this session's own transfer: measured beside it, while
				// the loop goes on applying the configuration the sample is for.
				wg.Add(1)
				go func() { defer wg.Done(); s.src.ProbeDone(s.probeOnData(p)) }()
				continue
			}
			s.src.ProbeDone(s.probe(p))
		case err := <-fetchDone:
			result = err
			break loop
		case <-sctx.Done():
			break loop
		}
	}
	s.stop()
	s.ctrl.Close()
	s.closeStreams()
	wg.Wait()
	// Give back what did not finish: another stripe (or this one, reconnected) sends it.
	s.mu.Lock()
	var back []wire.UnitResult
	for id := range s.flights {
		back = append(back, wire.UnitResult{ID: id, Retry: true})
	}
	s.flights = map[uint64]*flight{}
	if result == nil {
		result = s.err
	}
	s.mu.Unlock()
	for {
		select {
		case u := <-s.retry:
			back = append(back, wire.UnitResult{ID: u.ID, Retry: true})
			continue
		default:
		}
		break
	}
	if len(back) > 0 {
		s.src.Done(back)
	}
	if result == nil {
		result = errors.New("session ended")
	}
	end.progressed = s.unitsDone.Load() > 0
	var ie *IntegrityError
	if errors.As(result, &ie) {
		st.integrityFailures.Add(1)
		totalIntegrity.Add(1)
	}
	return end, result
}

// progressed records that the session moved forward now.
func (s *ssession) progressed() { s.progressAt.Store(time.Now().UnixNano()) }

// watch ends the session when it has work on its way and nothing moves for the stall
// timeout: no result, no reply, no byte acknowledged by the receiver's TCP. A frame
// whose length was damaged on the way, a receiver that stopped reading, a path that
// holds packets: each would otherwise wait forever; the retry resends what is not
// journaled.
func (s *ssession) watch() {
	timeout := s.st.stallTimeout()
	t := time.NewTicker(max(timeout/8, 50*time.Millisecond))
	defer t.Stop()
	var lastDelivered int64
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		var delivered int64
		s.mu.Lock()
		busy := len(s.flights) > 0
		for x := range s.live {
			acked, _ := x.readAcked()
			delivered += acked
		}
		s.mu.Unlock()
		if !busy || delivered > lastDelivered {
			lastDelivered = delivered
			s.progressed()
			continue
		}
		if idle := time.Since(time.Unix(0, s.progressAt.Load())); idle > timeout {
			s.st.stalls.Add(1)
			totalStalls.Add(1)
			metrics.Stalls.Inc()
			s.log.Warn("Stripe session made no progress; starting it again", "stripe", s.st.Index, "receiver", s.st.Receiver, "idle", idle.Round(time.Millisecond).String())
			s.fail(fmt.Errorf("%w for %v with work on its way (receiver %s)", errStalled, timeout, s.st.Receiver))
			return
		}
	}
}

func randomID() uint64 {
	var b [8]byte
	randRead(b[:])
	return uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 | uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
}

func (s *ssession) connect() error {
	st := s.st
	c, err := Dial(s.ctx, st.Receiver, st.Secret, 0)
	if err != nil {
		return err // a refusal (auth.ErrRefused) is counted by Run
	}
	s.ctrl, s.ctrlW = c, c.Writer()
	if s.encrypted() {
		if err := s.ctrlW.SetEncrypt(true); err != nil {
			c.Close()
			return err
		}
	}
	fail := func(err error) error {
		c.Close()
		if wire.IsIntegrity(err) {
			return &IntegrityError{Err: err}
		}
		return err
	}
	if err := s.ctrlW.WriteJSON(wire.TypeHello, wire.Hello{Role: wire.RoleControl, Session: s.id, Stripe: st.Index, Agent: agentName()}); err != nil {
		return fail(err)
	}
	if err := s.ctrlW.WriteJSON(wire.TypeSession, wire.Session{Job: s.cfg.Job, Run: s.cfg.Run, Encrypt: s.encrypted(), Checksum: s.cfg.Checksum, Verify: s.cfg.Verify, VerifyMode: s.cfg.VerifyMode,
		Overwrite: s.cfg.Overwrite, BlockSize: s.cfg.BlockSize, ChunkSize: s.cfg.ChunkSize}); err != nil {
		return fail(err)
	}
	rd := c.Reader(64 << 10)
	s.ctrlReader = rd
	// Until the session is set up, every frame must come within the stall timeout: a
	// damaged length would otherwise leave this read waiting for bytes that never come
	// (the session's watchdog starts only once it is up).
	next := func() (wire.Header, []byte, error) {
		c.SetReadDeadline(time.Now().Add(st.stallTimeout()))
		return rd.Next()
	}
	defer c.SetReadDeadline(time.Time{})
	for {
		h, meta, err := next()
		if err != nil {
			return fail(err)
		}
		switch h.Type {
		case wire.TypeError:
			var m wire.ErrorMsg
			wire.DecodeJSON(meta, &m)
			if m.Integrity {
				return fail(&IntegrityError{Err: errors.New(m.Error)})
			}
			return fail(&FatalError{Msg: "receiver refused the session: " + m.Error})
		case wire.TypeStats:
			continue
		case wire.TypeSessionOK:
			var ok wire.SessionOK
			if wire.DecodeJSON(meta, &ok) == nil && ok.Limits != nil {
				st.peerLimits.Store(ok.Limits)
			}
		default:
			return fail(fmt.Errorf("unexpected frame %d from receiver", h.Type))
		}
		break
	}
	if !s.src.NeedSummary() {
		return nil
	}
	if err := s.ctrlW.WriteFrame(wire.TypeSummaryQuery, nil, nil); err != nil {
		return fail(err)
	}
	for {
		h, meta, err := next()
		if err != nil {
			return fail(err)
		}
		if h.Type != wire.TypeSummary {
			continue
		}
		var sum wire.Summary
		if err := wire.DecodeJSON(meta, &sum); err != nil {
			return fail(err)
		}
		s.src.Summary(sum)
		if sum.Last {
			return nil
		}
	}
}

func agentName() string {
	h, _ := os.Hostname()
	return h + "/" + strconv.Itoa(os.Getpid())
}

// ---- streams ----

func (s *ssession) setStreams(n int32, buffer int64) error {
	n = max(n, 1)
	s.mu.Lock()
	have := int32(len(s.streams))
	for int32(len(s.streams)) > n {
		last := s.streams[len(s.streams)-1]
		s.streams = s.streams[:len(s.streams)-1]
		close(last.quit)
	}
	s.mu.Unlock()
	if have >= n {
		return nil
	}
	// New streams are dialled at once, not one after the other (each costs a TCP and
	// an authentication handshake, several round trips on a long path), and without
	// the lock, which Transport and the results take. Only the session's own loop
	// calls setStreams, so nobody else adds streams meanwhile.
	conns := make([]*wire.Conn, n-have)
	errs := make([]error, n-have)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			idx := have + int32(i)
			c, err := Dial(s.ctx, s.st.Receiver, s.st.Secret, buffer)
			if err == nil && s.encrypted() {
				if err = c.Writer().SetEncrypt(true); err != nil {
					c.Close()
				}
			}
			if err == nil {
				err = c.Writer().WriteJSON(wire.TypeHello, wire.Hello{Role: wire.RoleData, Session: s.id, Stripe: s.st.Index, Stream: idx, BufferBytes: buffer})
				if err != nil {
					c.Close()
				}
			}
			conns[i], errs[i] = c, err
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for i, c := range conns {
			if errs[i] == nil {
				c.Close()
			}
		}
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, c := range conns {
		st := &stream{idx: have + int32(i), conn: c, w: c.Writer(), quit: make(chan struct{})}
		s.streams = append(s.streams, st)
		s.live[st] = struct{}{}
		go s.runStream(st)
	}
	return nil
}

func (s *ssession) closeStreams() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, st := range s.streams {
		st.conn.Close()
	}
}

func (s *ssession) runStream(st *stream) {
	defer func() {
		s.retire(st)
		st.conn.Close()
	}()
	for {
		var f *outFrame
		select {
		case f = <-s.queue:
		case <-st.quit:
			return
		case <-s.ctx.Done():
			return
		}
		n := int64(f.dataLen())
		if s.limiter.Limit() != rate.Inf && n > 0 {
			if s.limiter.WaitN(s.ctx, int(n)) != nil {
				s.release(f)
				return
			}
		}
		var err error
		if f.file != nil {
			err = st.w.WriteFrameFile(f.typ, f.flags, f.meta, f.file, f.fileOff, f.fileLen)
		} else {
			err = st.w.WriteFrameFlags(f.typ, f.flags, f.meta, f.data)
		}
		s.release(f)
		if err != nil {
			s.fail(fmt.Errorf("stream %d: %w", st.idx, err))
			return
		}
		st.bytes.Add(n)
		s.st.bytesSent.Add(n)
		totalSent.Add(n)
		sentCounter.Add(float64(n))
	}
}

func (s *ssession) release(f *outFrame) {
	if f.buf != nil {
		s.bufs <- f.buf
	}
	if f.slots != nil {
		<-f.slots
	}
	*f = outFrame{}
	framePool.Put(f)
}

func (s *ssession) enqueue(f *outFrame) bool {
	select {
	case s.queue <- f:
		return true
	case <-s.ctx.Done():
		s.release(f)
		return false
	}
}

// maxBlockBuffers bounds a session's block buffers (and so its memory: 1 MiB each at
// the default block size).
const maxBlockBuffers = 2*1024 + 2*256 + 2

// growBuffers adds block buffers up to what the configuration needs: two per stream
// (one on the wire, one queued) and two per file in flight, plus two.
func (s *ssession) growBuffers() {
	s.mu.Lock()
	want := min(2*int(max(s.cfg.Streams, 1))+2*int(max(s.cfg.Concurrency, 1))+2, maxBlockBuffers)
	add := want - s.nbufs
	s.nbufs = max(s.nbufs, want)
	s.mu.Unlock()
	for range add {
		b := make([]byte, s.cfg.BlockSize)
		s.bufs <- &b
	}
}

func (s *ssession) getBuf() *[]byte {
	select {
	case b := <-s.bufs:
		return b
	case <-s.ctx.Done():
		return nil
	}
}

func (s *ssession) setRate(bps int64) {
	if bps <= 0 {
		s.limiter.SetLimit(rate.Inf)
		return
	}
	s.limiter.SetLimit(rate.Limit(float64(bps) / 8))
}

func (s *ssession) reconfigure(c wire.JobConfig) {
	old := s.cfg
	s.mu.Lock()
	s.cfg.Generation, s.cfg.Mode, s.cfg.SizeClasses, s.cfg.MaxBitsPerSecond = c.Generation, c.Mode, c.SizeClasses, c.MaxBitsPerSecond
	s.cfg.Streams, s.cfg.BufferBytes, s.cfg.Concurrency, s.cfg.Pipelining = c.Streams, c.BufferBytes, c.Concurrency, c.Pipelining
	if c.BufferBytes != old.BufferBytes {
		// A new buffer size needs new connections (the window scale is chosen at
		// connect); retired streams finish the frame in hand and close.
		for _, st := range s.streams {
			close(st.quit)
		}
		s.streams = nil
	}
	s.mu.Unlock()
	s.setRate(c.MaxBitsPerSecond)
	s.growBuffers()
	s.setConcurrency(c.Concurrency)
	if err := s.setStreams(c.Streams, c.BufferBytes); err != nil {
		s.fail(err)
	}
	s.log.Info("Applied a new configuration", "stripe", s.st.Index, "generation", c.Generation, "streams", c.Streams, "bufferBytes", c.BufferBytes, "concurrency", c.Concurrency)
}

// ---- control connection ----

func (s *ssession) readControl() {
	rd := s.ctrlReader
	for {
		h, meta, err := rd.Next()
		if err != nil {
			switch {
			case s.ctx.Err() != nil:
			case wire.IsIntegrity(err):
				metrics.IntegrityFailures.Inc()
				s.fail(&IntegrityError{Err: fmt.Errorf("control connection from the receiver: %w", err)})
			default:
				s.fail(fmt.Errorf("control connection: %w", err))
			}
			return
		}
		if h.Type != wire.TypeStats {
			s.progressed()
		}
		switch h.Type {
		case wire.TypeChunkOpened:
			var m wire.ChunkOpened
			if wire.DecodeJSON(meta, &m) != nil {
				s.fail(errors.New("bad ChunkOpened"))
				return
			}
			s.mu.Lock()
			fl := s.chunks[m.ID]
			s.mu.Unlock()
			if fl != nil {
				fl.opened <- m
			}
		case wire.TypeResult:
			var m wire.Results
			if wire.DecodeJSON(meta, &m) != nil {
				s.fail(errors.New("bad Results"))
				return
			}
			s.results(m.Results)
		case wire.TypeStats:
			var m wire.PeerStats
			if wire.DecodeJSON(meta, &m) == nil {
				s.peer.Store(&m)
			}
		case wire.TypeFlushed:
			s.flushed <- struct{}{}
		case wire.TypeManifest:
			var m wire.Manifest
			if err := wire.DecodeJSON(meta, &m); err != nil {
				s.fail(&IntegrityError{Err: err})
				return
			}
			s.src.Manifest(m)
			if m.Last {
				select {
				case s.manifested <- struct{}{}:
				default:
				}
			}
		case wire.TypeError:
			var m wire.ErrorMsg
			wire.DecodeJSON(meta, &m)
			if m.Integrity {
				s.fail(&IntegrityError{Err: errors.New(m.Error)})
			} else {
				s.fail(errors.New("receiver: " + m.Error))
			}
			return
		}
	}
}

func (s *ssession) results(rs []wire.Result) {
	var done []wire.UnitResult
	var fatal error
	for _, r := range rs {
		s.mu.Lock()
		var fl *flight
		if r.Chunk != 0 {
			fl = s.chunks[r.Chunk]
			delete(s.chunks, r.Chunk)
		} else {
			fl = s.flights[r.Unit]
		}
		if fl == nil {
			s.mu.Unlock()
			continue
		}
		if r.Retry && !r.Fatal && fl.attempts < maxAttempts {
			s.mu.Unlock()
			s.again(fl.unit.ID, r.Error)
			continue
		}
		delete(s.flights, fl.unit.ID)
		s.mu.Unlock()
		<-s.inflight
		ur := wire.UnitResult{ID: fl.unit.ID, OK: r.OK, Error: r.Error, Fatal: r.Fatal, Bytes: r.Bytes}
		if r.OK && len(fl.digest) > 0 {
			ur.Digest = hex.EncodeToString(fl.digest)
		}
		if r.OK {
			s.unitsDone.Add(1)
			if fl.unit.Kind != wire.UnitChunk {
				metrics.FilesTotal.WithLabelValues("sender").Inc()
			}
		}
		if r.Fatal {
			fatal = &FatalError{Msg: r.Error}
		}
		done = append(done, ur)
	}
	if len(done) > 0 {
		s.src.Done(done)
	}
	if fatal != nil {
		s.fail(fatal)
	}
}

// ---- work ----

// work pulls units and runs them with cfg.Concurrency workers until the source says
// the job is finished.
func (s *ssession) work() error {
	units := make(chan wire.Unit, cap(s.inflight))
	var wg sync.WaitGroup
	// Worker i runs while i < the configured concurrency; a directive that raises it
	// starts more (setConcurrency), one that lowers it lets the extra ones finish the
	// unit in hand and stop.
	s.spawnWorker = func(idx int32) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.workers.Add(-1)
			for idx < s.concurrency.Load() {
				select {
				case u := <-s.retry:
					s.run(u, true)
				case u, ok := <-units:
					if !ok {
						return
					}
					s.run(u, false)
				case <-s.ctx.Done():
					return
				}
			}
		}()
	}
	s.setConcurrency(s.cfg.Concurrency)
	defer func() { close(units); wg.Wait() }()
	for {
		// Wait for room, then ask for as many units as there is room for.
		select {
		case s.inflight <- struct{}{}:
		case <-s.ctx.Done():
			return s.ctx.Err()
		}
		room := 1
		for room < cap(s.inflight) {
			select {
			case s.inflight <- struct{}{}:
				room++
				continue
			default:
			}
			break
		}
		g, err := s.src.Request(s.ctx, room)
		if err != nil {
			return err
		}
		for range room - len(g.Units) {
			<-s.inflight
		}
		if g.Manifest {
			if err := s.fetchManifest(); err != nil {
				return err
			}
			continue
		}
		for _, u := range g.Units {
			s.mu.Lock()
			s.flights[u.ID] = &flight{unit: u}
			s.mu.Unlock()
			units <- u
		}
		if g.Finished {
			// Everything is verified; make the renames durable and stop.
			if s.ctrlW.WriteFrame(wire.TypeFlush, nil, nil) == nil {
				select {
				case <-s.flushed:
				case <-s.ctx.Done():
				case <-time.After(time.Minute):
				}
			}
			return errFinished
		}
	}
}

// maxAttempts bounds how often a unit is sent again within a session after a failed
// check or a momentary error at the receiver.
const maxAttempts = 5

// again queues a unit in flight to be sent once more; false when it has had its
// attempts.
func (s *ssession) again(unit uint64, reason string) bool {
	s.mu.Lock()
	fl := s.flights[unit]
	if fl == nil || fl.attempts >= maxAttempts {
		s.mu.Unlock()
		return false
	}
	fl.attempts++
	attempt := fl.attempts
	s.mu.Unlock()
	metrics.Resent.Inc()
	s.log.Warn("Sending again", "path", fsname.Show(string(fl.unit.Source)), "reason", reason, "attempt", attempt)
	s.retry <- fl.unit
	return true
}

// fetchManifest asks the receiver for its manifest; readControl passes the parts on to
// the work source.
func (s *ssession) fetchManifest() error {
	if err := s.ctrlW.WriteJSON(wire.TypeManifestAsk, wire.ManifestQuery{Run: s.cfg.Run}); err != nil {
		return err
	}
	select {
	case <-s.manifested:
		return nil
	case <-s.ctx.Done():
		return s.ctx.Err()
	}
}

func (s *ssession) run(u wire.Unit, again bool) {
	var err error
	switch u.Kind {
	case wire.UnitFile:
		err = s.sendFile(u)
	case wire.UnitChunk:
		err = s.sendChunk(u)
	case wire.UnitFinalize:
		err = s.ctrlW.WriteJSON(wire.TypeFinalize, wire.Finalize{ID: u.ID, Path: u.Dest, FileSize: u.Size, Mode: u.Mode, MtimeNs: u.MtimeNs, Chunks: u.Chunks, ChunkSize: s.cfg.ChunkSize})
		if err != nil {
			s.fail(err)
			return
		}
	}
	if err != nil && s.ctx.Err() == nil {
		s.finish(u, wire.UnitResult{ID: u.ID, Error: fsname.Message(err), Fatal: isFatal(err), Source: isSourceError(err)})
	}
}

func (s *ssession) finish(u wire.Unit, r wire.UnitResult) {
	s.mu.Lock()
	_, ok := s.flights[u.ID]
	delete(s.flights, u.ID)
	s.mu.Unlock()
	if !ok {
		return
	}
	<-s.inflight
	s.src.Done([]wire.UnitResult{r})
}

// openSource opens a source file and checks that it is the version that was listed.
// Its errors are SourceErrors (the file's own failure) unless the host is short of
// something for a moment.
func (s *ssession) openSource(u wire.Unit) (*os.File, error) {
	src := string(u.Source)
	dirName, base := split(src)
	dir, err := s.dirs.get(dirName)
	if err != nil {
		return nil, sourceError(fsroot.Explain(src, fmt.Errorf("opening source %s: %w", fsname.Show(src), err)))
	}
	f, err := dir.Open(base)
	if err != nil {
		return nil, sourceError(fsroot.Explain(src, fmt.Errorf("opening source %s: %w", fsname.Show(src), err)))
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, sourceError(err)
	}
	if fi.Size() != u.Size || fi.ModTime().UnixNano() != u.MtimeNs {
		f.Close()
		return nil, &SourceError{Err: fmt.Errorf("source file changed since it was listed: %s", fsname.Show(src))}
	}
	return f, nil
}

// stillListed checks, once a unit's data has been read, that the source is still the
// version that was listed: a file rewritten while it was read would otherwise be
// digested, verified and completed as a mixture of two versions. (A write updates the
// mtime before it copies its data, so data read from it shows here.)
func stillListed(f *os.File, u wire.Unit) error {
	fi, err := f.Stat()
	if err != nil {
		return sourceError(err)
	}
	if fi.Size() != u.Size || fi.ModTime().UnixNano() != u.MtimeNs {
		return &SourceError{Err: fmt.Errorf("source file changed while it was read: %s", fsname.Show(string(u.Source)))}
	}
	return nil
}

func (s *ssession) digest() hash.Hash {
	h, _ := NewDigest(s.cfg.Checksum)
	return h
}

func (s *ssession) sendFile(u wire.Unit) error {
	if u.Size > s.cfg.BlockSize {
		return fmt.Errorf("file %s of %d bytes sent as a small file", fsname.Show(string(u.Source)), u.Size)
	}
	f, err := s.openSource(u)
	if err != nil {
		return err
	}
	defer f.Close()
	bp := s.getBuf()
	if bp == nil {
		return s.ctx.Err()
	}
	data := (*bp)[:u.Size]
	if _, err := io.ReadFull(f, data); err != nil {
		s.bufs <- bp
		return sourceError(fmt.Errorf("reading source %s: %w", fsname.Show(string(u.Source)), err))
	}
	if err := stillListed(f, u); err != nil {
		s.bufs <- bp
		return err
	}
	meta := wire.FileMeta{Unit: u.ID, Size: uint64(u.Size), Mode: u.Mode, MtimeNs: u.MtimeNs, Path: string(u.Dest)}
	flags := s.dataFlags()
	if needsCRC(flags) {
		meta.CRC = wire.CRC32C(data)
	}
	if s.cfg.Verify {
		// (Without verification the receiver needs no digest: for IfDifferent it
		// compares an existing file with the bytes that arrived.)
		h := s.digest()
		h.Write(data)
		meta.Digest = h.Sum(nil)
		meta.Flags |= wire.FileVerify
		s.setDigest(u.ID, meta.Digest)
	}
	fr := framePool.Get().(*outFrame)
	fr.typ, fr.flags, fr.data, fr.buf = wire.TypeFile, flags, data, bp
	fr.meta, err = meta.Append(fr.metaArr[:0])
	if err != nil {
		s.release(fr)
		return err
	}
	s.enqueue(fr)
	return nil
}

func (s *ssession) sendChunk(u wire.Unit) error {
	bs := s.cfg.BlockSize
	s.mu.Lock()
	s.nextChunk++
	id := s.nextChunk
	fl := s.flights[u.ID]
	if fl == nil {
		s.mu.Unlock()
		return nil
	}
	fl.chunk, fl.opened = id, make(chan wire.ChunkOpened, 1)
	s.chunks[id] = fl
	s.mu.Unlock()
	err := s.ctrlW.WriteJSON(wire.TypeChunkOpen, wire.ChunkOpen{ID: id, Path: u.Dest, FileSize: u.Size, Mode: u.Mode, MtimeNs: u.MtimeNs,
		Index: u.Index, Chunks: u.Chunks, Offset: u.Offset, Length: u.Length, ChunkSize: s.cfg.ChunkSize, BlockSize: bs})
	if err != nil {
		s.fail(err)
		return nil
	}
	var op wire.ChunkOpened
	select {
	case op = <-fl.opened:
	case <-s.ctx.Done():
		return nil
	}
	if op.Error != "" || op.Verified {
		s.mu.Lock()
		delete(s.chunks, id)
		s.mu.Unlock()
		if op.Retry && !op.Fatal && s.again(u.ID, op.Error) {
			return nil
		}
		s.finish(u, wire.UnitResult{ID: u.ID, OK: op.Verified && op.Error == "", Error: op.Error, Fatal: op.Fatal})
		return nil
	}
	have := make(map[int64]bool)
	for _, r := range op.Have {
		for i := r[0]; i < r[1]; i++ {
			have[i] = true
		}
	}
	f, err := s.openSource(u)
	if err != nil {
		s.mu.Lock()
		delete(s.chunks, id)
		s.mu.Unlock()
		return err
	}
	defer f.Close()
	var h *chunkHasher
	if s.cfg.Verify {
		h = newChunkHasher(s.cfg.Checksum, s.cfg.VerifyMode)
	}
	// Parallelism of the file's size class bounds how many of its blocks are queued or
	// on the wire at once, hence over how many streams it is spread.
	par := s.parallelism(u)
	slots := make(chan struct{}, par)
	nblocks := (u.Length + bs - 1) / bs
	// Nothing reads the data in user space (no check in flight, no digest to take):
	// the blocks go from the page cache to the socket, and the file stays open until
	// the last of them is on the wire.
	zeroCopy := s.dataFlags()&wire.FlagDataUnchecked != 0 && h == nil
	if zeroCopy {
		defer func() {
			for range cap(slots) {
				select {
				case slots <- struct{}{}:
				case <-s.ctx.Done():
					return
				}
			}
		}()
	}
	for i := int64(0); i < nblocks; i++ {
		off := u.Offset + i*bs
		n := min(bs, u.Offset+u.Length-off)
		if zeroCopy {
			if have[i] {
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-s.ctx.Done():
				return nil
			}
			fr := framePool.Get().(*outFrame)
			fr.typ, fr.flags, fr.file, fr.fileOff, fr.fileLen = wire.TypeBlock, s.dataFlags(), f, off, int(n)
			fr.meta = wire.BlockMeta{Chunk: id, Offset: uint64(off)}.Put(fr.metaArr[:])
			fr.slots = slots
			if !s.enqueue(fr) {
				return nil
			}
			continue
		}
		bp := s.getBuf()
		if bp == nil {
			return nil
		}
		data := (*bp)[:n]
		if got, err := f.ReadAt(data, off); got < len(data) {
			s.bufs <- bp
			s.mu.Lock()
			delete(s.chunks, id)
			s.mu.Unlock()
			if err == nil || errors.Is(err, io.EOF) {
				err = fmt.Errorf("the file is shorter than listed (%w)", io.ErrUnexpectedEOF)
			}
			return sourceError(fmt.Errorf("reading source %s at %d: %w", fsname.Show(string(u.Source)), off, err))
		}
		if h != nil {
			h.Block(data)
		}
		if have[i] {
			s.bufs <- bp
			continue
		}
		select {
		case slots <- struct{}{}:
		case <-s.ctx.Done():
			s.bufs <- bp
			return nil
		}
		fr := framePool.Get().(*outFrame)
		fr.typ, fr.flags, fr.data, fr.buf = wire.TypeBlock, s.dataFlags(), data, bp
		bm := wire.BlockMeta{Chunk: id, Offset: uint64(off)}
		if needsCRC(fr.flags) {
			bm.CRC = wire.CRC32C(data)
		}
		fr.meta = bm.Put(fr.metaArr[:])
		fr.slots = slots
		if !s.enqueue(fr) {
			return nil
		}
	}
	if err := stillListed(f, u); err != nil {
		s.mu.Lock()
		delete(s.chunks, id)
		s.mu.Unlock()
		return err
	}
	end := wire.ChunkEnd{ID: id, Blocks: nblocks}
	if h != nil {
		end.Digest = h.Sum()
		s.setDigest(u.ID, end.Digest)
	}
	if err := s.ctrlW.WriteJSON(wire.TypeChunkEnd, end); err != nil {
		s.fail(err)
	}
	return nil
}

// dataFlags are the flags of the session's data frames: in-flight mode Checksum puts
// their data outside the tag, under a CRC32C; HeadersOnly leaves it unchecked.
func (s *ssession) dataFlags() wire.Flags {
	switch s.cfg.InFlight {
	case wire.InFlightChecksum:
		return wire.FlagDataOutsideTag
	case wire.InFlightHeadersOnly:
		return wire.FlagDataOutsideTag | wire.FlagDataUnchecked
	}
	return 0
}

// encrypted says the session encrypts every frame (in-flight mode Encrypted).
func (s *ssession) encrypted() bool { return s.cfg.InFlight == wire.InFlightEncrypted }

// needsCRC says data frames carry a CRC32C of their data.
func needsCRC(flags wire.Flags) bool {
	return flags&wire.FlagDataOutsideTag != 0 && flags&wire.FlagDataUnchecked == 0
}

// setDigest records the source digest of what a unit sent.
func (s *ssession) setDigest(unit uint64, d []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if fl := s.flights[unit]; fl != nil {
		fl.digest = d
	}
}

func (s *ssession) parallelism(u wire.Unit) int {
	streams := int(max(s.cfg.Streams, 1))
	for _, c := range s.cfg.SizeClasses {
		if c.Class == u.Class && c.Parallelism > 0 {
			return min(int(c.Parallelism), streams) * 2
		}
	}
	return streams * 2
}

// ---- measurements ----

func (s *ssession) sample() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := time.Now()
	lastBytes := s.st.bytesSent.Load()
	lastCPU := metrics.CPUSeconds()
	var lastPeer *wire.PeerStats
	label := metrics.Label(s.st.Index)
	for {
		select {
		case <-s.ctx.Done():
			s.src.Stats(wire.StripeStats{Stripe: s.st.Index})
			return
		case now := <-t.C:
			dt := now.Sub(last).Seconds()
			last = now
			s.mu.Lock()
			streams := append([]*stream(nil), s.streams...)
			s.mu.Unlock()
			stats := wire.StripeStats{Stripe: s.st.Index, Connected: true, Streams: int32(len(streams))}
			var rttSum time.Duration
			var dRetrans, dSegs uint32
			for _, st := range streams {
				b := st.bytes.Load()
				bps := int64(float64(b-st.lastBytes) * 8 / dt)
				st.lastBytes = b
				stats.StreamBitsPerSecond = append(stats.StreamBitsPerSecond, bps)
				metrics.StreamBitsPerSecond.WithLabelValues(label, metrics.Label(st.idx)).Set(float64(bps))
				ti := metrics.ReadTCPInfo(st.conn)
				rttSum += ti.RTT
				if ti.TotalRetrans >= st.lastRetrans {
					dRetrans += ti.TotalRetrans - st.lastRetrans
				}
				if ti.SegsOut >= st.lastSegs {
					dSegs += ti.SegsOut - st.lastSegs
				}
				st.lastRetrans, st.lastSegs = ti.TotalRetrans, ti.SegsOut
			}
			if len(streams) > 0 {
				stats.RTTMicros = (rttSum / time.Duration(len(streams))).Microseconds()
			}
			if dSegs > 0 {
				stats.LossPPM = int64(dRetrans) * 1_000_000 / int64(dSegs)
			}
			b := s.st.bytesSent.Load()
			stats.BytesSent = b
			stats.BitsPerSecond = int64(float64(b-lastBytes) * 8 / dt)
			lastBytes = b
			cpu := metrics.CPUSeconds()
			stats.SourceCPUSeconds = cpu
			stats.SourceMillicores = int64((cpu - lastCPU) / dt * 1000)
			lastCPU = cpu
			if p := s.peer.Load(); p != nil {
				stats.DestinationCPUSeconds = p.CPUSeconds
				if lastPeer != nil && p.UnixNano > lastPeer.UnixNano {
					stats.DestinationMillicores = int64((p.CPUSeconds - lastPeer.CPUSeconds) / (float64(p.UnixNano-lastPeer.UnixNano) / 1e9) * 1000)
				}
				lastPeer = p
			}
			metrics.StripeBitsPerSecond.WithLabelValues(label).Set(float64(stats.BitsPerSecond))
			metrics.RTTSeconds.WithLabelValues(label).Set(float64(stats.RTTMicros) / 1e6)
			metrics.LossRatio.WithLabelValues(label).Set(float64(stats.LossPPM) / 1e6)
			metrics.RetransmitsTotal.WithLabelValues(label).Add(float64(dRetrans))
			s.src.Stats(stats)
		}
	}
}

// probe runs one memory-to-memory sample for the coordinator. A request that asks to
// settle ends as soon as its rate is precise, with its Seconds as the ceiling (the
// settle limits come from the streams' RTT: at most 40 of them).
func (s *ssession) probe(p wire.ProbeRequest) wire.ProbeResult {
	res, err := Probe(s.ctx, s.st.Receiver, s.st.Secret, probeOptions(p, s.cfg.BlockSize))
	if err != nil {
		return wire.ProbeResult{Error: err.Error(), Sample: contract.Sample{Streams: p.Streams, BufferBytes: p.BufferBytes}}
	}
	return wire.ProbeResult{Sample: res.Sample, Seconds: res.Seconds, Settled: res.Settled}
}

// probeOptions are the options of the sample a coordinator's request asks for.
func probeOptions(p wire.ProbeRequest, blockSize int64) ProbeOptions {
	return ProbeOptions{Streams: p.Streams, BufferBytes: p.BufferBytes, Duration: time.Duration(p.Seconds) * time.Second,
		BlockSize: blockSize, Settle: p.Settle}
}
