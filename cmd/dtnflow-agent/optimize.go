package main

import (
	"sort"
	"time"

	"github.com/dtnflow/dtnflow/agent/autotune"
	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/coord"
	"github.com/dtnflow/dtnflow/agent/wire"
	"github.com/dtnflow/dtnflow/controllers/planning"
	"github.com/dtnflow/dtnflow/optimizer"
)

// prober is the optimizer's buffer-first, then ExpSelection, probe stepper, with the
// path's RTT as the samples so far measured it (the smallest), so that with
// autotuning among the directive's buffers the sizes autotuning already outruns are
// not sampled (optimizer.Prober.RTT).
func prober(d contract.ProbeDirective, samples []contract.Sample) optimizer.Prober {
	return optimizer.Prober{BufferSizes: d.BufferBytes, RTT: contract.LeastRTT(samples), Streams: optimizer.ExpSelection{MaxStreams: int(d.MaxStreams)}}
}

// probePlanner is the coordinator's probe sequence: the optimizer's stepper, which is
// stateless, so a replaced coordinator carries on from the samples it reports. Every
// sample ends as soon as its rate has settled, with SampleSeconds as its ceiling: a
// fixed-length sample spends most of its time re-measuring a rate already known
// (SampleSeconds is at least 5 s; a settled sample on a 50 ms path ends within 2 s).
//
// Each request also carries the rate its sample is compared with (autotune.Threshold:
// the previous level's plus ExpSelection's accuracy, or the previous buffer's plus the
// plateau), so that it may end as soon as the comparison is clear.
func probePlanner() coord.ProbePlanner {
	return func(d contract.ProbeDirective, samples []contract.Sample, ds contract.Dataset) (wire.ProbeRequest, bool) {
		p := prober(d, samples)
		small := len(samples) > 0 && coord.SmallFiles(ds, float64(samples[0].BitsPerSecond), contract.LeastRTT(samples))
		if small {
			// small files gain from pipelining, concurrency and stripes, hardly from
			// streams (Arslan & Kosar §3): no stream doubling, the stripes at two
			// streams each (optimizer.OneStripeLevel)
			p.Streams.MaxStreams = min(max(p.Streams.MaxStreams, 1), 2)
		}
		opt := planning.SamplesFromContract(samples)
		step := p.Next(opt)
		if step.Phase == optimizer.PhaseDone || (small && step.Phase == optimizer.PhaseStreams) {
			return stripeStep(d, samples, p, small)
		}
		return wire.ProbeRequest{Streams: int32(step.Streams), BufferBytes: step.BufferBytes, Seconds: max(d.SampleSeconds, 1), Settle: true,
			ThresholdBitsPerSecond: int64(autotune.Threshold(p, opt, step))}, false
	}
}

// stripeStep is the probe's stripe stage (contract.ProbeDirective.MaxStripes), as
// send --auto's: at the streams and buffer the plan of the one-stripe samples chooses
// (on small files, at two streams, as autotune.Tuner does: stripes of one stream
// measured no gain where stripes of two did), ExpSelection over the stripe count (two
// levels at least, up to MaxStripes) from one stripe at its best
// (optimizer.OneStripeLevel), each further level a sample of that many stripes
// together on the job's data.
func stripeStep(d contract.ProbeDirective, samples []contract.Sample, p optimizer.Prober, small bool) (wire.ProbeRequest, bool) {
	if d.MaxStripes <= 1 {
		return wire.ProbeRequest{}, true
	}
	plan, err := optimizer.MakePlan(optimizer.PlanInput{Samples: planning.SamplesFromContract(samples), Prober: p,
		SourceNodes: []optimizer.Node{{Name: "source", NICBitsPerSecond: 100e9}}, DestinationNodes: []optimizer.Node{{Name: "destination", NICBitsPerSecond: 100e9}},
		Limits: optimizer.Limits{MaxNodes: 1, MaxStripesPerNode: 1, MaxStreamsPerStripe: int(d.MaxStreams)}})
	if err != nil {
		return wire.ProbeRequest{}, true
	}
	streams, buffer := int32(plan.Flow.StreamsPerStripe), plan.BufferBytes
	if small {
		streams = max(streams, int32(p.Streams.MaxStreams))
	}
	pts := stripePoints(samples, streams, buffer)
	sel := optimizer.ExpSelection{MaxStreams: int(d.MaxStripes), MinSamples: 2}
	k, done := sel.Next(pts)
	if done {
		return wire.ProbeRequest{}, true
	}
	req := wire.ProbeRequest{Stripes: int32(k), Streams: streams, BufferBytes: buffer, Seconds: max(d.SampleSeconds, 1), Settle: true}
	var prev optimizer.StreamPoint
	for _, pt := range pts {
		if pt.Streams < k && pt.Streams > prev.Streams {
			prev = pt
		}
	}
	if prev.Streams > 0 && prev.BitsPerSecond > 0 {
		req.ThresholdBitsPerSecond = int64(prev.BitsPerSecond * (1 + optimizer.DefaultAccuracy*float64(k-prev.Streams)/float64(prev.Streams)))
	}
	return req, false
}

