// Package settle decides when a probe sample has measured enough, so that it can end
// as soon as its rate is known — or as soon as the decision it is taken for is clear
// — instead of after a fixed time.
//
// A sample starts with a transition (slow start of new streams, the newcomers taking
// their share from the others) and then wobbles around its rate: bbr's 8-RTT gain
// cycle, cubic's sawtooth, a busy machine. On the 1 Gbit/s, 50 ms emulated path of
// bench-wan the rate over half-second windows of acknowledged bytes moved ±10–15 %
// around its mean; counting the bytes selectively acknowledged past a loss as well
// (metrics.TCPInfo.DeliveredBytes: the cumulative acknowledgement jumps when the loss
// is repaired) took the samples of a 500 Mbit/s path from half-widths of 14–56 % to
// 0.3–12 %. A Detector is fed the cumulative bytes delivered as time goes on, leaves
// the transition out (Skip), cuts the rest into windows of a few round trips and ends
// the sample when either
//
//   - the rate is precise: the 95 % confidence interval of the mean window rate is
//     within ±Tolerance of it (Student's t over the windows, taken as independent); or
//   - the sample's question is answered: the caller gave a Threshold (the rate this
//     sample must beat for the probe to go on, e.g. the previous level's rate plus
//     ExpSelection's 5 %), the interval lies wholly above or below it, and the rate is
//     not still moving toward it (newcomers taking their share rise for seconds);
//
// and in any case after MinWindows windows at least and at the Ceiling at most.
//
// The package is pure: it takes times and byte counts and returns decisions, so that
// it is tested with synthetic series.
package settle

import (
	"math"
	"time"
)

// Limits shape one sample's Detector.
type Limits struct {
	// Window is the length of one rate window.
	Window time.Duration
	// Skip is the transition left out at the start.
	Skip time.Duration
	// MinWindows is the fewest windows after Skip before the sample may end early.
	MinWindows int
	// Tolerance is the relative half-width of the confidence interval at which the
	// rate counts as precise.
	Tolerance float64
	// Threshold, when > 0, is the rate (bits/s) the sample is compared with: it ends
	// as soon as the interval excludes it.
	Threshold float64
	// Ceiling is the longest sample: a rate still imprecise then is taken as it is,
	// unless its question is still open (Stretch).
	Ceiling time.Duration
	// Stretch is how far past the Ceiling a sample may run while its question is still
	// open: its interval still holds the Threshold, neither above nor below it yet.
	// 0: none.
	Stretch time.Duration
}

// Bounds of ForRTT. A window spans 8 round trips, a whole bbr gain cycle, so that a
// rate is not read off one burst of acknowledgements; the skip outlasts most of slow
// start (a stream reaches a window of W segments from 10 in log2(W/10) round trips:
// about 7 at 1 Gbit/s × 50 ms with 9000-byte segments); the ceiling bounds what an
// unsteady sample costs.
const (
	MinWindow  = 100 * time.Millisecond
	MaxWindow  = 2 * time.Second
	MinSkip    = 50 * time.Millisecond
	MaxSkip    = 2 * time.Second
	MinCeiling = 2 * time.Second
	MaxCeiling = 30 * time.Second
	// DefaultTolerance: ±5 %, the accuracy ExpSelection asks of a doubling
	// (optimizer.DefaultAccuracy).
	DefaultTolerance = 0.05
	// DefaultMinWindows before a sample may end.
	DefaultMinWindows = 3
)

// ForRTT returns the limits for a path with this round-trip time: windows of 8 RTT,
// a skip of 4 RTT, a ceiling of 40 RTT, each clamped to the bounds above, and a
// stretch of twice the ceiling for a sample whose question is still open there. An
// unknown RTT (≤ 0) gets the smallest window and skip, a ceiling of 5 s and no
// stretch.
//
// Why the stretch: beside four long-lived flows on bench-cluster's 1 Gbit/s, 50 ms
// path, the rate over a window of 8 RTT moves by ±15–30 %, and a 2 s sample has four
// such windows: its interval is ±13–64 % wide, wider than the 5–20 % a doubling of the
// streams gains there. The probe took those widths for the path's noise, asked every
// later doubling for a 25 % gain and stopped at 4–8 streams, where a fixed 32 streams
// took 50 s for the 4 GiB against 55–60. Three times the windows make the interval
// about half as wide (√3 more windows, a smaller Student's t), so a sample still
// undecided at the ceiling runs on until it is decided, up to three ceilings; one that
// settles or decides earlier ends as before.
func ForRTT(rtt time.Duration) Limits {
	clamp := func(d, lo, hi time.Duration) time.Duration { return min(max(d, lo), hi) }
	if rtt <= 0 {
		return Limits{Window: MinWindow, Skip: MinSkip, MinWindows: DefaultMinWindows, Tolerance: DefaultTolerance, Ceiling: 5 * time.Second}
	}
	ceiling := clamp(40*rtt, MinCeiling, MaxCeiling)
	return Limits{
		Window:     clamp(8*rtt, MinWindow, MaxWindow),
		Skip:       clamp(4*rtt, MinSkip, MaxSkip),
		MinWindows: DefaultMinWindows,
		Tolerance:  DefaultTolerance,
		Ceiling:    ceiling,
		Stretch:    min(2*ceiling, MaxCeiling-ceiling),
	}
}

