package mover

import (
	"context"
	"log/slog"
	"os"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// statsSource is a scriptedSource that keeps the stats its stripe reports.
type statsSource struct {
	scriptedSource
	mu    sync.Mutex
	stats []wire.StripeStats
}

func (s *statsSource) Stats(st wire.StripeStats) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.stats = append(s.stats, st)
}

func (s *statsSource) first() (wire.StripeStats, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.stats) == 0 {
		return wire.StripeStats{}, false
	}
	return s.stats[0], true
}

// TestStripeReportsBothHostsLimits: a sender's stats carry its host's socket buffer
// limits and its receiver's (from SessionOK) from the first one on, so that the
// coordinator knows before its first probe sample which buffers can matter.
func TestStripeReportsBothHostsLimits(t *testing.T) {
	addr, _ := startReceiver(t)
	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	src := &statsSource{scriptedSource: scriptedSource{configs: make(chan wire.JobConfig, 1)}}
	src.configs <- wire.JobConfig{Generation: 1, Job: "stats", Checksum: "SHA256", Overwrite: "Always", Streams: 1, Concurrency: 1, Pipelining: 1,
		BlockSize: 1 << 20, ChunkSize: 4 << 20}
	st := &Stripe{Index: 0, Receiver: addr, Secret: []byte(testSecret), Root: root, Log: slog.New(slog.DiscardHandler), RetryFor: 10 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx, src) }()
	t.Cleanup(func() { cancel(); <-done })

	g := NewWithT(t)
	g.Eventually(func() bool { _, ok := src.first(); return ok }).WithTimeout(10*time.Second).WithPolling(5*time.Millisecond).
		Should(BeTrue(), "the stripe reported no stats")
	s, _ := src.first()
	want := ReadSocketLimits()
	if !s.Connected || s.SourceLimits == nil || *s.SourceLimits != want || s.DestinationLimits == nil || *s.DestinationLimits != want {
		t.Errorf("first stats %+v (source limits %v, destination %v), want connected with both hosts' limits %+v", s, s.SourceLimits, s.DestinationLimits, want)
	}
}
