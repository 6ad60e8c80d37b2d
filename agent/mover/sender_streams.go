package mover

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// The sender's data streams: dialling and retiring them, the queue of frames they
// write, the block buffers and the rate limit, and applying a new job configuration.

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
	// reads, when set, takes the error of a file whose data the stream could not read
	// (the frame is then not sent, and the chunk fails as its source's error).
	reads *readFailure
}

// dataLen is the length of the frame's data.
func (f *outFrame) dataLen() int {
	if f.file != nil {
		return f.fileLen
	}
	return len(f.data)
}

var framePool = sync.Pool{New: func() any { return new(outFrame) }}

type stream struct {
	idx  int32
	conn *wire.Conn
	w    *wire.Writer
	quit chan struct{}
	// for rates: delivered bytes, retransmissions and segments at the last report
	lastDelivered int64
	lastRetrans   uint32
	lastSegs      uint32
	acked         atomic.Int64 // delivered bytes (metrics.TCPInfo.DeliveredBytes), the most read
	// busy and windowLimited are the connection's busy time and the part of it a
	// window limited (metrics.TCPInfo), in nanoseconds, the most read
	busy, windowLimited atomic.Int64
}

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
			c, err := dialUnitStream(s.ctx, s.st.Receiver, s.st.Secret, buffer)
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
		s.streamsRunning.Add(1)
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

// deliverLimit bounds how long a drained session waits for the receiver to read what
// its streams wrote (deliver).
const deliverLimit = 10 * time.Second

// deliver ends a drained session's streams so that what they wrote reaches the
// receiver before the session ends: each stream ends after the frame in hand, closes
// its sending side and waits until the receiver, having read every frame before the
// close, closes its own (or until limit). A data stream's frames are in its socket
// buffer and on the path long after the writes returned — 53 streams with 4 MiB
// buffers hold 200 MiB — and the receiver ends a session's streams with its control
// connection: a drained stripe that closed at once had the receiver drop what was on
// its way, and the stripe that took its chunks over sent it again (368 MB of a 4 GiB
// file in the nineteenth session's four-flows run of issue 11's suite). What arrives
// is written, so the chunks go back to the work source with the receiver holding it
// (ChunkOpened.Have).
func (s *ssession) deliver(limit time.Duration) {
	// written and not yet acknowledged: what the streams still have to bring (the
	// acknowledged count includes frame headers, so this reads a little low)
	onItsWay := max(s.st.bytesSent.Load()-s.st.Transport().DeliveredBytes, 0)
	by := time.Now().Add(limit)
	s.deliverBy.Store(by.UnixNano())
	s.mu.Lock()
	for st := range s.live {
		// a write the path holds must not outlast the limit (streams a
		// reconfiguration retired included)
		st.conn.NetConn().SetWriteDeadline(by)
	}
	for _, st := range s.streams {
		close(st.quit)
	}
	s.streams = nil
	s.mu.Unlock()
	start := time.Now()
	s.streamsRunning.Wait()
	if late := s.undelivered.Load(); late > 0 {
		s.log.Warn("The receiver did not read what a drained stripe's streams wrote in time; the stripe taking its chunks over sends it", "stripe", s.st.Index, "streams", late, "limit", limit)
	} else {
		s.log.Info("A drained stripe's streams delivered what they wrote", "stripe", s.st.Index, "bytes", onItsWay, "seconds", time.Since(start).Seconds())
	}
}

// awaitDelivery closes the stream's sending side and waits, until by, for the
// receiver to close its side, which it does once it has read every frame; it says
// whether the receiver did.
func awaitDelivery(c *wire.Conn, by time.Time) bool {
	tc, ok := c.NetConn().(*net.TCPConn)
	if !ok || tc.CloseWrite() != nil {
		return false
	}
	tc.SetReadDeadline(by)
	_, err := io.Copy(io.Discard, tc)
	return err == nil
}

func (s *ssession) runStream(st *stream) {
	defer func() {
		if by := s.deliverBy.Load(); by != 0 && !awaitDelivery(st.conn, time.Unix(0, by)) {
			s.undelivered.Add(1)
		}
		s.retire(st)
		st.conn.Close()
		s.streamsRunning.Done()
	}()
	for {
		// A stream told to quit takes no more frames, even with some waiting (a
		// select picks at random among ready cases): what a drained session's queue
		// holds belongs to the chunks it handed over, which the stripe taking them
		// sends, and a quitting stream that sent it would only keep those chunks from
		// that stripe for longer.
		select {
		case <-st.quit:
			return
		default:
		}
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
		var unread *wire.SourceReadError
		if f.reads != nil && errors.As(err, &unread) {
			// Nothing of the frame went out: the stream carries on, and the chunk's
			// sender reports the source's error once its blocks are done.
			f.reads.set(err)
			s.release(f)
			continue
		}
		s.release(f)
		if err != nil {
			s.fail(fmt.Errorf("stream %d: %w", st.idx, err))
			return
		}
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
	if add <= 0 {
		return
	}
	// One allocation for all of them: the heap grows once, by what the pool needs,
	// instead of a buffer at a time, each growth past the collector's target a cycle
	// that frees nothing (the buffers live as long as the session).
	bs := int(s.cfg.BlockSize)
	slab := make([]byte, add*bs)
	for i := range add {
		b := slab[i*bs : (i+1)*bs : (i+1)*bs]
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
