package main

import (
	"testing"

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
			got, done := plan(c.d, c.samples)
			if done != c.wantDone || !c.wantDone && got != c.want {
				t.Errorf("next %+v (done %v), want %+v (done %v)", got, done, c.want, c.wantDone)
			}
		})
	}
}
