package optimizer

import (
	"encoding/binary"
	"maps"
	"math"
	"slices"
	"testing"
	"time"
)

// The fuzz tests decode their input bytes into samples, capacities, limits and
// measurements, including hostile values (NaN, ±Inf, negative, zero), and check what
// every planner output must satisfy: no panic, no NaN or Inf where a number is
// promised, nothing outside the limits. Seed corpora live in testdata/fuzz/<Name>/.

// fuzzBytes reads values from fuzz input; past the end it reads zeros.
type fuzzBytes struct{ b []byte }

func (f *fuzzBytes) byte() byte {
	if len(f.b) == 0 {
		return 0
	}
	v := f.b[0]
	f.b = f.b[1:]
	return v
}

// intn is in [0, n).
func (f *fuzzBytes) intn(n int) int {
	if n <= 0 {
		return 0
	}
	return int(uint16(f.byte())<<8|uint16(f.byte())) % n
}

// rate is a rate in bits per second: usually a plausible one (1 kbit/s – 100 Gbit/s,
// log-uniform), sometimes a hostile value.
func (f *fuzzBytes) rate() float64 {
	switch k := f.byte(); {
	case k < 8:
		return []float64{0, -1e9, math.NaN(), math.Inf(1), math.Inf(-1), 1e300, 5e-324, -0.0}[k]
	case k < 16:
		if len(f.b) < 8 {
			return 0
		}
		v := math.Float64frombits(binary.LittleEndian.Uint64(f.b))
		f.b = f.b[8:]
		return v
	}
	return math.Pow(10, 3+8*float64(f.intn(65536))/65535)
}

// millicores is a CPU figure, sometimes hostile.
func (f *fuzzBytes) millicores() float64 {
	if k := f.byte(); k < 8 {
		return []float64{0, -100, math.NaN(), math.Inf(1), 1e12, 1, 0.5, 64000}[k]
	}
	return float64(f.intn(64000))
}

func (f *fuzzBytes) samples(max int) []Sample {
	n := f.intn(max + 1)
	out := make([]Sample, n)
	for i := range out {
		out[i] = Sample{Streams: f.intn(130) - 1, BufferBytes: int64(f.intn(4)) << (16 + f.intn(10)),
			BitsPerSecond: f.rate(), SourceMillicores: f.millicores(), DestinationMillicores: f.millicores(),
			WindowLimitedPercent: f.intn(130) - 10}
	}
	return out
}

func (f *fuzzBytes) nodes(prefix string) []Node {
	n := f.intn(6)
	out := make([]Node, n)
	for i := range out {
		out[i] = Node{Name: prefix + string(rune('a'+i)), NICBitsPerSecond: f.rate(), CPUBudgetMillicores: f.millicores(),
			PlacedStripes: f.intn(8) - 1, MaxStripes: f.intn(10) - 1}
		if f.byte()%2 == 0 {
			out[i].DiskBitsPerSecond = f.rate()
		}
		if f.byte()%2 == 0 {
			out[i].OthersBitsPerSecond, out[i].OthersMillicores = f.rate(), f.millicores()
		}
	}
	return out
}

func (f *fuzzBytes) limits() Limits {
	l := Limits{MaxNodes: f.intn(8) - 1, MaxStripesPerNode: f.intn(20) - 1, MaxStreamsPerStripe: f.intn(140) - 1, MaxConcurrency: f.intn(300) - 1}
	if f.byte()%3 == 0 {
		l.MaxBitsPerSecond = f.rate()
	}
	return l
}

func (f *fuzzBytes) histogram() Histogram {
	var h Histogram
	n := f.intn(12)
	for i := 0; i < n; i++ {
		b := Bucket{Log2: f.intn(66) - 1, Files: int64(f.intn(5000)) - 1}
		b.Bytes = b.Files << max(b.Log2-1, 0)
		if f.byte() < 16 {
			b.Bytes = -b.Bytes
		}
		h.Buckets = append(h.Buckets, b)
		h.Files += b.Files
		h.Bytes += b.Bytes
	}
	return h
}

func bad(x float64) bool { return math.IsNaN(x) || math.IsInf(x, 0) }

