package optimizer

import (
	"errors"
	"fmt"
	"math"
	"strings"
)

// ErrNoPoints is returned when not one stream count has a usable rate.
var ErrNoPoints = errors.New("optimizer: no stream sample with a usable rate")

// FitStreams is the stream model of a stripe: BestCmb over the papers' three models,
// and when none of them fits — fewer than three stream counts, or a curve that does
// not rise (ErrNoValidFit) — FitPlateau. It fails only when no point is usable.
// why says, for people, which model was taken and why.
//
// A model of the papers whose peak lies beyond the largest sample is said so in why:
// extrapolated where the model is trusted there (TrustedBeyondSamples), else held at
// the largest sample, with the reason; so is a peak between samples above all of them,
// which the plan does not count on.
func FitStreams(pts []StreamPoint) (fit StreamFit, why string, err error) {
	fit, err = BestCmb(pts)
	if err == nil {
		why = fmt.Sprintf("%s fits the samples best (BestCmb, mean error %s)", fit.Model, FormatBitsPerSecond(fit.FitErrorBitsPerSecond))
		return fit, why + beyondSamples(fit, pts), nil
	}
	plateau, perr := FitPlateau(pts)
	if perr != nil {
		return StreamFit{}, "", errors.Join(err, perr)
	}
	switch {
	case plateau.OptimalStreams == 1:
		why = fmt.Sprintf("the rate does not rise with more streams (%s): one stream fills the path", describePoints(pts))
	default:
		why = fmt.Sprintf("no model of the papers fits %s (%v): the path's capacity as measured, reached at %d streams", describePoints(pts), err, plateau.OptimalStreams)
	}
	return plateau, why, nil
}

// KeepPaidStreams makes a fit count on what a step up the samples measured to pay. A
// step up the sampled stream counts pays when it passes ExpSelection's test with twice
// the accuracy (the slope beats 2·accuracy·Th₁/n₁; accuracy ≤ 0 means
// DefaultAccuracy): a step is the difference of two samples, each as noisy as the
// accuracy allows, and unlike ExpSelection, which only takes one more sample when a
// step passes, this overrules the model (with α alone, noise at a plateau faked enough
// gains to put the streams of 0.4 % more of TestSyntheticCurvesAccuracy's paths beyond
// a doubling of their optimum). The most streams reached by a step that paid is the
// floor.
//
// Below the floor the fit then predicts no more than the samples' straight lines, and
// from the floor on no less than its sample, wherever the model's optimum lies: a model
// drawn through points from both sides of the step may put the counts just below it
// well above what was measured, and that is where OptB seeks the fewest streams within
// 2 % of the peak. On issue 11's suite beside four competing flows the samples rose
// 662 → 789 Mbit/s from 8 to 16 streams, Dinda's curve put 775 at 10 streams, and the
// plan of 10 ran 54.7 s where the grid's 16 × 2 took 49.6 (ninth session); in the
// eighth, 636 → 757 from 8 to 16, and the plan of 9 streams ran at 530–590 Mbit/s.
//
// Where the model's optimum lies below the floor, the model is contradicted where it
// matters — it says fewer streams carry as much, and a measurement said they do not —
// and the optimum is held at the floor: on the clean path the samples rose 896 → 991
// Mbit/s from 2 to 4 streams, Newton's fit (peak at 3) put 981 Mbit/s at 2 streams,
// and the operator's job ran its 4 GiB at 2 (eighth session). A model whose optimum is
// at or beyond the floor keeps it. The seeds' LONI samples (903.41, 954.84, 990.91 and
// 953.43 Mbit/s at 1, 2, 4 and 8 streams) have no step that gains 10 %: the slides' 2
// streams stand. A floor that changes nothing (the model already at or under the lines
// below it, its optimum at or beyond) is not kept. why is the fit's reason, with the
// floor said when it is kept.
func KeepPaidStreams(fit StreamFit, why string, pts []StreamPoint, accuracy float64) (StreamFit, string) {
	accuracy = orDefaultAccuracy(accuracy)
	if !sortedDistinct(pts) {
		pts = normalizePoints(append([]StreamPoint(nil), pts...))
	}
	floor := 0
	for i := 1; i < len(pts); i++ {
		if stepPays(pts[i-1], pts[i], 2*accuracy) {
			floor = i
		}
	}
	if floor == 0 {
		return fit, why
	}
	from, top := pts[floor-1], pts[floor]
	lines := EmpiricalCurve(pts[:floor+1])
	above := false // the model puts some count below the floor above the lines
	for n := 1; n < top.Streams && !above; n++ {
		above = fit.BitsPerSecond(n) > lines.BitsPerSecond(n)
	}
	if !above && top.Streams <= fit.OptimalStreams {
		return fit, why // nothing to hold
	}
	fit.Floor = append([]StreamPoint(nil), lines...)
	gain := fmt.Sprintf("measured a gain (%s with %d, %s with %d)",
		FormatBitsPerSecond(from.BitsPerSecond), from.Streams, FormatBitsPerSecond(top.BitsPerSecond), top.Streams)
	if top.Streams <= fit.OptimalStreams {
		fit.PeakBitsPerSecond = math.Max(fit.PeakBitsPerSecond, top.BitsPerSecond)
		return fit, why + fmt.Sprintf("; %d streams %s: below them the plan counts on no more than the samples' straight lines", top.Streams, gain)
	}
	model := fit.OptimalStreams
	fit.OptimalStreams = top.Streams
	fit.PeakBitsPerSecond = fit.BitsPerSecond(top.Streams)
	fit.Extrapolated = false
	return fit, why + fmt.Sprintf("; its optimum, %d streams, lies below %d streams, which %s: the optimum is held at %d streams, and below it the plan counts on no more than the samples' straight lines",
		model, top.Streams, gain, top.Streams)
}

