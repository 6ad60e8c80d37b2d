package planning

import (
	"math"
	"sort"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/optimizer"
)

// DefaultProfileMaxAge is how long a PathProfile stays fresh when its spec says
// nothing (the API's default, 86400 s).
const DefaultProfileMaxAge = 24 * time.Hour

// Fresh reports whether a profile may warm-start a job at now: it has learned
// something, and within spec.maxAgeSeconds.
func Fresh(p *v1alpha1.PathProfile, now time.Time) bool {
	if p == nil || p.Status.LastUpdateTime == nil || (p.Status.Model == nil && len(p.Status.Samples) == 0) {
		return false
	}
	age := DefaultProfileMaxAge
	if p.Spec.MaxAgeSeconds != nil {
		age = time.Duration(*p.Spec.MaxAgeSeconds) * time.Second
	}
	return !now.After(p.Status.LastUpdateTime.Add(age))
}

// ProbeInput is what a probe is planned from.
type ProbeInput struct {
	Tuning v1alpha1.TransferTuning
	// Profile is the path's PathProfile, nil when there is none; whether it is fresh
	// is decided here (Fresh).
	Profile *v1alpha1.PathProfile
	Now     time.Time
	// NICBitsPerSecond is the smaller NIC capacity of the two sides and RTT the path's
	// round-trip time, when known: they centre the buffer sampling on the BDP.
	NICBitsPerSecond int64
	RTT              time.Duration
	// MaxBufferBytes bounds the buffers sampled (the kernel's maximum); 0 is 64 MiB.
	MaxBufferBytes int64
}

// ProbeDirective says how to probe a job's path, or nil when no probe is needed: Fixed
// mode, or a fresh profile whose samples already complete the probe.
//
// The probe is DADC'09 §4.2.2, buffer first, then streams (optimizer.Prober): kernel
// autotuning (0) as a buffer candidate of its own, then the fixed buffers from
// optimizer.BufferCandidates around the BDP (NIC × RTT, BDP2 of §2) when known, then
// ExpSelection up to maxStreamsPerStripe. With a fresh profile only its buffer is
// sampled (if it chose a fixed one) and the stream counts it holds are passed as
// Known, which the coordinator continues from (the stream counts they hold are not
// measured again, and a dataset too small to repay another sample takes none: before,
// the coordinator started over at one stream, and a warm job on the e2e's path
// re-measured the profile's one-stream sample before the dataset-left rule could stop
// it). SampleSeconds is 50 round trips, at least 5 s and at most 30 s: long
// enough for slow start to finish on a long path; the coordinator's samples end
// earlier, as soon as their rate has settled, and SampleSeconds is their ceiling (the
// papers sample with fixed-size transfers and do not give a duration).
//
// Autotuning is listed because the paper predates it: its sweep climbs from buffers
// too small for the path because its hosts had nothing better, while today's kernels
// grow each stream's buffers themselves. Sampled first, autotuning's one-stream rate
// and the path's RTT tell the coordinator which fixed sizes could beat it at all
// (optimizer.Prober.RTT): the others are not sampled, and the sweep over the rest
// keeps the paper's order and plateau rule. On bench-cluster's path (1 Gbit/s, 50 ms)
// the cold probe took 8 buffer samples, 64 KiB to 8 MiB; with autotuning first it
// takes 3: autotuning (452 Mbit/s), 4 MiB (877 Mbit/s) and 8 MiB (no gain), and
// chooses the same 4 MiB. The controller cannot filter the sizes itself: it knows
// neither the RTT before the probe nor the nodes' kernel limits. The coordinator
// can, once the probe stripe reports both hosts' limits (with its first stats, before
// any sample): sizes of the same effect are sampled once, and where a fixed size gets
// a window beyond autotuning's ceiling autotuning is not sampled at all
// (wire.UsefulBuffers) — on that path the probe's first sample is then the 4 MiB
// buffer's 846 Mbit/s, not autotuning's 468.
//
// A cold probe then doubles the stripes (MaxStripes, at most ProbeMaxStripes and what
// the limits allow), so that a plan of several stripes rests on a sample of several
// stripes that paid (StripeRates); a warm one plans from the profile's samples.
func ProbeDirective(in ProbeInput) *contract.ProbeDirective {
	if in.Tuning.Mode == v1alpha1.TuningFixed {
		return nil
	}
	// the limits the plan keeps to (Strict: one stream on one stripe), so the probe
	// samples no stream count or stripe the plan could not use
	limits, _ := limitsWithShare(in.Tuning, 0)
	limits = limits.WithDefaults()
	d := &contract.ProbeDirective{MaxStreams: int32(limits.MaxStreamsPerStripe), SampleSeconds: sampleSeconds(in.RTT), MaxConcurrency: int32(limits.MaxConcurrency)}
	if Fresh(in.Profile, in.Now) {
		st := in.Profile.Status
		p := optimizer.Prober{Streams: optimizer.ExpSelection{MaxStreams: limits.MaxStreamsPerStripe}}
		if st.BufferBytes > 0 {
			p.BufferSizes = []int64{st.BufferBytes}
			d.BufferBytes = []int64{st.BufferBytes}
		}
		known := SamplesFromProbe(st.Samples)
		if p.Next(known).Phase == optimizer.PhaseDone {
			return nil
		}
		for _, s := range st.Samples {
			if s.BufferBytes == st.BufferBytes && s.Streams >= 1 && s.Stripes <= 1 {
				d.Known = append(d.Known, ContractSampleFromProbe(s))
			}
		}
		sort.SliceStable(d.Known, func(i, j int) bool { return d.Known[i].Streams < d.Known[j].Streams })
		return d
	}
	d.MaxStripes = int32(min(limits.MaxStripesPerNode*limits.MaxNodes, ProbeMaxStripes))
	if in.Tuning.Fairness == v1alpha1.FairnessStrict {
		// Strict plans autotuning (planAuto), so the probe samples no fixed buffer:
		// a cold probe's fixed buffers, stream doublings and helper stripes are the
		// most aggressive seconds of a transfer, and took three competing iperf3 flows
		// to 0.65–0.74 of a fair share while it ran. One sample of one autotuned stream
		// remains, the rate the plan starts from.
		return d
	}
	prior := optimizer.BDPPrior(optimizer.PathEstimate{CapacityBitsPerSecond: float64(in.NICBitsPerSecond), RTTMin: in.RTT})
	d.BufferBytes = append([]int64{0}, optimizer.BufferCandidates(prior, in.MaxBufferBytes)...)
	return d
}