func FuzzBestCmb(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data}
		pts := make([]StreamPoint, in.intn(12))
		for i := range pts {
			pts[i] = StreamPoint{Streams: in.intn(300) - 2, BitsPerSecond: in.rate()}
		}
		fit, err := BestCmb(pts)
		if err != nil {
			return
		}
		if bad(fit.A) || bad(fit.B) || bad(fit.C) || bad(fit.FitErrorBitsPerSecond) || fit.FitErrorBitsPerSecond < 0 || bad(fit.PeakBitsPerSecond) {
			t.Fatalf("fit with a non-finite figure: %+v", fit)
		}
		if !Valid(fit.Model, fit.A, fit.B, fit.C) {
			t.Fatalf("invalid coefficients returned: %+v", fit)
		}
		if fit.OptimalStreams < 1 || fit.OptimalStreams > optimumCeiling(fit.MaxSampledStreams) {
			t.Fatalf("optimum %d outside 1..%d", fit.OptimalStreams, optimumCeiling(fit.MaxSampledStreams))
		}
		// beyond the samples only where the model is trusted there, and said so
		if fit.Extrapolated != (fit.OptimalStreams > fit.MaxSampledStreams) || fit.Extrapolated && !TrustedBeyondSamples(fit, pts, 0) {
			t.Fatalf("optimum %d with samples up to %d, extrapolated %v, trusted %v", fit.OptimalStreams, fit.MaxSampledStreams,
				fit.Extrapolated, TrustedBeyondSamples(fit, pts, 0))
		}
		if !fit.Extrapolated && fit.PeakBitsPerSecond > fit.BestSampledBitsPerSecond {
			t.Fatalf("peak %g above the best sample %g without extrapolating", fit.PeakBitsPerSecond, fit.BestSampledBitsPerSecond)
		}
		for n, v := range fit.Curve(64) {
			if bad(v) || v < 0 {
				t.Fatalf("curve at %d streams = %g", n+1, v)
			}
		}
	})
}

func FuzzProber(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data}
		p := Prober{Streams: ExpSelection{MaxStreams: in.intn(140) - 1, Accuracy: in.rate() / 1e10}}
		for i := in.intn(8); i > 0; i-- {
			p.BufferSizes = append(p.BufferSizes, int64(in.intn(1<<12)-1)<<10)
		}
		samples := in.samples(20)
		// follow the stepper for a while with fuzzed rates: it must end
		for i := 0; i < 200; i++ {
			step := p.Next(samples)
			if step.Phase == PhaseDone {
				return
			}
			if step.Streams < 1 || step.BufferBytes < 0 {
				t.Fatalf("step %+v", step)
			}
			samples = append(samples, Sample{Streams: step.Streams, BufferBytes: step.BufferBytes, BitsPerSecond: in.rate()})
		}
		t.Fatalf("the probe did not finish in 200 steps")
	})
}

