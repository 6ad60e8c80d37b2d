package mover

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// TestPeerRetry: a peer never reached is tried every 50 ms and warned of once a second;
// once it was reached, failures back off by doubling and each is warned of; a peer
// failing for longer than For is given up.
func TestPeerRetry(t *testing.T) {
	ctx := context.Background()
	var r PeerRetry
	r.For = time.Hour
	if giveUp, warn := r.Failed(); giveUp || !warn {
		t.Fatalf("first failure: giveUp %v warn %v; want a warning", giveUp, warn)
	}
	for i := range 3 {
		if !r.Wait(ctx) || r.backoff != 50*time.Millisecond {
			t.Fatalf("starting peer, wait %d: backoff %v, want 50ms", i, r.backoff)
		}
		if _, warn := r.Failed(); warn {
			t.Fatalf("starting peer, failure %d within a second of the last warning was warned of again", i+2)
		}
	}

	r.Connected()
	if r.backoff != 100*time.Millisecond || !r.failingSince.IsZero() {
		t.Fatalf("after a connection: backoff %v, failing since %v", r.backoff, r.failingSince)
	}
	r.backoff = 3 * time.Millisecond // the doubling, without waiting seconds
	for _, want := range []time.Duration{6 * time.Millisecond, 12 * time.Millisecond} {
		if _, warn := r.Failed(); !warn {
			t.Error("a peer that went away: every failure is warned of")
		}
		if !r.Wait(ctx) || r.backoff != want {
			t.Fatalf("backoff %v, want %v", r.backoff, want)
		}
	}

	r.failingSince = time.Now().Add(-2 * time.Hour)
	if giveUp, _ := r.Failed(); !giveUp {
		t.Error("failing for longer than For: not given up")
	}
	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	if r.Wait(cancelled) {
		t.Error("Wait went on after its context ended")
	}
}

// TestResultsGiveBackEachTokenOnce: a unit's token goes back once, with its first
// result; a chunk's result for a unit already finished counts nothing, and a token
// found missing is logged, not waited for (waiting stopped a session for good on the
// local cluster's chaos step).
func TestResultsGiveBackEachTokenOnce(t *testing.T) {
	src := &scriptedSource{}
	s := &ssession{st: &Stripe{}, src: src, log: slog.New(slog.DiscardHandler), inflight: make(chan struct{}, 4),
		flights: map[uint64]*flight{}, chunks: map[uint64]*flight{}}
	fl := &flight{unit: wire.Unit{ID: 7, Kind: wire.UnitChunk}}
	s.inflight <- struct{}{} // the unit's token
	s.inflight <- struct{}{} // another unit's
	s.flights[7], s.chunks[1], s.chunks[2] = fl, fl, fl
	s.results([]wire.Result{{Chunk: 1, OK: true}})
	s.results([]wire.Result{{Chunk: 2, OK: true}}) // the same unit again, under its other chunk
	if got := len(s.inflight); got != 1 {
		t.Errorf("%d tokens held after the unit's results, want 1 (the other unit's)", got)
	}
	if got := len(src.results); got != 1 {
		t.Errorf("the unit reported done %d times, want once", got)
	}
	done := make(chan struct{})
	go func() { s.returnTokens(3); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("giving back tokens that are not there waited")
	}
}

// TestNoWorkerStartsAfterTheWorkLoopEnds: a configuration applied once the session's
// work loop has returned starts no worker. One did (its wg.Add came after the loop's
// Wait, which the race detector reported in CI), and it could pick a unit off retry
// after the session's work was over.
func TestNoWorkerStartsAfterTheWorkLoopEnds(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the loop returns at its first wait for room
	s := &ssession{st: &Stripe{}, src: &scriptedSource{}, log: slog.New(slog.DiscardHandler), ctx: ctx,
		cfg: wire.JobConfig{Concurrency: 1}, inflight: make(chan struct{}), retry: make(chan wire.Unit, 1),
		flights: map[uint64]*flight{}, chunks: map[uint64]*flight{}}
	if err := s.work(); err == nil {
		t.Fatal("work returned nil on a cancelled session")
	}
	s.retry <- wire.Unit{ID: 1}
	s.setConcurrency(3)
	if got := s.workers.Load(); got != 0 {
		t.Errorf("%d workers running after the work loop ended, want 0", got)
	}
	if got := len(s.retry); got != 1 {
		t.Errorf("a unit waiting to be sent again was taken after the work loop ended")
	}
}
