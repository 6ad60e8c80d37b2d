package optimizer

import (
	"fmt"
	"math"
)

// Model names a throughput-vs-parallel-streams model. The values are the names the API
// uses (v1alpha1.StreamModelName).
type Model string

const (
	// Dinda is Th = n/√(a′n² + b′) (Lu, Qiao, Dinda & Bustamante, IPDPS'05, as restated
	// in Yildirim, Yin & Kosar, DADC'09 §1 and §3.1.1). It rises monotonically towards
	// 1/√a′ and so cannot predict a peak.
	Dinda Model = "Dinda"
	// Newton is Th = n/√(a′n^c′ + b′) (Yildirim & Kosar, Condor Week 2011, "Prediction of
	// Optimal Parallel Stream Number"; DADC'09 §3), named after the Newton iteration
	// that solves its coefficients.
	Newton Model = "Newton"
	// FullSecondOrder is Th = n/√(a′n² + b′n + c′) (DADC'09 §3, eq. 4).
	FullSecondOrder Model = "FullSecondOrder"
	// Plateau is Th = n/√max(a′n², b′) = min(n/√b′, 1/√a′): each stream carries 1/√b′
	// until the path's capacity 1/√a′ is reached, and more streams add nothing. It is
	// Dinda's curve with its knee made sharp, and the model of a curve that does not
	// rise: on a clean path one stream often fills it (b′ = a′). The papers are silent
	// on samples no model of theirs fits (a flat or falling curve fits none: each of
	// the three must rise from one stream); FitPlateau fits it then (see there).
	Plateau Model = "Plateau"
)

// Models are the papers' three models in the order BestCmb tries them, simplest first: on a
// tie in fit error (within rounding) the earlier one wins, so exact points of Dinda's
// curve, which the other two also describe with a vanishing extra term, give Dinda.
var Models = []Model{Dinda, Newton, FullSecondOrder}

// StreamFit is a fitted throughput-vs-streams curve of one stripe.
//
// Units: rates in bits per second, so the coefficients describe p′ₙ = n²/Thₙ² in
// (streams/(bit/s))²; they are tiny numbers (around 1e-18 on a 1 Gbit/s path), which
// float64 carries without loss of relative precision.
type StreamFit struct {
	Model Model
	// A, B and C are a′, b′ and c′ of the model; C is 0 for Dinda.
	A, B, C float64
	// OptimalStreams is the stream count at which the model peaks (see Optimum).
	OptimalStreams int
	// PeakBitsPerSecond is the model's prediction at OptimalStreams, but no more than
	// BestSampledBitsPerSecond unless Extrapolated: what one stripe carries as far as
	// the samples show it.
	PeakBitsPerSecond float64
	// FitErrorBitsPerSecond is the mean absolute error of the model over every point
	// BestCmb was given, not only the three it was fitted to (DADC'09 §3.2, BestCmb
	// line 8).
	FitErrorBitsPerSecond float64
	// Points are the stream counts of the three points the coefficients come from.
	Points [3]int
	// MaxSampledStreams is the largest stream count among the points; it bounds the
	// optimum of a model that rises monotonically, and of any model not trusted
	// beyond its samples (see TrustedBeyondSamples).
	MaxSampledStreams int
	// BestSampledBitsPerSecond is the best rate among the points; 0 when unknown (a
	// stored fit). A plan never predicts one stripe above it unless the fit is
	// trusted beyond its samples (NewPathCapacity).
	BestSampledBitsPerSecond float64
	// Extrapolated says OptimalStreams lies beyond MaxSampledStreams, which
	// TrustedBeyondSamples allowed.
	Extrapolated bool
	// Floor, when a step up the sampled stream counts measured a gain
	// (KeepPaidStreams), holds the samples up to and including the last such step's:
	// from its stream count on the fit predicts no less than it measured, below it no
	// more than the samples' straight lines, and OptimalStreams is at least that
	// count. Empty when no step measured a gain or holding it would change nothing.
	Floor []StreamPoint
}

