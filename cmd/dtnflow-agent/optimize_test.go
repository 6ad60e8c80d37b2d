package main

import (
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/optimizer"
)

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
