package optimizer

import (
	"math"
	"reflect"
	"testing"
	"time"
)

// runExpSelection drives the stepper against a path and returns the counts it measured.
func runExpSelection(t *testing.T, e ExpSelection, path func(n int) float64, known []StreamPoint) []int {
	t.Helper()
	pts := append([]StreamPoint(nil), known...)
	var measured []int
	for i := 0; i < 40; i++ {
		n, done := e.Next(pts)
		if done {
			return measured
		}
		measured = append(measured, n)
		pts = append(pts, StreamPoint{Streams: n, BitsPerSecond: path(n)})
	}
	t.Fatalf("ExpSelection did not finish: measured %v", measured)
	return nil
}

func TestExpSelection(t *testing.T) {
	loni := map[int]float64{1: 903.41e6, 2: 954.84e6, 4: 990.91e6, 8: 953.43e6}
	fso := func(n int) float64 { return predict(FullSecondOrder, fsoA, fsoB, fsoC, float64(n)) }
	tests := map[string]struct {
		e     ExpSelection
		path  func(int) float64
		known []StreamPoint
		want  []int
	}{
		// 954.84/903.41 = +5.7 %, 990.91/954.84 = +3.8 % < 5 %: stop after 4
		"LONI, α 5 %": {ExpSelection{}, func(n int) float64 { return loni[n] }, nil, []int{1, 2, 4}},
		// with α 2 % the doubling to 8 is measured, and the drop stops it
		"LONI, α 2 %": {ExpSelection{Accuracy: 0.02}, func(n int) float64 { return loni[n] }, nil, []int{1, 2, 4, 8}},
		// full second order peaking at 4: 1→2 +37 %, 2→4 +14 %, 4→8 −6 %
		"peak at 4": {ExpSelection{}, fso, nil, []int{1, 2, 4, 8}},
		// a linear path never flattens: bounded by MaxStreams, which is not a power
		// of two and is measured itself
		"linear, max 12": {ExpSelection{MaxStreams: 12}, func(n int) float64 { return float64(n) * 1e8 }, nil, []int{1, 2, 4, 8, 12}},
		// flat from the start: still three levels for BestCmb
		"flat": {ExpSelection{}, func(int) float64 { return 1e9 }, nil, []int{1, 2, 4}},
		// a PathProfile already measured 1 and 2: they are not measured again
		"warm start": {ExpSelection{}, fso, []StreamPoint{{1, fso(1)}, {2, fso(2)}}, []int{4, 8}},
		// a dead path (no throughput) ends after the minimum
		"no throughput": {ExpSelection{}, func(int) float64 { return 0 }, nil, []int{1, 2, 4}},
		"max 1":         {ExpSelection{MaxStreams: 1}, fso, nil, []int{1}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := runExpSelection(t, tc.e, tc.path, tc.known); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("measured %v, want %v", got, tc.want)
			}
		})
	}
}

func TestExpSelectionLevels(t *testing.T) {
	if got, want := (ExpSelection{MaxStreams: 12}).Levels(), []int{1, 2, 4, 8, 12}; !reflect.DeepEqual(got, want) {
		t.Errorf("Levels = %v, want %v", got, want)
	}
	if got, want := (ExpSelection{MaxStreams: 16}).Levels(), []int{1, 2, 4, 8, 16}; !reflect.DeepEqual(got, want) {
		t.Errorf("Levels = %v, want %v", got, want)
	}
}

func TestBDPVariants(t *testing.T) {
	e := PathEstimate{CapacityBitsPerSecond: 10e9, AvailableBitsPerSecond: 4e9, BulkBitsPerSecond: 2e9,
		RTTMin: 10 * time.Millisecond, RTTMax: 20 * time.Millisecond, RTTAvg: 15 * time.Millisecond, LargeBufferBytes: 256 << 20}
	tests := map[BDPVariant]int64{
		BDP1: 25_000_000, // 10 Gbit/s × 20 ms / 8
		BDP2: 12_500_000,
		BDP3: 10_000_000,
		BDP4: 5_000_000,
		BDP5: 3_750_000,
		BDP6: 256 << 20,
	}
	for v, want := range tests {
		if got, ok := BDP(v, e); !ok || got != want {
			t.Errorf("BDP%d = %d (%v), want %d", v, got, ok, want)
		}
	}
	if _, ok := BDP(BDP3, PathEstimate{CapacityBitsPerSecond: 1e9, RTTMax: time.Millisecond}); ok {
		t.Error("BDP3 without available bandwidth reported ok")
	}
	if got := BDPPrior(e); got != 3_750_000 {
		t.Errorf("BDPPrior prefers BDP5: got %d", got)
	}
	if got := BDPPrior(PathEstimate{CapacityBitsPerSecond: 1e9, RTTMin: 8 * time.Millisecond}); got != 1_000_000 {
		t.Errorf("BDPPrior falls back to BDP2: got %d", got)
	}
	if got := BDPPrior(PathEstimate{}); got != 0 {
		t.Errorf("BDPPrior of nothing = %d", got)
	}
}

