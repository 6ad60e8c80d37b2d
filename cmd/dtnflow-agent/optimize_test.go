package main

import (
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/wire"
	"github.com/dtnflow/dtnflow/optimizer"
)

// TestProbePlanner: the coordinator's next sample for the controller's cold directive
// (autotuning, then 64 KiB … 16 MiB) on a 1 Gbit/s, 50 ms path where autotuning's
// window stops at 3 MB. Every request asks to settle, with SampleSeconds as its
// ceiling, and carries the rate it must beat (the previous level's plus 5 %); the
// RTT is read from the samples themselves.
func TestProbePlanner(t *testing.T) {
	cold := contract.ProbeDirective{MaxStreams: 8, SampleSeconds: 5, BufferBytes: append([]int64{0}, optimizer.BufferCandidates(0, 0)...)}
	one := func(buffer, bps, rttMicros int64) contract.Sample {
		return contract.Sample{Streams: 1, BufferBytes: buffer, BitsPerSecond: bps, RTTMicros: rttMicros}
	}
	autotuned := one(0, 480e6, 50_000)
	cases := map[string]struct {
		d        contract.ProbeDirective
		samples  []contract.Sample
		want     wire.ProbeRequest
		wantDone bool
	}{
		"autotuning first": {d: cold, want: wire.ProbeRequest{Streams: 1, BufferBytes: 0, Seconds: 5, Settle: true}},
		// 480 Mbit/s × 50 ms × 1.05 = 3.15 MB: 4 MiB is the first size that could beat it
		"then the first size beyond autotuning's window": {d: cold, samples: []contract.Sample{autotuned},
			want: wire.ProbeRequest{Streams: 1, BufferBytes: 4 << 20, Seconds: 5, Settle: true, ThresholdBitsPerSecond: 504e6}},
		// an older sender reports no RTT: the sizes are taken as given
		"no RTT reported": {d: cold, samples: []contract.Sample{one(0, 480e6, 0)},
			want: wire.ProbeRequest{Streams: 1, BufferBytes: 64 << 10, Seconds: 5, Settle: true, ThresholdBitsPerSecond: 504e6}},
		// the smallest RTT counts (a loaded sample's is larger)
		"the smallest RTT": {d: cold, samples: []contract.Sample{one(0, 480e6, 400_000), one(0, 480e6, 50_000)},
			want: wire.ProbeRequest{Streams: 1, BufferBytes: 4 << 20, Seconds: 5, Settle: true, ThresholdBitsPerSecond: 504e6}},
		// 4 MiB gained, 8 MiB gained, 16 MiB did not: streams at 8 MiB
		"streams at the plateau": {d: cold, samples: []contract.Sample{autotuned, one(4<<20, 671e6, 50_000), one(8<<20, 950e6, 50_000), one(16<<20, 950e6, 50_000)},
			want: wire.ProbeRequest{Streams: 2, BufferBytes: 8 << 20, Seconds: 5, Settle: true, ThresholdBitsPerSecond: 997_500_000}},
		// 4 MiB could have done more and did not: autotuning stays, streams next
		"a size that does not beat autotuning ends the sweep": {d: cold, samples: []contract.Sample{autotuned, one(4<<20, 490e6, 50_000)},
			want: wire.ProbeRequest{Streams: 2, BufferBytes: 0, Seconds: 5, Settle: true, ThresholdBitsPerSecond: 504e6}},
		// a warm directive: the profile's buffer only; SampleSeconds below 1 is 1
		"warm": {d: contract.ProbeDirective{MaxStreams: 8, BufferBytes: []int64{1 << 20}},
			want: wire.ProbeRequest{Streams: 1, BufferBytes: 1 << 20, Seconds: 1, Settle: true}},
		"done": {d: contract.ProbeDirective{MaxStreams: 1}, samples: []contract.Sample{autotuned}, wantDone: true},
	}
	plan := probePlanner()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, done := plan(c.d, c.samples, contract.Dataset{})
			if done != c.wantDone || !c.wantDone && got != c.want {
				t.Errorf("next %+v (done %v), want %+v (done %v)", got, done, c.want, c.wantDone)
			}
		})
	}
}

