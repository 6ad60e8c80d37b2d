package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/dtnflow/dtnflow/agent/autotune"
	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/coord"
	"github.com/dtnflow/dtnflow/agent/wire"
	"github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/planning"
	"github.com/dtnflow/dtnflow/optimizer"
)

func toOptimizer(ss []contract.Sample) []optimizer.Sample {
	out := make([]optimizer.Sample, 0, len(ss))
	for _, s := range ss {
		out = append(out, optimizer.Sample{Streams: int(s.Streams), BufferBytes: s.BufferBytes, BitsPerSecond: float64(s.BitsPerSecond),
			SourceMillicores: float64(s.SourceMillicores), DestinationMillicores: float64(s.DestinationMillicores)})
	}
	return out
}

// prober is the optimizer's buffer-first, then ExpSelection, probe stepper, with the
// path's RTT as the samples so far measured it (the smallest), so that with
// autotuning among the directive's buffers the sizes autotuning already outruns are
// not sampled (optimizer.Prober.RTT).
func prober(d contract.ProbeDirective, samples []contract.Sample) optimizer.Prober {
	return optimizer.Prober{BufferSizes: d.BufferBytes, RTT: minRTT(samples), Streams: optimizer.ExpSelection{MaxStreams: int(d.MaxStreams)}}
}

