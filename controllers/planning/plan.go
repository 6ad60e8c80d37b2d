package planning

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/optimizer"
)

// Input is what a plan is made from.
type Input struct {
	// Tuning is the job's spec.tuning: Auto or Fixed, the fixed values, the limits.
	Tuning v1alpha1.TransferTuning
	// Samples are the job's probe samples (status.samples, or a report's samples
	// through ProbeSamplesFromContract).
	Samples []v1alpha1.ProbeSample
	// Profile is the path's PathProfile status when it is fresh (a warm start), nil
	// otherwise. Its samples join the job's, its model, CPU models and buffer stand in
	// where the job's samples fall short.
	Profile *v1alpha1.PathProfileStatus
	// SourceNodes and DestinationNodes are the nodes available at each side.
	SourceNodes, DestinationNodes []Node
	// ExternalDestination is set when the destination is an agent outside the
	// cluster: DestinationNodes is then ignored and the destination does not bind.
	ExternalDestination bool
	// Dataset is the coordinator's dataset summary; nil before it has listed the
	// files (the plan then has no size classes).
	Dataset *contract.Dataset
	// RTT is the path's round-trip time when known (a stripe report's RTTMicros).
	RTT time.Duration
	// ShareBitsPerSecond is the job's share of a path or site it shares with other
	// jobs when it is held to it (optimizer.JobShare.Paced); 0 when it is not. The
	// plan is OPT_B for that rate: it caps the plan like spec.tuning.limits
	// .maxBitsPerSecond, and the plan records it (TransferPlan.ShareBitsPerSecond).
	ShareBitsPerSecond int64
	// DataPlane is what the job's agents do to each byte (verification, encryption): a
	// side without a fitted or stored CPU model gets optimizer.PriorCPUModel for it.
	DataPlane optimizer.DataPlane
	// TimeLeft is how long the job's data left takes at the rate it moves now (0:
	// unknown); below NewStripeLead an Auto plan adds no stripe.
	TimeLeft time.Duration
}

// stripeGainAccuracy is the gain a doubling of the stripes must bring over the level
// before it for the plan to count it: twice the probe's α, because it compares two
// samples, each as uncertain as α, taken in turn on a job's own data. The controller
// does not see the samples' own noise (send --auto's tuner raises α to it); at 5 %, a
// two-stripe sample 6.9 % above one stripe's best and a four-stripe one at 1.06
// Gbit/s — a 1 Gbit/s path, neither settled — planned 4 stripes × 1 stream on the
// cluster, three of them idle.
const stripeGainAccuracy = 2 * optimizer.DefaultAccuracy

// NewStripeLead is the least time a job must have left for a plan to add a stripe to
// the one it probed on: a stripe's pods take seconds to start and connect (1–3 s on
// the local cluster, more where the image is pulled), and a stripe that pays adds a
// part of the rate (the probe's doubling test asks 5 %), which a job ending within
// this cannot repay. A cold job of 20 000 small files was planned 2 stripes 15.3 s
// into its 18 s: the second stripe's agents started as the last files left, and
// used a quarter and half of what they asked.
const NewStripeLead = 10 * time.Second

// limits are the user's limits with the job's share as a rate cap when it is lower,
// and one stream in all for Strict fairness; shareBinds says the share is the cap.
func (in Input) limits() (optimizer.Limits, bool) {
	return limitsWithShare(in.Tuning, in.ShareBitsPerSecond)
}

func limitsWithShare(t v1alpha1.TransferTuning, share int64) (optimizer.Limits, bool) {
	limits := Limits(t.Limits)
	if t.Fairness == v1alpha1.FairnessStrict {
		// one TCP stream: on a bottleneck shared with other TCP flows the job is one
		// flow among them, and each keeps its fair share
		limits.MaxNodes, limits.MaxStripesPerNode, limits.MaxStreamsPerStripe = 1, 1, 1
	}
	if share > 0 && (limits.MaxBitsPerSecond <= 0 || float64(share) < limits.MaxBitsPerSecond) {
		limits.MaxBitsPerSecond = float64(share)
		return limits, true
	}
	return limits, false
}