// TestProbePlannerStripeStage: with MaxStripes, the stream stage is followed by
// ExpSelection over stripes at the streams and buffer the one-stripe samples plan
// (here one stream with autotuning: the rate does not rise with streams), each level
// a sample of several stripes that must beat the level before by 5 % per doubling.
func TestProbePlannerStripeStage(t *testing.T) {
	d := contract.ProbeDirective{MaxStreams: 4, SampleSeconds: 5, BufferBytes: []int64{0}, MaxStripes: 4}
	flat := []contract.Sample{{Streams: 1, BitsPerSecond: 480e6, RTTMicros: 50_000}, {Streams: 2, BitsPerSecond: 470e6, RTTMicros: 50_000}, {Streams: 4, BitsPerSecond: 465e6, RTTMicros: 50_000}}
	stripes := func(k int32, bps int64) contract.Sample {
		return contract.Sample{Stripes: k, Streams: 1, BitsPerSecond: bps, RTTMicros: 50_000}
	}
	cases := map[string]struct {
		d        contract.ProbeDirective
		samples  []contract.Sample
		want     wire.ProbeRequest
		wantDone bool
	}{
		"two stripes after the streams": {d: d, samples: flat,
			want: wire.ProbeRequest{Stripes: 2, Streams: 1, Seconds: 5, Settle: true, ThresholdBitsPerSecond: 504e6}},
		"four when two paid": {d: d, samples: append(append([]contract.Sample(nil), flat...), stripes(2, 900e6)),
			want: wire.ProbeRequest{Stripes: 4, Streams: 1, Seconds: 5, Settle: true, ThresholdBitsPerSecond: 945e6}},
		"done when two did not pay":          {d: d, samples: append(append([]contract.Sample(nil), flat...), stripes(2, 490e6)), wantDone: true},
		"done at MaxStripes":                 {d: d, samples: append(append([]contract.Sample(nil), flat...), stripes(2, 900e6), stripes(4, 1700e6)), wantDone: true},
		"no stripe stage without MaxStripes": {d: contract.ProbeDirective{MaxStreams: 4, BufferBytes: []int64{0}}, samples: flat, wantDone: true},
	}
	plan := probePlanner()
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, done := plan(c.d, c.samples, contract.Dataset{})
			if done != c.wantDone || !c.wantDone && got != c.want {
				t.Errorf("next %+v (done %v), want %+v (done %v)", got, done, c.want, c.wantDone)
			}
		})
	}
}

// TestProbePlannerStripeStageKeepsItsStreams: the stripe stage runs at the stream
// count the streams phase planned, a count below the last level sampled, and judges its
// levels against one stripe at its best (optimizer.OneStripeLevel): it does not measure
// one stripe at the planned count, which, on a bottleneck shared with four other flows,
// reads low while the streams just cut regrow their windows — once the stage's
// reference, and before that a point of the stream curve that moved the plan
// (bench-cluster, 2026-11-28: 64 streams 790 Mbit/s, then 15 at 660, then 14 at 585).
// The next level is at the same count, and a one-stripe sample there (an older
// coordinator's) changes neither the count nor the reference.
func TestProbePlannerStripeStageKeepsItsStreams(t *testing.T) {
	const buf = 4 << 20
	d := contract.ProbeDirective{MaxStreams: 64, SampleSeconds: 5, BufferBytes: []int64{buf}, MaxStripes: 4}
	var samples []contract.Sample
	for i, mbps := range []int64{275, 385, 534, 685, 749, 796, 790} {
		samples = append(samples, contract.Sample{Stripes: 1, Streams: 1 << i, BufferBytes: buf, BitsPerSecond: mbps * 1e6, RTTMicros: 50_000})
	}
	plan := probePlanner()
	first, done := plan(d, samples, contract.Dataset{})
	best := int64(796e6 * (1 + optimizer.DefaultAccuracy))
	if done || first.Stripes != 2 || first.Streams <= 1 || first.Streams >= 64 || first.ThresholdBitsPerSecond != best {
		t.Fatalf("after the streams phase: %+v (done %v), want two stripes at the planned count against the best sample (threshold %d)", first, done, best)
	}
	cut := append(samples[:len(samples):len(samples)], contract.Sample{Stripes: 1, Streams: first.Streams, BufferBytes: buf, BitsPerSecond: 660e6, RTTMicros: 50_000})
	if again, done := plan(d, cut, contract.Dataset{}); done || again != first {
		t.Errorf("after one stripe at %d streams: %+v (done %v), want %+v again", first.Streams, again, done, first)
	}
	paid := append(samples[:len(samples):len(samples)], contract.Sample{Stripes: 2, Streams: first.Streams, BufferBytes: buf, BitsPerSecond: 900e6, RTTMicros: 50_000})
	if next, done := plan(d, paid, contract.Dataset{}); done || next.Stripes != 4 || next.Streams != first.Streams {
		t.Errorf("after two stripes paid at %d streams: %+v (done %v), want 4 stripes at %d", first.Streams, next, done, first.Streams)
	}
}