// BitsPerSecond predicts the throughput of a stripe with n streams. It returns 0 where
// the model is undefined (p′ₙ ≤ 0), which a valid fit never is for n ≥ 1.
func (f StreamFit) BitsPerSecond(n int) float64 {
	th := predict(f.Model, f.A, f.B, f.C, float64(n))
	if len(f.Floor) > 0 {
		if top := f.Floor[len(f.Floor)-1]; n >= top.Streams {
			return math.Max(th, top.BitsPerSecond)
		}
		return math.Min(th, EmpiricalCurve(f.Floor).BitsPerSecond(n))
	}
	return th
}

// Optimal returns OptimalStreams (the Curve interface).
func (f StreamFit) Optimal() int { return f.OptimalStreams }

// Curve returns the predicted throughput for 1..maxStreams streams; element i is the
// prediction for i+1 streams.
func (f StreamFit) Curve(maxStreams int) []float64 {
	if maxStreams < 1 {
		return nil
	}
	out := make([]float64, maxStreams)
	for i := range out {
		out[i] = f.BitsPerSecond(i + 1)
	}
	return out
}

// String describes the fit for people.
func (f StreamFit) String() string {
	return fmt.Sprintf("%s a′=%g b′=%g c′=%g optimum=%d streams (%.4g bit/s), mean abs error %.4g bit/s",
		f.Model, f.A, f.B, f.C, f.OptimalStreams, f.PeakBitsPerSecond, f.FitErrorBitsPerSecond)
}

// pPrime is p′ₙ = n²/Thₙ² of the model (DADC'09 eq. 3).
func pPrime(m Model, a, b, c, n float64) float64 {
	switch m {
	case Dinda:
		return a*n*n + b
	case Newton:
		return a*math.Pow(n, c) + b
	case FullSecondOrder:
		return (a*n+b)*n + c
	case Plateau:
		return math.Max(a*n*n, b)
	}
	return math.NaN()
}

func predict(m Model, a, b, c, n float64) float64 {
	p := pPrime(m, a, b, c, n)
	if !(p > 0) || math.IsInf(p, 0) {
		return 0
	}
	th := n / math.Sqrt(p)
	if math.IsInf(th, 0) || math.IsNaN(th) {
		return 0
	}
	return th
}

// FitThree solves the coefficients of model m from three points with distinct stream
// counts (in any order). ok is false when the points admit no solution of the model's
// form; the coefficients may still be outside the model's valid region (see Valid).
//
//   - FullSecondOrder: closed form, DADC'09 eqs. 8–10. With yᵢ = nᵢ²/Thᵢ² the system
//     yᵢ = a′nᵢ² + b′nᵢ + c′ gives
//     a′ = [(y₃−y₁)/(n₃−n₁) − (y₂−y₁)/(n₂−n₁)] / (n₃−n₂),
//     b′ = (y₂−y₁)/(n₂−n₁) − (n₁+n₂)a′,
//     c′ = y₁ − n₁²a′ − n₁b′.
//     The paper prints eq. 8 without the division by (n₃−n₂) and eq. 10 with n₁a′ for
//     n₁²a′; both are typesetting slips (they agree with the algebra only when
//     n₃−n₂ = 1 and n₁ = 1). We use the algebra, and the tests recover known
//     coefficients from points such as 1, 2, 4 where the difference shows.
//   - Newton: yᵢ = a′nᵢ^c′ + b′ has no closed form in c′. Eliminating a′ and b′ leaves
//     R(c′) = (u₃^c′−1)/(u₂^c′−1) = (y₃−y₁)/(y₂−y₁) with uᵢ = nᵢ/n₁, and R is
//     increasing in c′, so the root is unique. We solve it by Newton's iteration on
//     (u₃^c′−1) − r(u₂^c′−1), safeguarded by bisection, over [2, cMax]: §3.1.1 requires
//     c′ ≥ 2, so a root below 2 is invalid anyway, and cMax (64, lowered so that n^c′
//     stays finite) rejects curves so steep that the samples contradict the model.
//   - Dinda: two coefficients from three points; we take the least-squares line of y
//     on n² through the three (the paper's BestCmb calls CALCOE on three points for
//     every model and is silent on how Dinda's two unknowns use them).
func FitThree(m Model, p [3]StreamPoint) (a, b, c float64, ok bool) {
	// sort the three by stream count
	if p[0].Streams > p[1].Streams {
		p[0], p[1] = p[1], p[0]
	}
	if p[1].Streams > p[2].Streams {
		p[1], p[2] = p[2], p[1]
	}
	if p[0].Streams > p[1].Streams {
		p[0], p[1] = p[1], p[0]
	}
	if p[0].Streams < 1 || p[0].Streams == p[1].Streams || p[1].Streams == p[2].Streams {
		return 0, 0, 0, false
	}
	var n, y, ln [3]float64
	for i := range p {
		if !usable(p[i].BitsPerSecond) {
			return 0, 0, 0, false
		}
		n[i] = float64(p[i].Streams)
		y[i] = (n[i] / p[i].BitsPerSecond) * (n[i] / p[i].BitsPerSecond)
		ln[i] = math.Log(n[i])
	}
	return fitThree(m, n, ln, y)
}

