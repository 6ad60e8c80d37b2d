package optimizer

import (
	"math"
	"math/rand/v2"
	"testing"
)

// syntheticPath is a throughput-vs-streams curve of known optimum, built from what
// shapes real ones (none of it is one of the papers' models):
//
//   - each stream follows Mathis et al.: MSS·1.22/(RTT·√p) with MSS 1448 bytes;
//   - loss grows with the stream count, p(n) = p₀·(1 + growth·(n − 1)), so the
//     aggregate n·MSS·1.22/(RTT·√p(n)) rises less than linearly;
//   - the bottleneck of capacity C saturates it, a smooth minimum of the aggregate
//     and C whose knee is sharper for a larger knee exponent;
//   - past saturation, streams that overdrive the bottleneck lose to queue overflow
//     and retransmissions: the rate falls by 1/(1 + decline·(aggregate/C − 1)).
type syntheticPath struct {
	capacity, rtt, p0, growth, knee, decline float64
}

const syntheticMSSBits = 1448 * 8

// offered is what n streams would carry without the bottleneck.
func (s syntheticPath) offered(n float64) float64 {
	return n * syntheticMSSBits * 1.22 / (s.rtt * math.Sqrt(s.p0*(1+s.growth*(n-1))))
}

// BitsPerSecond is the path's rate with n streams, without noise.
func (s syntheticPath) BitsPerSecond(n int) float64 {
	x := s.offered(float64(n)) / s.capacity
	saturated := s.capacity * x / math.Pow(1+math.Pow(x, s.knee), 1/s.knee)
	return saturated / (1 + s.decline*math.Max(0, x-1))
}

// newSyntheticPath draws a path: C log-uniform over 0.5–40 Gbit/s, RTT over 2–150 ms,
// loss growth 0–20 % per added stream, knee 2–8, decline 2–30 % per capacity overdriven,
// and p₀ set so that the offered rate reaches C at a stream count log-uniform over
// 0.7–24 (below 1: one stream fills the path), so that the curve saturates and turns
// down within ExpSelection's 1–64.
func newSyntheticPath(rng *rand.Rand) syntheticPath {
	logUniform := func(lo, hi float64) float64 { return lo * math.Pow(hi/lo, rng.Float64()) }
	s := syntheticPath{capacity: logUniform(0.5e9, 40e9), rtt: logUniform(2e-3, 150e-3),
		growth: 0.2 * rng.Float64(), knee: 2 + 6*rng.Float64(), decline: 0.02 + 0.28*rng.Float64()}
	saturation := logUniform(0.7, 24)
	perStream := syntheticMSSBits * 1.22 / s.rtt * saturation / s.capacity
	s.p0 = perStream * perStream / (1 + s.growth*(saturation-1))
	return s
}

// optimum is the stream count of the curve's highest rate within maxStreams (the
// smallest such count on a tie) and that rate, and the fewest streams that reach
// within tolerance of it: the optimum a plan seeks, which takes the fewest streams
// within 2 % of the best rate (planTolerance; issue 11) rather than a flat top's last
// percent.
func (s syntheticPath) optimum(maxStreams int, tolerance float64) (argmax int, peak float64, fewest int) {
	argmax, peak = 1, s.BitsPerSecond(1)
	for n := 2; n <= maxStreams; n++ {
		if r := s.BitsPerSecond(n); r > peak {
			argmax, peak = n, r
		}
	}
	for fewest = 1; s.BitsPerSecond(fewest) < (1-tolerance)*peak; fewest++ {
	}
	return argmax, peak, fewest
}

// syntheticRates are the shares of paths where the planner got it right.
type syntheticRates struct {
	// Streams: the planned streams per stripe lie within one doubling of the true
	// optimum (the fewest streams within 2 % of the true peak); StreamsArgmax: of the
	// curve's highest point instead.
	Streams, StreamsArgmax float64
	// Peak: the predicted peak (the fit's, as the plan records it) lies within 10 % of
	// the true peak.
	Peak float64
	// Both and BothArgmax: Streams (StreamsArgmax) and Peak together.
	Both, BothArgmax float64
	// Extrapolated: the fit's optimum lay beyond the largest sample.
	Extrapolated float64
}