// shareBinding names the share as what binds a plan held to it at its rate.
func shareBinding(out *v1alpha1.TransferPlan, share int64, shareBinds bool) {
	if share <= 0 {
		return
	}
	out.ShareBitsPerSecond = share
	if shareBinds && out.BindingResource == v1alpha1.BindingUserLimit && float64(out.PredictedBitsPerSecond) >= float64(share)*(1-1e-6) {
		out.BindingResource = v1alpha1.BindingShare
	}
}

// priorCPU is the CPU model of a side the samples and the profile say nothing of.
func (in Input) priorCPU(side optimizer.CPUSide) optimizer.CPUModel {
	return optimizer.PriorCPUModel(side, in.DataPlane)
}

// Plan returns the job's plan, every field of v1alpha1.TransferPlan filled:
//
//   - Auto: optimizer.MakePlan over the job's samples (and a fresh profile's), with
//     the buffer the samples settled on, the stream model by BestCmb (or Plateau
//     when none of the papers' models fits: one stream fills the path), a CPU model
//     per side, the path's capacity as far as the samples show it (pathBitsPerSecond:
//     the stream model's plateau, and beyond one stripe only as far as samples of
//     several stripes showed a doubling paying: StripeRates), OPT_B for
//     nodes × stripes × streams within it, CPU per agent, size classes with Algorithm
//     1 parameters, the scheduler the dataset calls for (optimizer.ChooseScheduler:
//     SC, MC or ProMC) and its channels.
//   - Fixed: the fixed values exactly as given (nodes, stripes per node, streams,
//     buffer, and each size class's pipelining and concurrency, with parallelism equal
//     to the streams per stripe), on the best nodes available. The CPU of each agent
//     is sized at the rate the shape is predicted to carry: from the samples when there
//     are any, otherwise from what the nodes allow (NIC, disk, CPU budget), with the
//     CPU model fitted from the samples, else the profile's, else
//     optimizer.PriorCPUModel (100 millicores + the data plane's measured slope per side). Fixed
//     mode needs no probe, has no stream model and never re-plans.
//
// CPU requests are rounded up to whole millicores. Hash identifies the plan's
// decisions (see Hash).
func Plan(in Input) (v1alpha1.TransferPlan, error) {
	switch in.Tuning.Mode {
	case v1alpha1.TuningFixed:
		return planFixed(in)
	case v1alpha1.TuningAuto, "":
		return planAuto(in)
	}
	return v1alpha1.TransferPlan{}, fmt.Errorf("spec.tuning.mode: unknown mode %q", in.Tuning.Mode)
}

func (in Input) nodes() (src, dst []optimizer.Node) {
	src = toOptimizerNodes(in.SourceNodes)
	if in.ExternalDestination {
		return src, externalNodes(len(src))
	}
	return src, toOptimizerNodes(in.DestinationNodes)
}

// stripeRates are the job's samples of several stripes (else the profile's), and the
// streams per stripe they ran with.
func (in Input) stripeRates() ([]optimizer.StreamPoint, int) {
	if r, streams := StripeRates(in.Samples); r != nil {
		return r, streams
	}
	if in.Profile != nil {
		return StripeRates(in.Profile.Samples)
	}
	return nil, 0
}

// samples are the profile's samples, then the job's.
func (in Input) samples() []optimizer.Sample {
	var all []optimizer.Sample
	if in.Profile != nil {
		all = append(all, SamplesFromProbe(in.Profile.Samples)...)
	}
	return append(all, SamplesFromProbe(in.Samples)...)
}

// warm reads a profile's model, CPU models and buffer; a corrupt stored model is left
// out (and said so) rather than failing the plan.
func (in Input) warm() (optimizer.Warm, []string) {
	var w optimizer.Warm
	if in.Profile == nil {
		return w, nil
	}
	var notes []string
	fit, err := Fit(in.Profile.Model)
	if err != nil {
		notes = append(notes, "stored model ignored: "+err.Error())
	}
	w.Fit = fit
	w.SourceCPU = CPUModelFromAPI(in.Profile.SourceCPU)
	w.DestinationCPU = CPUModelFromAPI(in.Profile.DestinationCPU)
	w.BufferBytes, w.HaveBuffer = in.Profile.BufferBytes, true
	return w, notes
}

