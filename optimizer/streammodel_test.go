package optimizer

import (
	"errors"
	"math"
	"slices"
	"strings"
	"testing"
)

// points evaluates a model exactly at the given stream counts.
func points(m Model, a, b, c float64, ns ...int) []StreamPoint {
	out := make([]StreamPoint, len(ns))
	for i, n := range ns {
		out[i] = StreamPoint{Streams: n, BitsPerSecond: predict(m, a, b, c, float64(n))}
	}
	return out
}

func relClose(got, want, tol float64) bool {
	if want == 0 {
		return math.Abs(got) <= tol
	}
	return math.Abs(got-want) <= tol*math.Abs(want)
}

// Coefficients in (streams/(bit/s))², chosen so that the curves peak near 1 Gbit/s.
const (
	fsoA, fsoB, fsoC = 1e-18, -4e-18, 8e-18 // optimum −2c/b = 4
	nwtA, nwtB, nwtC = 1e-19, 4e-18, 3.0    // optimum (2b/(a(c−2)))^(1/c) = 80^(1/3) ≈ 4.31
	dndA, dndB       = 1e-18, 3e-18
)

func TestFitThreeRecoversCoefficients(t *testing.T) {
	tests := map[string]struct {
		model   Model
		a, b, c float64
		ns      [3]int
	}{
		// 1, 2, 4: n₃ − n₂ = 2, where the printed eq. 8 (no division by n₃ − n₂) would
		// double a′; the algebra must recover it exactly.
		"full second order 1,2,4":  {FullSecondOrder, fsoA, fsoB, fsoC, [3]int{1, 2, 4}},
		"full second order 2,4,8":  {FullSecondOrder, fsoA, fsoB, fsoC, [3]int{2, 4, 8}},
		"full second order 1,3,16": {FullSecondOrder, fsoA, fsoB, fsoC, [3]int{1, 3, 16}},
		"newton 1,2,4":             {Newton, nwtA, nwtB, nwtC, [3]int{1, 2, 4}},
		"newton 2,8,32":            {Newton, nwtA, nwtB, nwtC, [3]int{2, 8, 32}},
		"newton steep c'=7.5":      {Newton, 1e-25, 5e-18, 7.5, [3]int{1, 4, 16}},
		"dinda 1,2,4":              {Dinda, dndA, dndB, 0, [3]int{1, 2, 4}},
		"dinda unordered 8,1,4":    {Dinda, dndA, dndB, 0, [3]int{8, 1, 4}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p := points(tc.model, tc.a, tc.b, tc.c, tc.ns[0], tc.ns[1], tc.ns[2])
			a, b, c, ok := FitThree(tc.model, [3]StreamPoint{p[0], p[1], p[2]})
			if !ok {
				t.Fatalf("FitThree(%s) found no solution", tc.model)
			}
			if !relClose(a, tc.a, 1e-6) || !relClose(b, tc.b, 1e-6) || !relClose(c, tc.c, 1e-6) {
				t.Errorf("FitThree(%s) = (%g, %g, %g), want (%g, %g, %g)", tc.model, a, b, c, tc.a, tc.b, tc.c)
			}
		})
	}
}

func TestFitThreeRejectsDegeneratePoints(t *testing.T) {
	good := points(FullSecondOrder, fsoA, fsoB, fsoC, 1, 2, 4)
	tests := map[string][3]StreamPoint{
		"repeated stream count": {good[0], good[0], good[2]},
		"zero rate":             {good[0], {Streams: 2, BitsPerSecond: 0}, good[2]},
		"NaN rate":              {good[0], {Streams: 2, BitsPerSecond: math.NaN()}, good[2]},
		"zero streams":          {{Streams: 0, BitsPerSecond: 1e9}, good[1], good[2]},
	}
	for name, p := range tests {
		t.Run(name, func(t *testing.T) {
			for _, m := range Models {
				if _, _, _, ok := FitThree(m, p); ok {
					t.Errorf("FitThree(%s) accepted %v", m, p)
				}
			}
		})
	}
}

