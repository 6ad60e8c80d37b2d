package optimizer

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// PathCapacity is what the path carries as far as the samples show it, for each
// stripe count: OPT_B's U_network, which Condor Week 2011 says is "found by the
// model", not given.
//
//   - One stripe carries the plateau of its stream curve (StripeBitsPerSecond): the
//     curve's best rate within the stream limit, but no more than the best sample
//     (StreamFit.BestSampledBitsPerSecond) unless the fit's optimum is a trusted
//     extrapolation beyond the samples (TrustedBeyondSamples; at most one doubling
//     past the largest sample). A model fitted through three noisy points may peak
//     between two samples above both; the samples never showed that rate, and with
//     5 % noise the overshoot is what most often puts a predicted peak more than
//     10 % off the true one (TestSyntheticCurvesAccuracy).
//   - More stripes carry more only where stripes were measured to pay: Gains are the
//     aggregate of k stripes over one stripe's, at each level of the stripe doubling
//     (send --auto's ExpSelection over stripes) whose doubling gained more than the
//     accuracy, the same test that ends ExpSelection. The first doubling that did not
//     pay ends them: the capacity is the level before it, for every stripe count
//     beyond. Between levels the gain is interpolated; beyond the last it is flat.
//
// With no stripe measured beyond one, the capacity is one stripe's plateau for every
// stripe count: a stripe curve says nothing of what a second stripe adds on the same
// path, and on a path that one stripe fills (the usual case on a clean path) a second
// only shares it. So the plan adds no stripe that no sample showed to pay.
type PathCapacity struct {
	// StripeBitsPerSecond is one stripe's plateau; +Inf when the curve's rate is
	// unknown (FlatCurve without a rate), and then the path does not bind.
	StripeBitsPerSecond float64
	// Gains are (stripes, aggregate ÷ one stripe's aggregate) of the levels that paid,
	// ascending, the first always (1, 1).
	Gains []StripeGain
	// Measured are the stripe levels measured (stripes, aggregate bit/s), for people.
	Measured []StreamPoint
	// StillRising says every doubling of the stripes measured paid: the path may
	// carry more than the most stripes measured did, so the capacity is only what is
	// known, and the planner does not name the path as what binds.
	StillRising bool
	// StripeStreams are the streams each stripe ran with in the stripe levels (0:
	// unknown). A gain of several stripes was measured with that many streams each
	// and says nothing of stripes with fewer: k stripes of one stream are k flows where
	// the measurement had k·StripeStreams (on the suite's path with a competing flow,
	// 2 × 3 streams measured 964 Mbit/s, and the plan of 2 × 1 it allowed ran at
	// 705), so At gives such a shape one stripe's plateau.
	StripeStreams int
}

// StripeGain is the measured aggregate of Stripes stripes over one stripe's.
type StripeGain struct {
	Stripes int
	Gain    float64
}

// NewPathCapacity reads the path's capacity from a stripe curve (its plateau within
// maxStreams) and the aggregate rates measured with 1, 2, 4, … stripes (Streams holds
// the stripe count; nil when only one stripe was measured). accuracy is the gain a
// doubling must bring (ExpSelection's α; ≤ 0 means DefaultAccuracy). The stripes'
// gains count from one stripe at its best: the one-stripe level, or the stripe curve's
// plateau without one, raised to the best one-stripe sample.
func NewPathCapacity(curve Curve, maxStreams int, stripeRates []StreamPoint, accuracy float64) PathCapacity {
	p := PathCapacity{StripeBitsPerSecond: math.Inf(1), Gains: []StripeGain{{Stripes: 1, Gain: 1}}}
	if curve != nil {
		n := bestStreamsWithin(curve, maxStreams)
		if u := curve.BitsPerSecond(n); u > 0 && !math.IsNaN(u) {
			p.StripeBitsPerSecond = u
			if fit, ok := curve.(StreamFit); ok && fit.BestSampledBitsPerSecond > 0 && !(fit.Extrapolated && n > fit.MaxSampledStreams) {
				p.StripeBitsPerSecond = math.Min(u, fit.BestSampledBitsPerSecond)
			}
		}
	}
	accuracy = orDefaultAccuracy(accuracy)
	levels := normalizePoints(append([]StreamPoint(nil), stripeRates...))
	p.Measured = levels
	if len(levels) == 0 {
		return p
	}
	ref := levels[0]
	if ref.Streams != 1 {
		if math.IsInf(p.StripeBitsPerSecond, 0) {
			return p
		}
		ref = StreamPoint{Streams: 1, BitsPerSecond: p.StripeBitsPerSecond}
	} else {
		levels = levels[1:]
	}
	// Stripes pay only beyond what one stripe carries at its best, with or without a
	// one-stripe level among the stripe rates (the probe's stripe stage measures none:
	// OneStripeLevel): the stripe levels are measured at one stream count (fewer than
	// the plateau's, often), and a second stripe that only matched one stripe with
	// more streams measured no gain of its own (issue 11: 2 × 2 streams 963 Mbit/s,
	// 1 × 2 905 and 1 × 4 967 was planned as 2 stripes predicting 1029 and ran slower
	// than one stripe) — at its best as the model's plateau puts it or as a sample
	// measured it, whichever is higher (a model whose peak falls below the best
	// sample, 920 against 981 Mbit/s on the cluster, let a noisy 2-stripe sample of
	// 975 pass for a gain, and then 4 stripes at 1.08 Gbit/s on a 1 Gbit/s path)
	best := p.StripeBitsPerSecond
	if fit, ok := curve.(StreamFit); ok && fit.BestSampledBitsPerSecond > best {
		best = fit.BestSampledBitsPerSecond
	}
	if !math.IsInf(best, 0) && best > ref.BitsPerSecond {
		ref.BitsPerSecond = best
	}
	// a level that paid carries what it measured: its gain is over one stripe's
	// capacity, which BitsPerSecond multiplies it by
	base := ref.BitsPerSecond
	if s := p.StripeBitsPerSecond; !math.IsInf(s, 0) && s > 0 {
		base = s
	}
	prev := ref
	p.StillRising = len(levels) > 0
	for _, l := range levels {
		// ExpSelection's test: the slope must beat α·Th₁/n₁
		if !stepPays(prev, l, accuracy) {
			p.StillRising = false
			break
		}
		p.Gains = append(p.Gains, StripeGain{Stripes: l.Streams, Gain: l.BitsPerSecond / base})
		prev = l
	}
	return p
}

