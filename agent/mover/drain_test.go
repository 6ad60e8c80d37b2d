package mover

import (
	"bytes"
	"context"
	"crypto/rand"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
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

// drainWait bounds each wait of the drain tests: a chunk's start, the drain's end, the
// other stripe's finish.
const drainWait = 20 * time.Second

// randomSource is a source root holding one file of size random bytes, and the file's
// details as a unit names them.
func randomSource(t *testing.T, name string, size int) (*os.Root, os.FileInfo) {
	t.Helper()
	dir := t.TempDir()
	data := make([]byte, size)
	rand.Read(data)
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	return root, fi
}

// sharedUnits is a job's units shared by stripes, as a coordinator's are: a unit given
// back (Retry) goes to the front of the queue for whichever stripe asks next.
type sharedUnits struct {
	mu      sync.Mutex
	units   []wire.Unit
	given   []wire.Unit // every unit, to queue again by ID
	results []wire.UnitResult
}

// stripeSource is one stripe's view of sharedUnits, with its own configuration.
type stripeSource struct {
	*sharedUnits
	configs chan wire.JobConfig
}

func (s stripeSource) Configs() <-chan wire.JobConfig   { return s.configs }
func (s stripeSource) NeedSummary() bool                { return false }
func (s stripeSource) Summary(wire.Summary)             {}
func (s stripeSource) Manifest(wire.Manifest)           {}
func (s stripeSource) Stats(wire.StripeStats)           {}
func (s stripeSource) Probes() <-chan wire.ProbeRequest { return nil }
func (s stripeSource) ProbeDone(wire.ProbeResult)       {}

func (s stripeSource) Request(ctx context.Context, n int) (wire.WorkGrant, error) {
	s.mu.Lock()
	if len(s.units) > 0 {
		k := min(n, len(s.units))
		g := wire.WorkGrant{Units: slices.Clone(s.units[:k])}
		s.units = s.units[k:]
		s.mu.Unlock()
		return g, nil
	}
	s.mu.Unlock()
	<-ctx.Done()
	return wire.WorkGrant{}, ctx.Err()
}

func (s stripeSource) Done(rs []wire.UnitResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		s.results = append(s.results, r)
		if r.Retry {
			for _, u := range s.given {
				if u.ID == r.ID {
					s.units = append([]wire.Unit{u}, s.units...)
				}
			}
		}
	}
}

// outcome is the last result of every unit: OK, given back, or not reported.
func (s *sharedUnits) outcome(id uint64) (ok, retry bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range s.results {
		if r.ID == id {
			ok, retry = r.OK, r.Retry
		}
	}
	return ok, retry
}

// TestDrainHandsItsChunkOverWhereTheReceiverHasIt: a stripe capped at 64 Mbit/s holds
// both 16 MiB chunks of a file and drains half-way through the first. It stops at the
// next block — it neither finishes the chunk at its pace nor starts the second — and
// gives both back. A second stripe then continues the first chunk from what the
// receiver has (ChunkOpened.Have) and sends the second: both are confirmed, the file
// written at the destination holds the source's bytes, and the two stripes together
// sent the file exactly once. (Finishing the chunk would have the drained stripe send all of it;
// sending it again from its first byte, half of it twice.) Each way a chunk is checked
// and moved: digests read back, digests of the blocks as they arrived (the first
// stripe's blocks read back), and neither, the blocks sent from the page cache.
func TestDrainHandsItsChunkOverWhereTheReceiverHasIt(t *testing.T) {
	for name, mode := range map[string]struct {
		verify             bool
		verifyMode, flight string
	}{
		"verified, read back":  {true, wire.VerifyReadBack, wire.InFlightAuthenticated},
		"verified on arrival":  {true, wire.VerifyOnArrival, wire.InFlightAuthenticated},
		"unverified zero-copy": {false, "", wire.InFlightHeadersOnly},
	} {
		t.Run(name, func(t *testing.T) {
			testDrainHandsItsChunkOver(t, handover{verify: mode.verify, verifyMode: mode.verifyMode, inFlight: mode.flight,
				chunk: 16 << 20, streams: 1, capBitsPerSecond: 64_000_000})
		})
	}
}

// TestDrainDeliversWhatIsOnItsWay: the drained stripe's path carries 64 Mbit/s per
// connection, slower than it writes, so that as it drains megabytes it wrote are still
// in its socket buffers. They reach the receiver before the session ends, and the
// stripe taking the chunk over is told it has them: the two stripes send the file
// exactly once. (A session that closed at once had the receiver drop them with its
// control connection, and they were sent again: 368 MB of a 4 GiB file on issue 11's
// path with four competing flows.)
func TestDrainDeliversWhatIsOnItsWay(t *testing.T) {
	for name, mode := range map[string]struct {
		verify             bool
		verifyMode, flight string
	}{
		"verified on arrival":  {true, wire.VerifyOnArrival, wire.InFlightAuthenticated},
		"unverified zero-copy": {false, "", wire.InFlightHeadersOnly},
	} {
		t.Run(name, func(t *testing.T) {
			testDrainHandsItsChunkOver(t, handover{verify: mode.verify, verifyMode: mode.verifyMode, inFlight: mode.flight,
				chunk: 32 << 20, streams: 2, buffer: 1 << 20, pathBitsPerSecond: 64e6})
		})
	}
}