func TestNewtonRejectsExponentBelowTwo(t *testing.T) {
	// c′ = 1.5 describes a real curve, but §3.1.1 requires c′ ≥ 2: no valid solution.
	p := points(Newton, 1e-19, 4e-18, 1.5, 1, 2, 4)
	if a, b, c, ok := FitThree(Newton, [3]StreamPoint{p[0], p[1], p[2]}); ok && Valid(Newton, a, b, c) {
		t.Errorf("FitThree(Newton) gave valid (%g, %g, %g) for c′ = 1.5", a, b, c)
	}
}

func TestValidFollowsSection311(t *testing.T) {
	tests := map[string]struct {
		model   Model
		a, b, c float64
		want    bool
	}{
		"dinda ok":                         {Dinda, 1, 1, 0, true},
		"dinda a<=0":                       {Dinda, 0, 1, 0, false},
		"dinda b<=0":                       {Dinda, 1, -1, 0, false},
		"newton ok":                        {Newton, 1, 10, 3, true},
		"newton c<2":                       {Newton, 1, 10, 1.9, false},
		"newton c=2 (no peak)":             {Newton, 1, 10, 2, true},
		"newton optimum <= 1":              {Newton, 1, 0.4, 3, false}, // (0.8)^(1/3) < 1
		"newton b<=0":                      {Newton, 1, -1, 3, false},
		"full second order ok":             {FullSecondOrder, 1, -4, 8, true},
		"full second order b>=0":           {FullSecondOrder, 1, 1, 1, false},
		"full second order c<=0":           {FullSecondOrder, 1, -1, -1, false},
		"full second order 2c+b<=0":        {FullSecondOrder, 1, -4, 2, false},
		"full second order quadratic dips": {FullSecondOrder, 1, -10, 6, false}, // 2c+b > 0 but n=5 gives 25−50+6 < 0
		"not finite":                       {FullSecondOrder, math.Inf(1), -4, 8, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Valid(tc.model, tc.a, tc.b, tc.c); got != tc.want {
				t.Errorf("Valid(%s, %g, %g, %g) = %v, want %v", tc.model, tc.a, tc.b, tc.c, got, tc.want)
			}
		})
	}
}

func TestOptimum(t *testing.T) {
	tests := map[string]struct {
		model      Model
		a, b, c    float64
		maxSampled int
		want       int
	}{
		// −2c′/b′ = 4 exactly
		"full second order": {FullSecondOrder, fsoA, fsoB, fsoC, 16, 4},
		// (2b′/(a′(c′−2)))^(1/c′) = 80^(1/3) = 4.31: 4 predicts higher than 5
		"newton": {Newton, nwtA, nwtB, nwtC, 16, 4},
		// a peak far beyond the samples is bounded by one doubling past them
		"bounded extrapolation": {FullSecondOrder, 1e-18, -1e-18, 50e-18, 8, 16},
		// Dinda rises for ever: bounded by the samples, the first count within 1 % of
		// the prediction at the largest sample. Th(n)·√a′ = 1/√(1+3/n²): 0.9942 at 16,
		// so the bar is 0.9843; n = 9 gives 0.9820, n = 10 gives 0.9853.
		"dinda bounded by samples": {Dinda, dndA, dndB, 0, 16, 10},
		"dinda plateau":            {Dinda, 1e-18, 1e-20, 0, 16, 1},
		"newton c'=2 like dinda":   {Newton, dndA, dndB, 2, 16, 10},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Optimum(tc.model, tc.a, tc.b, tc.c, tc.maxSampled); got != tc.want {
				t.Errorf("Optimum = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestBestCmbRecoversNoisyCurve(t *testing.T) {
	tests := map[string]struct {
		model   Model
		a, b, c float64
		wantOpt int
	}{
		"full second order": {FullSecondOrder, fsoA, fsoB, fsoC, 4},
		"newton":            {Newton, nwtA, nwtB, nwtC, 4},
	}
	// deterministic ±1 % perturbation
	noise := []float64{0.01, -0.008, 0.004, -0.01, 0.006, -0.003, 0.009, -0.005}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pts := points(tc.model, tc.a, tc.b, tc.c, 1, 2, 3, 4, 6, 8, 12, 16)
			for i := range pts {
				pts[i].BitsPerSecond *= 1 + noise[i]
			}
			fit, err := BestCmb(pts)
			if err != nil {
				t.Fatal(err)
			}
			if d := fit.OptimalStreams - tc.wantOpt; d < -1 || d > 1 {
				t.Errorf("optimum = %d, want %d ± 1: %s", fit.OptimalStreams, tc.wantOpt, fit)
			}
			// the fit error is the mean |measured − predicted|, at most the noise
			if fit.FitErrorBitsPerSecond > 0.02*fit.PeakBitsPerSecond {
				t.Errorf("fit error %g above 2 %% of the peak: %s", fit.FitErrorBitsPerSecond, fit)
			}
		})
	}
}

