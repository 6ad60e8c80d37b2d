package mover

import (
	"context"
	"fmt"
	"math"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/settle"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// A probe sample on the job's own data: the coordinator sets the job's streams and
// buffer for the sample (a configuration every stripe applies without restarting),
// then asks the stripe to measure; the stripe waits until it runs under that
// configuration and follows what its receiver's TCP acknowledged until the rate
// settles. The bytes moved meanwhile are the job's — this is how a cold job in a
// cluster probes while it transfers, as `send --auto` does in one process.

// SampleClock is time as an on-data sample sees it (a fake one in tests).
type SampleClock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) error
}

// RealClock is the wall clock as a SampleClock.
type RealClock struct{}

func (RealClock) Now() time.Time { return time.Now() }
func (RealClock) Sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// OnDataSample is one sample measured on a stripe's own transfer.
type OnDataSample struct {
	BitsPerSecond float64
	Settled       bool
	Reason        settle.Reason
	HalfWidth     float64
	Elapsed       time.Duration
	// SourceMillicores is this process's CPU over the sample, DestinationMillicores the
	// receiver's as it reported it (0: unknown).
	SourceMillicores, DestinationMillicores float64
	// MinRTT is the smallest round-trip time the streams saw (0: unknown).
	MinRTT time.Duration
	// WindowLimitedPercent is the share of the streams' busy time over the sample that
	// a window — the receiver's or the sender's socket buffer — held them back rather
	// than the path: near 100, the sample measured the windows, and one stream more
	// would carry more whatever the curve of the other samples says (0: none, or a
	// kernel without TCP_INFO's busy times).
	WindowLimitedPercent int32
}

// OnDataOptions shape one on-data sample.
type OnDataOptions struct {
	// Ceiling, when > 0, caps the sample's length, a stretch included (settle.ForRTT's
	// otherwise).
	Ceiling time.Duration
	// Threshold, when > 0, lets the sample end as soon as its rate is clearly above or
	// below it.
	Threshold float64
	// Limits, when set, replace settle.ForRTT of the streams' RTT (tests).
	Limits settle.Limits
}

// MeasureOnData follows read's delivered bytes until the rate settles (package
// settle: windows of 8 RTT after a skip of 4, at most the ceiling) and returns it,
// with the CPU of each end over the sample (cpu is this process's CPU seconds).
func MeasureOnData(ctx context.Context, clk SampleClock, read func() Transport, cpu func() float64, o OnDataOptions) (OnDataSample, error) {
	tr0 := read()
	rtt := tr0.MinRTT
	lim := o.Limits
	if lim == (settle.Limits{}) {
		lim = settle.ForRTT(rtt)
	}
	if o.Ceiling > 0 {
		// the caller's ceiling bounds the sample, a stretch included
		lim.Ceiling = min(lim.Ceiling, o.Ceiling)
		lim.Stretch = min(lim.Stretch, o.Ceiling-lim.Ceiling)
	}
	lim.Threshold = o.Threshold
	cpu0, t0 := cpu(), clk.Now()
	var peer PeerCPU
	peer.Observe(tr0)
	det := settle.New(lim, t0, tr0.DeliveredBytes)
	poll := max(det.Limits().Window/4, 10*time.Millisecond)
	for {
		if err := clk.Sleep(ctx, poll); err != nil {
			return OnDataSample{}, err
		}
		tr := read()
		peer.Observe(tr)
		if tr.MinRTT > 0 && (rtt == 0 || tr.MinRTT < rtt) {
			rtt = tr.MinRTT
		}
		res, done := det.Add(clk.Now(), tr.DeliveredBytes)
		if !done {
			continue
		}
		s := OnDataSample{BitsPerSecond: res.BitsPerSecond, Settled: res.Settled, Reason: res.Reason, HalfWidth: res.HalfWidth,
			Elapsed: res.Elapsed, MinRTT: rtt, WindowLimitedPercent: WindowLimitedPercent(tr0, tr)}
		if el := clk.Now().Sub(t0).Seconds(); el > 0 {
			s.SourceMillicores = max(cpu()-cpu0, 0) / el * 1000
		}
		s.DestinationMillicores = peer.Millicores(tr)
		return s, nil
	}
}

// WindowLimitedPercent is the share of the streams' busy time between two readings that
// a window limited, in per cent (OnDataSample.WindowLimitedPercent).
func WindowLimitedPercent(from, to Transport) int32 {
	busy := to.BusyTime - from.BusyTime
	if busy <= 0 {
		return 0
	}
	return int32(math.Round(100 * min(max(float64(to.WindowLimited-from.WindowLimited)/float64(busy), 0), 1)))
}

// PeerCPU measures the receiver's CPU over a sample from the CPU time it reports
// (every 250 ms): from the first report the sample sees to the last. The first is
// the one in hand at the sample's start or, when the session had sent none yet (a
// cold job's first sample starts with its first bytes), the first to arrive during
// the sample; without two reports the receiver's CPU is unknown (0).
type PeerCPU struct {
	seconds float64
	at      time.Time
}

// Observe notes a reading of the stripe: the first one that carries a report is the
// baseline.
func (p *PeerCPU) Observe(tr Transport) {
	if p.at.IsZero() && !tr.PeerTime.IsZero() {
		p.seconds, p.at = tr.PeerCPUSeconds, tr.PeerTime
	}
}

