package mover

import (
	"context"
	"testing"
	"time"
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
