package mover

import (
	"context"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"sync"
	"time"

	"github.com/dtnflow/dtnflow/agent/fsname"
	"github.com/dtnflow/dtnflow/agent/fsroot"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// The sender's work: pulling units from the work source, reading and sending files
// and chunks, and giving each unit's result back.

// flight is a unit on its way.
type flight struct {
	unit     wire.Unit
	attempts int
	chunk    uint64
	opened   chan wire.ChunkOpened
	// digest is the source digest of what was sent, when verifying.
	digest []byte
	// started says a worker began sending it: a draining stripe finishes it, unless
	// handedOver: a chunk the stripe stopped sending at a block boundary when it
	// drained, given back with the session's end for another stripe to continue.
	started    bool
	handedOver bool
}

// refillAt is how many units may still wait unstarted when the sender asks for more:
// half of the allowance (one per worker), so that each request brings at least half of
// it. With 339c991's allowance alone the sender asked again each time a worker took a
// unit, often for one: for a stripe in a pod each request is a round trip to the
// coordinator. On 20 000 × 64 KiB files, four stripes of eight files each against a
// coordinator of its own (emulated 1 Gbit/s, 50 ms), the coordinator read 21 000
// times against 12 800 before 339c991 and used 1.49–1.51 CPU seconds against
// 1.33–1.39; with the half it reads 15 600 times and uses 1.37–1.45
// (docs/benchmarks.md, thirty-eighth session). The half still waiting covers the round
// trip: a worker spends milliseconds on a unit, the coordinator answers in a fraction
// of one.
func refillAt(allowance int) int { return allowance / 2 }

// requestBounds is how many units a sender with waiting units unstarted asks for once it
// may ask (waiting ≤ refillAt(allowance)): at least least, so that a request brings at
// least what the allowance lacks beyond refillAt (or all it lacks, if less), and at
// most want, what it lacks; ok is false when it lacks nothing, as when the allowance
// was lowered under units already waiting.
func requestBounds(allowance, waiting int) (least, want int, ok bool) {
	want = allowance - waiting
	if want < 1 {
		return 0, 0, false
	}
	return min(want, allowance-refillAt(allowance)), want, true
}

// work pulls units and runs them with cfg.Concurrency workers until the source says
// the job is finished.
func (s *ssession) work() error {
	units := make(chan wire.Unit, cap(s.inflight))
	// taken hears a worker take a unit from units (see allowance below).
	taken := make(chan struct{}, 1)
	// stopWorkers ends the workers as work returns (a draining worker no longer
	// watches units, whose close would otherwise end it).
	stopWorkers := make(chan struct{})
	var wg sync.WaitGroup
	// Worker i runs while i < the configured concurrency; a directive that raises it
	// starts more (setConcurrency), one that lowers it lets the extra ones finish the
	// unit in hand and stop. Once the stripe drains, workers start no new unit; they
	// still send again what they had started.
	spawn := func(idx int32) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer s.workers.Add(-1)
			drainSignal, draining := s.st.drained(), false
			for idx < s.concurrency.Load() {
				// A select picks at random among ready cases: a drain already signalled
				// must win over a unit waiting in the channel, or a draining worker
				// starts work it was told to give back.
				if !draining {
					select {
					case <-drainSignal:
						draining, drainSignal = true, nil
					default:
					}
				}
				next := units
				if draining {
					next = nil
				}
				select {
				case u := <-s.retry:
					s.run(u, true)
				case u, ok := <-next:
					if !ok {
						return
					}
					select {
					case taken <- struct{}{}:
					default:
					}
					s.run(u, false)
				case <-drainSignal:
					draining, drainSignal = true, nil
				case <-stopWorkers:
					return
				case <-s.ctx.Done():
					return
				}
			}
		}()
	}
	// under workMu: a configuration applied as the session starts calls
	// setConcurrency, which spawns through it
	s.workMu.Lock()
	s.spawnWorker = spawn
	s.workMu.Unlock()
	drain := s.st.drained()
	// requests give up when the stripe drains: a source with nothing to hand out keeps
	// a request waiting
	requests, stopRequests := context.WithCancel(s.ctx)
	defer stopRequests()
	go func() {
		select {
		case <-drain:
			stopRequests()
		case <-requests.Done():
		}
	}()
	// the configuration may change under the session from its first moment
	// (reconfigure writes it under s.mu)
	s.mu.Lock()
	concurrency := s.cfg.Concurrency
	s.mu.Unlock()
	s.setConcurrency(concurrency)
	defer func() {
		// A configuration may still arrive after the work loop ends (the session
		// runs on until its streams close): it must start no worker, whose wg.Add
		// would come after the Wait below (the race detector caught one, from
		// TestOnConfigIsHeardBeforeTheStripeApplies in CI) and which could run a
		// unit from retry after the session's work was over.
		s.workMu.Lock()
		s.spawnWorker = nil
		s.workMu.Unlock()
		close(units)
		close(stopWorkers)
		wg.Wait()
	}()
	// allowance is how many units may wait unstarted: one per worker
	allowance := func() int { return int(max(s.concurrency.Load(), 1)) }
	// release gives back room taken for units that did not come
	release := s.returnTokens
	for {
		select {
		case <-drain:
			return s.drainStarted()
		default:
		}
		// Ask only for units the workers start soon: at most one waiting per worker.
		// A unit this stripe holds unstarted is one no other stripe can take, and the
		// bytes of the units it started wait in its streams' sockets no longer than
		// the low-water mark lets them (notSentLowWater). Before both, a stripe took
		// every unit its 256 tokens allowed, the sockets took their bytes (8 MiB a
		// stream at a 4 MiB buffer), and when the job's queue ran out each stripe
		// still held up to 256 of 20 000 small files, to be sent at its own pace:
		// 0.6–1.7 s for the last hundred files while the other stripes idled, in a
		// third of the runs on issue 11's path (docs/benchmarks.md, thirty-seventh
		// session).
		//
		// And ask again only once half of them have been taken: each request is a round
		// trip to the coordinator for a stripe in a pod, and asking for every unit as its
		// worker took the one before made a request per small file (see refillAt).
		for len(units) > refillAt(allowance()) {
			select {
			case <-taken:
			case <-drain:
				return s.drainStarted()
			case <-s.ctx.Done():
				return s.ctx.Err()
			}
		}
		// Wait for room (a token per unit on its way) for at least what the allowance
		// lacks beyond refillAt, then take what more there is room for right away, and
		// ask for that many units. When the units on their way fill the tokens (small
		// files are confirmed only once durable), tokens come back one confirmation at a
		// time; asking on each would again be a request per file.
		least, want, ok := requestBounds(allowance(), len(units))
		if !ok {
			// a directive lowered the concurrency since the wait above: wait again
			// rather than ask for nothing (a source keeps such a request waiting)
			continue
		}
		// a directive may raise the concurrency past the tokens the session was made with
		least, want = min(least, cap(s.inflight)), min(want, cap(s.inflight))
		room := 0
		for room < least {
			select {
			case s.inflight <- struct{}{}:
				room++
			case <-drain:
				release(room)
				return s.drainStarted()
			case <-s.ctx.Done():
				release(room)
				return s.ctx.Err()
			}
		}
		for room < want {
			select {
			case s.inflight <- struct{}{}:
				room++
				continue
			default:
			}
			break
		}
		g, err := s.src.Request(requests, room)
		if err != nil {
			release(room)
			select {
			case <-drain:
				return s.drainStarted()
			default:
			}
			return err
		}
		// A token per unit granted, whatever the request asked for: a grant may answer
		// an earlier request of the stripe, one its last session abandoned as it ended
		// (the coordinator's connection outlives the sessions and grants name no
		// request), with more units than this request had room for. Counting tokens by
		// the request's room left fewer tokens than units in flight, and a later
		// release waited for good (the local cluster's chaos step, a receiver killed).
		var fresh []wire.Unit
		s.mu.Lock()
		for _, u := range g.Units {
			if s.flights[u.ID] != nil {
				continue // granted again while this session holds it
			}
			s.flights[u.ID] = &flight{unit: u}
			fresh = append(fresh, u)
		}
		s.mu.Unlock()
		release(room - len(fresh))
		for i, u := range fresh {
			if i >= room {
				select {
				case s.inflight <- struct{}{}:
				case <-s.ctx.Done():
					return s.ctx.Err() // the session's end gives its flights back
				}
			}
			units <- u
		}
		if g.Manifest {
			if err := s.fetchManifest(); err != nil {
				return err
			}
			continue
		}
		if g.Finished {
			// Everything is verified; make the renames durable and stop.
			if s.ctrlW.WriteFrame(wire.TypeFlush, nil, nil) == nil {
				select {
				case <-s.flushed:
				case <-s.ctx.Done():
					s.log.Warn("The session ended before the receiver said its renames were durable", "stripe", s.st.Index)
				case <-time.After(time.Minute):
					s.log.Warn("The receiver did not say its renames were durable within a minute", "stripe", s.st.Index)
				}
			}
			return errFinished
		}
	}
}