// checkFlow asserts what every flow plan must satisfy.
func checkFlow(t *testing.T, p FlowPlan, in FlowInput) {
	t.Helper()
	lim := in.Limits.WithDefaults()
	if p.Nodes < 1 || p.Nodes > lim.MaxNodes || p.Nodes > len(in.SourceNodes) || p.Nodes > len(in.DestinationNodes) {
		t.Fatalf("%d nodes: outside 1..%d or more than available (%d, %d)", p.Nodes, lim.MaxNodes, len(in.SourceNodes), len(in.DestinationNodes))
	}
	if p.StripesPerNode < 1 || p.StripesPerNode > lim.MaxStripesPerNode {
		t.Fatalf("%d stripes per node outside 1..%d", p.StripesPerNode, lim.MaxStripesPerNode)
	}
	if p.StreamsPerStripe < 1 || p.StreamsPerStripe > lim.MaxStreamsPerStripe {
		t.Fatalf("%d streams outside 1..%d", p.StreamsPerStripe, lim.MaxStreamsPerStripe)
	}
	for _, x := range []float64{p.PredictedBitsPerSecond, p.StripeBitsPerSecond, p.SourceMillicoresPerStripe, p.DestinationMillicoresPerStripe} {
		if bad(x) || x < 0 {
			t.Fatalf("plan with a bad figure %g: %+v", x, p)
		}
	}
	if lim.MaxBitsPerSecond > 0 && p.PredictedBitsPerSecond > lim.MaxBitsPerSecond*(1+1e-12) {
		t.Fatalf("predicted %g above the cap %g", p.PredictedBitsPerSecond, lim.MaxBitsPerSecond)
	}
	for side, names := range map[string][]string{"source": p.SourceNodes, "destination": p.DestinationNodes} {
		nodes := in.SourceNodes
		if side == "destination" {
			nodes = in.DestinationNodes
		}
		if len(names) != p.Nodes {
			t.Fatalf("%s names %v for %d nodes", side, names, p.Nodes)
		}
		seen := map[string]bool{}
		for _, name := range names {
			if seen[name] {
				t.Fatalf("%s node %s chosen twice", side, name)
			}
			seen[name] = true
			for _, nd := range nodes {
				if nd.Name != name {
					continue
				}
				if nd.MaxStripes > 0 && max(nd.PlacedStripes, 0)+p.StripesPerNode > nd.MaxStripes {
					t.Fatalf("%s node %s: %d placed + %d planned > %d slots", side, name, nd.PlacedStripes, p.StripesPerNode, nd.MaxStripes)
				}
				// the node's planned load, ours and others', within its budgets
				rate := float64(p.StripesPerNode) * p.StripeBitsPerSecond
				others := max(nd.OthersBitsPerSecond, 0)
				if rate+others > nd.NICBitsPerSecond*(1+1e-9) {
					t.Fatalf("%s node %s: %g planned + %g of others > NIC %g", side, name, rate, others, nd.NICBitsPerSecond)
				}
				if nd.DiskBitsPerSecond > 0 && rate+others > nd.DiskBitsPerSecond*(1+1e-9) {
					t.Fatalf("%s node %s: %g planned + %g of others > disk %g", side, name, rate, others, nd.DiskBitsPerSecond)
				}
				cpu := p.SourceMillicoresPerStripe
				if side == "destination" {
					cpu = p.DestinationMillicoresPerStripe
				}
				if nd.CPUBudgetMillicores > 0 && rate > 0 && float64(p.StripesPerNode)*cpu+max(nd.OthersMillicores, 0) > nd.CPUBudgetMillicores*(1+1e-9) {
					t.Fatalf("%s node %s: %d × %g m planned + %g m of others > budget %g m", side, name, p.StripesPerNode, cpu, nd.OthersMillicores, nd.CPUBudgetMillicores)
				}
			}
		}
	}
	if p.Binding == "" || p.Reason == "" {
		t.Fatalf("plan without binding or reason: %+v", p)
	}
}

func FuzzOptB(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data}
		var curve Curve
		switch in.byte() % 3 {
		case 0:
			curve = FlatCurve{Rate: in.rate(), Streams: in.intn(200) - 1}
		case 1:
			curve = EmpiricalCurve(StreamPoints(in.samples(8), 0))
		default:
			curve = StreamFit{Model: FullSecondOrder, A: fsoA, B: fsoB, C: fsoC, OptimalStreams: 4}
		}
		fi := FlowInput{Curve: curve, SourceCPU: CPUModel{InterceptMillicores: in.millicores(), MillicoresPerGbps: in.millicores()},
			DestinationCPU: CPUModel{InterceptMillicores: in.millicores(), MillicoresPerGbps: in.millicores()},
			SourceNodes:    in.nodes("s"), DestinationNodes: in.nodes("d"), Limits: in.limits()}
		if in.byte()%2 == 0 {
			fi.PathBitsPerSecond = in.rate()
		}
		fi.MinStreams = in.intn(80) - 2
		p, err := OptB(fi)
		if err != nil {
			return
		}
		checkFlow(t, p, fi)
		if least := min(max(fi.MinStreams, 1), fi.Limits.WithDefaults().MaxStreamsPerStripe); p.StreamsPerStripe < least {
			t.Fatalf("%d streams, fewer than the %d allowed (MinStreams %d)", p.StreamsPerStripe, least, fi.MinStreams)
		}
	})
}