func (l Limits) withDefaults() Limits {
	if l.Window <= 0 {
		l.Window = MinWindow
	}
	if l.MinWindows < 2 {
		l.MinWindows = DefaultMinWindows
	}
	if !(l.Tolerance > 0) {
		l.Tolerance = DefaultTolerance
	}
	if l.Ceiling <= 0 {
		l.Ceiling = MaxCeiling
	}
	l.Stretch = max(l.Stretch, 0)
	l.Skip = min(max(l.Skip, 0), l.Ceiling)
	if !(l.Threshold > 0) || math.IsInf(l.Threshold, 0) {
		l.Threshold = 0
	}
	return l
}

// Reason says why a sample ended.
type Reason string

const (
	Precise  Reason = "Precise" // the interval is within the tolerance
	Decided  Reason = "Decided" // the interval excludes the threshold
	TimedOut Reason = "Ceiling" // the ceiling came first
)

// Result is a finished sample.
type Result struct {
	// BitsPerSecond is the rate over the windows after the skip, or, for a sample
	// that reached its ceiling with fewer than MinWindows of them, over its second
	// half.
	BitsPerSecond float64
	// Reason says why it ended; Settled is Reason != TimedOut.
	Reason  Reason
	Settled bool
	// HalfWidth is the relative half-width of the rate's 95 % interval (0 with fewer
	// than two windows).
	HalfWidth float64
	// Elapsed is the sample's length; Bytes what was delivered over all of it.
	Elapsed time.Duration
	Bytes   int64
}

type point struct {
	t     time.Time
	bytes int64
}

// Detector follows one sample. Use New.
type Detector struct {
	l     Limits
	start point
	// boundaries are the points at the end of the skip and of each full window
	// after it, in order; the counts are interpolated at those times.
	boundaries []point
	all        []point
}

// New starts a sample at t with the cumulative byte count bytes.
func New(l Limits, t time.Time, bytes int64) *Detector {
	d := &Detector{l: l.withDefaults(), start: point{t, bytes}}
	d.all = append(d.all, d.start)
	return d
}

// Limits are the detector's limits, defaults filled in.
func (d *Detector) Limits() Limits { return d.l }

// Add records the cumulative bytes delivered at t (a t before the last is read as
// no time passing) and says whether the sample is over; when it is, the Result is
// its rate.
func (d *Detector) Add(t time.Time, bytes int64) (Result, bool) {
	prev := d.all[len(d.all)-1]
	if t.Before(prev.t) {
		t = prev.t
	}
	d.all = append(d.all, point{t, bytes})
	// the next boundary: the end of the skip, then of each window
	for len(d.boundaries) < 1<<16 {
		end := d.start.t.Add(d.l.Skip)
		if n := len(d.boundaries); n > 0 {
			end = d.boundaries[n-1].t.Add(d.l.Window)
		}
		if t.Before(end) {
			break
		}
		at := bytes
		if span := t.Sub(prev.t); span > 0 && end.Before(t) && end.After(prev.t) {
			at = prev.bytes + int64(float64(bytes-prev.bytes)*float64(end.Sub(prev.t))/float64(span))
		}
		d.boundaries = append(d.boundaries, point{end, at})
	}
	elapsed := t.Sub(d.start.t)
	res := Result{Elapsed: elapsed, Bytes: bytes - d.start.bytes}
	first := d.firstWindow()
	n := len(d.boundaries) - 1 - first // windows counted
	if n >= 1 {
		res.BitsPerSecond = rateBetween(d.boundaries[first], d.boundaries[len(d.boundaries)-1])
		res.HalfWidth = d.halfWidth(first, res.BitsPerSecond)
	}
	if n >= d.l.MinWindows && res.BitsPerSecond > 0 {
		hw := res.HalfWidth * res.BitsPerSecond
		switch {
		case res.HalfWidth <= d.l.Tolerance:
			res.Reason, res.Settled = Precise, true
			return res, true
		case d.l.Threshold > 0 && res.BitsPerSecond-hw > d.l.Threshold && d.trend(first) >= 0,
			d.l.Threshold > 0 && res.BitsPerSecond+hw < d.l.Threshold && d.trend(first) <= 0:
			res.Reason, res.Settled = Decided, true
			return res, true
		}
	}
	if elapsed >= d.l.Ceiling {
		// still undecided (the interval holds the threshold): run on, within the stretch
		undecided := d.l.Threshold > 0 && n >= d.l.MinWindows && res.BitsPerSecond > 0
		if undecided && elapsed < d.l.Ceiling+d.l.Stretch {
			return Result{}, false
		}
		if n < d.l.MinWindows {
			res.BitsPerSecond = d.secondHalf()
		}
		res.Reason = TimedOut
		return res, true
	}
	return Result{}, false
}