// TestProbePlannerAfterThePathMoved: the operator's probe on issue 11's rate schedule
// (2026-11-29, run 5): 1, 2 and 4 streams at 1 Gbit/s, then 8 streams on the cut to
// 400 Mbit/s. The doubling ends there (the 8-stream sample is not asked for again),
// and the stripe stage runs at the streams the samples before the cut plan, where
// the curve fitted through the cut had it run one stripe of one stream.
func TestProbePlannerAfterThePathMoved(t *testing.T) {
	const buf = 4 << 20
	d := contract.ProbeDirective{MaxStreams: 64, SampleSeconds: 2, BufferBytes: []int64{buf}, MaxStripes: 4}
	large := contract.Dataset{Files: 1, Bytes: 5 << 30, Buckets: []contract.SizeBucket{{Log2: 33, Files: 1, Bytes: 5 << 30}}}
	var samples []contract.Sample
	for i, mbps := range []int64{881, 887, 968, 397} {
		samples = append(samples, contract.Sample{Stripes: 1, Streams: 1 << i, BufferBytes: buf, BitsPerSecond: mbps * 1e6, RTTMicros: 50_000})
	}
	plan := probePlanner()
	before, _ := plan(d, samples[:3], large)
	next, done := plan(d, samples, large)
	if done || next.Stripes != 2 || next.Streams != 3 {
		t.Fatalf("after 8 streams on the cut: %+v (done %v), want the stripe stage at the 3 streams the samples before it plan", next, done)
	}
	if before.Streams != 8 {
		t.Fatalf("before the cut the doubling asks for %+v, want 8 streams", before)
	}
}