// FitPlateau fits the Plateau model, Th = min(n·r, C): C is the best measured rate
// (the path's capacity as far as the samples show it) and r the rate per stream of
// the smallest stream count measured (one stream, as ExpSelection always samples),
// so the knee C/r is where the streams reach the capacity. A flat or falling curve
// has r = C: the capacity is reached at one stream. The model never predicts more than
// was measured, at any stream count; it is what we plan from when the papers' models
// do not fit (FitStreams), which on a clean path is the usual case: one stream fills
// it and the samples at 2 and 4 streams only add noise or a little loss.
//
// The fit error is the mean absolute error over every point, as BestCmb's.
func FitPlateau(pts []StreamPoint) (StreamFit, error) {
	if !sortedDistinct(pts) {
		pts = normalizePoints(append([]StreamPoint(nil), pts...))
	}
	if len(pts) == 0 {
		return StreamFit{}, ErrNoPoints
	}
	first, top := pts[0], pts[0]
	for _, p := range pts {
		if p.BitsPerSecond > top.BitsPerSecond {
			top = p
		}
	}
	capacity := top.BitsPerSecond
	perStream := first.BitsPerSecond / float64(first.Streams)
	a, b := 1/(capacity*capacity), 1/(perStream*perStream)
	if !(a > 0) || math.IsInf(b, 0) || !finite(a) {
		return StreamFit{}, ErrNoPoints
	}
	b = math.Max(a, b) // rounding: one stream never carries more than the capacity
	fit := StreamFit{Model: Plateau, A: a, B: b, Points: [3]int{first.Streams, top.Streams, top.Streams},
		MaxSampledStreams: pts[len(pts)-1].Streams, BestSampledBitsPerSecond: capacity}
	var sum float64
	for _, p := range pts {
		sum += math.Abs(p.BitsPerSecond - fit.BitsPerSecond(p.Streams))
	}
	fit.FitErrorBitsPerSecond = sum / float64(len(pts))
	fit.OptimalStreams = Optimum(Plateau, a, b, 0, fit.MaxSampledStreams)
	fit.PeakBitsPerSecond = fit.BitsPerSecond(fit.OptimalStreams)
	return fit, nil
}

// beyondSamples says, for people, where the model's peak lies beyond what the samples
// show: beyond the largest sample (extrapolated or held), or between samples above
// all of them (PeakBitsPerSecond holds the best sample); "" when it does not.
func beyondSamples(fit StreamFit, pts []StreamPoint) string {
	top := fit.MaxSampledStreams
	if fit.Extrapolated {
		return fmt.Sprintf("; its optimum, %d streams, lies beyond the largest sample (%d streams): extrapolated, since the samples still rose by more than %.3g %% per doubling at their end and the model fits them within %.3g %%",
			fit.OptimalStreams, top, 100*DefaultAccuracy, 100*DefaultAccuracy/2)
	}
	peak := Optimum(fit.Model, fit.A, fit.B, fit.C, top)
	if peak <= top {
		if model := fit.BitsPerSecond(fit.OptimalStreams); model > fit.PeakBitsPerSecond {
			return fmt.Sprintf("; its peak, %s at %d streams, lies above every sample: the plan counts on the best sample, %s",
				FormatBitsPerSecond(model), fit.OptimalStreams, FormatBitsPerSecond(fit.PeakBitsPerSecond))
		}
		return ""
	}
	cause := fmt.Sprintf("its mean error is more than %.3g %% of the rate", 100*DefaultAccuracy/2)
	if prev, last, rising := risingAtEnd(pts, DefaultAccuracy); !rising && last.Streams > 0 {
		cause = fmt.Sprintf("the samples stopped rising (%s at %d streams, %s at %d)", FormatBitsPerSecond(prev.BitsPerSecond), prev.Streams,
			FormatBitsPerSecond(last.BitsPerSecond), last.Streams)
	}
	return fmt.Sprintf("; it peaks beyond the largest sample, but %s: the optimum is held at %d streams", cause, top)
}

// describePoints writes points for people: "497, 474 and 469 Mbit/s at 1, 2 and 4
// streams".
func describePoints(pts []StreamPoint) string {
	if !sortedDistinct(pts) {
		pts = normalizePoints(append([]StreamPoint(nil), pts...))
	}
	rates, counts := make([]string, len(pts)), make([]string, len(pts))
	for i, p := range pts {
		rates[i], counts[i] = FormatBitsPerSecond(p.BitsPerSecond), fmt.Sprint(p.Streams)
	}
	stream := "streams"
	if len(pts) == 1 && pts[0].Streams == 1 {
		stream = "stream"
	}
	return fmt.Sprintf("%s at %s %s", joinAnd(rates), joinAnd(counts), stream)
}

func joinAnd(s []string) string {
	if len(s) < 2 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " and " + s[len(s)-1]
}
