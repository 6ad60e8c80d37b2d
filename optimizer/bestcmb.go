package optimizer

import (
	"errors"
	"math"
)

// ErrTooFewPoints is returned when fewer than three distinct stream counts were
// measured: every model needs three.
var ErrTooFewPoints = errors.New("optimizer: at least three distinct stream counts are needed to fit a stream model")

// ErrNoValidFit is returned when no 3-point combination gives coefficients in any
// model's effective range (DADC'09 §3.1.1).
var ErrNoValidFit = errors.New("optimizer: no combination of samples gives a valid stream model")

// BestCmb fits every 3-point combination of pts with each of the given models (all
// three when none is given), keeps the combinations whose coefficients are valid
// (§3.1.1), and returns the one with the least mean absolute error over all of pts —
// BestCmb of Yildirim, Yin & Kosar, DADC'09 §3.2, taken across models as well as
// combinations. pts may be in any order; repeated stream counts are averaged and
// unusable points (rate not finite and positive, streams < 1) are dropped first.
//
// The result carries the model, its coefficients, the optimum stream count (Optimum,
// beyond the largest sample only where TrustedBeyondSamples allows), the predicted
// peak (the model at the optimum, but no more than the best sample unless the optimum
// is such an extrapolation) and the fit error. Use StreamFit.Curve for the predicted
// curve.
func BestCmb(pts []StreamPoint, models ...Model) (StreamFit, error) {
	if len(models) == 0 {
		models = Models
	}
	if !sortedDistinct(pts) {
		pts = normalizePoints(append([]StreamPoint(nil), pts...))
	}
	n := len(pts)
	if n < 3 {
		return StreamFit{}, ErrTooFewPoints
	}
	best := StreamFit{FitErrorBitsPerSecond: math.Inf(1)}
	found := false
	// errors closer than this are a tie (rounding), which the earlier model keeps
	var meanRate float64
	for _, p := range pts {
		meanRate += p.BitsPerSecond / float64(n)
	}
	tie := 1e-9 * meanRate
	// per point, once: n, ln n (Newton's n^c′ = exp(c′·ln n)) and y = n²/Th²
	var buf [3 * 16]float64
	var ns, logs, ys []float64
	if n <= 16 {
		ns, logs, ys = buf[:n], buf[16:16+n], buf[32:32+n]
	} else {
		ns, logs, ys = make([]float64, n), make([]float64, n), make([]float64, n)
	}
	for i, p := range pts {
		ns[i] = float64(p.Streams)
		logs[i] = math.Log(ns[i])
		ys[i] = (ns[i] / p.BitsPerSecond) * (ns[i] / p.BitsPerSecond)
	}
	for i := 0; i < n-2; i++ {
		for j := i + 1; j < n-1; j++ {
			for k := j + 1; k < n; k++ {
				tn := [3]float64{ns[i], ns[j], ns[k]}
				tl := [3]float64{logs[i], logs[j], logs[k]}
				ty := [3]float64{ys[i], ys[j], ys[k]}
				for _, m := range models {
					a, b, c, ok := fitThree(m, tn, tl, ty)
					if !ok || !Valid(m, a, b, c) {
						continue
					}
					err := meanAbsError(m, a, b, c, pts, logs, best.FitErrorBitsPerSecond-tie)
					if err < best.FitErrorBitsPerSecond-tie {
						found = true
						best = StreamFit{Model: m, A: a, B: b, C: c, FitErrorBitsPerSecond: err,
							Points: [3]int{pts[i].Streams, pts[j].Streams, pts[k].Streams}}
					}
				}
			}
		}
	}
	if !found {
		return StreamFit{}, ErrNoValidFit
	}
	best.MaxSampledStreams = pts[n-1].Streams
	for _, p := range pts {
		best.BestSampledBitsPerSecond = math.Max(best.BestSampledBitsPerSecond, p.BitsPerSecond)
	}
	// CALOPTSTREAMNO: the model's peak, beyond the samples only where the model is
	// trusted there
	ceiling := best.MaxSampledStreams
	if TrustedBeyondSamples(best, pts, 0) {
		ceiling = optimumCeiling(best.MaxSampledStreams)
	}
	best.OptimalStreams = optimumWithin(best.Model, best.A, best.B, best.C, best.MaxSampledStreams, ceiling)
	best.Extrapolated = best.OptimalStreams > best.MaxSampledStreams
	best.PeakBitsPerSecond = best.BitsPerSecond(best.OptimalStreams)
	if !best.Extrapolated {
		// a peak drawn between samples above all of them is the fit's, not the path's
		best.PeakBitsPerSecond = math.Min(best.PeakBitsPerSecond, best.BestSampledBitsPerSecond)
	}
	return best, nil
}

// meanAbsError is (1/n)·Σ|Th − Th_pred| over pts; it gives up (returning +Inf) as soon
// as the running sum shows the result cannot beat bound.
func meanAbsError(m Model, a, b, c float64, pts []StreamPoint, logs []float64, bound float64) float64 {
	limit := bound * float64(len(pts))
	var sum float64
	for i, p := range pts {
		var pred float64
		if m == Newton {
			// predict(Newton, …) without math.Pow: the same value to rounding
			n := float64(p.Streams)
			if q := a*math.Exp(c*logs[i]) + b; q > 0 && !math.IsInf(q, 0) {
				pred = n / math.Sqrt(q)
			}
		} else {
			pred = predict(m, a, b, c, float64(p.Streams))
		}
		sum += math.Abs(p.BitsPerSecond - pred)
		if sum >= limit {
			return math.Inf(1)
		}
	}
	return sum / float64(len(pts))
}