func TestBufferCandidates(t *testing.T) {
	tests := map[string]struct {
		prior, max int64
		want       []int64
	}{
		"no prior":            {0, 0, []int64{64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20}},
		"1.25 MB BDP":         {1_250_000, 0, []int64{128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20}},
		"capped by max":       {1_250_000, 1 << 20, []int64{128 << 10, 256 << 10, 512 << 10, 1 << 20}},
		"tiny BDP floors":     {1000, 0, []int64{64 << 10}},
		"max below the floor": {0, 1000, []int64{64 << 10}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := BufferCandidates(tc.prior, tc.max); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("BufferCandidates(%d, %d) = %v, want %v", tc.prior, tc.max, got, tc.want)
			}
		})
	}
}

// plateauPath is a one-stream rate that grows with the buffer up to 1 MiB and is flat
// beyond (DADC'09 Figure 1: "around 1MB, it becomes stable"), and the streams curve of
// a full second order model scaled by the buffer's rate.
func plateauPath(streams int, buffer int64) float64 {
	single := 900e6 * math.Min(1, float64(buffer)/float64(1<<20))
	if buffer <= 0 {
		single = 600e6 // autotuning on this path
	}
	return single * predict(FullSecondOrder, fsoA, fsoB, fsoC, float64(streams)) / predict(FullSecondOrder, fsoA, fsoB, fsoC, 1)
}

func TestProberBufferFirstThenStreams(t *testing.T) {
	p := Prober{BufferSizes: BufferCandidates(0, 0)}
	var samples []Sample
	var steps []ProbeStep
	for i := 0; i < 40; i++ {
		step := p.Next(samples)
		if step.Phase == PhaseDone {
			break
		}
		steps = append(steps, step)
		samples = append(samples, Sample{Streams: step.Streams, BufferBytes: step.BufferBytes, BitsPerSecond: plateauPath(step.Streams, step.BufferBytes)})
	}
	// buffer phase: 64 KiB … 2 MiB (2 MiB gains nothing over 1 MiB), one stream each
	var wantSteps []ProbeStep
	for b := int64(64 << 10); b <= 2<<20; b *= 2 {
		wantSteps = append(wantSteps, ProbeStep{Phase: PhaseBuffer, Streams: 1, BufferBytes: b})
	}
	// stream phase at 1 MiB, the plateau: 1 is known, then 2, 4, 8
	for _, n := range []int{2, 4, 8} {
		wantSteps = append(wantSteps, ProbeStep{Phase: PhaseStreams, Streams: n, BufferBytes: 1 << 20})
	}
	if !reflect.DeepEqual(steps, wantSteps) {
		t.Errorf("steps = %v\nwant    %v", steps, wantSteps)
	}
	if b, settled := p.Buffer(samples); !settled || b != 1<<20 {
		t.Errorf("Buffer = %d (%v), want 1 MiB", b, settled)
	}
	fit, err := BestCmb(StreamPoints(samples, 1<<20))
	if err != nil || fit.OptimalStreams != 4 {
		t.Errorf("stream fit after the probe: %v %v, want optimum 4", fit, err)
	}
}

func TestProberWithoutBuffersUsesAutotuning(t *testing.T) {
	p := Prober{}
	if step := p.Next(nil); step != (ProbeStep{Phase: PhaseStreams, Streams: 1, BufferBytes: 0}) {
		t.Errorf("first step = %+v, want 1 stream with autotuning", step)
	}
}