// sampledProber is a Prober over the buffer sizes the samples were actually taken
// with, so that the plan settles on the buffer the probe settled on whatever list the
// directive gave. A one-stream sample with autotuning (0) next to fixed sizes makes
// autotuning a candidate, as the directive made it; alone it changes nothing (the
// buffer is autotuning either way). Every size listed was measured, so the choice is
// the plateau choice over all of them (a profile's older samples at sizes the
// coordinator now skips included) and needs no RTT.
func sampledProber(samples []optimizer.Sample, limits optimizer.Limits) optimizer.Prober {
	seen := map[int64]bool{}
	var sizes []int64
	for _, s := range samples {
		if s.Streams == 1 && s.BufferBytes >= 0 && !seen[s.BufferBytes] {
			seen[s.BufferBytes] = true
			sizes = append(sizes, s.BufferBytes)
		}
	}
	if len(sizes) == 1 && sizes[0] == 0 {
		sizes = nil
	}
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	return optimizer.Prober{BufferSizes: sizes, Streams: optimizer.ExpSelection{MaxStreams: limits.MaxStreamsPerStripe}}
}

func planAuto(in Input) (v1alpha1.TransferPlan, error) {
	if in.Tuning.Fixed != nil {
		return v1alpha1.TransferPlan{}, errors.New("spec.tuning.fixed may be set only when spec.tuning.mode is Fixed")
	}
	limits, shareBinds := in.limits()
	short := in.TimeLeft > 0 && in.TimeLeft < NewStripeLead
	if short {
		limits.MaxNodes, limits.MaxStripesPerNode = 1, 1 // the stripe it probed on
	}
	samples := in.samples()
	warm, _ := in.warm()
	src, dst := in.nodes()
	stripeRates, stripeStreams := in.stripeRates()
	p, err := optimizer.MakePlan(optimizer.PlanInput{Samples: samples, Prober: sampledProber(samples, limits), Warm: warm,
		SourceNodes: src, DestinationNodes: dst, Limits: limits, Dataset: Histogram(in.Dataset), RTT: in.RTT,
		StripeRates: stripeRates, StripeStreams: stripeStreams, StripeAccuracy: stripeGainAccuracy, DataPlane: in.DataPlane})
	if err != nil {
		return v1alpha1.TransferPlan{}, err
	}
	buffer := p.BufferBytes
	if in.Tuning.Fairness == v1alpha1.FairnessStrict {
		// one ordinary TCP flow: the kernel's autotuning, not the probe's fixed buffer,
		// with which one stream keeps more in flight than a competing flow and takes
		// more than a flow's share (bench-sharing-wan: 1.47× with 4 MiB against three
		// iperf3 flows; 0.98–1.23 of a fair share autotuned)
		buffer = 0
	}
	out := transferPlan(p.Flow, buffer, p.SourceCPU, p.DestinationCPU, in.ExternalDestination)
	out.Model = StreamModel(p.Fit)
	if out.Model != nil {
		out.Model.Reason = contract.Cut(p.FitReason, maxModelReason)
	}
	out.PathBitsPerSecond = roundNonNegative(p.Path.Max())
	out.SizeClasses = sizeClasses(p.Chunks)
	if len(out.SizeClasses) > 0 {
		out.Scheduler = v1alpha1.Scheduler(p.Scheduler)
	}
	if short && !shareBinds {
		// this job's own stripes sample, not a profile's: its helpers are what runs
		if r, streams := StripeRates(in.Samples); len(r) > 0 {
			keepProbeStripes(&out, r, streams, limits, p.SourceCPU, p.DestinationCPU)
		}
	}
	shareBinding(&out, in.ShareBitsPerSecond, shareBinds)
	if in.Dataset != nil {
		out.CoordinatorCPUMillicores = coordinatorCPU(in.Dataset.Files, in.Dataset.Bytes, out.PredictedBitsPerSecond)
	}
	out.Hash = Hash(out)
	return out, nil
}

