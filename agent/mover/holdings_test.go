package mover

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/dtnflow/dtnflow/agent/fsname"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// holdingSource hands out its units as asked and counts what the stripe holds: units
// granted and not yet given back with a result, and the most it held at once.
type holdingSource struct {
	scriptedSource
	held, mostHeld, done int
}

func (s *holdingSource) Request(ctx context.Context, n int) (wire.WorkGrant, error) {
	g, err := s.scriptedSource.Request(ctx, n)
	s.mu.Lock()
	s.held += len(g.Units)
	s.mostHeld = max(s.mostHeld, s.held)
	s.mu.Unlock()
	return g, err
}

func (s *holdingSource) Done(rs []wire.UnitResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.held -= len(rs)
	for _, r := range rs {
		if r.OK {
			s.done++
		}
	}
}

func (s *holdingSource) counts() (mostHeld, done int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.mostHeld, s.done
}

// TestStripeHoldsOnlyWhatItCanSendSoon: a stripe whose path carries 32 Mbit/s, with a
// 4 MiB socket buffer (what the probe gives its streams), sends small files from a
// queue of many. The units it holds — granted, not yet confirmed — stay within what
// its stream may leave unsent in the kernel (notSentLowWater), its block buffers, the
// file in each worker's hands and one waiting per worker, and the few files the path
// itself holds. A stripe that held more kept them from the job's other stripes: it
// took 256 files at once, the socket took their bytes, and at the end of a job the
// other stripes idled while it sent them at its own pace.
func TestStripeHoldsOnlyWhatItCanSendSoon(t *testing.T) {
	const (
		files       = 300
		fileSize    = 32 << 10
		concurrency = 4
		streams     = 1
		pathRate    = 32e6
	)
	recv, _ := startReceiver(t)
	src := &holdingSource{scriptedSource: scriptedSource{configs: make(chan wire.JobConfig, 1)}}
	// Every file confirmed (about 2.5 s at the path's rate), so that the receiver has
	// nothing left to write when the test ends; the stripe's sockets and queues were
	// full within its first tenth of a second.
	sendSmallFiles(t, slowReader(t, recv, pathRate), src, src, files, fileSize, streams, concurrency)
	mostHeld, _ := src.counts()
	unsent := (notSentLowWater + fileSize + 4<<10) / fileSize // the last write may pass the mark by one frame and its header
	buffers := 2*streams + 2*concurrency + 2                  // growBuffers
	inHandAndWaiting := 2 * concurrency
	onThePath := (2*64<<10 + 16<<10) / fileSize                   // the relay's socket buffer (doubled by the kernel) and its read buffer
	bound := unsent + buffers + inHandAndWaiting + onThePath + 16 // and what the receiver has not yet confirmed
	t.Logf("the stripe held at most %d of %d files (bound %d)", mostHeld, files, bound)
	if mostHeld > bound {
		t.Errorf("the stripe held %d files at once on a 32 Mbit/s path; want at most %d: "+
			"%d unsent in its stream, %d in its block buffers, %d in its workers' hands or waiting, %d on the path",
			mostHeld, bound, unsent, buffers, inHandAndWaiting, onThePath)
	}
}

// sendSmallFiles runs one stripe over files random files of fileSize bytes from src (hs,
// or one that embeds it), at streams × concurrency with a 4 MiB buffer, until hs has
// every file confirmed.
func sendSmallFiles(t *testing.T, addr string, src WorkSource, hs *holdingSource, files, fileSize int, streams, concurrency int32) {
	t.Helper()
	dir := t.TempDir()
	data := make([]byte, fileSize)
	for i := range files {
		rand.Read(data)
		name := fmt.Sprintf("f%04d", i)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		hs.units = append(hs.units, wire.Unit{ID: uint64(i + 1), Kind: wire.UnitFile, Source: fsname.Path(name), Dest: fsname.Path("out/" + name),
			Size: int64(fileSize), Mode: 0o644, MtimeNs: fi.ModTime().UnixNano()})
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	hs.configs <- wire.JobConfig{Generation: 1, Job: "holdings", Checksum: "SHA256", InFlight: wire.InFlightAuthenticated,
		Overwrite: "Always", Streams: streams, BufferBytes: 4 << 20, Concurrency: concurrency, Pipelining: 4,
		BlockSize: DefaultBlockSize, ChunkSize: 64 << 20}
	st := &Stripe{Index: 0, Receiver: addr, Secret: []byte(testSecret), Root: root,
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil)), RetryFor: 10 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = st.Run(ctx, src) }()
	defer func() { cancel(); wg.Wait() }()
	NewWithT(t).Eventually(func() int { _, done := hs.counts(); return done }).WithTimeout(60*time.Second).
		WithPolling(10*time.Millisecond).Should(Equal(files), "the stripe did not confirm every file")
}

