package mover

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/settle"
)

// stepClock is time that moves only when the sample sleeps.
type stepClock struct{ now time.Time }

func (c *stepClock) Now() time.Time { return c.now }
func (c *stepClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.now = c.now.Add(d)
	return nil
}

// syntheticStripe delivers bytes at rate(t) (bits/s, t since the start), and its
// receiver reports its CPU seconds every 250 ms.
type syntheticStripe struct {
	clk      *stepClock
	start    time.Time
	rate     func(t time.Duration) float64
	peerCPU  float64 // receiver CPU seconds per second
	rtt      time.Duration
	streams  int
	last     time.Time
	bytes    float64
	lastPeer time.Time
	// firstReport is when the receiver's first report arrives (0: at the start): a
	// cold job's first sample starts before its session has sent one.
	firstReport time.Duration
}

func (s *syntheticStripe) read() Transport {
	now := s.clk.Now()
	if s.last.IsZero() {
		s.last = now
	}
	// integrate in 1 ms steps
	for t := s.last; t.Before(now); t = t.Add(time.Millisecond) {
		s.bytes += s.rate(t.Sub(s.start)) / 8 / 1000
	}
	s.last = now
	tr := Transport{DeliveredBytes: int64(s.bytes), MinRTT: s.rtt, Streams: s.streams, Connected: true}
	if now.Sub(s.start) >= s.firstReport {
		tr.PeerTime = s.start.Add(now.Sub(s.start).Truncate(250 * time.Millisecond))
		tr.PeerCPUSeconds = s.peerCPU * tr.PeerTime.Sub(s.start).Seconds()
	}
	return tr
}

func TestMeasureOnData(t *testing.T) {
	steady := func(bps float64, ramp time.Duration) func(time.Duration) float64 {
		return func(t time.Duration) float64 {
			if t < ramp {
				return bps * float64(t) / float64(ramp) // slow start: left out by the skip
			}
			return bps
		}
	}
	wobbly := func(t time.Duration) float64 { // ±40 % every 200 ms: never precise
		if (t/(200*time.Millisecond))%2 == 0 {
			return 560e6
		}
		return 240e6
	}
	cases := map[string]struct {
		rate       func(time.Duration) float64
		rtt        time.Duration
		opts       OnDataOptions
		wantBPS    float64
		wantReason settle.Reason
		minElapsed time.Duration
		maxElapsed time.Duration
		// firstReport delays the receiver's first CPU report.
		firstReport time.Duration
	}{
		"steady rate after slow start is precise within the ceiling": {
			rate: steady(400e6, 100*time.Millisecond), rtt: 40 * time.Millisecond,
			wantBPS: 400e6, wantReason: settle.Precise, maxElapsed: 2 * time.Second,
		},
		"a threshold far above ends the sample as decided": {
			rate: steady(400e6, 0), rtt: 40 * time.Millisecond, opts: OnDataOptions{Threshold: 800e6},
			wantBPS: 400e6, wantReason: settle.Precise, maxElapsed: 2 * time.Second,
		},
		"a rate that never settles ends at the ceiling asked for (below 40 RTT)": {
			rate: wobbly, rtt: 10 * time.Millisecond, opts: OnDataOptions{Ceiling: 1500 * time.Millisecond},
			wantBPS: 400e6, wantReason: settle.TimedOut, maxElapsed: 1600 * time.Millisecond,
		},
		"no report from the receiver yet as the sample starts: its CPU from the first one": {
			rate: steady(400e6, 100*time.Millisecond), rtt: 40 * time.Millisecond, firstReport: 300 * time.Millisecond,
			wantBPS: 400e6, wantReason: settle.Precise, maxElapsed: 2 * time.Second,
		},
		"undecided at the ceiling: stretched, but no further than the ceiling asked for": {
			rate: wobbly, rtt: 40 * time.Millisecond, opts: OnDataOptions{Ceiling: 3 * time.Second, Threshold: 400e6},
			wantBPS: 400e6, wantReason: settle.TimedOut, minElapsed: 3 * time.Second, maxElapsed: 3100 * time.Millisecond,
		},
		"unknown RTT: the smallest windows": {
			rate: steady(900e6, 0), wantBPS: 900e6, wantReason: settle.Precise, maxElapsed: 5 * time.Second,
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := &stepClock{now: time.Unix(1e9, 0)}
			st := &syntheticStripe{clk: clk, start: clk.now, rate: tc.rate, peerCPU: 0.3, rtt: tc.rtt, streams: 2, firstReport: tc.firstReport}
			cpuStart := clk.now
			cpu := func() float64 { return 0.2 * clk.Now().Sub(cpuStart).Seconds() }
			got, err := MeasureOnData(context.Background(), clk, st.read, cpu, tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			if math.Abs(got.BitsPerSecond-tc.wantBPS) > 0.1*tc.wantBPS {
				t.Errorf("rate %.0f, want %.0f ± 10 %%", got.BitsPerSecond, tc.wantBPS)
			}
			if tc.wantReason != "" && got.Reason != tc.wantReason && !(tc.opts.Threshold > 0 && got.Reason == settle.Decided) {
				t.Errorf("ended %s, want %s", got.Reason, tc.wantReason)
			}
			if got.Elapsed > tc.maxElapsed || got.Elapsed < tc.minElapsed {
				t.Errorf("took %s, want %s … %s", got.Elapsed, tc.minElapsed, tc.maxElapsed)
			}
			if math.Abs(got.SourceMillicores-200) > 5 {
				t.Errorf("source CPU %.0f m, want 200", got.SourceMillicores)
			}
			if math.Abs(got.DestinationMillicores-300) > 30 {
				t.Errorf("destination CPU %.0f m, want 300", got.DestinationMillicores)
			}
			if got.MinRTT != tc.rtt {
				t.Errorf("RTT %s, want %s", got.MinRTT, tc.rtt)
			}
		})
	}
}