// ProbeMaxStripes bounds a cold probe's stripe stage (contract.ProbeDirective.
// MaxStripes): the stripes of a sample run in the probe stripe's sender pod, beside
// its own, so a sample of more than 4 would measure that pod's CPU as much as the
// path. send --auto's bench-wan runs use 4 too (--stripes 4).
const ProbeMaxStripes = 4

func sampleSeconds(rtt time.Duration) int32 {
	s := math.Ceil((50 * rtt).Seconds())
	return int32(min(max(s, 5), 30))
}

// ProbeRequests is what the probe stripe's agents and the coordinator ask for while
// the job probes, once a sample has measured them: each side the most it used over the
// samples (the probe stripe's pods run a sample's helper stripes too), and the
// coordinator its model (optimizer.CoordinatorMillicores) at the best rate sampled over
// the dataset listed. Before, the pods ask the manager's flat defaults until the plan
// (250 and 100 millicores), which on issue 11's mixed dataset were 3–30× what the
// agents used for the 24 s the probe took. A side no sample measured, or a dataset not
// yet listed, gets 0: the default stands.
func ProbeRequests(samples []v1alpha1.ProbeSample, ds *contract.Dataset) (source, destination, coordinator int64) {
	var best int64
	for _, s := range samples {
		source = max(source, s.SourceMillicores)
		destination = max(destination, s.DestinationMillicores)
		best = max(best, s.BitsPerSecond)
	}
	if ds != nil && best > 0 {
		coordinator = coordinatorCPU(ds.Files, ds.Bytes, best)
	}
	return source, destination, coordinator
}
