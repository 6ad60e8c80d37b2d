package coord

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/wire"
	"github.com/dtnflow/dtnflow/optimizer"
)

// scriptChannel plays the controller: a directive the test sets, reports it keeps,
// and a watch the test fires.
type scriptChannel struct {
	mu        sync.Mutex
	directive *contract.Directive
	reports   []contract.Report
	watch     chan struct{}
}

func (s *scriptChannel) Directive(context.Context) (*contract.Directive, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.directive == nil {
		return nil, nil
	}
	d := *s.directive
	return &d, nil
}

func (s *scriptChannel) Publish(_ context.Context, r contract.Report) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reports = append(s.reports, r)
	return nil
}

func (s *scriptChannel) Watch(context.Context) <-chan struct{} { return s.watch }

func (s *scriptChannel) set(d contract.Directive) {
	s.mu.Lock()
	s.directive = &d
	s.mu.Unlock()
	s.watch <- struct{}{}
}

// lastReport is the newest report published that satisfies ok.
func (s *scriptChannel) find(ok func(contract.Report) bool) (contract.Report, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := len(s.reports) - 1; i >= 0; i-- {
		if ok(s.reports[i]) {
			return s.reports[i], true
		}
	}
	return contract.Report{}, false
}

// waitFor waits until cond holds or the named timeout passes.
func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	gomega.NewWithT(t).Eventually(cond).WithTimeout(timeout).WithPolling(5*time.Millisecond).Should(gomega.BeTrue(), "waiting for %s", what)
}

const runnerTimeout = 10 * time.Second

