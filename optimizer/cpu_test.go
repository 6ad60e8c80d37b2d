package optimizer

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
)

func TestFitCPUModelRecoversLine(t *testing.T) {
	// U = 120 + 180·Th[Gbit/s] at the source, 40 + 60·Th at the destination, ±3 %
	rng := rand.New(rand.NewPCG(1, 2))
	var samples []Sample
	for _, gbps := range []float64{0.5, 0.9, 1.6, 2.8, 3.5, 4.9, 6.1, 7.4} {
		j := func() float64 { return 1 + 0.06*(rng.Float64()-0.5) }
		samples = append(samples, Sample{Streams: 1, BitsPerSecond: gbps * 1e9,
			SourceMillicores: (120 + 180*gbps) * j(), DestinationMillicores: (40 + 60*gbps) * j()})
	}
	tests := map[CPUSide]struct{ a, b float64 }{Source: {120, 180}, Destination: {40, 60}}
	for side, want := range tests {
		m, err := FitCPUModel(samples, side)
		if err != nil {
			t.Fatalf("%s: %v", side, err)
		}
		if math.Abs(m.InterceptMillicores-want.a) > 0.25*want.a || math.Abs(m.MillicoresPerGbps-want.b) > 0.05*want.b {
			t.Errorf("%s: fitted a=%g b=%g, want a=%g±25%% b=%g±5%%", side, m.InterceptMillicores, m.MillicoresPerGbps, want.a, want.b)
		}
		if m.Samples != len(samples) {
			t.Errorf("%s: Samples = %d, want %d", side, m.Samples, len(samples))
		}
	}
}

func TestFitCPUModelGuards(t *testing.T) {
	tests := map[string]struct {
		samples []Sample
		wantErr error
		wantA   float64
		wantB   float64
	}{
		"no CPU measured": {[]Sample{{BitsPerSecond: 1e9}, {BitsPerSecond: 2e9}}, ErrTooFewCPUSamples, 0, 0},
		"one rate only": {[]Sample{{BitsPerSecond: 1e9, SourceMillicores: 100}, {BitsPerSecond: 1e9, SourceMillicores: 120}},
			ErrTooFewCPUSamples, 0, 0},
		// CPU falls as rate rises (noise over a narrow range): ratio through the origin,
		// ΣU/ΣTh = 300/3 = 100 per Gbit/s
		"negative slope": {[]Sample{{BitsPerSecond: 1e9, SourceMillicores: 160}, {BitsPerSecond: 2e9, SourceMillicores: 140}}, nil, 0, 100},
		// exact line 200·Th − 100: the negative intercept is refitted through the origin,
		// Σxy/Σx² = (100·1 + 500·3)/(1+9) = 160
		"negative intercept": {[]Sample{{BitsPerSecond: 1e9, SourceMillicores: 100}, {BitsPerSecond: 3e9, SourceMillicores: 500}}, nil, 0, 160},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			m, err := FitCPUModel(tc.samples, Source)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if err == nil && (!relClose(m.InterceptMillicores, tc.wantA, 1e-9) || !relClose(m.MillicoresPerGbps, tc.wantB, 1e-9)) {
				t.Errorf("model = %+v, want a=%g b=%g", m, tc.wantA, tc.wantB)
			}
		})
	}
}

func TestCPUModelInverse(t *testing.T) {
	m := CPUModel{InterceptMillicores: 100, MillicoresPerGbps: 250}
	for _, bps := range []float64{1e8, 1e9, 4e9, 12.5e9} {
		if got := m.BitsPerSecond(m.Millicores(bps)); !relClose(got, bps, 1e-12) {
			t.Errorf("BitsPerSecond(Millicores(%g)) = %g", bps, got)
		}
	}
	if got := m.BitsPerSecond(50); got != 0 {
		t.Errorf("CPU below the intercept sustains %g bit/s, want 0", got)
	}
	if got := (CPUModel{}).BitsPerSecond(10); !math.IsInf(got, 1) {
		t.Errorf("a model without slope is not CPU bound: got %g", got)
	}
	// the documented default (the verified destination's prior): one core (1000 m)
	// moves (1000−100)/250 Gbit/s
	if got := DefaultCPUModel.BitsPerSecond(1000); !relClose(got, 900.0/250*1e9, 1e-12) {
		t.Errorf("default model: one core moves %g bit/s, want %g", got, 900.0/250*1e9)
	}
}