// keepProbeStripes has a plan made with too little time left for new stripes keep the
// probe's stripes sample of this job running — the probe stripe and its helpers, at
// the sample's streams — when that sample measured more than the plan's one stripe is
// predicted to carry by more than the probe's accuracy α (a doubling that gains α is
// one ExpSelection goes on for; here the shape already runs, no pod has to start). On
// issue 11's 20 000 small files the probe measured 877 Mbit/s on one stripe and 991
// with two of two streams 4.4 s before the end, and the plan of one stripe of one
// stream ran those 4.4 s at one stripe's rate.
func keepProbeStripes(out *v1alpha1.TransferPlan, rates []optimizer.StreamPoint, streams int, limits optimizer.Limits, srcCPU, dstCPU optimizer.CPUModel) {
	best := optimizer.StreamPoint{}
	for _, p := range rates {
		if p.Streams > 1 && p.BitsPerSecond > best.BitsPerSecond {
			best = p
		}
	}
	lim := limits.WithDefaults()
	if best.Streams < 2 || streams < 1 || streams > lim.MaxStreamsPerStripe || best.Streams-1 > 63 ||
		(limits.MaxBitsPerSecond > 0 && best.BitsPerSecond > limits.MaxBitsPerSecond) ||
		!(best.BitsPerSecond > (1+optimizer.DefaultAccuracy)*float64(out.PredictedBitsPerSecond)) {
		return
	}
	out.ProbeHelperStripes = int32(best.Streams - 1)
	out.StreamsPerStripe = int32(streams)
	out.PredictedBitsPerSecond = roundNonNegative(best.BitsPerSecond)
	out.BindingResource = v1alpha1.BindingPath
	// the probe stripe's agents move the whole sample's rate
	out.SourceCPUMillicores = ceilMillicores(srcCPU.Millicores(best.BitsPerSecond))
	out.DestinationCPUMillicores = ceilMillicores(dstCPU.Millicores(best.BitsPerSecond))
}

func planFixed(in Input) (v1alpha1.TransferPlan, error) {
	f := in.Tuning.Fixed
	if f == nil {
		return v1alpha1.TransferPlan{}, errors.New("spec.tuning.fixed is required when spec.tuning.mode is Fixed")
	}
	if f.Nodes < 1 || f.StripesPerNode < 1 || f.StreamsPerStripe < 1 || f.Concurrency < 1 || f.Pipelining < 1 || f.BufferBytes < 0 {
		return v1alpha1.TransferPlan{}, fmt.Errorf("spec.tuning.fixed: nodes, stripesPerNode, streamsPerStripe, concurrency and pipelining must be at least 1 and bufferBytes at least 0, got %+v", *f)
	}
	limits, shareBinds := in.limits()
	samples := in.samples()
	warm, _ := in.warm()
	src, dst := in.nodes()
	if len(src) < int(f.Nodes) {
		return v1alpha1.TransferPlan{}, fmt.Errorf("spec.tuning.fixed.nodes is %d but the source endpoint has %d node(s) available", f.Nodes, len(src))
	}
	if !in.ExternalDestination && len(dst) < int(f.Nodes) {
		return v1alpha1.TransferPlan{}, fmt.Errorf("spec.tuning.fixed.nodes is %d but the destination endpoint has %d node(s) available", f.Nodes, len(dst))
	}
	// The stripe's rate: what the samples say at the fixed streams and buffer, or
	// unknown (the nodes then bound the prediction).
	var curve optimizer.Curve = optimizer.FlatCurve{Streams: int(f.StreamsPerStripe)}
	if pts := optimizer.StreamPoints(samples, f.BufferBytes); len(pts) > 0 {
		if fit, err := optimizer.BestCmb(pts); err == nil {
			curve = fit
		} else {
			curve = optimizer.EmpiricalCurve(pts)
		}
	} else if warm.Fit != nil && warm.BufferBytes == f.BufferBytes {
		curve = *warm.Fit
	}
	srcCPU, _ := optimizer.CPUModelFor(samples, optimizer.Source, warm.SourceCPU, in.priorCPU(optimizer.Source))
	dstCPU, _ := optimizer.CPUModelFor(samples, optimizer.Destination, warm.DestinationCPU, in.priorCPU(optimizer.Destination))
	flow, err := optimizer.EvaluateShape(optimizer.FlowInput{Curve: curve, SourceCPU: srcCPU, DestinationCPU: dstCPU,
		SourceNodes: src, DestinationNodes: dst, Limits: limits}, int(f.Nodes), int(f.StripesPerNode), int(f.StreamsPerStripe))
	if err != nil {
		return v1alpha1.TransferPlan{}, fmt.Errorf("spec.tuning.fixed: %w", err)
	}
	out := transferPlan(flow, f.BufferBytes, srcCPU, dstCPU, in.ExternalDestination)
	if h := Histogram(in.Dataset); len(h.Buckets) > 0 {
		bdp := optimizer.StripeBDP(flow.StripeBitsPerSecond, in.RTT, f.BufferBytes)
		for _, c := range optimizer.Partition(h, flow.StripeBitsPerSecond, bdp) {
			out.SizeClasses = append(out.SizeClasses, v1alpha1.SizeClassPlan{Class: v1alpha1.SizeClass(c.Class), Files: c.Files, Bytes: c.Bytes,
				MaxBytes: c.MaxBytes, Pipelining: f.Pipelining, Parallelism: f.StreamsPerStripe, Concurrency: f.Concurrency})
		}
	}
	shareBinding(&out, in.ShareBitsPerSecond, shareBinds)
	if in.Dataset != nil {
		out.CoordinatorCPUMillicores = coordinatorCPU(in.Dataset.Files, in.Dataset.Bytes, out.PredictedBitsPerSecond)
	}
	out.Hash = Hash(out)
	return out, nil
}