// FuzzStreamsPastTheWindow: the floor is 0 or a sampled count at the buffer, the first
// from one up whose mean share is below windowBoundPercent, with every sampled count
// below it at or above; a reason exactly when there is a floor.
func FuzzStreamsPastTheWindow(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data}
		samples := in.samples(12)
		buffer := int64(in.intn(4)) << (16 + in.intn(10))
		got, why := StreamsPastTheWindow(samples, buffer)
		if (got > 0) != (why != "") {
			t.Fatalf("floor %d with reason %q", got, why)
		}
		share := map[int][]int{}
		for _, s := range samples {
			if s.BufferBytes == buffer && s.Streams >= 1 && usable(s.BitsPerSecond) {
				share[s.Streams] = append(share[s.Streams], min(max(s.WindowLimitedPercent, 0), 100))
			}
		}
		bound := func(n int) bool {
			sum := 0
			for _, p := range share[n] {
				sum += p
			}
			return (sum+len(share[n])/2)/len(share[n]) >= windowBoundPercent // the rounded mean
		}
		counts := slices.Sorted(maps.Keys(share))
		if got == 0 {
			// no floor: the fewest were not bound, or every count was
			if len(counts) > 0 && bound(counts[0]) && slices.ContainsFunc(counts, func(n int) bool { return !bound(n) }) {
				t.Fatalf("no floor, but counts %v start bound and one is not", counts)
			}
			return
		}
		if len(share[got]) == 0 || bound(got) {
			t.Fatalf("floor %d is no unbound sampled count (%v)", got, share)
		}
		for _, n := range counts {
			if n < got && !bound(n) {
				t.Fatalf("floor %d above the unbound count %d", got, n)
			}
		}
		if got == counts[0] {
			t.Fatalf("floor at the fewest sampled count %d", got)
		}
	})
}

func FuzzMakePlan(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data}
		pi := PlanInput{Samples: in.samples(16), Prober: Prober{BufferSizes: BufferCandidates(int64(in.intn(1<<20)), 0)},
			SourceNodes: in.nodes("s"), DestinationNodes: in.nodes("d"), Limits: in.limits(), Dataset: in.histogram(),
			RTT: time.Duration(in.intn(500)) * time.Millisecond, Scheduler: []Scheduler{"", SingleChunk, MultiChunk, ProActiveMultiChunk}[in.intn(4)]}
		for i := in.intn(5); i > 0; i-- {
			pi.StripeRates = append(pi.StripeRates, StreamPoint{Streams: in.intn(20) - 1, BitsPerSecond: in.rate()})
		}
		plan, err := MakePlan(pi)
		if err != nil {
			return
		}
		checkFlow(t, plan.Flow, FlowInput{Curve: plan.Curve, SourceNodes: pi.SourceNodes, DestinationNodes: pi.DestinationNodes, Limits: pi.Limits})
		checkWithinSamples(t, plan, pi)
		kept, _ := StreamCurve(pi.Samples)
		if floor, why := StreamsPastTheWindow(kept, plan.BufferBytes); plan.Flow.StreamsPerStripe < min(floor, pi.Limits.WithDefaults().MaxStreamsPerStripe) {
			t.Fatalf("%d streams below the window's floor: %s", plan.Flow.StreamsPerStripe, why)
		}
		if plan.BufferBytes < 0 || bad(plan.BDPBytes) || plan.BDPBytes < 0 {
			t.Fatalf("buffer %d, BDP %g", plan.BufferBytes, plan.BDPBytes)
		}
		for _, m := range []CPUModel{plan.SourceCPU, plan.DestinationCPU} {
			if bad(m.InterceptMillicores) || bad(m.MillicoresPerGbps) || m.MillicoresPerGbps < 0 {
				t.Fatalf("CPU model %+v", m)
			}
		}
		lim := pi.Limits.WithDefaults()
		channels := 0
		seen := map[SizeClass]bool{}
		for _, c := range plan.Chunks {
			if seen[c.Class] {
				t.Fatalf("class %s twice", c.Class)
			}
			seen[c.Class] = true
			p := c.Params
			if p.Pipelining < 1 || p.Pipelining > MaxPipelining || p.Parallelism < 1 || p.Parallelism > plan.Flow.StreamsPerStripe ||
				p.Concurrency < 1 || p.Concurrency > lim.MaxConcurrency || c.Channels < 0 {
				t.Fatalf("chunk %v with parameters %+v, %d channels (streams %d, maxCC %d)", c.Chunk, p, c.Channels, plan.Flow.StreamsPerStripe, lim.MaxConcurrency)
			}
			channels += c.Channels
		}
		if plan.Scheduler != SingleChunk && channels > lim.MaxConcurrency {
			t.Fatalf("%d channels over maxCC %d", channels, lim.MaxConcurrency)
		}
	})
}