// firstWindow is the index of the boundary the counted windows start from: after the
// skip, less any leading windows still ramping up (below the mean of the windows
// after them by more than the tolerance), as long as MinWindows remain.
func (d *Detector) firstWindow() int {
	first := 0
	last := len(d.boundaries) - 1
	for last-first > d.l.MinWindows {
		w := rateBetween(d.boundaries[first], d.boundaries[first+1])
		rest := rateBetween(d.boundaries[first+1], d.boundaries[last])
		if w >= (1-d.l.Tolerance)*rest {
			break
		}
		first++
	}
	return first
}

// trend is +1 when the counted windows' rates (from boundary first on) still rise, −1
// when they still fall, 0 otherwise: the least-squares slope of the rates against the
// window's index, tested one-sided at 95 % (Student's t with n−2 degrees of freedom).
//
// A rate still moving toward the threshold has not answered the sample's question:
// beside four competing flows on the local cluster's 1 Gbit/s, 50 ms path, the
// coordinator's sample of two stripes × 8 streams (one stripe cut from 32 streams, the
// other's streams new, taking their share) was decided below the 756 Mbit/s its
// doubling had to beat after 1.9 s, at 565, and the job was planned on one stripe,
// where `send --auto`'s sample of the same shape ran 6 s and measured 752. The windows
// are taken as independent, as halfWidth takes them; a rate that only wobbles shows a
// slope this significant in one sample of twenty, which then runs on until it is
// decided or reaches its ceiling.
func (d *Detector) trend(first int) int {
	n := len(d.boundaries) - 1 - first
	if n < 3 {
		return 0
	}
	xm := float64(n-1) / 2
	var ym float64
	rates := make([]float64, n)
	for i := range rates {
		rates[i] = rateBetween(d.boundaries[first+i], d.boundaries[first+i+1])
		ym += rates[i]
	}
	ym /= float64(n)
	var sxy, sxx float64
	for i, r := range rates {
		sxy += (float64(i) - xm) * (r - ym)
		sxx += (float64(i) - xm) * (float64(i) - xm)
	}
	slope := sxy / sxx
	var sse float64
	for i, r := range rates {
		e := r - (ym + slope*(float64(i)-xm))
		sse += e * e
	}
	se := math.Sqrt(sse / float64(n-2) / sxx)
	if slope == 0 || math.Abs(slope) <= studentT95OneSided(n-2)*se {
		return 0
	}
	if slope > 0 {
		return 1
	}
	return -1
}

// studentT95OneSided is the 95th percentile of Student's t with df degrees of freedom.
func studentT95OneSided(df int) float64 {
	return tQuantile(df, []float64{0, 6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
		1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725}, 1.70, 1.68, 1.645)
}

// halfWidth is the relative half-width of the 95 % interval of the mean rate of the
// windows from boundary first on (Student's t), or +Inf with fewer than two.
func (d *Detector) halfWidth(first int, mean float64) float64 {
	n := len(d.boundaries) - 1 - first
	if n < 2 || !(mean > 0) {
		return math.Inf(1)
	}
	sum, sq := 0.0, 0.0
	for i := first + 1; i <= first+n; i++ {
		r := rateBetween(d.boundaries[i-1], d.boundaries[i])
		sum += r
		sq += r * r
	}
	m := sum / float64(n)
	v := max((sq-float64(n)*m*m)/float64(n-1), 0)
	return studentT975(n-1) * math.Sqrt(v/float64(n)) / mean
}

// studentT975 is the 97.5th percentile of Student's t with df degrees of freedom.
func studentT975(df int) float64 {
	return tQuantile(df, []float64{0, 12.71, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
		2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086}, 2.06, 2.02, 1.96)
}

// tQuantile is a quantile of Student's t with df degrees of freedom: table[df] up to
// 20, then below30 up to 29, below60 up to 59 and the normal's beyond.
func tQuantile(df int, table []float64, below30, below60, normal float64) float64 {
	switch {
	case df < 1:
		return math.Inf(1)
	case df < len(table):
		return table[df]
	case df < 30:
		return below30
	case df < 60:
		return below60
	}
	return normal
}

// secondHalf is the rate from the point nearest the sample's middle to its end.
func (d *Detector) secondHalf() float64 {
	last := d.all[len(d.all)-1]
	mid := d.start.t.Add(last.t.Sub(d.start.t) / 2)
	from := d.start
	for _, p := range d.all {
		if p.t.After(mid) {
			break
		}
		from = p
	}
	if !last.t.After(from.t) {
		from = d.start
	}
	return rateBetween(from, last)
}

func rateBetween(a, b point) float64 {
	dt := b.t.Sub(a.t).Seconds()
	if dt <= 0 {
		return 0
	}
	return float64(b.bytes-a.bytes) * 8 / dt
}