// fitThree is FitThree over three points sorted by distinct stream counts n, with
// ln n and yᵢ = nᵢ²/Thᵢ² already computed (BestCmb computes them once per point).
func fitThree(m Model, n, ln, y [3]float64) (a, b, c float64, ok bool) {
	switch m {
	case FullSecondOrder:
		s31 := (y[2] - y[0]) / (n[2] - n[0])
		s21 := (y[1] - y[0]) / (n[1] - n[0])
		a = (s31 - s21) / (n[2] - n[1])
		b = s21 - (n[0]+n[1])*a
		c = y[0] - n[0]*n[0]*a - n[0]*b
	case Dinda:
		var mx, my float64
		for i := range n {
			mx += n[i] * n[i] / 3
			my += y[i] / 3
		}
		var sxy, sxx float64
		for i := range n {
			dx := n[i]*n[i] - mx
			sxy += dx * (y[i] - my)
			sxx += dx * dx
		}
		a = sxy / sxx
		b = my - a*mx
	case Newton:
		var solved bool
		a, b, c, solved = solveNewton(n, ln, y)
		if !solved {
			return 0, 0, 0, false
		}
	default:
		return 0, 0, 0, false
	}
	if !finite(a) || !finite(b) || !finite(c) {
		return 0, 0, 0, false
	}
	return a, b, c, true
}

func finite(x float64) bool { return !math.IsInf(x, 0) && !math.IsNaN(x) }

// newtonCMax bounds c′ of the Newton model (see FitThree).
const newtonCMax = 64

// solveNewton solves yᵢ = a·nᵢ^c + b for c in [2, cMax] (n sorted ascending, ln = ln n).
func solveNewton(n, ln, y [3]float64) (a, b, c float64, ok bool) {
	d2, d3 := y[1]-y[0], y[2]-y[0]
	// a′ > 0 and c′ ≥ 2 make y increase with n; anything else has no valid solution.
	if !(d2 > 0) || !(d3 > d2) {
		return 0, 0, 0, false
	}
	u2, u3 := n[1]/n[0], n[2]/n[0]
	r := d3 / d2
	// R(2) = (u₃²−1)/(u₂²−1) > r means c′ < 2: invalid, and cheap to see.
	if (u3*u3-1)/(u2*u2-1) > r {
		return 0, 0, 0, false
	}
	l2, l3 := ln[1]-ln[0], ln[2]-ln[0]
	lr := math.Log(r)
	cMax := math.Min(newtonCMax, 700/ln[2])
	if cMax <= 2 {
		return 0, 0, 0, false
	}
	// h(c) = (u₃^c − 1) − r·(u₂^c − 1): its sign is that of ln R(c) − ln r, so it is
	// negative below the root and positive above, and it is convex there (h″ ≈
	// r(u₂^c−1)(ln²u₃ − ln²u₂) > 0), so Newton's iteration from above converges
	// monotonically — without a logarithm per step.
	h := func(c float64) (v, dv, scale float64) {
		e3, e2 := math.Expm1(c*l3), math.Expm1(c*l2)
		return e3 - r*e2, l3*(e3+1) - r*l2*(e2+1), e3
	}
	// R(c) > (u₃/u₂)^c, so c₀ = ln r/ln(u₃/u₂) lies above the root: an upper bracket
	// close to it.
	lo, hi := 2.0, math.Min(cMax, lr/(l3-l2))
	if !(hi > lo) {
		hi = cMax
	}
	if v, _, _ := h(hi); v < 0 {
		if hi >= cMax {
			return 0, 0, 0, false // the root lies beyond cMax
		}
		lo, hi = hi, cMax
		if v, _, _ := h(hi); v < 0 {
			return 0, 0, 0, false
		}
	}
	c = hi
	for i := 0; i < 60 && hi-lo > 1e-12*hi; i++ {
		v, dv, scale := h(c)
		if math.Abs(v) <= 1e-12*scale {
			break
		}
		if v < 0 {
			lo = c
		} else {
			hi = c
		}
		next := c - v/dv
		if !(next > lo && next < hi) { // Newton left the bracket: bisect
			next = (lo + hi) / 2
		}
		if math.Abs(next-c) <= 1e-11*c {
			c = next
			break
		}
		c = next
	}
	p1, p2 := math.Exp(c*ln[0]), math.Exp(c*ln[1])
	a = d2 / (p2 - p1)
	b = y[0] - a*p1
	return a, b, c, true
}

