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

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/coord"
	"github.com/dtnflow/dtnflow/agent/mover"
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

// prober is the optimizer's buffer-first, then ExpSelection, probe stepper.
func prober(d contract.ProbeDirective) optimizer.Prober {
	return optimizer.Prober{BufferSizes: d.BufferBytes, Streams: optimizer.ExpSelection{MaxStreams: int(d.MaxStreams)}}
}

// probePlanner is the coordinator's probe sequence: the optimizer's stepper, which is
// stateless, so a replaced coordinator carries on from the samples it reports.
func probePlanner() coord.ProbePlanner {
	return func(d contract.ProbeDirective, samples []contract.Sample) (wire.ProbeRequest, bool) {
		step := prober(d).Next(toOptimizer(samples))
		if step.Phase == optimizer.PhaseDone {
			return wire.ProbeRequest{}, true
		}
		return wire.ProbeRequest{Streams: int32(step.Streams), BufferBytes: step.BufferBytes, Seconds: max(d.SampleSeconds, 1)}, false
	}
}

// autoOptions are the flags of send --auto.
type autoOptions struct {
	maxStreams, maxStripes int32
	probeSeconds           int32
	nicBitsPerSecond       rateFlag
	buffers                bool
}

// autoTune probes the path memory-to-memory (buffer first, then ExpSelection), plans
// with the optimizer (BestCmb, buffer choice, OPT_B for stripes × streams, Algorithm 1
// per size class) and applies the plan to the core. It returns the plan.
func autoTune(ctx context.Context, core *coord.Core, to string, secret []byte, j *jobFlags, a autoOptions, log *slog.Logger) (optimizer.Plan, error) {
	d := contract.ProbeDirective{MaxStreams: a.maxStreams, SampleSeconds: a.probeSeconds}
	if a.buffers {
		d.BufferBytes = optimizer.BufferCandidates(0, 0)
	}
	p := prober(d)
	core.SetPhase(contract.PhaseProbing)
	for {
		step := p.Next(toOptimizer(core.Samples()))
		if step.Phase == optimizer.PhaseDone {
			break
		}
		res, err := mover.Probe(ctx, to, secret, mover.ProbeOptions{Streams: int32(step.Streams), BufferBytes: step.BufferBytes,
			Duration: time.Duration(a.probeSeconds) * time.Second, BlockSize: int64(j.blockSize)})
		if err != nil {
			return optimizer.Plan{}, fmt.Errorf("--auto probe: %w", err)
		}
		core.AddSample(res.Sample)
		log.Info("Probe sample", "phase", step.Phase, "streams", step.Streams, "bufferBytes", step.BufferBytes, "rate", coord.HumanRate(res.Sample.BitsPerSecond),
			"sourceMillicores", res.Sample.SourceMillicores, "destinationMillicores", res.Sample.DestinationMillicores)
	}
	core.SetPhase(contract.PhaseProbed)
	ds := core.Dataset()
	hist := optimizer.Histogram{Files: ds.Files, Bytes: ds.Bytes}
	for _, b := range ds.Buckets {
		hist.Buckets = append(hist.Buckets, optimizer.Bucket{Log2: int(b.Log2), Files: b.Files, Bytes: b.Bytes})
	}
	nic := float64(a.nicBitsPerSecond)
	if nic <= 0 {
		nic = 100e9 // unknown: let the path, not the NIC, bind
	}
	node := []optimizer.Node{{Name: "local", NICBitsPerSecond: nic}}
	plan, err := optimizer.MakePlan(optimizer.PlanInput{Samples: toOptimizer(core.Samples()), Prober: p, SourceNodes: node, DestinationNodes: []optimizer.Node{{Name: "remote", NICBitsPerSecond: nic}},
		Limits: optimizer.Limits{MaxNodes: 1, MaxStripesPerNode: int(a.maxStripes), MaxStreamsPerStripe: int(a.maxStreams), MaxConcurrency: int(j.concurrency),
			MaxBitsPerSecond: float64(j.maxRate)}, Dataset: hist})
	if err != nil {
		return optimizer.Plan{}, fmt.Errorf("--auto plan: %w", err)
	}
	params := j.params()
	params.Streams = int32(plan.Flow.StreamsPerStripe)
	params.BufferBytes = plan.BufferBytes
	params.SizeClasses = nil
	for _, c := range plan.Chunks {
		params.SizeClasses = append(params.SizeClasses, contract.SizeClassParam{Class: string(c.Class), MaxBytes: c.MaxBytes,
			Pipelining: int32(c.Params.Pipelining), Parallelism: int32(c.Params.Parallelism), Concurrency: int32(c.Params.Concurrency), Channels: int32(c.Channels)})
	}
	params.Concurrency, params.Pipelining = 0, 0
	core.SetParams(coord.ParamsFromDirective(contract.Directive{StreamsPerStripe: params.Streams, BufferBytes: params.BufferBytes, SizeClasses: params.SizeClasses,
		MaxBitsPerSecond: params.MaxBitsPerSecond}, params))
	log.Info("Planned", "stripes", plan.Flow.StripesPerNode, "streams", plan.Flow.StreamsPerStripe, "bufferBytes", plan.BufferBytes,
		"predicted", coord.HumanRate(int64(plan.Flow.PredictedBitsPerSecond)), "binding", plan.Flow.Binding, "classes", len(plan.Chunks), "reason", plan.Flow.Reason)
	return plan, nil
}

// adapter runs the optimizer's rescale policy over the running job: every report it
// may add or remove local stripes or change the streams per stripe.
type adapter struct {
	plan   optimizer.Plan
	policy optimizer.RescalePolicy
	state  optimizer.RescaleState
	max    int
}

func (a *adapter) step(rep contract.Report, stripes, streams int) optimizer.Intent {
	m := optimizer.Measurement{Time: rep.Time, AggregateBitsPerSecond: float64(rep.BitsPerSecond)}
	for _, s := range rep.Stripes {
		m.Stripes = append(m.Stripes, optimizer.StripeMeasurement{BitsPerSecond: float64(s.BitsPerSecond), LossPPM: float64(s.LossPPM), Connected: s.Connected})
	}
	in := optimizer.RescaleInput{Now: time.Now(), Current: optimizer.Shape{Stripes: stripes, StreamsPerStripe: streams}, MinStripes: 1, MaxStripes: a.max,
		MaxStreams: optimizer.DefaultMaxStreamsPerStripe, Curve: a.plan.Curve, PlannedStripes: a.plan.Flow.Stripes(),
		PlannedBitsPerSecond: a.plan.Flow.PredictedBitsPerSecond, Measurement: m}
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