// coordinatorCPU is the coordinator's request for a dataset moved at the predicted rate
// (optimizer.CoordinatorMillicores).
func coordinatorCPU(files, bytes, predictedBitsPerSecond int64) int64 {
	return ceilMillicores(optimizer.CoordinatorMillicores(float64(predictedBitsPerSecond), files, bytes))
}

// transferPlan fills the fields every mode shares.
func transferPlan(flow optimizer.FlowPlan, buffer int64, srcCPU, dstCPU optimizer.CPUModel, external bool) v1alpha1.TransferPlan {
	out := v1alpha1.TransferPlan{
		SourceNodes:              append([]string(nil), flow.SourceNodes...),
		StripesPerNode:           int32(flow.StripesPerNode),
		StreamsPerStripe:         int32(flow.StreamsPerStripe),
		BufferBytes:              buffer,
		SourceCPUMillicores:      ceilMillicores(flow.SourceMillicoresPerStripe),
		DestinationCPUMillicores: ceilMillicores(flow.DestinationMillicoresPerStripe),
		PredictedBitsPerSecond:   roundNonNegative(flow.PredictedBitsPerSecond),
		BindingResource:          bindingResource(flow.Binding),
		SourceCPU:                CPUModel(srcCPU),
		DestinationCPU:           CPUModel(dstCPU),
	}
	if !external {
		out.DestinationNodes = append([]string(nil), flow.DestinationNodes...)
	}
	return out
}

// bindingResource maps the optimizer's binding to the API's.
func bindingResource(b optimizer.Binding) v1alpha1.BindingResource {
	switch b {
	case optimizer.BindingPath:
		return v1alpha1.BindingPath
	case optimizer.BindingNIC:
		return v1alpha1.BindingNIC
	case optimizer.BindingCPU:
		return v1alpha1.BindingCPU
	case optimizer.BindingDisk:
		return v1alpha1.BindingDisk
	case optimizer.BindingNodes:
		return v1alpha1.BindingNodes
	}
	return v1alpha1.BindingUserLimit
}

func sizeClasses(chunks []optimizer.ChunkPlan) []v1alpha1.SizeClassPlan {
	var out []v1alpha1.SizeClassPlan
	for _, c := range chunks {
		out = append(out, v1alpha1.SizeClassPlan{Class: v1alpha1.SizeClass(c.Class), Files: c.Files, Bytes: c.Bytes,
			MaxBytes: c.MaxBytes, Pipelining: clamp32(c.Params.Pipelining), Parallelism: clamp32(c.Params.Parallelism), Concurrency: clamp32(c.Params.Concurrency),
			Channels: int32(min(max(c.Channels, 0), math.MaxInt32))})
	}
	return out
}

func clamp32(v int) int32 { return int32(min(max(v, 1), math.MaxInt32)) }

// maxModelReason is the API's bound on status.plan.model.reason.
const maxModelReason = 512