func TestConcomitantCPUAndRateAreInverse(t *testing.T) {
	m := paperConcomitant()
	m.Beta0, m.Beta1 = 20, 0.3 // SLAC millicores = 20 + 0.3 × NERSC millicores
	for _, target := range []float64{1e9, 3e9, 5.5e9} {
		src, dst, err := m.CPUFor(target, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !(src < dst) {
			t.Errorf("the SLAC (source) end should need less CPU than NERSC: src %g, dst %g", src, dst)
		}
		if got := m.RateFor(src, dst, 0); !relClose(got, target, 1e-9) {
			t.Errorf("RateFor(CPUFor(%g)) = %g", target, got)
		}
		// a source with half the CPU it needs caps the rate through eq. 1
		if got := m.RateFor(src/2, dst, 0); !(got < target) {
			t.Errorf("halving the source CPU did not lower the rate: %g", got)
		}
	}
	if _, _, err := (ConcomitantModel{}).CPUFor(1e9, 0, 0); err == nil {
		t.Error("CPUFor with β′₁ = 0 did not fail")
	}
}

// synthObservations draws n transfers from known coefficients: the bottleneck end's
// CPU uniform over 130–970 millicores, the other end 20 + 0.3·x plus N(0, 15), loss
// rates log-uniform over 1e-6–1e-3, and y = β′₁x + β′₂ε + f(p) + N(0, 50 Mbit/s).
func synthObservations(n int, f func(p float64) float64, seed uint64) []CPUObservation {
	rng := rand.New(rand.NewPCG(seed, 7))
	obs := make([]CPUObservation, n)
	for i := range obs {
		x := 130 + 840*rng.Float64()
		eps := 15 * rng.NormFloat64()
		dep := 20 + 0.3*x + eps
		p := math.Pow(10, -6+3*rng.Float64())
		y := 6.27e6*x + 1.53e7*eps + f(p) + 50e6*rng.NormFloat64()
		obs[i] = CPUObservation{BitsPerSecond: y, DestinationMillicores: x, SourceMillicores: dep, LossRate: p}
	}
	return obs
}

// predictionError is the mean |Predict − noise-free truth| over the observations,
// with each model's own eq. 1 residuals (the truth uses the true ones).
func predictionError(m ConcomitantModel, obs []CPUObservation, f func(float64) float64) float64 {
	var sum float64
	for _, o := range obs {
		x, dep := o.DestinationMillicores, o.SourceMillicores
		eps := dep - (20 + 0.3*x)
		truth := 6.27e6*x + 1.53e7*eps + f(o.LossRate)
		sum += math.Abs(m.Predict(x, dep-m.Dependent(x), o.LossRate) - truth)
	}
	return sum / float64(len(obs))
}

// The two-stage method of NDM'13 carries eq. 1's estimation error into eq. 2: with
// ε̂ = ε + Δβ₀ + Δβ₁·x, the fitted β′₁ absorbs β′₂·Δβ₁ and f(p) absorbs β′₂·Δβ₀. The
// tolerances below are set from that (about 2 % on β′₁ and ±100 Mbit/s on the level
// of f at n = 155 and σ_ε = 15 millicores); the shape of f and the predictions are
// tested tightly.
func TestFitConcomitantRecoversCoefficients(t *testing.T) {
	smooth := func(p float64) float64 { return -400e6 - 3e11*p }
	obs := synthObservations(155, smooth, 1)
	m, err := FitConcomitant(obs, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Independent != Destination {
		t.Errorf("independent side = %s, want the destination (higher CPU)", m.Independent)
	}
	checks := []struct {
		name      string
		got, want float64
		tol       float64
	}{
		{"β0", m.Beta0, 20, 0.6}, // ±12 millicores on 20
		{"β1", m.Beta1, 0.3, 0.05},
		{"β′1", m.BetaCPU, 6.27e6, 0.04},
		{"β′2", m.BetaResidual, 1.53e7, 0.15},
		{"f(1e-4) − f(1e-5)", m.Loss.At(1e-4) - m.Loss.At(1e-5), smooth(1e-4) - smooth(1e-5), 0.15},
		{"f(5e-4) − f(1e-5)", m.Loss.At(5e-4) - m.Loss.At(1e-5), smooth(5e-4) - smooth(1e-5), 0.1},
	}
	for _, c := range checks {
		if !relClose(c.got, c.want, c.tol) {
			t.Errorf("%s = %g, want %g ± %.0f %%", c.name, c.got, c.want, 100*c.tol)
		}
	}
	if got := m.Loss.At(1e-4); math.Abs(got-smooth(1e-4)) > 150e6 {
		t.Errorf("f(1e-4) = %g, want %g ± 150 Mbit/s", got, smooth(1e-4))
	}
	if e := predictionError(m, obs, smooth); e > 20e6 {
		t.Errorf("mean prediction error %g bit/s against the noise-free truth, want < 20 Mbit/s", e)
	}
	if m.LOOCVError > 80e6 {
		t.Errorf("LOOCV RMS error %g above 80 Mbit/s with 50 Mbit/s noise", m.LOOCVError)
	}
}

func TestFitConcomitantKnotsByCrossValidation(t *testing.T) {
	// f with a kink near p = 3e-4 (flat, then falling steeply) needs interior knots;
	// a straight f does not. LOOCV should see the difference.
	straight := func(p float64) float64 { return -500e6 - 1e11*p }
	kinked := func(p float64) float64 { return -500e6 - 4e12*math.Max(0, p-3e-4) }
	ms, err := FitConcomitant(synthObservations(200, straight, 3), FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mk, err := FitConcomitant(synthObservations(200, kinked, 3), FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if mk.Knots <= ms.Knots {
		t.Errorf("knots chosen: straight f %d, kinked f %d; the kink should need more", ms.Knots, mk.Knots)
	}
	for _, p := range []float64{1e-4, 5e-4, 8e-4} {
		if got, want := mk.Loss.At(p), kinked(p); math.Abs(got-want) > 100e6 {
			t.Errorf("kinked f(%g) = %g, want %g ± 100 Mbit/s", p, got, want)
		}
	}
}

func TestFitConcomitantDegenerateInputs(t *testing.T) {
	// every loss rate equal: f is a constant
	obs := synthObservations(40, func(float64) float64 { return -600e6 }, 5)
	for i := range obs {
		obs[i].LossRate = 1e-4
	}
	m, err := FitConcomitant(obs, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Loss.At(0) != m.Loss.At(1) {
		t.Errorf("f(0) = %g, f(1) = %g: f is not constant", m.Loss.At(0), m.Loss.At(1))
	}
	if e := predictionError(m, obs, func(float64) float64 { return -600e6 }); e > 40e6 {
		t.Errorf("mean prediction error %g bit/s, want < 40 Mbit/s", e)
	}
	if _, err := FitConcomitant(obs[:5], FitOptions{}); !errors.Is(err, ErrTooFewObservations) {
		t.Errorf("5 observations: error %v, want ErrTooFewObservations", err)
	}
}

func TestBSplineBasisPartitionOfUnity(t *testing.T) {
	b := NewBSplineBasis(3, 0, 1, []float64{0.33, 0.66, 0.66, 2}) // duplicate and outside knots dropped
	if b.Len() != 5 {
		t.Fatalf("Len = %d, want 5 (2 interior knots + order 3)", b.Len())
	}
	buf := make([]float64, 8)
	for _, x := range []float64{-1, 0, 0.1, 0.33, 0.5, 0.66, 0.9, 1, 2} {
		vals := b.Eval(x, buf)
		s := 0.0
		for _, v := range vals {
			if v < -1e-15 {
				t.Errorf("B(%g) has a negative value %g", x, v)
			}
			s += v
		}
		if math.Abs(s-1) > 1e-12 {
			t.Errorf("basis at %g sums to %g, want 1", x, s)
		}
	}
	// at the ends only the first and the last function is non-zero
	if v := b.Eval(0, buf); v[0] != 1 {
		t.Errorf("B₁(lo) = %g, want 1", v[0])
	}
	if v := b.Eval(1, buf); v[4] != 1 {
		t.Errorf("B₅(hi) = %g, want 1", v[4])
	}
}

func TestQuantileKnots(t *testing.T) {
	x := []float64{9, 1, 2, 3, 4, 5, 6, 7, 8, 10}
	got := QuantileKnots(x, 2)
	if len(got) != 2 || !(got[0] > 3 && got[0] < 4.5) || !(got[1] > 6.5 && got[1] < 8) {
		t.Errorf("QuantileKnots(1..10, 2) = %v, want near the 33 %% and 66 %% quantiles", got)
	}
}

func TestCalibrateCPUModel(t *testing.T) {
	prior := PriorCPUModel(Destination, DataPlane{Verify: true}) // 100 + 250·Th
	tests := map[string]struct {
		base    CPUModel
		samples []Sample
		side    CPUSide
		want    CPUModel
		wantOK  bool
	}{
		// the demo's probe: one stream at 497 Mbit/s, the receiver at 80 millicores;
		// the prior says 100 + 250·0.497 = 224.25, so both parts scale by 80/224.25
		"one sample": {prior, []Sample{{Streams: 1, BitsPerSecond: 497e6, DestinationMillicores: 80}}, Destination,
			CPUModel{InterceptMillicores: 100 * 80 / 224.25, MillicoresPerGbps: 250 * 80 / 224.25, Samples: 1}, true},
		// two samples at one rate: their mean, 90 millicores at 1 Gbit/s against 350
		"several at one rate": {prior, []Sample{{BitsPerSecond: 1e9, DestinationMillicores: 80}, {BitsPerSecond: 1e9, DestinationMillicores: 100}}, Destination,
			CPUModel{InterceptMillicores: 100 * 90.0 / 350, MillicoresPerGbps: 250 * 90.0 / 350, Samples: 2}, true},
		// the source side reads SourceMillicores only
		"the side's own measurement": {CPUModel{InterceptMillicores: 50, MillicoresPerGbps: 150}, []Sample{{BitsPerSecond: 2e9, SourceMillicores: 700, DestinationMillicores: 1}}, Source,
			CPUModel{InterceptMillicores: 100, MillicoresPerGbps: 300, Samples: 1}, true},
		"a base that predicts nothing: the ratio through the origin": {CPUModel{}, []Sample{{BitsPerSecond: 5e8, SourceMillicores: 60}}, Source,
			CPUModel{MillicoresPerGbps: 120, Samples: 1}, true},
		"a corrupt base is sanitized first": {CPUModel{InterceptMillicores: math.NaN(), MillicoresPerGbps: 200}, []Sample{{BitsPerSecond: 1e9, SourceMillicores: 100}}, Source,
			CPUModel{MillicoresPerGbps: 100, Samples: 1}, true},
		"no CPU measured at that side": {prior, []Sample{{BitsPerSecond: 1e9, SourceMillicores: 100}}, Destination, CPUModel{}, false},
		"unusable samples are skipped": {prior, []Sample{{BitsPerSecond: math.Inf(1), DestinationMillicores: 100}, {BitsPerSecond: 1e9, DestinationMillicores: math.Inf(1)}}, Destination, CPUModel{}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := CalibrateCPUModel(tc.base, tc.samples, tc.side)
			if ok != tc.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tc.wantOK)
			}
			if !relClose(got.InterceptMillicores, tc.want.InterceptMillicores, 1e-9) || !relClose(got.MillicoresPerGbps, tc.want.MillicoresPerGbps, 1e-9) || got.Samples != tc.want.Samples {
				t.Errorf("model = %+v, want %+v", got, tc.want)
			}
			if ok {
				// it passes through the measurement
				var gbps, used float64
				var n int
				for _, s := range tc.samples {
					u := s.SourceMillicores
					if tc.side == Destination {
						u = s.DestinationMillicores
					}
					if usable(s.BitsPerSecond) && u > 0 && !math.IsInf(u, 0) {
						gbps, used, n = gbps+s.BitsPerSecond, used+u, n+1
					}
				}
				if m := got.Millicores(gbps / float64(n)); !relClose(m, used/float64(n), 1e-9) {
					t.Errorf("at the samples' mean rate the model says %g millicores, measured %g", m, used/float64(n))
				}
			}
		})
	}
}