// stripePoints are the aggregate rates sampled at streams and buffer against the
// stripe count (the count in Streams), the newest of each; the one-stripe level is
// optimizer.OneStripeLevel's: one stripe at its best as the samples measured it, not a
// sample of one stripe at these streams.
func stripePoints(samples []contract.Sample, streams int32, buffer int64) []optimizer.StreamPoint {
	by := map[int32]int64{}
	for _, s := range samples {
		if s.Streams == streams && s.BufferBytes == buffer && s.BitsPerSecond > 0 && s.Stripes > 1 {
			by[s.Stripes] = s.BitsPerSecond
		}
	}
	out := make([]optimizer.StreamPoint, 0, len(by)+1)
	if level, ok := optimizer.OneStripeLevel(planning.OneStripeSamplesFromContract(samples), buffer); ok {
		out = append(out, level)
	}
	for k, bps := range by {
		out = append(out, optimizer.StreamPoint{Streams: int(k), BitsPerSecond: float64(bps)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Streams < out[j].Streams })
	return out
}

// adapter runs the optimizer's rescale policy over the running job: every report it
// may add or remove local stripes or change the streams per stripe.
type adapter struct {
	plan   optimizer.Plan
	policy optimizer.RescalePolicy
	state  optimizer.RescaleState
	max    int
}

// newAdapter follows a plan just made. The plan counts as a change made now, so the
// policy lets it settle and cool down before judging it, as it would any change of
// its own: the probe has just measured this shape, and a decision on the first
// seconds' reports would undo that measurement on less evidence. What it predicted
// (within the path's measured capacity) is the level against which a path that moves
// meanwhile is seen and answered at once.
func newAdapter(plan optimizer.Plan, maxStripes int, baseRTT time.Duration) *adapter {
	return &adapter{plan: plan, max: maxStripes, state: optimizer.AfterPlan(time.Now(), plan.Flow.PredictedBitsPerSecond, plan.Path.Max(), baseRTT)}
}

func (a *adapter) step(rep contract.Report, stripes, streams int) optimizer.Intent {
	m := planning.MeasurementFromReport(rep)
	// A plan bound by the path's capacity that the probe measured (more stripes
	// stopped paying) is not probed upwards when the rate falls short of it: that
	// measurement already says more stripes do not help.
	planned := a.plan.Flow.PredictedBitsPerSecond
	if a.plan.Flow.Binding == optimizer.BindingPath {
		planned = 0
	}
	in := optimizer.RescaleInput{Now: time.Now(), Current: optimizer.Shape{Stripes: stripes, StreamsPerStripe: streams}, MinStripes: 1, MaxStripes: a.max,
		MaxStreams: optimizer.DefaultMaxStreamsPerStripe, Curve: a.plan.Curve, PlannedStripes: a.plan.Flow.Stripes(),
		PlannedBitsPerSecond: planned, PathBitsPerSecond: a.plan.Path.Max(), Measurement: m}
	var it optimizer.Intent
	it, a.state = a.policy.Decide(a.state, in)
	return it
}