// TestRunnerProbesOnTheJobsData follows a cold job's coordinator: a Transfer directive
// with a probe starts the transfer at once and takes each sample on stripe 0's own
// data under the sample's streams (pushed to the stripe as a configuration first);
// every change the controller acts on is published at once, though the report
// interval is an hour; the plan's directive, heard through the watch, ends the probe
// and sets the plan's streams.
func TestRunnerProbesOnTheJobsData(t *testing.T) {
	c := newCore(t, map[string]int{"d/small1": 10, "d/small2": 20, "d/big": 1000})
	c.SetPhase(contract.PhaseStarting)
	ch := &scriptChannel{watch: make(chan struct{}, 1), directive: &contract.Directive{Generation: 1, Mode: contract.ModeTransfer,
		StreamsPerStripe: 1, Stripes: 1, Probe: &contract.ProbeDirective{MaxStreams: 4, SampleSeconds: 5}}}
	planner := func(d contract.ProbeDirective, samples []contract.Sample, _ contract.Dataset) (wire.ProbeRequest, bool) {
		if len(samples) >= 2 {
			return wire.ProbeRequest{}, true
		}
		return wire.ProbeRequest{Streams: int32(1 << len(samples)), Seconds: d.SampleSeconds}, false
	}
	r := &Runner{Core: c, Channel: ch, Interval: time.Hour, Probe: planner, Grace: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()

	// stripe 0 joins and answers each sample once its configuration has the sample's
	// streams, as a sender does (mover.WaitConfigured)
	m := c.Join(0)
	m.Summary(wire.Summary{Last: true})
	var requests []wire.ProbeRequest
	stripeDone := make(chan struct{})
	go func() {
		defer close(stripeDone)
		var cfg wire.JobConfig
		for {
			select {
			case cfg = <-m.Configs():
			case p := <-m.Probes():
				for cfg.Generation < p.Generation {
					cfg = <-m.Configs()
				}
				if cfg.Streams != p.Streams {
					t.Errorf("sample of %d streams under a configuration of %d", p.Streams, cfg.Streams)
				}
				requests = append(requests, p)
				// a slow path: the 1030 bytes outlast the probe (ProbeOutlasts)
				m.ProbeDone(wire.ProbeResult{Settled: true, Sample: contract.Sample{Streams: p.Streams, BitsPerSecond: 100 * int64(p.Streams)}})
			case <-ctx.Done():
				return
			}
		}
	}()

	waitFor(t, "the data moving while the probe runs", runnerTimeout, func() bool {
		_, ok := ch.find(func(r contract.Report) bool { return r.Phase == contract.PhaseTransferring && r.Generation == 1 })
		return ok
	})
	if g := request(t, m, 1); len(g.Units) != 1 {
		t.Fatalf("grant %+v while probing: the job's data must move", g)
	}
	var probed contract.Report
	waitFor(t, "a report saying Probed with two samples and the first byte", runnerTimeout, func() bool {
		var ok bool
		probed, ok = ch.find(func(r contract.Report) bool {
			return r.Probe == contract.PhaseProbed && len(r.Samples) == 2 && r.FirstByteTime != nil
		})
		return ok
	})
	for i, s := range probed.Samples {
		if s.Stripes != 1 || s.Streams != int32(1<<i) {
			t.Errorf("sample %d: %+v, want one stripe of %d streams", i, s, 1<<i)
		}
	}
	for _, p := range requests {
		if !p.OnData || !p.Settle || p.Generation == 0 {
			t.Errorf("request %+v: want a settled sample on the job's data under a configuration", p)
		}
	}

	// the plan: heard through the watch, it ends the probe and sets its parameters
	ch.set(contract.Directive{Generation: 2, Mode: contract.ModeTransfer, StreamsPerStripe: 3, Stripes: 2})
	waitFor(t, "the plan's directive applied and reported", runnerTimeout, func() bool {
		_, ok := ch.find(func(r contract.Report) bool { return r.Generation == 2 && r.Probe == "" })
		return ok && c.Params().Streams == 3
	})
	cancel()
	<-done
	<-stripeDone
}

// TestStripeLeavingEndsItsSample: a sample waiting for a stripe that leaves returns,
// so that the probe can go on with the next stripe.
func TestStripeLeavingEndsItsSample(t *testing.T) {
	c := newCore(t, map[string]int{"d/a": 10})
	m := c.Join(0)
	errs := make(chan error, 1)
	go func() {
		_, err := m.Probe(context.Background(), wire.ProbeRequest{Streams: 1, OnData: true})
		errs <- err
	}()
	<-m.Probes()
	m.Leave()
	select {
	case err := <-errs:
		if err != errStripeLeft {
			t.Fatalf("err %v, want errStripeLeft", err)
		}
	case <-time.After(runnerTimeout):
		t.Fatal("the sample of a stripe that left never returned")
	}
}

// probeScript runs a Runner for a one-file job under a Transfer directive with probe d,
// its stripe 0 reporting stats (as a sender does from its session's first moment) and
// answering each sample with answer, until it reports Probed, and returns that report.
func probeScript(t *testing.T, c *Core, d contract.ProbeDirective, planner ProbePlanner, answer func(wire.ProbeRequest) wire.ProbeResult) contract.Report {
	return probeScriptWithStats(t, c, d, planner, wire.StripeStats{Stripe: 0, Connected: true, Streams: 1}, answer)
}

// probeScriptWithStats is probeScript with the stats stripe 0 reports when it joins.
func probeScriptWithStats(t *testing.T, c *Core, d contract.ProbeDirective, planner ProbePlanner, stats wire.StripeStats,
	answer func(wire.ProbeRequest) wire.ProbeResult) contract.Report {
	t.Helper()
	c.SetPhase(contract.PhaseStarting)
	ch := &scriptChannel{watch: make(chan struct{}, 1), directive: &contract.Directive{Generation: 1, Mode: contract.ModeTransfer,
		StreamsPerStripe: 1, Stripes: 1, Probe: &d}}
	r := &Runner{Core: c, Channel: ch, Interval: time.Hour, Probe: planner, Grace: time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	m := c.Join(0)
	m.Summary(wire.Summary{Last: true})
	m.Stats(stats)
	stripeDone := make(chan struct{})
	go func() {
		defer close(stripeDone)
		for {
			select {
			case <-m.Configs():
			case p := <-m.Probes():
				m.ProbeDone(answer(p))
			case <-ctx.Done():
				return
			}
		}
	}()
	var probed contract.Report
	waitFor(t, "the probe Probed", runnerTimeout, func() bool {
		var ok bool
		probed, ok = ch.find(func(r contract.Report) bool { return r.Probe == contract.PhaseProbed })
		return ok
	})
	cancel()
	<-done
	<-stripeDone
	return probed
}

// TestProbeSamplesOnlyBuffersThatMatter: the controller lists buffer sizes around the
// BDP without knowing the nodes' kernels; the planner is asked with the sizes that take
// a different effect at these hosts only (wire.UsefulBuffers) — on this machine's
// limits 8 MiB gets what 4 MiB gets (wmem_max 4 MiB), and 4 MiB's 8 MiB is beyond
// autotuning's 4 MiB ceiling, so autotuning is not sampled either. A sender reports
// the limits with its first stats, before any sample: the probe's first sample is
// already the fixed buffer's. An older sender's stats say no limits: the first sample
// (autotuning's, as the controller listed it first) brings them.
func TestProbeSamplesOnlyBuffersThatMatter(t *testing.T) {
	const MiB = 1 << 20
	asked := []int64{0, 4 * MiB, 8 * MiB}
	limits := wire.SocketLimits{SndAutotuneMax: 4 * MiB, SndMax: 4 * MiB, RcvAutotuneMax: 32 * MiB, RcvMax: 4 * MiB}
	cases := map[string]struct {
		stats wire.StripeStats
		// the buffers the planner is asked with after 0, 1 and 2 samples
		want [][]int64
	}{
		"limits in the stripe's first stats": {
			wire.StripeStats{Connected: true, Streams: 1, SourceLimits: &limits, DestinationLimits: &limits},
			[][]int64{{4 * MiB}, {4 * MiB}, {4 * MiB}},
		},
		"an older sender: limits from the first sample": {
			wire.StripeStats{Connected: true, Streams: 1},
			[][]int64{asked, {4 * MiB}, {4 * MiB}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var mu sync.Mutex
			var seen [][]int64 // the buffers the planner was asked with, by samples taken
			var sampled []int64
			planner := func(d contract.ProbeDirective, samples []contract.Sample, _ contract.Dataset) (wire.ProbeRequest, bool) {
				mu.Lock()
				defer mu.Unlock()
				if len(seen) == len(samples) {
					seen = append(seen, append([]int64(nil), d.BufferBytes...))
				}
				if len(samples) >= 2 {
					return wire.ProbeRequest{}, true
				}
				return wire.ProbeRequest{Streams: int32(1 + len(samples)), BufferBytes: d.BufferBytes[0], Seconds: d.SampleSeconds}, false
			}
			probeScriptWithStats(t, newCore(t, map[string]int{"d/big": 1 << 20}), contract.ProbeDirective{MaxStreams: 4, SampleSeconds: 5, BufferBytes: asked}, planner,
				tc.stats, func(p wire.ProbeRequest) wire.ProbeResult {
					mu.Lock()
					sampled = append(sampled, p.BufferBytes)
					mu.Unlock()
					return wire.ProbeResult{Settled: true, SourceLimits: &limits, DestinationLimits: &limits,
						Sample: contract.Sample{Streams: p.Streams, BufferBytes: p.BufferBytes, BitsPerSecond: 1}}
				})
			mu.Lock()
			defer mu.Unlock()
			if len(seen) != len(tc.want) {
				t.Fatalf("the planner was asked with %v, want %v", seen, tc.want)
			}
			for i := range tc.want {
				if !slices.Equal(seen[i], tc.want[i]) {
					t.Errorf("after %d samples the planner was asked with buffers %v, want %v", i, seen[i], tc.want[i])
				}
			}
			if wantFirst := tc.want[0][0]; len(sampled) == 0 || sampled[0] != wantFirst {
				t.Errorf("samples taken at buffers %v, want the first at %d", sampled, wantFirst)
			}
		})
	}
}

// runProbeOnAutotuningOr4MiB runs, until the test ends, a Runner whose directive
// transfers while probing on the job's data with autotuning and 4 MiB listed, and
// whose planner takes the first size listed as useful once, then stops; local is the
// coordinator's host's socket limits (nil: unknown).
func runProbeOnAutotuningOr4MiB(t *testing.T, local *wire.SocketLimits) *Core {
	t.Helper()
	c := newCore(t, map[string]int{"d/big": 1 << 20})
	c.SetPhase(contract.PhaseStarting)
	d := contract.ProbeDirective{MaxStreams: 4, SampleSeconds: 5, BufferBytes: []int64{0, 4 << 20}}
	ch := &scriptChannel{watch: make(chan struct{}, 1), directive: &contract.Directive{Generation: 1, Mode: contract.ModeTransfer,
		StreamsPerStripe: 1, Stripes: 1, Probe: &d}}
	planner := func(d contract.ProbeDirective, samples []contract.Sample, _ contract.Dataset) (wire.ProbeRequest, bool) {
		return wire.ProbeRequest{Streams: 1, BufferBytes: d.BufferBytes[0], Seconds: d.SampleSeconds}, len(samples) >= 1
	}
	r := &Runner{Core: c, Channel: ch, Interval: time.Hour, Probe: planner, Grace: time.Millisecond, LocalLimits: local}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return c
}

// TestProbeWaitsForTheStripesLimitsBeforeItsFirstSample: with autotuning listed beside
// fixed sizes, which of them is sampled first depends on the hosts' limits; no sample
// is asked for until the probe stripe has reported (its session up: before that no
// byte moves, so the wait costs nothing).
func TestProbeWaitsForTheStripesLimitsBeforeItsFirstSample(t *testing.T) {
	const MiB = 1 << 20
	c := runProbeOnAutotuningOr4MiB(t, nil)
	m := c.Join(0)
	m.Summary(wire.Summary{Last: true})
	// the stripe has joined and its summary is in; the probe must still wait for it
	// to report: a sample asked for now would be autotuning's, the list's first
	waitFor(t, "the runner to follow the directive", runnerTimeout, func() bool { return c.Phase() == contract.PhaseTransferring })
	select {
	case p := <-m.Probes():
		t.Fatalf("a sample (%+v) was asked for before the stripe reported its limits", p)
	case <-time.After(200 * time.Millisecond):
	}
	limits := wire.SocketLimits{SndAutotuneMax: 4 * MiB, SndMax: 4 * MiB, RcvAutotuneMax: 32 * MiB, RcvMax: 4 * MiB}
	m.Stats(wire.StripeStats{Connected: true, Streams: 1, SourceLimits: &limits, DestinationLimits: &limits})
	select {
	case p := <-m.Probes():
		if p.BufferBytes != 4*MiB {
			t.Errorf("first sample at buffer %d, want the fixed 4 MiB", p.BufferBytes)
		}
	case <-time.After(runnerTimeout):
		t.Fatal("no sample was asked for once the stripe reported")
	}
}

// TestProbeStripeConnectsWithTheFirstSamplesBuffer: a probing job's stripe dials its
// streams as its session begins, before it has said the hosts' limits; the runner sets
// the buffer the first sample will take if both ends have this host's limits, so that
// the sample, asked for once the stripe reports the same limits, changes nothing (a
// buffer change would redial every stream). Without this host's limits the
// directive's buffer stands, as before.
func TestProbeStripeConnectsWithTheFirstSamplesBuffer(t *testing.T) {
	const MiB = 1 << 20
	limits := wire.SocketLimits{SndAutotuneMax: 4 * MiB, SndMax: 4 * MiB, RcvAutotuneMax: 32 * MiB, RcvMax: 4 * MiB}
	for _, tc := range []struct {
		name  string
		local *wire.SocketLimits
		want  int64
	}{
		{name: "this host's limits known", local: &limits, want: 4 * MiB},
		{name: "unknown", local: nil, want: 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := runProbeOnAutotuningOr4MiB(t, tc.local)
			waitFor(t, "the runner to follow the directive", runnerTimeout, func() bool { return c.Phase() == contract.PhaseTransferring })
			m := c.Join(0)
			var began wire.JobConfig
			select {
			case began = <-m.Configs():
			case <-time.After(runnerTimeout):
				t.Fatal("the stripe got no configuration when it joined")
			}
			if began.BufferBytes != tc.want {
				t.Fatalf("the stripe's session began with buffer %d, want %d", began.BufferBytes, tc.want)
			}
			m.Summary(wire.Summary{Last: true})
			m.Stats(wire.StripeStats{Connected: true, Streams: 1, SourceLimits: &limits, DestinationLimits: &limits})
			select {
			case p := <-m.Probes():
				changed := false
				select {
				case cfg := <-m.Configs():
					changed = cfg.BufferBytes != began.BufferBytes || cfg.Streams != began.Streams
				default:
				}
				if p.BufferBytes != 4*MiB || changed != (tc.want != 4*MiB) {
					t.Errorf("first sample at buffer %d, configuration changed for it: %v; want 4 MiB, changed only if the stripe began elsewhere", p.BufferBytes, changed)
				}
			case <-time.After(runnerTimeout):
				t.Fatal("no sample was asked for once the stripe reported")
			}
		})
	}
}

// TestProbeKeepsNoSampleThatMeasuredNothing: a sample during which nothing was
// acknowledged (the job's data ran out under it, or the path carried nothing) says
// nothing of the path: it is not recorded, and with data left the sample is taken
// again.
func TestProbeKeepsNoSampleThatMeasuredNothing(t *testing.T) {
	planner := func(d contract.ProbeDirective, samples []contract.Sample, _ contract.Dataset) (wire.ProbeRequest, bool) {
		if len(samples) >= 2 {
			return wire.ProbeRequest{}, true
		}
		return wire.ProbeRequest{Streams: int32(1 + len(samples)), Seconds: d.SampleSeconds}, false
	}
	answered := 0 // only the stripe's goroutine counts
	probed := probeScript(t, newCore(t, map[string]int{"d/big": 1 << 20}), contract.ProbeDirective{MaxStreams: 2, SampleSeconds: 5}, planner, func(p wire.ProbeRequest) wire.ProbeResult {
		answered++
		rate := int64(100 * p.Streams)
		if answered == 2 {
			rate = 0 // the second sample saw nothing acknowledged
		}
		return wire.ProbeResult{Settled: true, Sample: contract.Sample{Streams: p.Streams, BitsPerSecond: rate}}
	})
	if len(probed.Samples) != 2 {
		t.Fatalf("samples %+v, want two", probed.Samples)
	}
	for _, s := range probed.Samples {
		if s.BitsPerSecond <= 0 {
			t.Errorf("a sample that measured nothing was recorded: %+v", s)
		}
	}
	if probed.Samples[1].Streams != 2 {
		t.Errorf("second sample %+v, want the 2-stream sample taken again", probed.Samples[1])
	}
}

// expSelectionPlanner is the probe stepper's buffer-then-streams rule
// (optimizer.Prober with ExpSelection) over the samples it is given, as the agent's
// own planner steps them.
func expSelectionPlanner(d contract.ProbeDirective, samples []contract.Sample, _ contract.Dataset) (wire.ProbeRequest, bool) {
	var opt []optimizer.Sample
	for _, s := range samples {
		opt = append(opt, optimizer.Sample{Streams: int(s.Streams), BufferBytes: s.BufferBytes, BitsPerSecond: float64(s.BitsPerSecond)})
	}
	step := optimizer.Prober{BufferSizes: d.BufferBytes, Streams: optimizer.ExpSelection{MaxStreams: int(d.MaxStreams)}}.Next(opt)
	if step.Phase == optimizer.PhaseDone {
		return wire.ProbeRequest{}, true
	}
	return wire.ProbeRequest{Streams: int32(step.Streams), BufferBytes: step.BufferBytes, Seconds: d.SampleSeconds}, false
}

// TestProbeContinuesFromAProfilesSamples: a warm job whose PathProfile left the stream
// curve unfinished (1 and 2 streams sampled, 2 gaining half again) continues from
// those samples: its first sample is the 4 streams the stepper asks for next, at the
// profile's buffer, and only its own samples are reported. A dataset too small to
// repay one more sample at the rate the profile measured takes none (before, the first
// sample was always taken: one stream again, which the e2e's warm job did on some runs).
func TestProbeContinuesFromAProfilesSamples(t *testing.T) {
	const buffer = 4 << 20
	known := []contract.Sample{{Stripes: 1, Streams: 1, BufferBytes: buffer, BitsPerSecond: 100_000}, {Stripes: 1, Streams: 2, BufferBytes: buffer, BitsPerSecond: 150_000}}
	d := contract.ProbeDirective{MaxStreams: 8, SampleSeconds: 5, BufferBytes: []int64{buffer}, Known: known}

	// 1 MiB at 150 kbit/s is 56 s, more than three samples' ceilings (15 s)
	var requests []wire.ProbeRequest // only the stripe's goroutine appends
	probed := probeScript(t, newCore(t, map[string]int{"d/big": 1 << 20}), d, expSelectionPlanner, func(p wire.ProbeRequest) wire.ProbeResult {
		requests = append(requests, p)
		return wire.ProbeResult{Settled: true, Sample: contract.Sample{Streams: p.Streams, BufferBytes: p.BufferBytes, BitsPerSecond: 155_000}}
	})
	if len(requests) != 1 || requests[0].Streams != 4 || requests[0].BufferBytes != buffer {
		t.Errorf("samples asked %+v, want one of 4 streams at the profile's %d-byte buffer", requests, buffer)
	}
	if len(probed.Samples) != 1 || probed.Samples[0].Streams != 4 {
		t.Errorf("reported samples %+v, want the job's own 4-stream sample alone", probed.Samples)
	}

	// the same profile at 1 Gbit/s: the 1 MiB left moves in 8 ms, no sample pays
	fast := slices.Clone(known)
	for i := range fast {
		fast[i].BitsPerSecond *= 10_000
	}
	d.Known = fast
	requests = nil
	probed = probeScript(t, newCore(t, map[string]int{"d/big": 1 << 20}), d, expSelectionPlanner, func(p wire.ProbeRequest) wire.ProbeResult {
		requests = append(requests, p)
		return wire.ProbeResult{Settled: true, Sample: contract.Sample{Streams: p.Streams, BufferBytes: p.BufferBytes, BitsPerSecond: 1e9}}
	})
	if len(requests) != 0 || len(probed.Samples) != 0 {
		t.Errorf("a dataset too small to repay a sample: asked %+v, reported %+v; want none", requests, probed.Samples)
	}
}

// TestProbeEarlyClassesKeepTheJobsMaxConcurrency: the size classes a dataset of small
// files gets from the first sample are bounded by the directive's maxCC (the job's
// spec.tuning.limits.maxConcurrency), not by a default of the coordinator's own: the
// cluster's coordinator once gave each stripe 16 files in flight where the job and
// `send --auto` ran 4.
func TestProbeEarlyClassesKeepTheJobsMaxConcurrency(t *testing.T) {
	planner := func(d contract.ProbeDirective, samples []contract.Sample, _ contract.Dataset) (wire.ProbeRequest, bool) {
		return wire.ProbeRequest{Streams: 1, Seconds: d.SampleSeconds}, len(samples) >= 1
	}
	for _, maxCC := range []int32{2, 3, 9} {
		files := map[string]int{}
		for i := range 2000 {
			files[fmt.Sprintf("d/s%04d", i)] = 4096
		}
		c := newCore(t, files)
		probeScript(t, c, contract.ProbeDirective{MaxStreams: 1, SampleSeconds: 2, MaxConcurrency: maxCC}, planner, func(p wire.ProbeRequest) wire.ProbeResult {
			// 1 Gbit/s over 50 ms: 6.25 MB in flight, 1500 files of 4 KiB
			return wire.ProbeResult{Settled: true, Sample: contract.Sample{Streams: p.Streams, BitsPerSecond: 1e9, RTTMicros: 50_000}}
		})
		p := c.Params()
		if len(p.SizeClasses) == 0 {
			t.Fatalf("maxCC %d: no early classes for 2000 files of 4 KiB", maxCC)
		}
		most := int32(0)
		for _, sc := range p.SizeClasses {
			most = max(most, sc.Concurrency, sc.Channels)
		}
		// the BDP asks for far more than any of these bounds: each must bind exactly
		if most != maxCC || p.Concurrency != maxCC {
			t.Errorf("maxCC %d: classes %+v, concurrency %d; want %d files in flight at most, and used", maxCC, p.SizeClasses, p.Concurrency, maxCC)
		}
	}
}

// TestRunnerNamesTheStripesThatOutstayTheGrace: a job ended, one of its two stripes
// left and the other did not; the runner returns after its grace and says which stripe
// was still there (a standalone send once exited 30 s late with no word of why).
func TestRunnerNamesTheStripesThatOutstayTheGrace(t *testing.T) {
	c := newCore(t, map[string]int{"d/a": 10})
	// slog's handler writes one record at a time; the buffer is read once Run has
	// returned
	var logged bytes.Buffer
	c.log = slog.New(slog.NewTextHandler(&logged, nil))
	r := &Runner{Core: c, Channel: &scriptChannel{}, Interval: time.Hour, Grace: 20 * time.Millisecond}
	gone := c.Join(0)
	c.Join(1) // never leaves
	done := make(chan contract.Phase, 1)
	go func() { done <- r.Run(context.Background()) }()
	gone.Leave()
	c.SetPhase(contract.PhaseComplete)
	select {
	case p := <-done:
		if p != contract.PhaseComplete {
			t.Fatalf("Run returned %s, want Complete", p)
		}
	case <-time.After(runnerTimeout):
		t.Fatal("Run did not return after its grace")
	}
	if out := logged.String(); !strings.Contains(out, "Stripes still connected") || !strings.Contains(out, "stripes=[1]") {
		t.Fatalf("log %q: want the warning naming stripe 1 only", out)
	}
}

// TestPlanKeepsOrEndsTheProbesHelpers: a plan's directive ends the probe's helper
// stripes (its stripes are pods), unless it keeps them to the job's end
// (HelperStripes: the probe stripe runs that many besides itself, as for its sample).
func TestPlanKeepsOrEndsTheProbesHelpers(t *testing.T) {
	sampling := Params{Streams: 2, BufferBytes: 4 << 20, SampleStripes: 2}
	for _, tc := range []struct {
		helpers, want int32
	}{{0, 0}, {1, 2}, {3, 4}} {
		p := ParamsFromDirective(contract.Directive{Mode: contract.ModeTransfer, StreamsPerStripe: 2, BufferBytes: 4 << 20, HelperStripes: tc.helpers}, sampling)
		if p.SampleStripes != tc.want {
			t.Errorf("%d helpers in the directive: the probe stripe runs %d stripes, want %d", tc.helpers, p.SampleStripes, tc.want)
		}
	}
}

// TestCPUUse: the coordinator's CPU is a rate over windows of at least a second; a
// report sooner than that (a change published at once) repeats the last window's.
func TestCPUUse(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC)
	var u cpuUse
	for i, step := range []struct {
		after   time.Duration
		seconds float64
		want    int64
	}{
		{0, 10, 0},                          // the first reading only starts a window
		{500 * time.Millisecond, 10.2, 0},   // too short a window: nothing yet
		{2 * time.Second, 10.194, 97},       // 0.194 s of CPU in 2 s
		{2100 * time.Millisecond, 10.9, 97}, // 100 ms later: the last window's
		{4 * time.Second, 10.394, 100},      // 0.2 s in the 2 s since 2 s
		{5 * time.Second, 10.394, 0},        // idle
		{7 * time.Second, 10.3, 0},          // a clock that went back is no use
	} {
		if got := u.read(t0.Add(step.after), step.seconds); got != step.want {
			t.Errorf("reading %d (+%v, %.3f s): %d millicores, want %d", i, step.after, step.seconds, got, step.want)
		}
	}
}