func TestChooseBuffer(t *testing.T) {
	samples := []Sample{
		{Streams: 1, BufferBytes: 256 << 10, BitsPerSecond: 400e6},
		{Streams: 1, BufferBytes: 512 << 10, BitsPerSecond: 800e6},
		{Streams: 1, BufferBytes: 1 << 20, BitsPerSecond: 960e6},
		{Streams: 1, BufferBytes: 2 << 20, BitsPerSecond: 990e6}, // +3 %: noise on the plateau
		{Streams: 1, BufferBytes: 4 << 20, BitsPerSecond: 970e6},
		{Streams: 4, BufferBytes: 8 << 20, BitsPerSecond: 5e9}, // not a one-stream sample
	}
	if b, ok := ChooseBuffer(samples, 0); !ok || b != 1<<20 {
		t.Errorf("ChooseBuffer = %d (%v), want 1 MiB", b, ok)
	}
	if _, ok := ChooseBuffer(samples[5:], 0); ok {
		t.Error("ChooseBuffer without one-stream samples reported ok")
	}
}

// TestProberAutotuningCandidate: with 0 among the candidates, autotuning is sampled
// first and a fixed buffer replaces it only when it gains more than the plateau.
func TestProberAutotuningCandidate(t *testing.T) {
	cases := map[string]struct {
		autotuned, fixed4M float64 // one-stream rates
		wantBuffer         int64
	}{
		"autotuning capped below the BDP: the fixed buffer wins": {autotuned: 430e6, fixed4M: 790e6, wantBuffer: 4 << 20},
		"a fixed buffer gains under 5 %: autotuning stays":       {autotuned: 800e6, fixed4M: 830e6, wantBuffer: 0},
		"a fixed buffer is worse: autotuning stays":              {autotuned: 800e6, fixed4M: 500e6, wantBuffer: 0},
	}
	for name, c := range cases {
		p := Prober{BufferSizes: []int64{4 << 20, 0}, Streams: ExpSelection{MaxStreams: 8}}
		rate := func(streams int, buffer int64) float64 {
			single := c.autotuned
			if buffer > 0 {
				single = c.fixed4M
			}
			return math.Min(950e6, single*float64(streams))
		}
		var samples []Sample
		var steps []ProbeStep
		for step := p.Next(nil); step.Phase != PhaseDone && len(steps) < 20; step = p.Next(samples) {
			steps = append(steps, step)
			samples = append(samples, Sample{Streams: step.Streams, BufferBytes: step.BufferBytes, BitsPerSecond: rate(step.Streams, step.BufferBytes)})
		}
		if len(steps) < 2 || steps[0] != (ProbeStep{Phase: PhaseBuffer, Streams: 1, BufferBytes: 0}) ||
			steps[1] != (ProbeStep{Phase: PhaseBuffer, Streams: 1, BufferBytes: 4 << 20}) {
			t.Errorf("%s: steps %v, want autotuning then 4 MiB at one stream first", name, steps)
			continue
		}
		if b, settled := p.Buffer(samples); !settled || b != c.wantBuffer {
			t.Errorf("%s: Buffer = %d (%v), want %d", name, b, settled, c.wantBuffer)
		}
		for _, st := range steps[2:] {
			if st.Phase != PhaseStreams || st.BufferBytes != c.wantBuffer || st.Streams < 2 {
				t.Errorf("%s: stream step %+v, want streams ≥ 2 at buffer %d", name, st, c.wantBuffer)
			}
		}
		plan, err := MakePlan(PlanInput{Samples: samples, Prober: p, SourceNodes: nodes("s", 1, Node{NICBitsPerSecond: 10e9}),
			DestinationNodes: nodes("d", 1, Node{NICBitsPerSecond: 10e9}), Limits: Limits{MaxStreamsPerStripe: 8}})
		if err != nil || plan.BufferBytes != c.wantBuffer {
			t.Errorf("%s: MakePlan buffer %d (%v), want %d", name, plan.BufferBytes, err, c.wantBuffer)
		}
	}
}