// askingSource is a holdingSource that also records how many units each request
// asked for.
type askingSource struct {
	holdingSource
	asked []int
}

func (s *askingSource) Request(ctx context.Context, n int) (wire.WorkGrant, error) {
	s.mu.Lock()
	s.asked = append(s.asked, n)
	s.mu.Unlock()
	return s.holdingSource.Request(ctx, n)
}

// TestStripeAsksForHalfItsAllowanceAtOnce: a stripe of small files asks its source for
// units only once half of those waiting for its workers have been taken, so that each
// request brings at least half of the allowance (one per worker). For a stripe in a pod
// a request is a round trip to the coordinator; asking again as each worker took a unit
// made about one request per file.
func TestStripeAsksForHalfItsAllowanceAtOnce(t *testing.T) {
	const (
		files       = 400
		fileSize    = 8 << 10
		concurrency = 8
	)
	recv, _ := startReceiver(t)
	src := &askingSource{holdingSource: holdingSource{scriptedSource: scriptedSource{configs: make(chan wire.JobConfig, 1)}}}
	sendSmallFiles(t, recv, src, &src.holdingSource, files, fileSize, 2, concurrency)
	src.mu.Lock()
	asked := append([]int(nil), src.asked...)
	src.mu.Unlock()
	t.Logf("%d requests for %d files: %v", len(asked), files, asked)
	for i, n := range asked {
		if n < concurrency/2 {
			t.Fatalf("request %d of %d asked for %d units; want at least %d (half of one per worker): %v", i+1, len(asked), n, concurrency/2, asked)
		}
	}
	if most := files/(concurrency/2) + 1; len(asked) > most {
		t.Errorf("%d requests for %d files; want at most %d", len(asked), files, most)
	}
}

func TestRequestBounds(t *testing.T) {
	for _, c := range []struct {
		allowance, waiting int
		least, want        int
		ok                 bool
	}{
		{8, 0, 4, 8, true}, // empty: ask for all, wait for room for half
		{8, 4, 4, 4, true}, // half taken: the refill point
		{8, 3, 4, 5, true},
		{1, 0, 1, 1, true}, // one worker: one unit at a time
		{3, 1, 2, 2, true}, // refillAt(3) = 1
		{2, 1, 1, 1, true},
		{8, 8, 0, 0, false}, // nothing lacking
		{4, 6, 0, 0, false}, // the allowance lowered to 4 under 6 waiting
	} {
		least, want, ok := requestBounds(c.allowance, c.waiting)
		if least != c.least || want != c.want || ok != c.ok {
			t.Errorf("requestBounds(%d, %d) = %d, %d, %v; want %d, %d, %v", c.allowance, c.waiting, least, want, ok, c.least, c.want, c.ok)
		}
	}
}

// staleGrantSource grants up to three times what each request asks for, as a
// coordinator's answer to a request the stripe's previous session abandoned reaches
// the next session's request (grants name no request).
type staleGrantSource struct{ holdingSource }

func (s *staleGrantSource) Request(ctx context.Context, n int) (wire.WorkGrant, error) {
	return s.holdingSource.Request(ctx, 3*n)
}

// TestStripeTakesATokenPerUnitGranted: a stripe whose grants bring more units than its
// requests had room for sends every file. Counting tokens by the request's room left
// fewer tokens than units in flight, and the session waited for good for tokens that
// were not there (the local cluster's chaos step, a receiver killed, 2026-12-04).
func TestStripeTakesATokenPerUnitGranted(t *testing.T) {
	recv, _ := startReceiver(t)
	src := &staleGrantSource{holdingSource{scriptedSource: scriptedSource{configs: make(chan wire.JobConfig, 1)}}}
	sendSmallFiles(t, recv, src, &src.holdingSource, 300, 8<<10, 1, 4)
}