// checkWithinSamples asserts that a plan predicts no more than the samples support:
// one stripe's best measured rate at the plan's buffer, or the model's rate within
// its trusted extrapolation (up to one doubling beyond the largest sample, Optimum's
// ceiling), times the largest gain measured with more stripes.
func checkWithinSamples(t *testing.T, plan Plan, in PlanInput) {
	t.Helper()
	if plan.Fit == nil {
		t.Fatalf("a plan from samples without a model: %+v", plan)
	}
	if x := plan.Path.Max(); bad(x) || !(x > 0) {
		t.Fatalf("path capacity %g", x)
	}
	// the samples the plan fits: a sample the path moved under, and the probe's later
	// ones, are no points of the curve (StreamCurve)
	kept, _ := StreamCurve(in.Samples)
	pts := StreamPoints(kept, plan.BufferBytes)
	stripe := 0.0
	for _, p := range pts {
		stripe = math.Max(stripe, p.BitsPerSecond)
	}
	// the model counts above the best sample only beyond the samples, where trusted
	if plan.Fit.Extrapolated {
		for n := plan.Fit.MaxSampledStreams + 1; n <= plan.Fit.OptimalStreams; n++ {
			stripe = math.Max(stripe, plan.Fit.BitsPerSecond(n))
		}
	}
	gain := 1.0
	levels := normalizePoints(append([]StreamPoint(nil), in.StripeRates...))
	if len(levels) > 0 {
		ref := plan.Path.StripeBitsPerSecond
		if levels[0].Streams == 1 {
			// the stripe stage's one-stripe level is a measurement of one stripe too:
			// above every stream sample, it is one stripe's best (found by fuzzing:
			// 32.1 kbit/s with one stripe, 32.05 the best stream sample, 57 with
			// fifteen stripes, which the path carries as measured)
			ref = levels[0].BitsPerSecond
			stripe = math.Max(stripe, ref)
		}
		for _, l := range levels {
			gain = math.Max(gain, l.BitsPerSecond/ref)
		}
	}
	if limit := stripe * gain * (1 + 1e-9); plan.Flow.PredictedBitsPerSecond > limit || plan.Path.Max() > limit {
		t.Fatalf("predicted %g, path %s: above what the samples support (%g per stripe × %g measured gain)", plan.Flow.PredictedBitsPerSecond, plan.Path, stripe, gain)
	}
	if plan.Flow.PredictedBitsPerSecond > plan.Path.Max()*(1+1e-9) {
		t.Fatalf("predicted %g above the path's capacity %s", plan.Flow.PredictedBitsPerSecond, plan.Path)
	}
}

func FuzzPartition(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data}
		h := in.histogram()
		chunks := Partition(h, in.rate(), in.rate())
		var want int64
		for _, b := range h.Buckets {
			want += max(b.Files, 0)
		}
		var got int64
		for i, c := range chunks {
			got += c.Files
			if i > 0 && (c.Class.rank() <= chunks[i-1].Class.rank() || c.MinLog2 <= chunks[i-1].MaxLog2) {
				t.Fatalf("chunks out of order: %v", chunks)
			}
			if (i == len(chunks)-1) != (c.MaxBytes == 0) {
				t.Fatalf("only the last chunk is unbounded: %v", chunks)
			}
		}
		if got != want {
			t.Fatalf("chunks hold %d files, histogram %d", got, want)
		}
	})
}