// syntheticAccuracy runs the planner on paths drawn from seeds 1…seeds, each sampled
// as ExpSelection asks with noise(rng) relative noise per measurement.
func syntheticAccuracy(t *testing.T, seeds int, noise func(*rand.Rand) float64) syntheticRates {
	t.Helper()
	node := []Node{{Name: "n", NICBitsPerSecond: 100e9}} // never what binds
	var r syntheticRates
	within := func(chosen, optimum int) bool { return 2*chosen >= optimum && chosen <= 2*optimum }
	count := func(ok bool, into *float64) {
		if ok {
			*into += 1 / float64(seeds)
		}
	}
	for seed := 1; seed <= seeds; seed++ {
		rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
		path := newSyntheticPath(rng)
		prober := Prober{Streams: ExpSelection{}}
		argmax, truePeak, fewest := path.optimum(DefaultMaxStreamsPerStripe, planTolerance)
		var samples []Sample
		for step := prober.Next(samples); step.Phase != PhaseDone; step = prober.Next(samples) {
			samples = append(samples, Sample{Streams: step.Streams, BufferBytes: step.BufferBytes,
				BitsPerSecond: path.BitsPerSecond(step.Streams) * (1 + noise(rng))})
		}
		plan, err := MakePlan(PlanInput{Samples: samples, Prober: prober, SourceNodes: node, DestinationNodes: node})
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		chosen := plan.Flow.StreamsPerStripe
		peakOK := math.Abs(plan.Fit.PeakBitsPerSecond-truePeak) <= 0.1*truePeak
		count(within(chosen, fewest), &r.Streams)
		count(within(chosen, argmax), &r.StreamsArgmax)
		count(peakOK, &r.Peak)
		count(peakOK && within(chosen, fewest), &r.Both)
		count(peakOK && within(chosen, argmax), &r.BothArgmax)
		count(plan.Fit.Extrapolated, &r.Extrapolated)
	}
	return r
}

// TestSyntheticCurvesAccuracy (issue 11, item 3): on curves of known optimum, sampled
// as the sampler asks with 5 % noise, the planned stream count is within one doubling
// of the true optimum and the predicted peak within 10 % of the true peak, both in at
// least 95 % of 2000 paths — for noise read as a standard deviation of 5 % (normal)
// and as a bound of ±5 % (uniform). The rates against the curve's highest point are
// logged beside them; all are in docs/models.md.
func TestSyntheticCurvesAccuracy(t *testing.T) {
	const seeds = 2000
	readings := map[string]func(*rand.Rand) float64{
		"normal, σ = 5 %": func(rng *rand.Rand) float64 { return 0.05 * rng.NormFloat64() },
		"uniform ±5 %":    func(rng *rand.Rand) float64 { return 0.05 * (2*rng.Float64() - 1) },
	}
	for name, noise := range readings {
		t.Run(name, func(t *testing.T) {
			r := syntheticAccuracy(t, seeds, noise)
			t.Logf("%d paths, noise %s: streams within one doubling %.2f %% (of the highest point %.2f %%), peak within 10 %% %.2f %%, both %.2f %% (%.2f %%); optimum extrapolated beyond the samples in %.2f %%",
				seeds, name, 100*r.Streams, 100*r.StreamsArgmax, 100*r.Peak, 100*r.Both, 100*r.BothArgmax, 100*r.Extrapolated)
			if r.Streams < 0.95 || r.Peak < 0.95 || r.Both < 0.95 {
				t.Errorf("streams %.2f %%, peak %.2f %%, both %.2f %%: want at least 95 %% each", 100*r.Streams, 100*r.Peak, 100*r.Both)
			}
		})
	}
}