// Valid reports whether coefficients are in the model's effective range, DADC'09
// §3.1.1:
//
//   - Dinda: a′ > 0, b′ > 0.
//   - Newton: a′ > 0, b′ > 0, c′ ≥ 2, (2b′/(a′(c′−2)))^(1/c′) > 1 (c′ = 2 makes the
//     optimum infinite, which satisfies the last rule; the model is then Dinda's).
//   - Plateau (ours, not the paper's): a′ > 0 and b′ ≥ a′ (one stream carries no more
//     than the capacity), c′ = 0.
//   - FullSecondOrder: a′ > 0, b′ < 0, c′ > 0, 2c′ + b′ > 0. The paper's proof (§3.1.2)
//     prints "2c′ + b′ > 1" in its last line; −2c′/b′ > 1 with b′ < 0 is 2c′ + b′ > 0,
//     which is what §3.1.1 states and what we check. The proof also assumes
//     a′n² + b′n + c′ > 0 for every n ≥ 1, which the four rules alone do not ensure
//     (b′² > 4a′c′ lets the quadratic dip below zero); we check it too, since the
//     model is undefined where it fails.
func Valid(m Model, a, b, c float64) bool {
	if !finite(a) || !finite(b) || !finite(c) {
		return false
	}
	switch m {
	case Dinda:
		return a > 0 && b > 0
	case Newton:
		if !(a > 0 && b > 0 && c >= 2) {
			return false
		}
		if c == 2 {
			return true
		}
		return 2*b/(a*(c-2)) > 1 // x^(1/c) > 1 ⟺ x > 1 for c > 0
	case FullSecondOrder:
		if !(a > 0 && b < 0 && c > 0 && 2*c+b > 0) {
			return false
		}
		// minimum of the quadratic over n ≥ 1
		vertex := -b / (2 * a)
		if vertex < 1 {
			vertex = 1
		}
		return (a*vertex+b)*vertex+c > 0
	case Plateau:
		return a > 0 && b >= a && c == 0
	}
	return false
}

// TrustedBeyondSamples reports whether a model fitted to pts may place its optimum
// beyond the largest sample (at most one doubling, optimumCeiling). The papers always
// take the model's peak (DADC'09 §3.2, CALOPTSTREAMNO); a peak beyond the samples is
// then the model's shape, not a measurement, and we take it only where both hold:
//
//   - The samples still rise at their end: the step between the two largest stream
//     counts gained more than α per doubling (accuracy; DefaultAccuracy when ≤ 0),
//     the test that keeps ExpSelection going.
//     A sequence that ended because the rate flattened has shown where the path stops;
//     a peak the model draws beyond it is the model's extrapolation of noise.
//   - The model agrees with the samples within their noise: its mean absolute error
//     is at most α/2 of the largest sample's rate, half the gain that counts as a
//     rise, so that the rise it extrapolates is not its own error.
//
// With ExpSelection's samples the first holds only when the sequence stopped at the
// stream limit, which bounds the plan anyway; samples from elsewhere (a profile, a
// sequence with another limit) may still rise.
func TrustedBeyondSamples(fit StreamFit, pts []StreamPoint, accuracy float64) bool {
	accuracy = orDefaultAccuracy(accuracy)
	_, last, rising := risingAtEnd(pts, accuracy)
	return rising && fit.FitErrorBitsPerSecond <= accuracy/2*last.BitsPerSecond
}