// minRTT is the smallest RTT the samples saw, 0 when none says.
func minRTT(samples []contract.Sample) time.Duration {
	var rtt time.Duration
	for _, s := range samples {
		if d := time.Duration(s.RTTMicros) * time.Microsecond; d > 0 && (rtt == 0 || d < rtt) {
			rtt = d
		}
	}
	return rtt
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
	return func(d contract.ProbeDirective, samples []contract.Sample) (wire.ProbeRequest, bool) {
		p := prober(d, samples)
		opt := toOptimizer(samples)
		step := p.Next(opt)
		if step.Phase == optimizer.PhaseDone {
			return wire.ProbeRequest{}, true
		}
		return wire.ProbeRequest{Streams: int32(step.Streams), BufferBytes: step.BufferBytes, Seconds: max(d.SampleSeconds, 1), Settle: true,
			ThresholdBitsPerSecond: int64(autotune.Threshold(p, opt, step))}, false
	}
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
// seconds' reports would undo that measurement on less evidence.
func newAdapter(plan optimizer.Plan, maxStripes int) *adapter {
	return &adapter{plan: plan, max: maxStripes, state: optimizer.RescaleState{LastChange: time.Now()}}
}

func (a *adapter) step(rep contract.Report, stripes, streams int) optimizer.Intent {
	m := optimizer.Measurement{Time: rep.Time, AggregateBitsPerSecond: float64(rep.BitsPerSecond)}
	for _, s := range rep.Stripes {
		m.Stripes = append(m.Stripes, optimizer.StripeMeasurement{BitsPerSecond: float64(s.BitsPerSecond), LossPPM: float64(s.LossPPM), Connected: s.Connected})
	}
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

// planInput is what `dtnflow-agent plan` reads: the TransferJob's tuning, probe
// samples (as in TransferJob status.samples, or as `dtnflow-agent probe` prints them),
// the nodes of each side with their capacities, and the dataset.
type planInput struct {
	Tuning              v1alpha1.TransferTuning `json:"tuning"`
	Samples             []v1alpha1.ProbeSample  `json:"samples"`
	SourceNodes         []planNode              `json:"sourceNodes"`
	DestinationNodes    []planNode              `json:"destinationNodes"`
	ExternalDestination bool                    `json:"externalDestination,omitempty"`
	Dataset             *contract.Dataset       `json:"dataset,omitempty"`
	RTTMicros           int64                   `json:"rttMicros,omitempty"`
}

type planNode struct {
	Name                string `json:"name"`
	NICBitsPerSecond    int64  `json:"nicBitsPerSecond"`
	CPUBudgetMillicores int64  `json:"cpuBudgetMillicores,omitempty"`
	DiskBitsPerSecond   int64  `json:"diskBitsPerSecond,omitempty"`
	MaxStripes          int    `json:"maxStripes,omitempty"`
}

// planOutput carries the plan under the name it has in TransferJob status, and the
// directive the coordinator would get.
type planOutput struct {
	Plan      v1alpha1.TransferPlan `json:"plan"`
	Directive contract.Directive    `json:"directive"`
}

// runPlan is the what-if tool: the same planner the controller uses
// (controllers/planning), from JSON in to the plan as TransferJob status shows it.
func runPlan(ctx context.Context, args []string, log *slog.Logger) error {
	fs := newFlags("plan", "plan [--in input.json] [--samples probe.jsonl] [--nic-rate 10G] [--root DIR --path P...]")
	in := fs.String("in", "", "input JSON (tuning, samples, sourceNodes, destinationNodes, dataset, rttMicros); - or empty for none")
	samplesFile := fs.String("samples", "", "probe samples as JSON lines (the output of dtnflow-agent probe), added to the input's")
	var nic rateFlag
	fs.Var(&nic, "nic-rate", "when the input names no nodes: one node per side with this NIC capacity, e.g. 10G")
	rootDir := fs.String("root", "", "with --path: list the dataset under this root for the size classes")
	paths := fs.StringArray("path", nil, "dataset path under --root (repeatable)")
	if err := parse(fs, args); err != nil {
		return err
	}
	var pin planInput
	if *in != "" {
		var b []byte
		var err error
		if *in == "-" {
			b, err = io.ReadAll(os.Stdin)
		} else {
			b, err = os.ReadFile(*in)
		}
		if err != nil {
			return fmt.Errorf("--in: %w", err)
		}
		dec := json.NewDecoder(bytes.NewReader(b))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&pin); err != nil {
			return fmt.Errorf("--in %s: %w", *in, err)
		}
	}
	if *samplesFile != "" {
		f, err := os.Open(*samplesFile)
		if err != nil {
			return fmt.Errorf("--samples: %w", err)
		}
		defer f.Close()
		dec := json.NewDecoder(f)
		for {
			var s v1alpha1.ProbeSample
			if err := dec.Decode(&s); err == io.EOF {
				break
			} else if err != nil {
				return fmt.Errorf("--samples %s: %w", *samplesFile, err)
			}
			pin.Samples = append(pin.Samples, s)
		}
	}
	if len(pin.SourceNodes) == 0 && len(pin.DestinationNodes) == 0 {
		if nic <= 0 {
			nic = 10e9
		}
		pin.SourceNodes = []planNode{{Name: "source", NICBitsPerSecond: int64(nic)}}
		pin.DestinationNodes = []planNode{{Name: "destination", NICBitsPerSecond: int64(nic)}}
	}
	if len(*paths) > 0 {
		root, err := openRoot(*rootDir)
		if err != nil {
			return err
		}
		ds, err := coord.ListDataset(root, *paths)
		if err != nil {
			return err
		}
		pin.Dataset = &ds
	}
	nodes := func(ns []planNode) []planning.Node {
		var out []planning.Node
		for _, n := range ns {
			out = append(out, planning.Node{Name: n.Name, NICBitsPerSecond: n.NICBitsPerSecond, CPUBudgetMillicores: n.CPUBudgetMillicores,
				DiskBitsPerSecond: n.DiskBitsPerSecond, MaxStripes: n.MaxStripes})
		}
		return out
	}
	plan, err := planning.Plan(planning.Input{Tuning: pin.Tuning, Samples: pin.Samples, SourceNodes: nodes(pin.SourceNodes),
		DestinationNodes: nodes(pin.DestinationNodes), ExternalDestination: pin.ExternalDestination, Dataset: pin.Dataset,
		RTT: time.Duration(pin.RTTMicros) * time.Microsecond})
	if err != nil {
		return fmt.Errorf("plan: %w", err)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(planOutput{Plan: plan, Directive: planning.Directive(plan, pin.Tuning.Limits)})
}