// handover is a case of testDrainHandsItsChunkOver: the job's checks, its chunk size,
// and the drained stripe's streams, socket buffer, rate cap and path (0: loopback as
// it is).
type handover struct {
	verify            bool
	verifyMode        string
	inFlight          string
	chunk             int
	streams           int32
	buffer            int64
	capBitsPerSecond  int64
	pathBitsPerSecond float64
}

func testDrainHandsItsChunkOver(t *testing.T, hc handover) {
	addr, dstDir := startReceiver(t)
	firstPath := addr
	if hc.pathBitsPerSecond > 0 {
		firstPath = slowReader(t, addr, hc.pathBitsPerSecond)
	}
	const chunks, block = 2, 1 << 20
	chunk := hc.chunk
	root, fi := randomSource(t, "big", chunk*chunks)
	units := &sharedUnits{}
	for i := range int32(chunks) {
		units.units = append(units.units, wire.Unit{ID: uint64(i + 1), Kind: wire.UnitChunk, Source: "big", Dest: "out/big", Size: fi.Size(),
			Mode: 0o644, MtimeNs: fi.ModTime().UnixNano(), Index: i, Chunks: chunks, Offset: int64(i) * int64(chunk), Length: int64(chunk)})
	}
	units.given = slices.Clone(units.units)
	config := wire.JobConfig{Generation: 1, Job: "handover", Checksum: "SHA256", Verify: hc.verify, VerifyMode: hc.verifyMode, InFlight: hc.inFlight,
		Overwrite: "Always", Streams: hc.streams, BufferBytes: hc.buffer, Concurrency: 1, Pipelining: 4, BlockSize: block, ChunkSize: int64(chunk),
		MaxBitsPerSecond: hc.capBitsPerSecond}
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	newStripe := func(idx int32, receiver string, cfg wire.JobConfig) (*Stripe, stripeSource) {
		src := stripeSource{sharedUnits: units, configs: make(chan wire.JobConfig, 1)}
		src.configs <- cfg
		return &Stripe{Index: idx, Receiver: receiver, Secret: []byte(testSecret), Root: root, Log: log, RetryFor: 10 * time.Second}, src
	}

	first, firstSrc := newStripe(HelperStripeBase, firstPath, config)
	done := make(chan error, 1)
	go func() { done <- first.Run(context.Background(), firstSrc) }()
	NewWithT(t).Eventually(func() int64 { return first.Transport().DeliveredBytes }).WithTimeout(drainWait).WithPolling(10*time.Millisecond).
		Should(BeNumerically(">=", int64(chunk/2)), "the first chunk did not get half-way")
	first.Drain()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("a drained stripe ended with %v, want nil", err)
		}
	case <-time.After(drainWait):
		t.Fatalf("the drained stripe did not end within %s", drainWait)
	}
	sentFirst := first.bytesSent.Load()
	for id := uint64(1); id <= chunks; id++ {
		if ok, retry := units.outcome(id); ok || !retry {
			t.Fatalf("chunk %d after the drain: OK %v, given back %v; want it given back", id, ok, retry)
		}
	}
	if sentFirst >= int64(chunk) {
		t.Fatalf("the drained stripe sent %d bytes: it finished the %d-byte chunk instead of handing it over", sentFirst, chunk)
	}

	uncapped := config
	uncapped.MaxBitsPerSecond = 0
	second, secondSrc := newStripe(0, addr, uncapped)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = second.Run(ctx, secondSrc) }()
	NewWithT(t).Eventually(func() bool {
		ok1, _ := units.outcome(1)
		ok2, _ := units.outcome(2)
		return ok1 && ok2
	}).WithTimeout(drainWait).WithPolling(10*time.Millisecond).Should(BeTrue(), "the second stripe did not finish both chunks")
	cancel()
	// the chunks are confirmed, not yet renamed (that is the file's finalize step):
	// the temporary file holds what the two stripes wrote
	want, err := root.ReadFile("big")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(dstDir, "root", TempName("out/big", config.Job)))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("the destination holds %d bytes that are not the source's %d", len(got), len(want))
	}
	sent := sentFirst + second.bytesSent.Load()
	t.Logf("the drained stripe sent %d bytes, the second %d, for a %d-byte file", sentFirst, second.bytesSent.Load(), chunk*chunks)
	// what the drained stripe wrote reached the receiver, and the second was told of
	// all of it, journaled or not (committer.writtenElsewhere)
	if sent != int64(chunk*chunks) {
		t.Errorf("the stripes sent %d bytes for a %d-byte file: the handed-over chunk was sent again where the receiver had it", sent, chunk*chunks)
	}
}