// BitsPerSecond is what the path carries with the given number of stripes.
func (p PathCapacity) BitsPerSecond(stripes int) float64 {
	return p.StripeBitsPerSecond * p.gain(stripes)
}

// At is what the path carries with the given stripes of streams each: BitsPerSecond,
// but one stripe's plateau for several stripes of fewer streams than the stripe levels
// measured (StripeStreams).
func (p PathCapacity) At(stripes, streams int) float64 {
	if stripes > 1 && p.StripeStreams > 0 && streams < p.StripeStreams {
		return p.StripeBitsPerSecond
	}
	return p.BitsPerSecond(stripes)
}

// Max is the most the path carries with any number of stripes.
func (p PathCapacity) Max() float64 {
	if len(p.Gains) == 0 {
		return p.StripeBitsPerSecond
	}
	return p.StripeBitsPerSecond * p.Gains[len(p.Gains)-1].Gain
}

// Stripes is the fewest stripes at which the path carries Max.
func (p PathCapacity) Stripes() int {
	if len(p.Gains) == 0 {
		return 1
	}
	return p.Gains[len(p.Gains)-1].Stripes
}

func (p PathCapacity) gain(stripes int) float64 {
	g := p.Gains
	if len(g) == 0 || stripes <= g[0].Stripes {
		return 1
	}
	i := sort.Search(len(g), func(i int) bool { return g[i].Stripes >= stripes })
	if i == len(g) {
		return g[len(g)-1].Gain
	}
	lo, hi := g[i-1], g[i]
	t := float64(stripes-lo.Stripes) / float64(hi.Stripes-lo.Stripes)
	return lo.Gain + t*(hi.Gain-lo.Gain)
}

// String says for people where the capacity comes from.
func (p PathCapacity) String() string {
	if math.IsInf(p.StripeBitsPerSecond, 0) {
		return "unknown"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: one stripe's plateau", FormatBitsPerSecond(p.Max()))
	switch {
	case len(p.Measured) == 0:
		b.WriteString("; no stripe count beyond one measured, so no stripe is added")
	case len(p.Gains) > 1:
		fmt.Fprintf(&b, " × %.3g measured with %d stripes (%s)", p.Gains[len(p.Gains)-1].Gain, p.Stripes(), describeStripes(p.Measured))
		if p.StillRising {
			b.WriteString(", still rising at the most stripes measured")
		}
	default:
		fmt.Fprintf(&b, "; more stripes did not pay (%s)", describeStripes(p.Measured))
	}
	return b.String()
}

func describeStripes(levels []StreamPoint) string {
	parts := make([]string, len(levels))
	for i, l := range levels {
		parts[i] = fmt.Sprintf("%s with %d", FormatBitsPerSecond(l.BitsPerSecond), l.Streams)
	}
	return strings.Join(parts, ", ")
}

// OneStripeLevel is the one-stripe level a stripe stage at buffer judges its first
// doubling against (StreamPoint.Streams holds the stripe count, 1): the best usable
// one-stripe sample at that buffer, whatever its streams — the reference
// NewPathCapacity counts stripe gains from (one stripe at its best, as a sample
// measured it), so that the stage measures no level the planner would not count.
//
// It is not a new sample of one stripe at the stage's streams. The stage runs at the
// streams the plan of the one-stripe samples chose, which the stream doubling often did
// not sample (3, 5, 37); measuring one stripe there cuts the streams from the doubling's
// last level, and a cut reads low while the streams left regrow their windows (on the
// local cluster's clean 1 Gbit/s path: 695 Mbit/s at 3 streams, not settled in its 2 s,
// right after 993 at 8). The planner replaced such a level by the best sample anyway,
// but the probe had spent a sample on it at a third less than the path's rate, and
// judged the next doubling against it: two stripes of 3 streams at 998 Mbit/s passed
// for a 43 % gain and four were sampled too, for a plan of one stripe (fourteenth
// session). A level at fewer streams than the stage's would credit the stripes with
// what the streams add; the best sample credits them with nothing one stripe did not
// already carry. On small files the stream doubling is not run and the samples are the
// first sample's level, at one stream (§3 of Arslan & Kosar: streams hardly matter).
func OneStripeLevel(samples []Sample, buffer int64) (StreamPoint, bool) {
	var level StreamPoint
	for _, s := range samples {
		if s.BufferBytes == buffer && usable(s.BitsPerSecond) && s.BitsPerSecond > level.BitsPerSecond {
			level = StreamPoint{Streams: 1, BitsPerSecond: s.BitsPerSecond}
		}
	}
	return level, level.Streams > 0
}
