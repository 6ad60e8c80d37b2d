package mover

import (
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// The sender's control connection: the session's handshake with the receiver and
// what the receiver says on it (chunks opened, results, stats, manifests, errors).

func (s *ssession) connect() error {
	st := s.st
	c := st.takeEarly(s.ctx)
	if c == nil {
		var err error
		if c, err = Dial(s.ctx, st.Receiver, st.Secret, 0); err != nil {
			return err // a refusal (auth.ErrRefused) is counted by Run
		}
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
	// The receiver serves its control frames in order: the summary query goes out
	// behind the session, not a round trip after its answer (a session it refuses
	// is never asked).
	needSummary := s.src.NeedSummary()
	if needSummary {
		if err := s.ctrlW.WriteFrame(wire.TypeSummaryQuery, nil, nil); err != nil {
			return fail(err)
		}
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
			return fail(refused(m))
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
	if !needSummary {
		return nil
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
			if err := m.Unpack(); err != nil {
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
		if _, inFlight := s.flights[fl.unit.ID]; !inFlight {
			// a chunk's result for a unit already finished (its token given back
			// and its result reported): nothing to count again
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
		s.returnTokens(1)
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

// refused is the error of a session the receiver refused: an integrity failure and a
// refusal for now (ErrorMsg.Retry) are tried again, any other refusal stops the stripe.
func refused(m wire.ErrorMsg) error {
	switch {
	case m.Integrity:
		return &IntegrityError{Err: errors.New(m.Error)}
	case m.Retry:
		return errors.New("receiver refused the session for now: " + m.Error)
	}
	return &FatalError{Msg: "receiver refused the session: " + m.Error}
}