func TestMeasureOnDataEndsWithItsContext(t *testing.T) {
	clk := &stepClock{now: time.Unix(1e9, 0)}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	st := &syntheticStripe{clk: clk, start: clk.now, rate: func(time.Duration) float64 { return 1e9 }, streams: 1}
	if _, err := MeasureOnData(ctx, clk, st.read, func() float64 { return 0 }, OnDataOptions{}); err == nil {
		t.Fatal("a sample whose session ended returned no error")
	}
}

func TestWaitConfigured(t *testing.T) {
	cases := map[string]struct {
		gen       int64 // the generation the stripe reaches at 50 ms
		streamsAt time.Duration
		want      bool
		waited    time.Duration
	}{
		"the configuration and its streams arrive":  {gen: 7, streamsAt: 80 * time.Millisecond, want: true, waited: 80 * time.Millisecond},
		"a later configuration counts too":          {gen: 9, streamsAt: 0, want: true, waited: 50 * time.Millisecond},
		"an older configuration is waited out":      {gen: 6, streamsAt: 0, want: false, waited: time.Second},
		"streams that never come: the limit passes": {gen: 7, streamsAt: time.Hour, want: false, waited: time.Second},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := &stepClock{now: time.Unix(1e9, 0)}
			start := clk.now
			configured := func() int64 {
				if clk.Now().Sub(start) >= 50*time.Millisecond {
					return tc.gen
				}
				return 5
			}
			read := func() Transport {
				n := 1
				if clk.Now().Sub(start) >= tc.streamsAt {
					n = 4
				}
				return Transport{Connected: true, Streams: n}
			}
			ok, err := WaitConfigured(context.Background(), clk, configured, read, 7, 4, time.Second)
			if err != nil || ok != tc.want {
				t.Fatalf("WaitConfigured = %v, %v; want %v", ok, err, tc.want)
			}
			if w := clk.Now().Sub(start); w < tc.waited || w > tc.waited+20*time.Millisecond {
				t.Errorf("waited %s, want %s", w, tc.waited)
			}
		})
	}
}
