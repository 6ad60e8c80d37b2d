package mover

import (
	"context"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// heldRelay is a relay to addr that, while held, accepts a new connection but does
// not forward it (its handshake waits) until the hold is lifted; forwarded counts the
// connections forwarded so far.
func heldRelay(t *testing.T, addr string) (relayAddr string, hold func(bool), forwarded func() int) {
	t.Helper()
	var mu sync.Mutex
	held, n := false, 0
	released := make(chan struct{})
	hold = func(on bool) {
		mu.Lock()
		defer mu.Unlock()
		if held && !on {
			close(released)
			released = make(chan struct{})
		}
		held = on
	}
	waitWhileHeld := func() {
		mu.Lock()
		wait := released
		if !held {
			wait = nil
		}
		mu.Unlock()
		if wait != nil {
			<-wait
		}
	}
	count := func(out, in net.Conn) {
		mu.Lock()
		n++
		mu.Unlock()
		io.Copy(out, in)
	}
	return relay(t, net.ListenConfig{}, addr, waitWhileHeld, count), hold, func() int { mu.Lock(); defer mu.Unlock(); return n }
}

// TestOnConfigIsHeardBeforeTheStripeApplies: a stripe tells OnConfig of a new
// configuration before it applies it, so that the helper stripes a probe sample asks
// for start while this stripe dials the streams the configuration adds. Here the
// stream it adds cannot finish its handshake (the path holds new connections), and
// OnConfig has still heard the configuration.
func TestOnConfigIsHeardBeforeTheStripeApplies(t *testing.T) {
	g := NewWithT(t)
	addr, _ := startReceiver(t)
	relay, hold, forwarded := heldRelay(t, addr)
	root, _ := randomSource(t, "f", 1<<20)
	src := stripeSource{sharedUnits: &sharedUnits{}, configs: make(chan wire.JobConfig, 1)}
	config := wire.JobConfig{Generation: 1, Job: "onconfig", Checksum: "SHA256", Verify: true, Overwrite: "Always", Streams: 1, BufferBytes: 1 << 20,
		Concurrency: 1, Pipelining: 4, BlockSize: 1 << 20, ChunkSize: 4 << 20}
	src.configs <- config
	heard := make(chan wire.JobConfig, 4)
	st := &Stripe{Index: 0, Receiver: relay, Secret: []byte(testSecret), Root: root, Log: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		RetryFor: 10 * time.Second, OnConfig: func(c wire.JobConfig) { heard <- c }}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	defer func() { hold(false); cancel(); <-done }()
	go func() { defer close(done); _ = st.Run(ctx, src) }()
	g.Eventually(forwarded).WithTimeout(10*time.Second).Should(BeNumerically(">=", 2), "the session's control connection and stream")

	hold(true)
	more := config
	more.Generation, more.Streams, more.SampleStripes = 2, 2, 2
	src.configs <- more
	var got wire.JobConfig
	g.Eventually(heard).WithTimeout(5*time.Second).Should(Receive(&got), "OnConfig waited for the stream the configuration adds")
	g.Expect(got.Generation).To(Equal(int64(2)))
	g.Expect(got.SampleStripes).To(Equal(int32(2)))
}