// risingAtEnd returns the last two of pts (by stream count) and whether the step
// between them gained more than accuracy per doubling, ExpSelection's test: the slope
// beats α·Th₁/n₁. With fewer than two points it returns zeros and false.
func risingAtEnd(pts []StreamPoint, accuracy float64) (prev, last StreamPoint, rising bool) {
	if !sortedDistinct(pts) {
		pts = normalizePoints(append([]StreamPoint(nil), pts...))
	}
	n := len(pts)
	if n < 2 {
		return StreamPoint{}, StreamPoint{}, false
	}
	prev, last = pts[n-2], pts[n-1]
	rising = stepPays(prev, last, accuracy)
	return prev, last, rising
}

// optimumCeiling bounds an optimum beyond the samples: more than one doubling past the
// largest sampled stream count is an extrapolation the samples cannot support.
func optimumCeiling(maxSampled int) int {
	if maxSampled < 1 {
		maxSampled = 1
	}
	return 2 * maxSampled
}

// Optimum returns the stream count at which a valid model peaks, as an integer ≥ 1:
//
//   - FullSecondOrder: n* = −2c′/b′ (DADC'09 §3.1.2).
//   - Newton: n* = (2b′/(a′(c′−2)))^(1/c′) (the zero of dTh/dn).
//   - Dinda, Plateau, and Newton with c′ = 2, rise monotonically (Plateau up to its
//     knee, √(b′/a′) streams, and flat beyond), so the optimum is bounded by
//     the samples (the issue's reading of DADC'09 §1: Dinda's model "cannot predict the
//     optimal number"). The paper is silent on which sampled count to take; we take
//     the smallest n ≤ maxSampled whose predicted rate is within 1 % of the prediction
//     at maxSampled, so that a plateau does not cost streams it does not pay for.
//
// A real-valued n* is rounded to whichever neighbouring integer the model predicts
// higher, and bounded by 2·maxSampled (optimumCeiling): the samples of ExpSelection
// stop once the curve flattens, so a peak far beyond them is an artefact of the fit.
// BestCmb bounds it by maxSampled itself where the model is not trusted beyond its
// samples (TrustedBeyondSamples).
func Optimum(m Model, a, b, c float64, maxSampled int) int {
	return optimumWithin(m, a, b, c, maxSampled, optimumCeiling(maxSampled))
}

// optimumWithin is Optimum with the ceiling given: optimumCeiling(maxSampled) where
// the model is trusted beyond its samples, maxSampled where it is not.
func optimumWithin(m Model, a, b, c float64, maxSampled, ceiling int) int {
	var x float64
	monotone := false
	switch m {
	case FullSecondOrder:
		x = -2 * c / b
	case Newton:
		if c == 2 {
			monotone = true
		} else {
			x = math.Pow(2*b/(a*(c-2)), 1/c)
		}
	default:
		monotone = true
	}
	if monotone {
		top := maxSampled
		if top < 1 {
			top = 1
		}
		target := 0.99 * predict(m, a, b, c, float64(top))
		for n := 1; n < top; n++ {
			if predict(m, a, b, c, float64(n)) >= target {
				return n
			}
		}
		return top
	}
	if !(x >= 1) { // also catches NaN
		return 1
	}
	if x >= float64(ceiling) {
		return ceiling
	}
	lo := int(math.Floor(x))
	if lo < 1 {
		lo = 1
	}
	hi := lo + 1
	if predict(m, a, b, c, float64(hi)) > predict(m, a, b, c, float64(lo)) {
		return hi
	}
	return lo
}