// Millicores is the receiver's CPU from the baseline to tr's report, in millicores.
func (p *PeerCPU) Millicores(tr Transport) float64 {
	p.Observe(tr)
	if dt := tr.PeerTime.Sub(p.at).Seconds(); dt > 0 {
		return max(tr.PeerCPUSeconds-p.seconds, 0) / dt * 1000
	}
	return 0
}

// WaitConfigured waits until the stripe runs under configuration generation gen (or a
// later one, as configured says) with streams data streams connected, for at most
// limit; it reports whether it got there (a sample taken anyway measures what runs).
func WaitConfigured(ctx context.Context, clk SampleClock, configured func() int64, read func() Transport, gen int64, streams int, limit time.Duration) (bool, error) {
	deadline := clk.Now().Add(limit)
	for {
		tr := read()
		if configured() >= gen && tr.Connected && tr.Streams == streams {
			return true, nil
		}
		if !clk.Now().Before(deadline) {
			return false, nil
		}
		if err := clk.Sleep(ctx, 10*time.Millisecond); err != nil {
			return false, err
		}
	}
}

// Aggregate reads a stripe and its helpers as one transport for a sample of want
// stripes: delivered bytes summed, the smallest RTT, the first stripe's peer, and
// connected with Streams streams only when all want stripes are connected with the
// same streams (Streams is the first's otherwise, and Connected false), so that
// WaitConfigured waits for every stripe of the sample.
func Aggregate(first Transport, helpers []Transport, want int) Transport {
	t := first
	for _, h := range helpers {
		t.DeliveredBytes += h.DeliveredBytes
		t.BusyTime += h.BusyTime
		t.WindowLimited += h.WindowLimited
		if h.MinRTT > 0 && (t.MinRTT == 0 || h.MinRTT < t.MinRTT) {
			t.MinRTT = h.MinRTT
		}
		if !h.Connected || h.Streams != first.Streams {
			t.Connected = false
		}
	}
	if 1+len(helpers) < want {
		t.Connected = false
	}
	return t
}

// waitHelpersFlowing waits, for at most limit, until every helper stripe has had bytes
// acknowledged. The sample that follows runs until its rate settles, which takes the
// helpers' slow start in, as send --auto's stripe samples do: a further wait of eight
// round trips here (0.4 s at 50 ms) made each stripe sample of the operator's probe
// 0.4–0.6 s longer than send --auto's, which measured the same levels (980–994
// Mbit/s for 2 and 4 stripes on issue 11's small files, thirteenth session).
func waitHelpersFlowing(ctx context.Context, clk SampleClock, helpers func() []Transport, limit time.Duration) error {
	deadline := clk.Now().Add(limit)
	for clk.Now().Before(deadline) {
		flowing := true
		for _, h := range helpers() {
			flowing = flowing && h.DeliveredBytes > 0
		}
		if flowing {
			return nil
		}
		if err := clk.Sleep(ctx, 10*time.Millisecond); err != nil {
			return err
		}
	}
	return nil
}

// onDataWait bounds how long a sample waits for its configuration's streams.
const onDataWait = 10 * time.Second

// probeOnData takes one sample on the session's own transfer for the coordinator.
func (s *ssession) probeOnData(p wire.ProbeRequest) wire.ProbeResult {
	fail := func(err error) wire.ProbeResult {
		return wire.ProbeResult{Error: err.Error(), Sample: contract.Sample{Stripes: max(p.Stripes, 1), Streams: p.Streams, BufferBytes: p.BufferBytes}}
	}
	clk := RealClock{}
	configured := func() int64 {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.cfg.Generation
	}
	stripes := max(p.Stripes, 1)
	read := s.st.Transport
	if stripes > 1 && s.st.Helpers != nil {
		read = func() Transport { return Aggregate(s.st.Transport(), s.st.Helpers(), int(stripes)) }
	}
	ok, err := WaitConfigured(s.ctx, clk, configured, read, p.Generation, int(p.Streams), onDataWait)
	if err != nil {
		return fail(err)
	}
	if !ok {
		s.log.Warn("Sampling before the stripes reached the sample's streams", "stripe", s.st.Index, "stripes", stripes, "streams", p.Streams,
			"running", read().Streams)
	}
	if stripes > 1 && s.st.Helpers != nil {
		// A helper connected is not yet a helper moving data: it asks for work first.
		// Wait until every one has delivered something, so that the sample measures
		// the stripes running.
		if err := waitHelpersFlowing(s.ctx, clk, s.st.Helpers, onDataWait); err != nil {
			return fail(err)
		}
	}
	m, err := MeasureOnData(s.ctx, clk, read, metrics.CPUSeconds,
		OnDataOptions{Ceiling: time.Duration(p.Seconds) * time.Second, Threshold: float64(p.ThresholdBitsPerSecond)})
	if err != nil {
		return fail(fmt.Errorf("on-data sample: %w", err))
	}
	local := hostSocketLimits()
	return wire.ProbeResult{Seconds: m.Elapsed.Seconds(), Settled: m.Settled, Sample: contract.Sample{Stripes: stripes, Streams: p.Streams,
		BufferBytes: p.BufferBytes, BitsPerSecond: int64(m.BitsPerSecond), SourceMillicores: int64(m.SourceMillicores),
		DestinationMillicores: int64(m.DestinationMillicores), RTTMicros: m.MinRTT.Microseconds(), WindowLimitedPercent: m.WindowLimitedPercent,
		Time: time.Now().UTC()},
		SourceLimits: &local, DestinationLimits: s.st.peerLimits.Load()}
}