func FuzzRescale(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data}
		curve := Curve(StreamFit{Model: FullSecondOrder, A: fsoA, B: fsoB, C: fsoC, OptimalStreams: 4})
		if in.byte()%4 == 0 {
			curve = FlatCurve{Rate: in.rate(), Streams: in.intn(20)}
		}
		policy := RescalePolicy{Config: RescaleConfig{Granularity: in.intn(4)}}
		var st RescaleState
		shape := Shape{Stripes: in.intn(20) - 1, StreamsPerStripe: in.intn(40) - 1}
		now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
		for round := 0; round < 60 && len(in.b) > 0; round++ {
			now = now.Add(time.Duration(in.intn(30)) * time.Second)
			ri := RescaleInput{Now: now, Current: shape, MinStripes: in.intn(4) - 1, MaxStripes: in.intn(20) - 1, MaxStreams: in.intn(40) - 1,
				Curve: curve, PlannedStripes: in.intn(20) - 1, PlannedBitsPerSecond: in.rate(),
				Measurement: Measurement{Time: now.Add(-time.Duration(in.intn(20)) * time.Second), AggregateBitsPerSecond: in.rate()}}
			if in.byte()%5 == 0 {
				ri.MaxBitsPerSecond = in.rate()
			}
			for i := in.intn(6); i > 0; i-- {
				ri.Measurement.Stripes = append(ri.Measurement.Stripes, StripeMeasurement{BitsPerSecond: in.rate(), LossPPM: in.rate() / 1e3, Connected: in.byte()%2 == 0})
			}
			intent, next := policy.Decide(st, ri)
			st = next
			lo := max(ri.MinStripes, 1)
			hi := max(ri.MaxStripes, lo)
			if intent.To.Stripes < lo || intent.To.Stripes > hi || intent.To.StreamsPerStripe < 1 || intent.To.StreamsPerStripe > max(ri.MaxStreams, 1) {
				t.Fatalf("round %d: intent %+v outside stripes %d..%d, streams 1..%d", round, intent, lo, hi, max(ri.MaxStreams, 1))
			}
			if intent.Reason == "" || intent.Message == "" {
				t.Fatalf("round %d: intent without a reason: %+v", round, intent)
			}
			switch intent.Action {
			case Hold, ChangeStreams:
				if intent.Stripes != 0 {
					t.Fatalf("round %d: %s with a stripe count %d", round, intent.Action, intent.Stripes)
				}
			case AddStripes, RemoveStripes:
				if intent.Stripes < 1 {
					t.Fatalf("round %d: %s of %d stripes", round, intent.Action, intent.Stripes)
				}
			default:
				t.Fatalf("round %d: unknown action %q", round, intent.Action)
			}
			shape = intent.To
		}
	})
}

func FuzzConcomitant(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data}
		obs := make([]CPUObservation, in.intn(60))
		for i := range obs {
			obs[i] = CPUObservation{BitsPerSecond: in.rate(), SourceMillicores: in.millicores(), DestinationMillicores: in.millicores(), LossRate: in.rate() / 1e12}
		}
		m, err := FitConcomitant(obs, FitOptions{MaxKnots: in.intn(8)})
		if err != nil {
			return
		}
		for _, x := range []float64{m.Beta0, m.Beta1, m.BetaCPU, m.BetaResidual, m.LOOCVError} {
			if bad(x) {
				t.Fatalf("model with a non-finite coefficient: %+v", m)
			}
		}
		p := in.rate() / 1e12
		if r := m.RateFor(in.millicores(), in.millicores(), p); bad(r) || r < 0 || r > m.MaxBitsPerSecond {
			t.Fatalf("RateFor = %g (fastest observation %g)", r, m.MaxBitsPerSecond)
		}
		if s, d, err := m.CPUFor(in.rate(), p, in.millicores()); err == nil && (bad(s) || bad(d) || s < 0 || d < 0) {
			t.Fatalf("CPUFor = %g, %g", s, d)
		}
	})
}
