package optimizer

import (
	"math"
	"sort"
)

// Sample is one probe measurement of a single stripe moving memory-to-memory: the
// optimizer's view of contract.Sample and v1alpha1.ProbeSample.
type Sample struct {
	// Streams is the number of parallel TCP streams of the stripe.
	Streams int
	// BufferBytes is the socket buffer size asked for; 0 is kernel autotuning.
	BufferBytes int64
	// BitsPerSecond is the measured throughput of the stripe.
	BitsPerSecond float64
	// SourceMillicores and DestinationMillicores are the CPU the sending and the
	// receiving agent used while the sample ran; 0 means not measured.
	SourceMillicores      float64
	DestinationMillicores float64
}

// StreamPoint is one point of a throughput-vs-streams curve.
type StreamPoint struct {
	Streams       int
	BitsPerSecond float64
}

// usable reports whether a rate can enter a fit: finite and positive.
func usable(bps float64) bool { return bps > 0 && !math.IsInf(bps, 0) && !math.IsNaN(bps) }

// StreamPoints turns samples taken with one socket buffer size into a curve: the mean
// rate per stream count, sorted by stream count. Samples with another buffer size, a
// stream count below 1, or a rate that is not finite and positive are left out.
// Repeated stream counts are averaged, which is the least-squares value of a point
// measured several times.
func StreamPoints(samples []Sample, bufferBytes int64) []StreamPoint {
	pts := make([]StreamPoint, 0, len(samples))
	for _, s := range samples {
		if s.BufferBytes != bufferBytes || s.Streams < 1 || !usable(s.BitsPerSecond) {
			continue
		}
		pts = append(pts, StreamPoint{Streams: s.Streams, BitsPerSecond: s.BitsPerSecond})
	}
	return normalizePoints(pts)
}

// normalizePoints sorts by stream count, drops unusable points and averages repeats.
// It reuses pts' storage.
func normalizePoints(pts []StreamPoint) []StreamPoint {
	out := pts[:0]
	for _, p := range pts {
		if p.Streams >= 1 && usable(p.BitsPerSecond) {
			out = append(out, p)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Streams < out[j].Streams })
	merged := out[:0]
	for i := 0; i < len(out); {
		j, sum := i, 0.0
		for j < len(out) && out[j].Streams == out[i].Streams {
			sum += out[j].BitsPerSecond
			j++
		}
		merged = append(merged, StreamPoint{Streams: out[i].Streams, BitsPerSecond: sum / float64(j-i)})
		i = j
	}
	return merged
}

// sortedDistinct reports whether pts is sorted by strictly increasing stream count with
// usable rates, which is what normalizePoints returns.
func sortedDistinct(pts []StreamPoint) bool {
	for i, p := range pts {
		if p.Streams < 1 || !usable(p.BitsPerSecond) || (i > 0 && pts[i-1].Streams >= p.Streams) {
			return false
		}
	}
	return true
}

// StreamCurveSamples are the samples of a probe sequence (oldest first) that measure
// the stream curve: every one but those taken with fewer streams than a sample before
// them in the same probe, which a probe's stepper never does (it only doubles) and
// the stripe stage does when the plan chooses a stream count between two levels.
// Such a sample follows a cut in the streams: the streams left still have the windows
// they had as a share of the larger count, and on a path whose round trips are long
// they regrow over many seconds, so the sample reads the path's rate well below what
// that stream count carries once it has settled. Fitted into the curve it pulls the
// model down and moves the plan, whose next sample is again a cut (the operator's
// stripe stage on four competing flows, 2026-11-28: 64 streams 790 Mbit/s, then 15
// streams 660 and 14 streams 585 where 16 had measured 749, and a plan of 13).
// A sample of one stream starts a new sequence: a probe begins there (a profile holds
// several jobs' probes one after another).
func StreamCurveSamples(samples []Sample) []Sample {
	out := make([]Sample, 0, len(samples))
	most := 0
	for _, s := range samples {
		if s.Streams <= 1 {
			most = 0
		}
		if s.Streams < most {
			continue
		}
		most = max(most, s.Streams)
		out = append(out, s)
	}
	return out
}