// TestRunnerReportsItsCPU: every report the runner publishes says what the process's
// CPU measured over its latest window, which the controller resizes the coordinator's
// pod to follow.
func TestRunnerReportsItsCPU(t *testing.T) {
	c := newCore(t, map[string]int{"d/a": 10})
	c.SetPhase(contract.PhaseStarting)
	ch := &scriptChannel{watch: make(chan struct{}, 1), directive: &contract.Directive{Generation: 1, Mode: contract.ModeTransfer, StreamsPerStripe: 1, Stripes: 1}}
	var mu sync.Mutex
	now, cpu := time.Date(2026, 11, 29, 5, 0, 0, 0, time.UTC), 3.0
	r := &Runner{Core: c, Channel: ch, Interval: time.Hour, Grace: time.Millisecond,
		Now:        func() time.Time { mu.Lock(); defer mu.Unlock(); return now },
		CPUSeconds: func() float64 { mu.Lock(); defer mu.Unlock(); return cpu }}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	waitFor(t, "the first report", runnerTimeout, func() bool {
		_, ok := ch.find(func(r contract.Report) bool { return r.Phase == contract.PhaseTransferring })
		return ok
	})
	mu.Lock()
	now, cpu = now.Add(4*time.Second), cpu+0.5
	mu.Unlock()
	c.AddSample(contract.Sample{Streams: 1, BitsPerSecond: 1e8}) // a change the controller acts on: published at once
	waitFor(t, "a report with the coordinator's CPU", runnerTimeout, func() bool {
		_, ok := ch.find(func(r contract.Report) bool { return r.CoordinatorMillicores == 125 })
		return ok
	})
	cancel()
	<-done
}