// drainStarted waits until every unit the session started is done or handed over and
// ends it with errDrained, once the blocks it queued are on their way (or
// handOverFlushLimit passed); the units it holds unstarted or handed over go back to
// the source as the session ends.
func (s *ssession) drainStarted() error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	var idleSince time.Time
	for {
		s.mu.Lock()
		busy := false
		for _, fl := range s.flights {
			if fl.started && !fl.handedOver {
				busy = true
				break
			}
		}
		s.mu.Unlock()
		if !busy {
			if idleSince.IsZero() {
				idleSince = time.Now()
			}
			if len(s.queue) == 0 || time.Since(idleSince) >= handOverFlushLimit {
				return errDrained
			}
		}
		select {
		case <-s.ctx.Done():
			return s.ctx.Err()
		case <-t.C:
		}
	}
}

// handOverFlushLimit bounds how long a drained session waits for the blocks it queued
// to be written before it ends; a block left unsent is sent by the stripe that takes
// its chunk over.
const handOverFlushLimit = time.Second

// handOver stops sending a chunk when the stripe drains: the chunk goes back to the work
// source with the session's end, and the stripe that takes it sends only the blocks its
// receiver does not have (ChunkOpened.Have: what the receiver journals every
// journalEvery and as a session ends). A drained stripe that finished its chunks
// instead held them for as long as it took at its own pace, up to 30 s: the probe's
// helper stripe, stopped by a plan with four 256 MiB chunks begun at the sample's
// concurrency, sent them for 21 s after the plan, and in one run of issue 11's
// four-flows row the probe stripe beside it wrote nothing for 6 s of that
// (docs/benchmarks.md, seventeenth session).
func (s *ssession) handOver(unit, chunk uint64) bool {
	select {
	case <-s.st.drained():
	default:
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if fl := s.flights[unit]; fl != nil {
		fl.handedOver = true
	}
	delete(s.chunks, chunk)
	return true
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
	if err := s.ctrlW.WriteJSON(wire.TypeManifestAsk, wire.ManifestQuery{Run: s.cfg.Run, Packed: true}); err != nil {
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
	s.mu.Lock()
	if fl := s.flights[u.ID]; fl != nil {
		fl.started = true
	}
	s.mu.Unlock()
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
	s.returnTokens(1)
	s.src.Done([]wire.UnitResult{r})
}

// returnTokens gives n tokens of s.inflight back. A unit holds its token from its grant
// to its result, and room taken for a request is held until the grant, so the tokens
// are there to take; one that is not means something was counted twice. That is
// logged, not waited for: waiting stopped the session for good — on the local
// cluster's chaos step a stripe whose receiver had been killed waited here with the
// final check's request for its receiver's manifest in hand, and the job stayed at
// 100 % until the test gave up (2026-12-04: a grant with more units than its request's
// room, counted by the room; work now takes a token per unit granted).
func (s *ssession) returnTokens(n int) {
	for i := range n {
		select {
		case <-s.inflight:
		default:
			s.log.Warn("A unit's token was already given back: something was counted twice", "stripe", s.st.Index, "missing", n-i)
			return
		}
	}
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
	f, fi, err := dir.openRegular(base)
	if err != nil {
		return nil, sourceError(fsroot.Explain(src, fmt.Errorf("opening source %s: %w", fsname.Show(src), err)))
	}
	if fi.Size() != u.Size || fsroot.MtimeNs(fi) != u.MtimeNs {
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
	if fi.Size() != u.Size || fsroot.MtimeNs(fi) != u.MtimeNs {
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
	// Nothing reads the data here either when it goes under the frame's tag and no
	// digest is taken: each stream reads its block itself and tags and writes it from
	// its own buffer, one goroutine and one core's cache for the three passes, where a
	// block read here would be handed to a stream and read again from another core's.
	// A file of one block stays here: its worker would wait for the frame to be written
	// before the next file, where small files need their workers ahead of the streams.
	// Encrypted frames too: there the stream's encryption is the long pass, the read
	// overlapped with it on the other core, and reading in the stream showed no gain
	// in four runs (docs/benchmarks.md, 2026-12-05).
	streamReads := s.dataFlags() == 0 && !s.encrypted() && h == nil && nblocks > 1
	var reads *readFailure
	if streamReads {
		reads = new(readFailure)
	}
	drained := false
	// drain waits until every block of the chunk given to a stream is on the wire (or
	// its read failed): the file stays open until then.
	drain := func() bool {
		if drained {
			return true
		}
		for range cap(slots) {
			select {
			case slots <- struct{}{}:
			case <-s.ctx.Done():
				return false
			}
		}
		drained = true
		return true
	}
	if zeroCopy || streamReads {
		defer drain()
	}
	for i := int64(0); i < nblocks; i++ {
		if s.handOver(u.ID, id) {
			return nil
		}
		off := u.Offset + i*bs
		n := min(bs, u.Offset+u.Length-off)
		if zeroCopy || streamReads {
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
			fr.slots, fr.reads = slots, reads
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
	if streamReads {
		// The streams read the blocks: the file's version is judged once they have.
		if !drain() {
			return nil
		}
		if err := reads.get(); err != nil {
			s.mu.Lock()
			delete(s.chunks, id)
			s.mu.Unlock()
			return sourceError(fmt.Errorf("reading source %s %w", fsname.Show(string(u.Source)), err))
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

// readFailure is the first error of a chunk's blocks read by its streams
// (streamReads in sendChunk).
type readFailure struct {
	mu  sync.Mutex
	err error
}

func (r *readFailure) set(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

func (r *readFailure) get() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
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
	s.mu.Lock()
	defer s.mu.Unlock()
	streams := int(max(s.cfg.Streams, 1))
	for _, c := range s.cfg.SizeClasses {
		if c.Class == u.Class && c.Parallelism > 0 {
			return min(int(c.Parallelism), streams) * 2
		}
	}
	return streams * 2
}
