package optimizer

import "math"

// Curve is the throughput of one stripe as a function of its stream count: a fitted
// StreamFit (one of the papers' models or Plateau), the measured points themselves
// (EmpiricalCurve, Fixed mode), or a flat guess (FlatCurve) when nothing was measured.
type Curve interface {
	// BitsPerSecond is the predicted rate of a stripe with the given streams.
	BitsPerSecond(streams int) float64
	// Optimal is the stream count the curve recommends.
	Optimal() int
}

var (
	_ Curve = StreamFit{}
	_ Curve = EmpiricalCurve(nil)
	_ Curve = FlatCurve{}
)

// EmpiricalCurve is the measured points, joined by straight lines and flat beyond the
// first and last. Fixed mode predicts a fixed shape from it when BestCmb finds no
// valid fit; Auto mode fits Plateau instead (FitStreams), which is a model it can
// store. The points must be sorted by stream count (StreamPoints returns them so).
type EmpiricalCurve []StreamPoint

// BitsPerSecond interpolates linearly between measured points.
func (e EmpiricalCurve) BitsPerSecond(n int) float64 {
	if len(e) == 0 {
		return 0
	}
	if n <= e[0].Streams {
		return e[0].BitsPerSecond
	}
	for i := 1; i < len(e); i++ {
		if n <= e[i].Streams {
			p, q := e[i-1], e[i]
			t := float64(n-p.Streams) / float64(q.Streams-p.Streams)
			return p.BitsPerSecond + t*(q.BitsPerSecond-p.BitsPerSecond)
		}
	}
	return e[len(e)-1].BitsPerSecond
}

// Optimal is the smallest measured stream count within 1 % of the best measured rate,
// the same tolerance Optimum uses for models without a peak.
func (e EmpiricalCurve) Optimal() int {
	best := 0.0
	for _, p := range e {
		best = math.Max(best, p.BitsPerSecond)
	}
	for _, p := range e {
		if p.BitsPerSecond >= 0.99*best {
			return p.Streams
		}
	}
	return 1
}

// FlatCurve is a stripe rate that does not depend on streams: the planner's guess when
// nothing was measured (Fixed mode without samples). Rate 0 means unknown, which the
// flow model reads as "the stripe is not what binds".
type FlatCurve struct {
	Rate    float64
	Streams int
}

// BitsPerSecond returns Rate, or +Inf when the rate is unknown.
func (f FlatCurve) BitsPerSecond(int) float64 {
	if f.Rate > 0 {
		return f.Rate
	}
	return math.Inf(1)
}

// Optimal returns Streams (at least 1).
func (f FlatCurve) Optimal() int { return max(1, f.Streams) }

// bestStreamsWithin returns the stream count ≤ maxStreams that the curve recommends:
// its optimum when allowed, otherwise the best predicted count within the limit.
func bestStreamsWithin(c Curve, maxStreams int) int {
	opt := max(1, c.Optimal())
	if maxStreams <= 0 || opt <= maxStreams {
		return opt
	}
	best, bestRate := 1, c.BitsPerSecond(1)
	for n := 2; n <= maxStreams; n++ {
		if r := c.BitsPerSecond(n); r > bestRate {
			best, bestRate = n, r
		}
	}
	return best
}