// TestRunnerReportsItsFirstCPUAtOnce: a coordinator's first CPU window runs from its
// process's start and its figure is published as soon as the window ends, though the
// report interval is an hour: until then its pod asks the manager's 5 millicores.
func TestRunnerReportsItsFirstCPUAtOnce(t *testing.T) {
	// all of it spent before the first report: the listing
	if got := firstCPUFigure(t, 0, func() float64 { return 0.3 }); got > 300 {
		t.Errorf("%d millicores: 0.3 s of CPU over a window of at least %v is at most 300", got, cpuWindow)
	}
}

// TestRunnerFirstCPUWindowLeavesOutTheStandby: a warm agent execs its coordinator in
// the same process, whose rusage keeps the CPU the standby spent before the claim. The
// first window counts only what the coordinator used since it started: 4 ms over a
// window of at least a second is at most 4 millicores, not the standby's half second.
func TestRunnerFirstCPUWindowLeavesOutTheStandby(t *testing.T) {
	const standby = 0.5 // the process's CPU before the exec
	if got := firstCPUFigure(t, standby, func() float64 { return standby + 0.004 }); got > 4 {
		t.Errorf("%d millicores: the coordinator used 4 ms of CPU over a window of at least %v (the standby's %.1f s before it is not its own)",
			got, cpuWindow, standby)
	}
}

