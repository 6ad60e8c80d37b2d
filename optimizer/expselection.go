package optimizer

// DefaultAccuracy is ExpSelection's default accuracy α: doubling the streams stops
// once it gains less than 5 % (see ExpSelection.Accuracy).
const DefaultAccuracy = 0.05

// orDefaultAccuracy is accuracy, or DefaultAccuracy where it is not positive (unset).
func orDefaultAccuracy(accuracy float64) float64 {
	if !(accuracy > 0) {
		return DefaultAccuracy
	}
	return accuracy
}

// ExpSelection chooses which stream counts to sample, as a stepper: given the points
// measured so far it returns the next stream count to measure, or done (Yildirim, Yin &
// Kosar, DADC'09 §3.2, EXPSELECTION; Condor Week 2011, "Sampling strategy").
//
// The sequence is 1, 2, 4, …, 2^k, and it stops when the slope between the last two
// levels, (Th₂ − Th₁)/(n₂ − n₁), falls to the accuracy threshold or below: the
// throughput "begins to drop or increase very slightly compared with the previous
// one". The stepper is stateless — the answer depends only on the points — so a
// restarted coordinator carries on where it was, and points already known (from a
// PathProfile) are not measured again. Points at counts outside the sequence are
// ignored here (BestCmb still uses them).
//
// Choices where the paper is silent:
//   - α is relative, so one value fits a 100 Mbit/s and a 100 Gbit/s path: the loop
//     stops when the slope is at most α·Th₁/n₁, that is, when a doubling gains at most
//     α (5 % by default) of the previous rate.
//   - The sequence goes on to at least MinSamples levels (3 by default) even if it
//     flattens earlier, since BestCmb needs three points.
//   - When MaxStreams is not a power of two, the last level is MaxStreams itself.
type ExpSelection struct {
	// MaxStreams bounds the sequence (the user's maxStreamsPerStripe); 0 means 64.
	MaxStreams int
	// Accuracy is α; 0 means DefaultAccuracy.
	Accuracy float64
	// MinSamples is the fewest levels measured before the slope may stop the sequence;
	// 0 means 3.
	MinSamples int
}

func (e ExpSelection) withDefaults() ExpSelection {
	if e.MaxStreams <= 0 {
		e.MaxStreams = 64
	}
	if !(e.Accuracy > 0) {
		e.Accuracy = DefaultAccuracy
	}
	if e.MinSamples <= 0 {
		e.MinSamples = 3
	}
	return e
}

// Next returns the next stream count to measure, or done when the sequence has ended.
// pts need not be sorted; rates that are not finite and positive count as measured
// with no throughput.
func (e ExpSelection) Next(pts []StreamPoint) (streams int, done bool) {
	e = e.withDefaults()
	rate := func(n int) (float64, bool) {
		sum, count := 0.0, 0
		for _, p := range pts {
			if p.Streams == n {
				if usable(p.BitsPerSecond) {
					sum += p.BitsPerSecond
				}
				count++
			}
		}
		if count == 0 {
			return 0, false
		}
		return sum / float64(count), true
	}
	prevN, prevTh, levels := 0, 0.0, 0
	for n := 1; ; {
		th, measured := rate(n)
		if !measured {
			return n, false
		}
		levels++
		if prevN > 0 && levels >= e.MinSamples {
			// slope ≤ α·Th₁/n₁ ends the sequence
			if !stepPays(StreamPoint{Streams: prevN, BitsPerSecond: prevTh}, StreamPoint{Streams: n, BitsPerSecond: th}, e.Accuracy) {
				return 0, true
			}
		}
		if n >= e.MaxStreams {
			return 0, true
		}
		prevN, prevTh = n, th
		n = min(2*n, e.MaxStreams)
	}
}

// stepPays is ExpSelection's test on the step from p to q: the slope beats
// accuracy·Th₁/n₁, that is, a doubling gains more than accuracy of p's rate.
func stepPays(p, q StreamPoint, accuracy float64) bool {
	return (q.BitsPerSecond-p.BitsPerSecond)*float64(p.Streams) > accuracy*p.BitsPerSecond*float64(q.Streams-p.Streams)
}

// Levels returns the stream counts of the sequence up to MaxStreams, for callers that
// measure them all at once (a probe that knows no stepper).
func (e ExpSelection) Levels() []int {
	e = e.withDefaults()
	var out []int
	for n := 1; ; n = min(2*n, e.MaxStreams) {
		out = append(out, n)
		if n >= e.MaxStreams {
			return out
		}
	}
}
