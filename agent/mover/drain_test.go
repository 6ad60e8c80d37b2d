package mover

import (
	"context"
	"crypto/rand"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// scriptedSource hands out its units once and records what comes back.
type scriptedSource struct {
	configs chan wire.JobConfig
	mu      sync.Mutex
	units   []wire.Unit
	results []wire.UnitResult
}

func (s *scriptedSource) Configs() <-chan wire.JobConfig { return s.configs }
func (s *scriptedSource) NeedSummary() bool              { return false }
func (s *scriptedSource) Summary(wire.Summary)           {}
func (s *scriptedSource) Manifest(wire.Manifest)         {}
func (s *scriptedSource) Stats(wire.StripeStats)         {}
func (s *scriptedSource) Probes() <-chan wire.ProbeRequest {
	return nil
}
func (s *scriptedSource) ProbeDone(wire.ProbeResult) {}

func (s *scriptedSource) Request(ctx context.Context, n int) (wire.WorkGrant, error) {
	s.mu.Lock()
	if len(s.units) > 0 {
		k := min(n, len(s.units))
		g := wire.WorkGrant{Units: s.units[:k]}
		s.units = s.units[k:]
		s.mu.Unlock()
		return g, nil
	}
	s.mu.Unlock()
	<-ctx.Done() // nothing more for now: a request waits, as a coordinator's does
	return wire.WorkGrant{}, ctx.Err()
}

func (s *scriptedSource) Done(rs []wire.UnitResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.results = append(s.results, rs...)
}

func (s *scriptedSource) resultOf(id uint64) (wire.UnitResult, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.results {
		if r.ID == id {
			return r, true
		}
	}
	return wire.UnitResult{}, false
}

// drainWait bounds each wait of the drain test: the first chunk's start, the drain's end.
const drainWait = 20 * time.Second

// TestDrainFinishesWhatItStartedAndGivesBackTheRest: a stripe holding four 4 MiB chunks
// of a file, one worker, capped at 64 Mbit/s, drains while the first chunk is on the
// wire. It finishes what it started (the receiver confirms it; the worker may have
// queued a second chunk's frames behind the first), starts none of the others, gives
// them back for other stripes and ends without error — having sent the finished
// chunks' bytes and nothing another stripe must send again.
func TestDrainFinishesWhatItStartedAndGivesBackTheRest(t *testing.T) {
	addr, _ := startReceiver(t)
	srcDir := t.TempDir()
	const chunk, chunks = 4 << 20, 4
	data := make([]byte, chunk*chunks)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(srcDir, "big"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(srcDir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(srcDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })

	src := &scriptedSource{configs: make(chan wire.JobConfig, 1)}
	for i := range int32(chunks) {
		src.units = append(src.units, wire.Unit{ID: uint64(i + 1), Kind: wire.UnitChunk, Source: "big", Dest: "out/big", Size: fi.Size(),
			Mode: 0o644, MtimeNs: fi.ModTime().UnixNano(), Index: i, Chunks: chunks, Offset: int64(i) * chunk, Length: chunk})
	}
	src.configs <- wire.JobConfig{Generation: 1, Job: "drain", Checksum: "SHA256", Overwrite: "Always", Streams: 1, Concurrency: 1, Pipelining: 4,
		BlockSize: 1 << 20, ChunkSize: chunk, MaxBitsPerSecond: 64_000_000}
	st := &Stripe{Index: HelperStripeBase, Receiver: addr, Secret: []byte(testSecret), Root: root, Log: slog.New(slog.NewTextHandler(os.Stderr, nil)),
		RetryFor: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- st.Run(context.Background(), src) }()

	// the first chunk on the wire: a quarter of it delivered (it takes 0.5 s at the cap)
	NewWithT(t).Eventually(func() int64 { return st.Transport().DeliveredBytes }).WithTimeout(drainWait).WithPolling(10*time.Millisecond).
		Should(BeNumerically(">=", chunk/4), "the first chunk did not start")
	st.Drain()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a drained stripe ended with %v, want nil", err)
		}
	case <-time.After(drainWait):
		t.Fatalf("the drained stripe did not end within %s", drainWait)
	}
	// every chunk finished or given back, and the bytes sent are the finished ones'
	// alone: nothing begun and dropped for another stripe to send again
	finished := 0
	for id := uint64(1); id <= chunks; id++ {
		r, ok := src.resultOf(id)
		switch {
		case ok && r.OK:
			finished++
		case ok && r.Retry:
		default:
			t.Errorf("chunk %d: result %+v (reported %v), want it finished or given back", id, r, ok)
		}
	}
	if finished == 0 || finished == chunks {
		t.Errorf("%d of %d chunks finished: want the one on the wire finished and the rest given back", finished, chunks)
	}
	if sent := st.bytesSent.Load(); sent < int64(finished)*chunk || sent > int64(finished)*chunk+chunk/16 {
		t.Errorf("sent %d bytes for %d finished %d-byte chunks", sent, finished, chunk)
	}
}