// firstCPUFigure runs a coordinator whose process started half a window ago with
// startedCPU seconds of CPU already spent, and returns the first CPU figure it
// publishes (the report interval is an hour: only the first window's timer sends it).
func firstCPUFigure(t *testing.T, startedCPU float64, cpu func() float64) int64 {
	t.Helper()
	c := newCore(t, map[string]int{"d/a": 10})
	c.SetPhase(contract.PhaseStarting)
	ch := &scriptChannel{watch: make(chan struct{}, 1), directive: &contract.Directive{Generation: 1, Mode: contract.ModeTransfer, StreamsPerStripe: 1, Stripes: 1}}
	r := &Runner{Core: c, Channel: ch, Interval: time.Hour, Grace: time.Millisecond, Started: time.Now().Add(-cpuWindow / 2),
		StartedCPUSeconds: startedCPU, CPUSeconds: cpu}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	defer func() { cancel(); <-done }()
	waitFor(t, "a report with the coordinator's first CPU figure", runnerTimeout, func() bool {
		_, ok := ch.find(func(r contract.Report) bool { return r.CoordinatorMillicores > 0 })
		return ok
	})
	rep, _ := ch.find(func(r contract.Report) bool { return r.CoordinatorMillicores > 0 })
	return rep.CoordinatorMillicores
}