// TestProberRTTSkipsSizesBelowAutotuning: with the RTT known, the fixed sizes whose
// window cannot carry more than autotuning's rate are not sampled, the sweep stops at
// the first size that does not beat autotuning, and the buffer chosen is the one the
// paper's full sweep would choose, or autotuning where no fixed size beats it by more
// than the plateau. The path is physical: one stream moves min(capacity, window/RTT)
// per stream, a fixed buffer b has a window of b, autotuning a window up to its
// ceiling.
func TestProberRTTSkipsSizesBelowAutotuning(t *testing.T) {
	ladder := BufferCandidates(0, 0) // 64 KiB … 16 MiB
	cases := map[string]struct {
		capacity   float64
		rtt        time.Duration
		autoWindow float64 // bytes autotuning grows a window to
		sizes      []int64
		noRTT      bool
		wantBuffer []int64 // the one-stream buffer samples, in order
		wantChosen int64
	}{
		// 3 MB of autotuning at 50 ms: 480 Mbit/s; 4 MiB is the first size whose
		// window carries more (671 Mbit/s), 8 MiB fills the link, 16 MiB adds nothing
		"autotuning capped below the BDP": {capacity: 950e6, rtt: 50 * time.Millisecond, autoWindow: 3e6, sizes: ladder,
			wantBuffer: []int64{0, 4 << 20, 8 << 20, 16 << 20}, wantChosen: 8 << 20},
		// autotuning fills the link: 8 MiB is the first size that could do more, and
		// does not; the sweep stops there
		"autotuning fills the path": {capacity: 950e6, rtt: 50 * time.Millisecond, autoWindow: 8e6, sizes: ladder,
			wantBuffer: []int64{0, 8 << 20}, wantChosen: 0},
		// no candidate's window reaches beyond autotuning's rate: autotuning alone
		"no size beyond autotuning": {capacity: 950e6, rtt: 50 * time.Millisecond, autoWindow: 8e6, sizes: BufferCandidates(0, 4<<20),
			wantBuffer: []int64{0}, wantChosen: 0},
		// a short fast path: from 256 KiB up every window outruns the link
		"short path": {capacity: 9.5e9, rtt: 200 * time.Microsecond, autoWindow: 6e6, sizes: ladder,
			wantBuffer: []int64{0, 256 << 10}, wantChosen: 0},
		// without the RTT the sizes are taken as given: the first (64 KiB) does not
		// beat autotuning and ends the sweep, which is why a caller without the RTT
		// lists only sizes beyond autotuning's ceiling
		"RTT unknown": {capacity: 950e6, rtt: 50 * time.Millisecond, autoWindow: 3e6, sizes: ladder, noRTT: true,
			wantBuffer: []int64{0, 64 << 10}, wantChosen: 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			rate := func(streams int, buffer int64) float64 {
				window := c.autoWindow
				if buffer > 0 {
					window = float64(buffer)
				}
				return math.Min(c.capacity, float64(streams)*window*8/c.rtt.Seconds())
			}
			run := func(p Prober) (buffers []int64, samples []Sample) {
				for step := p.Next(nil); step.Phase != PhaseDone; step = p.Next(samples) {
					if len(samples) > 30 {
						t.Fatalf("probe did not finish: %v", samples)
					}
					if step.Phase == PhaseBuffer {
						buffers = append(buffers, step.BufferBytes)
					}
					samples = append(samples, Sample{Streams: step.Streams, BufferBytes: step.BufferBytes, BitsPerSecond: rate(step.Streams, step.BufferBytes)})
				}
				return buffers, samples
			}
			p := Prober{BufferSizes: append([]int64{0}, c.sizes...), RTT: c.rtt, Streams: ExpSelection{MaxStreams: 8}}
			if c.noRTT {
				p.RTT = 0
			}
			buffers, samples := run(p)
			if !reflect.DeepEqual(buffers, c.wantBuffer) {
				t.Errorf("buffer samples %v, want %v", buffers, c.wantBuffer)
			}
			if b, settled := p.Buffer(samples); !settled || b != c.wantChosen {
				t.Errorf("Buffer = %d (%v), want %d", b, settled, c.wantChosen)
			}
			if c.noRTT {
				return
			}
			// the paper's sweep alone, without autotuning: the same choice whenever
			// a fixed size beats autotuning by more than the plateau, with more samples
			paper := Prober{BufferSizes: c.sizes, Streams: ExpSelection{MaxStreams: 8}}
			paperBuffers, paperSamples := run(paper)
			fixed, _ := paper.Buffer(paperSamples)
			if beats := rate(1, fixed) > (1+DefaultPlateau)*rate(1, 0); beats != (c.wantChosen != 0) || beats && fixed != c.wantChosen {
				t.Errorf("chose %d; the paper's sweep chose %d (%.0f bit/s against autotuning's %.0f)", c.wantChosen, fixed, rate(1, fixed), rate(1, 0))
			}
			if len(buffers) > len(paperBuffers) {
				t.Errorf("%d buffer samples, the paper's sweep %d", len(buffers), len(paperBuffers))
			}
		})
	}
}
