package mover

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/dtnflow/dtnflow/agent/auth"
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
	// OnConfig, when set, hears every job configuration the stripe is given, before the
	// stripe applies it (the cluster's probe stripe starts and stops its helper stripes
	// from it).
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
	// retiredBusy and retiredWindowLimited are the same for the streams' busy time and
	// the part of it a window limited (nanoseconds).
	retiredBusy, retiredWindowLimited atomic.Int64
	peerLimits                        atomic.Pointer[wire.SocketLimits]

	// drain is closed by Drain (made on first use: a Stripe is built as a literal).
	drainMake, drainClose sync.Once
	drain                 chan struct{}

	earlyState
}

// drained is closed once Drain is called.
func (st *Stripe) drained() <-chan struct{} {
	st.drainMake.Do(func() { st.drain = make(chan struct{}) })
	return st.drain
}

// Drain ends the stripe without holding work back or wasting what it has on the wire:
// it asks for no more work and starts none of the units it holds; the chunks it is
// sending it stops at the next block and hands over (another stripe continues each
// from the blocks the receiver has); the files it has started it finishes. Then Run
// returns nil, the units it held unstarted or handed over going back to the work source
// for other stripes. A stripe that is only cancelled gives back everything at once: the
// blocks queued in it and not yet journaled by the receiver are sent again.
func (st *Stripe) Drain() {
	st.drained()
	st.drainClose.Do(func() { close(st.drain) })
}

// HelperStripeBase numbers the helper stripes a cluster's probe stripe runs for a
// sample of several stripes (wire.JobConfig.SampleStripes): far above any stripe a
// plan has, so that the coordinator tells them apart.
const HelperStripeBase int32 = 1 << 20

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

// errDrained ends a session that Drain emptied of the units it had started.
var errDrained = errors.New("drained")

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
	retry := PeerRetry{For: st.RetryFor}
	refusals, bad := 0, 0
	for {
		end, err := st.session(ctx, src, &cfg)
		if err == nil || errors.Is(err, errFinished) || errors.Is(err, errDrained) {
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
			retry.Connected()
		}
		giveUp, warn := retry.Failed()
		if giveUp {
			return fmt.Errorf("stripe %d: receiver %s: %w", st.Index, st.Receiver, err)
		}
		if warn {
			st.Log.Warn("Stripe lost its receiver; retrying", "stripe", st.Index, "receiver", st.Receiver, "err", err.Error())
		}
		if !retry.Wait(ctx) {
			return ctx.Err()
		}
	}
}

// PeerRetry paces the attempts to reach a job's peer (a receiver, a coordinator) after
// failures. A peer never reached yet is most likely starting (a plan's pods start
// together: each pause is time the job's first byte may wait — the cluster's sender met
// a coordinator that began listening 20 ms after a refused attempt and waited 180 ms
// more — while a refused connection costs next to nothing): it is tried every 50 ms and
// warned of once a second. One that went away may take longer to come back: 100 ms
// doubling to 5 s, every failure warned of.
type PeerRetry struct {
	// For is how long the peer may keep failing before the caller gives up.
	For time.Duration

	backoff                  time.Duration
	everConnected            bool
	failingSince, lastWarned time.Time
}

// Connected says an attempt reached the peer: a failure after it starts a new round.
func (r *PeerRetry) Connected() {
	r.failingSince, r.backoff, r.everConnected = time.Time{}, 100*time.Millisecond, true
}

// Failed records a failed attempt: giveUp when the peer has been failing for longer
// than For, warn when the failure is worth a warning.
func (r *PeerRetry) Failed() (giveUp, warn bool) {
	now := time.Now()
	if r.failingSince.IsZero() {
		r.failingSince = now
	}
	if now.Sub(r.failingSince) > r.For {
		return true, false
	}
	if r.everConnected || now.Sub(r.lastWarned) >= time.Second {
		r.lastWarned = now
		return false, true
	}
	return false, false
}

// Wait pauses before the next attempt; false when ctx ended first.
func (r *PeerRetry) Wait(ctx context.Context) bool {
	if r.backoff == 0 {
		r.backoff = 50 * time.Millisecond
	}
	t := time.NewTimer(r.backoff)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
	}
	ceiling := 50 * time.Millisecond
	if r.everConnected {
		ceiling = 5 * time.Second
	}
	r.backoff = min(r.backoff*2, ceiling)
	return true
}

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

	// streamsRunning counts the stream goroutines (runStream) not yet ended;
	// deliverBy, once set (unix ns), has each of them, as it ends, wait until the
	// receiver has read what it wrote, up to that time (deliver).
	streamsRunning sync.WaitGroup
	deliverBy      atomic.Int64
	undelivered    atomic.Int32 // streams whose receiver did not close by deliverBy

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
			if st.OnConfig != nil {
				// before this stripe applies it: a probe sample's helper stripes then
				// join and dial while this stripe dials the streams the configuration
				// adds (each a handshake across the path), not after — on the local
				// cluster the first stripes sample's helper started 0.19 s late
				st.OnConfig(c)
			}
			if c.Generation != cfg.Generation || c.MaxBitsPerSecond != cfg.MaxBitsPerSecond {
				s.reconfigure(c)
			}
			*cfg = c
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
	if errors.Is(result, errDrained) {
		s.deliver(min(deliverLimit, st.stallTimeout()))
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

func agentName() string {
	h, _ := os.Hostname()
	return h + "/" + strconv.Itoa(os.Getpid())
}
