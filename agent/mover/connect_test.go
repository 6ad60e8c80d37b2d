package mover

import (
	"context"
	"log/slog"
	"net"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// summarySource is a scriptedSource whose coordinator wants the receiver's journal
// summary, and that keeps it.
type summarySource struct {
	scriptedSource
	got chan wire.Summary
}

func (s *summarySource) NeedSummary() bool { return true }
func (s *summarySource) Summary(sum wire.Summary) {
	select {
	case s.got <- sum:
	default:
	}
}

// connectWait bounds each wait of the test: the opening frames, the summary.
const connectWait = 5 * time.Second

// TestConnectAsksForTheSummaryBehindTheSession: the summary query goes out right
// behind the session, not a round trip after the receiver's SessionOK (on a 50 ms
// path, 50 ms off every job's first byte). The receiver here answers the session
// only once it holds the query: a sender that waits for the answer before asking
// never gets its summary.
func TestConnectAsksForTheSummaryBehindTheSession(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	order := make(chan []wire.Type, 1)
	go Serve(ctx, ln, []byte(testSecret), 0, func(c *wire.Conn) {
		defer c.Close()
		rd := c.Reader(64 << 10)
		var seen []wire.Type
		for len(seen) < 3 {
			h, _, err := rd.Next()
			if err != nil {
				return
			}
			seen = append(seen, h.Type)
		}
		order <- seen
		w := c.Writer()
		w.WriteJSON(wire.TypeSessionOK, wire.SessionOK{})
		w.WriteJSON(wire.TypeSummary, wire.Summary{Last: true})
		for {
			if _, _, err := rd.Next(); err != nil {
				return
			}
		}
	}, slog.New(slog.DiscardHandler))

	root, err := os.OpenRoot(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	src := &summarySource{scriptedSource: scriptedSource{configs: make(chan wire.JobConfig, 1)}, got: make(chan wire.Summary, 1)}
	src.configs <- wire.JobConfig{Generation: 1, Job: "summary", Checksum: "SHA256", Overwrite: "Always", Streams: 1, Concurrency: 1, Pipelining: 1,
		BlockSize: 1 << 20, ChunkSize: 4 << 20}
	st := &Stripe{Index: 0, Receiver: ln.Addr().String(), Secret: []byte(testSecret), Root: root, Log: slog.New(slog.DiscardHandler), RetryFor: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- st.Run(ctx, src) }()
	defer func() { cancel(); <-done }()

	select {
	case seen := <-order:
		if want := []wire.Type{wire.TypeHello, wire.TypeSession, wire.TypeSummaryQuery}; !slices.Equal(seen, want) {
			t.Fatalf("the control connection opened with frames %v, want %v", seen, want)
		}
	case <-time.After(connectWait):
		t.Fatal("the sender did not send its summary query before the receiver answered the session")
	}
	select {
	case sum := <-src.got:
		if !sum.Last {
			t.Fatalf("summary %+v", sum)
		}
	case <-time.After(connectWait):
		t.Fatal("the source never got the receiver's summary")
	}
}