// slowChannel is a scriptChannel whose publishing of a chosen report waits until the
// test lets it go: what the runner does while a report is on its way to the API.
type slowChannel struct {
	scriptChannel
	hold    func(contract.Report) bool
	held    chan struct{} // closed when a held publish has begun
	release chan struct{}
	once    sync.Once
}

func (s *slowChannel) Publish(ctx context.Context, r contract.Report) error {
	if s.hold(r) {
		s.once.Do(func() { close(s.held) })
		<-s.release
	}
	return s.scriptChannel.Publish(ctx, r)
}

// TestRunnerPublishesAChangeMadeWhileItPublished: the probe's last sample is published,
// and while that report is on its way the probe ends (Probed). The end is published
// as soon as the first report is out, though the report interval is an hour: the
// controller plans on it. A runner that took its change channel after publishing
// missed the change and published it at the next interval — on the local cluster the
// plan's directive came 1.7 and 2.1 s after the probe ended instead of 0.2 s.
func TestRunnerPublishesAChangeMadeWhileItPublished(t *testing.T) {
	c := newCore(t, map[string]int{"d/a": 10})
	c.SetPhase(contract.PhaseStarting)
	ch := &slowChannel{scriptChannel: scriptChannel{watch: make(chan struct{}, 1),
		directive: &contract.Directive{Generation: 1, Mode: contract.ModeTransfer, StreamsPerStripe: 1, Stripes: 1}},
		hold:    func(r contract.Report) bool { return len(r.Samples) == 1 },
		held:    make(chan struct{}),
		release: make(chan struct{})}
	// the process started well before: its first CPU figure goes out with the first
	// report, and no timer of the runner's fires after it within the test
	r := &Runner{Core: c, Channel: ch, Interval: time.Hour, Grace: time.Millisecond, Started: time.Now().Add(-time.Minute)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); r.Run(ctx) }()
	started := time.Now()
	waitFor(t, "the first report and the first CPU figure's, a window later", runnerTimeout, func() bool {
		ch.mu.Lock()
		defer ch.mu.Unlock()
		return len(ch.reports) >= 2
	})
	c.SetProbe(contract.PhaseProbing)
	c.AddSample(contract.Sample{Streams: 1, BitsPerSecond: 1e8})
	select {
	case <-ch.held:
	case <-time.After(runnerTimeout):
		t.Fatal("the sample's report was never published")
	}
	c.SetProbe(contract.PhaseProbed) // while the sample's report is on its way
	close(ch.release)
	// The runner's next wake of its own is the channels' reallocation, a period after
	// it started: the end must be out well before it.
	waitFor(t, "the probe's end published without waiting for the runner's next wake", optimizer.ReallocationPeriod-time.Since(started)-time.Second, func() bool {
		_, ok := ch.find(func(r contract.Report) bool { return r.Probe == contract.PhaseProbed })
		return ok
	})
	cancel()
	<-done
}