// TestProbePlannerSmallFilesStripes: on a dataset of small files no stream doubling is
// sampled, and the stripe stage runs at two streams even where the plan of the
// one-stripe samples takes one: on issue 11's suite two stripes of one stream measured
// no gain where two of two measured 8–10 % (ninth session), and one stripe's two
// streams measured what its one did (882 and 884 Mbit/s) in a sample that ran
// 3.4–4.2 s (thirteenth). After the first sample the next request is two stripes of
// two, compared with the first sample's level (optimizer.OneStripeLevel); a one-stripe
// sample at two streams, where one was taken, is the level instead.
func TestProbePlannerSmallFilesStripes(t *testing.T) {
	const buf = 4 << 20
	d := contract.ProbeDirective{MaxStreams: 64, SampleSeconds: 5, BufferBytes: []int64{buf}, MaxStripes: 4}
	// 20 000 files of 64 KiB (bucket 16: 2^15 < s ≤ 2^16)
	small := contract.Dataset{Files: 20000, Bytes: 20000 << 16, Buckets: []contract.SizeBucket{{Log2: 16, Files: 20000, Bytes: 20000 << 16}}}
	samples := []contract.Sample{
		{Stripes: 1, Streams: 1, BufferBytes: buf, BitsPerSecond: 890e6, RTTMicros: 50_000},
		{Stripes: 1, Streams: 2, BufferBytes: buf, BitsPerSecond: 893e6, RTTMicros: 50_000},
	}
	plan := probePlanner()
	for _, tc := range []struct {
		ds      contract.Dataset
		streams int32
	}{
		{small, 2},
		// one large file: the stream stage goes on to four streams
		{contract.Dataset{Files: 1, Bytes: 4 << 30, Buckets: []contract.SizeBucket{{Log2: 32, Files: 1, Bytes: 4 << 30}}}, 4},
	} {
		got, done := plan(d, samples, tc.ds)
		if done || got.Streams != tc.streams || tc.streams == 2 && got.Stripes != 2 {
			t.Errorf("dataset of %d files: next %+v (done %v), want %d streams (2 stripes for small files)", tc.ds.Files, got, done, tc.streams)
		}
	}
	// the two stripes' threshold is the level's rate plus the accuracy: the first
	// sample's, or the two-stream sample's where there is one
	for _, tc := range []struct {
		samples []contract.Sample
		level   float64
	}{{samples[:1], 890e6}, {samples, 893e6}} {
		got, done := plan(d, tc.samples, small)
		if want := int64(tc.level * (1 + optimizer.DefaultAccuracy)); done || got.Stripes != 2 || got.Streams != 2 || got.ThresholdBitsPerSecond != want {
			t.Errorf("small files after %d samples: next %+v (done %v), want 2 stripes × 2 streams with a threshold of %d", len(tc.samples), got, done, want)
		}
	}
}

// TestAdapterReadsTheRoundTrip: `send --auto`'s rescale adapter hands the policy the
// probe's least round trip and each stripe's reported one, so that heavy loss behind a
// full bottleneck queue (the rate schedule's cut: 100 ms on the 50 ms path) gets no
// more streams, while the same loss at the path's round trip does.
func TestAdapterReadsTheRoundTrip(t *testing.T) {
	plan := optimizer.Plan{
		Curve: optimizer.EmpiricalCurve{{Streams: 1, BitsPerSecond: 886.5e6}, {Streams: 2, BitsPerSecond: 913.4e6}, {Streams: 4, BitsPerSecond: 889.1e6}},
		Path:  optimizer.PathCapacity{StripeBitsPerSecond: 913.4e6},
		Flow:  optimizer.FlowPlan{StreamsPerStripe: 2, StripesPerNode: 1, Nodes: 1, StripeBitsPerSecond: 913.4e6, PredictedBitsPerSecond: 913.4e6, Binding: optimizer.BindingPath},
	}
	run := func(cutRTT time.Duration) optimizer.Intent {
		a := newAdapter(plan, 4, 50*time.Millisecond)
		start := time.Now()
		var it optimizer.Intent
		for i, bps := range []int64{913e6, 400e6, 395e6, 398e6, 397e6} {
			rtt := 52 * time.Millisecond
			if i > 0 {
				rtt = cutRTT
			}
			rep := contract.Report{Time: start.Add(time.Duration(i) * time.Second), BitsPerSecond: bps,
				Stripes: []contract.StripeReport{{Index: 0, Connected: true, Streams: 2, BitsPerSecond: bps, LossPPM: 90_000, RTTMicros: rtt.Microseconds()}}}
			if it = a.step(rep, 1, 2); it.Action != optimizer.Hold {
				return it
			}
		}
		return it
	}
	if it := run(100 * time.Millisecond); it.Action != optimizer.Hold {
		t.Errorf("behind a full queue: %s %s (%s), want holds", it.Action, it.Reason, it.Message)
	}
	if it := run(51 * time.Millisecond); it.Reason != "HighLoss" {
		t.Errorf("at the path's round trip: %s %s (%s), want HighLoss", it.Action, it.Reason, it.Message)
	}
}
