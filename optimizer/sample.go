package optimizer

import (
	"fmt"
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
	kept, _ := streamCurve(samples, false)
	return kept
}

// pathMovedBelow is how far below the best sample before it a sample of the same probe
// must read for the path, not the streams, to have made the difference. No curve of
// the seeds falls that far within a doubling: past saturation they decline by a few
// per cent (seed 000's LONI case, 990.91 → 953.43 Mbps from 4 to 8 streams), and a
// model fitted through such a drop peaks well below where the path was measured.
const pathMovedBelow = 0.5

// StreamCurve is what MakePlan fits: StreamCurveSamples without, also, a sample that
// reads less than half (pathMovedBelow) of the best one before it in the same probe,
// and every later sample of that probe — the path moved under the probe (its capacity
// was cut, or other traffic arrived), and what it measured is a different path's, not
// a point of this curve. note says so for people ("" when nothing moved). On issue
// 11's rate schedule the operator's 8-stream sample fell on the cut from 1 Gbit/s to
// 400 Mbit/s (397 Mbit/s after 968 with 4 streams); Newton's fit through it peaked at
// 2 streams, the plan took 1, and when the link came back one stream ran the last
// phase at 858 Mbit/s where the fixed 8 streams ran at 912–970. The rescale policy
// answers the move itself (RescaleState.Level); the plan keeps the curve the probe
// measured before it. A probe's stepper still sees the sample (StreamCurveSamples): it
// ends the doubling, where leaving it out would have the stepper ask for it again.
func StreamCurve(samples []Sample) (kept []Sample, note string) {
	return streamCurve(samples, true)
}

func streamCurve(samples []Sample, moves bool) (kept []Sample, note string) {
	kept = make([]Sample, 0, len(samples))
	most, best, moved := 0, 0.0, false
	for _, s := range samples {
		if s.Streams <= 1 {
			most, best, moved = 0, 0, false
		}
		if moved || s.Streams < most {
			continue
		}
		if moves && usable(s.BitsPerSecond) && s.BitsPerSecond < pathMovedBelow*best {
			moved = true
			note = fmt.Sprintf("the path moved under the probe (%d streams read %s after %s): that sample and the probe's later ones are no points of the curve",
				s.Streams, FormatBitsPerSecond(s.BitsPerSecond), FormatBitsPerSecond(best))
			continue
		}
		most = max(most, s.Streams)
		if usable(s.BitsPerSecond) {
			best = max(best, s.BitsPerSecond)
		}
		kept = append(kept, s)
	}
	return kept, note
}