func TestBestCmbPicksTheModelThatFits(t *testing.T) {
	// Exact points of each model: BestCmb must find that model with (almost) no error.
	tests := map[string]struct {
		model   Model
		a, b, c float64
	}{
		"full second order": {FullSecondOrder, fsoA, fsoB, fsoC},
		"dinda":             {Dinda, dndA, dndB, 0},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fit, err := BestCmb(points(tc.model, tc.a, tc.b, tc.c, 1, 2, 4, 8, 16))
			if err != nil {
				t.Fatal(err)
			}
			if fit.FitErrorBitsPerSecond > 1e-6*fit.PeakBitsPerSecond {
				t.Errorf("fit error %g on exact points: %s", fit.FitErrorBitsPerSecond, fit)
			}
			if fit.Model != tc.model {
				t.Errorf("model = %s, want %s: %s", fit.Model, tc.model, fit)
			}
		})
	}
}

func TestBestCmbErrors(t *testing.T) {
	tests := map[string]struct {
		pts  []StreamPoint
		want error
	}{
		"two points":              {[]StreamPoint{{1, 1e9}, {2, 1.5e9}}, ErrTooFewPoints},
		"three with a repeat":     {[]StreamPoint{{1, 1e9}, {2, 1.5e9}, {2, 1.6e9}}, ErrTooFewPoints},
		"unusable rates":          {[]StreamPoint{{1, 1e9}, {2, math.NaN()}, {4, -1}}, ErrTooFewPoints},
		"linear: no model valid":  {[]StreamPoint{{1, 1e8}, {2, 2e8}, {4, 4e8}, {8, 8e8}}, ErrNoValidFit},
		"falling: no model valid": {[]StreamPoint{{1, 8e8}, {2, 4e8}, {4, 2e8}}, ErrNoValidFit},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := BestCmb(tc.pts); !errors.Is(err, tc.want) {
				t.Errorf("BestCmb error = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestCurveAndPredictAgree(t *testing.T) {
	fit, err := BestCmb(loniStreams)
	if err != nil {
		t.Fatal(err)
	}
	curve := fit.Curve(8)
	for i, v := range curve {
		if v != fit.BitsPerSecond(i+1) || !(v > 0) {
			t.Errorf("Curve[%d] = %g, BitsPerSecond(%d) = %g", i, v, i+1, fit.BitsPerSecond(i+1))
		}
	}
	if fit.Curve(0) != nil {
		t.Error("Curve(0) is not empty")
	}
}

func TestStreamPointsAveragesAndFilters(t *testing.T) {
	samples := []Sample{
		{Streams: 2, BufferBytes: 1 << 20, BitsPerSecond: 2e9},
		{Streams: 1, BufferBytes: 1 << 20, BitsPerSecond: 1e9},
		{Streams: 2, BufferBytes: 1 << 20, BitsPerSecond: 4e9},
		{Streams: 4, BufferBytes: 0, BitsPerSecond: 9e9},              // other buffer
		{Streams: 4, BufferBytes: 1 << 20, BitsPerSecond: math.NaN()}, // unusable
		{Streams: 0, BufferBytes: 1 << 20, BitsPerSecond: 1e9},        // no streams
	}
	got := StreamPoints(samples, 1<<20)
	want := []StreamPoint{{1, 1e9}, {2, 3e9}}
	if len(got) != len(want) {
		t.Fatalf("StreamPoints = %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("StreamPoints[%d] = %v, want %v", i, got[i], want[i])
		}
	}
}

func TestEmpiricalCurve(t *testing.T) {
	e := EmpiricalCurve{{1, 1e9}, {4, 4e9}, {8, 4.02e9}}
	tests := map[int]float64{0: 1e9, 1: 1e9, 2: 2e9, 4: 4e9, 6: 4.01e9, 100: 4.02e9}
	for n, want := range tests {
		if got := e.BitsPerSecond(n); !relClose(got, want, 1e-12) {
			t.Errorf("BitsPerSecond(%d) = %g, want %g", n, got, want)
		}
	}
	if got := e.Optimal(); got != 4 { // 4 is within 1 % of the best (8)
		t.Errorf("Optimal = %d, want 4", got)
	}
}

// TestExtrapolationOnlyWhereTrusted (issue 11): the optimum goes beyond the largest
// sample only where the model is trusted there, and the plan says so.
func TestExtrapolationOnlyWhereTrusted(t *testing.T) {
	tests := map[string]struct {
		pts          []StreamPoint
		wantOptimum  int
		extrapolated bool
		why          string // the end of FitStreams' why
	}{
		// exact points of a Newton curve peaking at 6 streams, sampled at 1, 2, 3: the
		// samples still rise (+39 % from 2 to 3) and the model fits them exactly
		"still rising, exact fit": {points(Newton, 1e-19, 1.08e-17, 3, 1, 2, 3), 6, true,
			"; its optimum, 6 streams, lies beyond the largest sample (3 streams): extrapolated, since the samples still rose by more than 5 % per doubling at their end and the model fits them within 2.5 %"},
		// Newton through these peaks at 9 streams, but 4 → 8 gained 2.9 %: held at 8
		"flattened": {[]StreamPoint{{1, 1751e6}, {2, 2499e6}, {4, 2871e6}, {8, 2955e6}}, 8, false,
			"; it peaks beyond the largest sample, but the samples stopped rising (2.87 Gbit/s at 4 streams, 2.96 Gbit/s at 8): the optimum is held at 8 streams"},
		// the peak within the samples: nothing to say
		"LONI": {loniStreams, 3, false, "(BestCmb, mean error 7.59 Mbit/s)"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			fit, why, err := FitStreams(tc.pts)
			if err != nil {
				t.Fatal(err)
			}
			if fit.OptimalStreams != tc.wantOptimum || fit.Extrapolated != tc.extrapolated {
				t.Errorf("optimum %d, extrapolated %v; want %d, %v: %s", fit.OptimalStreams, fit.Extrapolated, tc.wantOptimum, tc.extrapolated, fit)
			}
			if !strings.HasSuffix(why, tc.why) {
				t.Errorf("why %q, want it to end %q", why, tc.why)
			}
		})
	}

	// the plan of the rising samples: 5 streams (1.036 Gbit/s, within 2 % of the
	// 1.054 at 6), beyond the 3 sampled, and a note that says so
	var samples []Sample
	for _, p := range tests["still rising, exact fit"].pts {
		samples = append(samples, Sample{Streams: p.Streams, BitsPerSecond: p.BitsPerSecond})
	}
	node := nodes("n", 1, Node{NICBitsPerSecond: 100e9})
	plan, err := MakePlan(PlanInput{Samples: samples, SourceNodes: node, DestinationNodes: node})
	if err != nil {
		t.Fatal(err)
	}
	if plan.Flow.StreamsPerStripe != 5 || !strings.Contains(plan.FitReason, "extrapolated") {
		t.Errorf("plan %s (%s), want 5 streams from the extrapolated model", plan.Flow.Reason, plan.FitReason)
	}
	note := "5 streams per stripe lie beyond the largest sample (3 streams): the Newton model is trusted there (see its reason)"
	if !slices.Contains(plan.Notes, note) {
		t.Errorf("notes %q, want %q", plan.Notes, note)
	}
}
