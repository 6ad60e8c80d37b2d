package optimizer

import (
	"fmt"
	"maps"
	"math"
	"slices"
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
	// WindowLimitedPercent is the share of the streams' busy time that a window — the
	// receiver's, or the sender's socket buffer — held them back while the sample ran
	// (TCP_INFO's rwnd_limited and sndbuf_limited), in per cent; 0: none, or not
	// measured. A sample mostly window-limited measured the buffer, not the path
	// (StreamsPastTheWindow).
	WindowLimitedPercent int
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

// windowBoundPercent is the share of a sample's busy time from which a window, not the
// path, is what the sample measured: more than half the time the streams had data to
// send, every byte the buffers allow was already in flight, so another stream would
// have added its own window's worth whatever the other samples say.
const windowBoundPercent = 50

// StreamsPastTheWindow is the fewest streams a plan may use at the given buffer when
// the samples of the fewest streams were window-bound (windowBoundPercent, the mean
// over repeated samples of a stream count), and why, for people: the smallest sampled
// stream count that was not window-bound, above the ones that were. 0 and "" when the
// fewest streams sampled were not window-bound, or when every sampled count was (the
// samples then say nothing of where the path's capacity begins, and the curve stands
// as fitted). A window-bound count above one that was not is left alone: with more
// streams than the buffer needs, a window that closes is the receiver falling behind
// (its CPU), which more streams do not cure.
//
// A window-bound sample reads the buffer's rate, BDP-limited, not the path's: on issue
// 11's loss-free row (1 Gbit/s, 50 ms, 4 MiB buffers) one stream was 53 % window-
// limited and ran at 831–842 Mbit/s, two streams 21 % at 924–934; the probe's samples
// of 1, 2 and 4 streams read 882, 878 and 884 Mbit/s, the flat curve took one stream
// as the fewest within 2 % of the best, and `send --auto` ran at 0.92× the grid's best
// in every one of five suites' one-stream plans.
func StreamsPastTheWindow(samples []Sample, bufferBytes int64) (streams int, why string) {
	type share struct{ sum, n int }
	by := map[int]*share{}
	for _, s := range samples {
		if s.BufferBytes != bufferBytes || s.Streams < 1 || !usable(s.BitsPerSecond) {
			continue
		}
		if by[s.Streams] == nil {
			by[s.Streams] = &share{}
		}
		by[s.Streams].sum += min(max(s.WindowLimitedPercent, 0), 100)
		by[s.Streams].n++
	}
	var bound []string
	for _, n := range slices.Sorted(maps.Keys(by)) {
		pct := (by[n].sum + by[n].n/2) / by[n].n
		if pct < windowBoundPercent {
			if len(bound) == 0 {
				return 0, ""
			}
			return n, fmt.Sprintf("the samples of %s were mostly window-limited and measured the socket buffer, not the path (%d streams: %d %%): the plan takes at least %d streams",
				joinAnd(bound), n, pct, n)
		}
		unit := "streams"
		if n == 1 {
			unit = "stream"
		}
		bound = append(bound, fmt.Sprintf("%d %s (%d %%)", n, unit, pct))
	}
	return 0, ""
}
