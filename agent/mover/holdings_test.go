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
	addr := slowReader(t, recv, pathRate)
	dir := t.TempDir()
	data := make([]byte, fileSize)
	src := &holdingSource{scriptedSource: scriptedSource{configs: make(chan wire.JobConfig, 1)}}
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
		src.units = append(src.units, wire.Unit{ID: uint64(i + 1), Kind: wire.UnitFile, Source: fsname.Path(name), Dest: fsname.Path("out/" + name),
			Size: fileSize, Mode: 0o644, MtimeNs: fi.ModTime().UnixNano()})
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	src.configs <- wire.JobConfig{Generation: 1, Job: "holdings", Checksum: "SHA256", InFlight: wire.InFlightAuthenticated,
		Overwrite: "Always", Streams: streams, BufferBytes: 4 << 20, Concurrency: concurrency, Pipelining: 4,
		BlockSize: DefaultBlockSize, ChunkSize: 64 << 20}
	st := &Stripe{Index: 0, Receiver: addr, Secret: []byte(testSecret), Root: root,
		Log: slog.New(slog.NewTextHandler(os.Stderr, nil)), RetryFor: 10 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { defer wg.Done(); _ = st.Run(ctx, src) }()
	defer func() { cancel(); wg.Wait() }()

	// Every file confirmed (about 2.5 s at the path's rate), so that the receiver has
	// nothing left to write when the test ends; the stripe's sockets and queues were
	// full within its first tenth of a second.
	NewWithT(t).Eventually(func() int { _, done := src.counts(); return done }).WithTimeout(60*time.Second).
		WithPolling(10*time.Millisecond).Should(Equal(files), "the stripe did not confirm every file")
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
