package mover

import (
	"context"
	"io"
	"log/slog"
	"math"
	"net"
	"os"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/sys/unix"
	"golang.org/x/time/rate"

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

// relay forwards every connection made to its loopback listener (lc's) to addr:
// beforeDial (nil: none) runs first for each connection, and up (nil: io.Copy)
// carries the connection's bytes towards addr. The listener closes at the test's end.
func relay(t *testing.T, lc net.ListenConfig, addr string, beforeDial func(), up func(dst, src net.Conn)) string {
	t.Helper()
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				if beforeDial != nil {
					beforeDial()
				}
				out, err := net.Dial("tcp", addr)
				if err != nil {
					in.Close()
					return
				}
				back := make(chan struct{})
				go func() { io.Copy(in, out); in.Close(); close(back) }()
				defer out.Close()
				if up != nil {
					up(out, in)
				} else {
					io.Copy(out, in)
				}
				// The sender's end goes on as the path would carry it: behind the bytes
				// before it, and the sender hears the receiver's close only once the
				// receiver has read them (a relay that closed both ways here told a
				// drained sender its blocks had arrived while the receiver had yet to
				// read the last one).
				if tc, ok := out.(*net.TCPConn); ok && tc.CloseWrite() == nil {
					<-back
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// slowReader is a TCP relay to addr whose every connection reads from the sender at
// bitsPerSecond (its socket's receive buffer kept small, so that its TCP acknowledges
// little beyond what it read): a path slower than the sender's socket buffer, on
// loopback.
func slowReader(t *testing.T, addr string, bitsPerSecond float64) string {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 64<<10) })
		if err != nil {
			return err
		}
		return serr
	}}
	return relay(t, lc, addr, nil, func(out, in net.Conn) {
		lim := rate.NewLimiter(rate.Limit(bitsPerSecond/8), 16<<10)
		buf := make([]byte, 16<<10)
		for {
			if err := lim.WaitN(context.Background(), len(buf)); err != nil {
				return
			}
			n, err := in.Read(buf)
			if n > 0 {
				if _, werr := out.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
}

// TestStripeReportsTheRateThatArrived: a stripe with a 4 MiB socket buffer sends a
// file over a path that carries 40 Mbit/s. Its first seconds fill that buffer — 4 MiB
// written beyond what arrived, 34 Mbit/s more in the first second — but the rate it
// reports, which the rescale policy reads, is what arrived: within a quarter of the
// path's rate in every report. And its transport says what held the stream back: the
// relay's window, most of its busy time.
func TestStripeReportsTheRateThatArrived(t *testing.T) {
	const pathRate = 40e6
	recv, _ := startReceiver(t)
	addr := slowReader(t, recv, pathRate)
	root, fi := randomSource(t, "f", 64<<20)
	src := &statsSource{scriptedSource: scriptedSource{configs: make(chan wire.JobConfig, 1), units: []wire.Unit{{ID: 1, Kind: wire.UnitChunk,
		Source: "f", Dest: "f", Size: fi.Size(), Mode: 0o644, MtimeNs: fi.ModTime().UnixNano(), Chunks: 1, Length: fi.Size()}}}}
	src.configs <- wire.JobConfig{Generation: 1, Job: "rate", Checksum: "SHA256", Overwrite: "Always", Streams: 1, Concurrency: 1, Pipelining: 1,
		BlockSize: 1 << 20, ChunkSize: 64 << 20, BufferBytes: 4 << 20}
	st := &Stripe{Index: 0, Receiver: addr, Secret: []byte(testSecret), Root: root, Log: slog.New(slog.DiscardHandler), RetryFor: 10 * time.Second}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx, src) }()
	t.Cleanup(func() { cancel(); <-done })

	reports := func() []wire.StripeStats {
		src.mu.Lock()
		defer src.mu.Unlock()
		var out []wire.StripeStats
		for _, s := range src.stats {
			if s.Connected && len(s.StreamBitsPerSecond) > 0 {
				out = append(out, s)
			}
		}
		return out
	}
	NewWithT(t).Eventually(func() int { return len(reports()) }).WithTimeout(20*time.Second).WithPolling(10*time.Millisecond).
		Should(BeNumerically(">=", 3), "three reports of the running stripe")
	if written := st.bytesSent.Load(); written < 4<<20 {
		t.Fatalf("the stripe wrote %d bytes in three seconds: its buffer never filled, so nothing here tells written from arrived", written)
	}
	// the relay's window, not a path, holds the stream back: the stripe says so
	if tr := st.Transport(); tr.BusyTime <= 0 || tr.WindowLimited < tr.BusyTime/2 {
		t.Errorf("busy %v, window-limited %v: want most of the stream's busy time limited by the relay's window", tr.BusyTime, tr.WindowLimited)
	}
	for i, s := range reports()[:3] {
		if float64(s.BitsPerSecond) > 1.25*pathRate {
			t.Errorf("report %d: %d bit/s over a %.0f bit/s path (%d bytes written so far): the rate counts what was written into the socket, not what arrived",
				i+1, s.BitsPerSecond, pathRate, s.BytesSent)
		}
		// the stream's count and the stripe's are read a moment apart
		if s.BitsPerSecond <= 0 || len(s.StreamBitsPerSecond) != 1 || math.Abs(float64(s.StreamBitsPerSecond[0]-s.BitsPerSecond)) > 0.05*float64(s.BitsPerSecond) {
			t.Errorf("report %d: %d bit/s, streams %v: want the one stream's rate, above zero", i+1, s.BitsPerSecond, s.StreamBitsPerSecond)
		}
	}
}
