package planning

import (
	"reflect"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/optimizer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func basePlan() v1alpha1.TransferPlan {
	return v1alpha1.TransferPlan{SourceNodes: []string{"s0", "s1"}, DestinationNodes: []string{"d0", "d1"}, StripesPerNode: 4, StreamsPerStripe: 4,
		BufferBytes: 1 << 20, SourceCPUMillicores: 500, DestinationCPUMillicores: 200, PredictedBitsPerSecond: 8e9,
		SizeClasses: []v1alpha1.SizeClassPlan{
			{Class: v1alpha1.SizeClassSmall, MaxBytes: 1 << 23, Pipelining: 50, Parallelism: 1, Concurrency: 8, Channels: 5},
			{Class: v1alpha1.SizeClassLarge, Pipelining: 1, Parallelism: 2, Concurrency: 2, Channels: 3},
		}}
}

func TestDirective(t *testing.T) {
	d := Directive(basePlan(), &v1alpha1.TuningLimits{MaxBitsPerSecond: ptr[int64](9e9)})
	// each class but the last carries the planner's bound; the last is unbounded
	want := contract.Directive{Mode: contract.ModeTransfer, StreamsPerStripe: 4, BufferBytes: 1 << 20, MaxBitsPerSecond: 9e9, Stripes: 8,
		SizeClasses: []contract.SizeClassParam{
			{Class: "Small", MaxBytes: 1 << 23, Pipelining: 50, Parallelism: 1, Concurrency: 8, Channels: 5},
			{Class: "Large", MaxBytes: 0, Pipelining: 1, Parallelism: 2, Concurrency: 2, Channels: 3},
		}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("Directive =\n%+v\nwant\n%+v", d, want)
	}
	if d := Directive(v1alpha1.TransferPlan{StripesPerNode: 1, StreamsPerStripe: 1}, nil); d.MaxBitsPerSecond != 0 || d.Stripes != 1 {
		t.Errorf("Directive without limits or nodes: %+v", d)
	}
}

func TestHashCoversDecisionsOnly(t *testing.T) {
	base := basePlan()
	h := Hash(base)
	changes := map[string]func(p *v1alpha1.TransferPlan){
		"nodes":         func(p *v1alpha1.TransferPlan) { p.SourceNodes = []string{"s0", "s2"} },
		"stripes":       func(p *v1alpha1.TransferPlan) { p.StripesPerNode = 5 },
		"streams":       func(p *v1alpha1.TransferPlan) { p.StreamsPerStripe = 8 },
		"buffer":        func(p *v1alpha1.TransferPlan) { p.BufferBytes = 0 },
		"cpu":           func(p *v1alpha1.TransferPlan) { p.DestinationCPUMillicores = 201 },
		"class channel": func(p *v1alpha1.TransferPlan) { p.SizeClasses[1].Channels = 4 },
	}
	for name, change := range changes {
		p := basePlan()
		change(&p)
		if Hash(p) == h {
			t.Errorf("changing the %s keeps the hash", name)
		}
	}
	same := basePlan()
	same.PredictedBitsPerSecond, same.BindingResource = 1, v1alpha1.BindingCPU
	same.Model = &v1alpha1.StreamModel{Name: v1alpha1.StreamModelDinda, A: "1", B: "1", OptimalStreams: 1}
	if Hash(same) != h {
		t.Error("predictions changed the hash")
	}
}

func TestProbeDirective(t *testing.T) {
	now := time.Unix(100_000, 0)
	auto := v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto, Limits: &v1alpha1.TuningLimits{MaxStreamsPerStripe: ptr[int32](32)}}
	fresh := func(samples ...v1alpha1.ProbeSample) *v1alpha1.PathProfile {
		fit := optimizer.StreamFit{Model: optimizer.FullSecondOrder, A: 1e-18, B: -4e-18, C: 8e-18, OptimalStreams: 4}
		return &v1alpha1.PathProfile{Status: v1alpha1.PathProfileStatus{Model: StreamModel(&fit), BufferBytes: 1 << 20, Samples: samples,
			LastUpdateTime: &metav1.Time{Time: now.Add(-time.Hour)}}}
	}
	sample := func(streams int32) v1alpha1.ProbeSample {
		return v1alpha1.ProbeSample{Streams: streams, BufferBytes: 1 << 20, BitsPerSecond: int64(stripeRate(int(streams), 1<<20))}
	}
	// a profile whose cold probe kept autotuning (bufferBytes 0): 8 MiB did not beat it
	autotuned := func(streams ...int32) *v1alpha1.PathProfile {
		p := fresh(v1alpha1.ProbeSample{Streams: 1, BufferBytes: 8 << 20, BitsPerSecond: 900e6})
		p.Status.BufferBytes = 0
		for _, n := range streams {
			p.Status.Samples = append(p.Status.Samples, v1alpha1.ProbeSample{Streams: n, BitsPerSecond: 900e6})
		}
		return p
	}
	autotuningThenSweep := func(prior, max int64) []int64 { return append([]int64{0}, optimizer.BufferCandidates(prior, max)...) }
	const dcc = optimizer.DefaultMaxConcurrency // maxCC of the early size classes, unless the job sets it
	tests := map[string]struct {
		in   ProbeInput
		want *contract.ProbeDirective
	}{
		"fixed: no probe": {ProbeInput{Tuning: v1alpha1.TransferTuning{Mode: v1alpha1.TuningFixed}}, nil},
		// Strict: one autotuned stream is all the plan may use, so all the probe samples
		"cold, Strict fairness": {ProbeInput{Tuning: v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto, Fairness: v1alpha1.FairnessStrict}, NICBitsPerSecond: 10e9, RTT: 50 * time.Millisecond},
			&contract.ProbeDirective{MaxConcurrency: dcc, MaxStreams: 1, SampleSeconds: 5, MaxStripes: 1}},
		// autotuning first, then 10 Gbit/s × 2 ms = 2.5 MB: buffers from 256 KiB to
		// 8 MiB; 50 × 2 ms < 5 s
		"cold, BDP known": {ProbeInput{Tuning: auto, NICBitsPerSecond: 10e9, RTT: 2 * time.Millisecond},
			&contract.ProbeDirective{MaxConcurrency: dcc, MaxStreams: 32, SampleSeconds: 5, BufferBytes: []int64{0, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20}, MaxStripes: ProbeMaxStripes}},
		// one node of at most 2 stripes: the stripe stage stops at 2
		"cold, two stripes at most": {ProbeInput{Tuning: v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto, Limits: &v1alpha1.TuningLimits{MaxNodes: ptr[int32](1), MaxStripesPerNode: ptr[int32](2)}}},
			&contract.ProbeDirective{MaxConcurrency: dcc, MaxStreams: 64, SampleSeconds: 5, BufferBytes: autotuningThenSweep(0, 0), MaxStripes: 2}},
		"cold, the job's maxConcurrency": {ProbeInput{Tuning: v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto, Limits: &v1alpha1.TuningLimits{MaxConcurrency: ptr[int32](12)}}},
			&contract.ProbeDirective{MaxConcurrency: 12, MaxStreams: 64, SampleSeconds: 5, BufferBytes: autotuningThenSweep(0, 0), MaxStripes: ProbeMaxStripes}},
		"cold, nothing known, long path": {ProbeInput{Tuning: v1alpha1.TransferTuning{}, RTT: 300 * time.Millisecond},
			&contract.ProbeDirective{MaxConcurrency: dcc, MaxStreams: 64, SampleSeconds: 15, BufferBytes: autotuningThenSweep(0, 0), MaxStripes: ProbeMaxStripes}},
		"cold, kernel maximum": {ProbeInput{Tuning: auto, MaxBufferBytes: 4 << 20},
			&contract.ProbeDirective{MaxConcurrency: dcc, MaxStreams: 32, SampleSeconds: 5, BufferBytes: autotuningThenSweep(0, 4<<20), MaxStripes: ProbeMaxStripes}},
		// a fresh profile whose samples complete ExpSelection: nothing to measure
		"fresh and complete": {ProbeInput{Tuning: auto, Now: now, Profile: fresh(sample(1), sample(2), sample(4), sample(8))}, nil},
		// a fresh profile that ExpSelection has not finished (2 streams gained on 1): the
		// probe continues from its one-stripe samples at its buffer, in stream order; a
		// sample of several stripes and one at another buffer are not the curve's
		"fresh, partial": {ProbeInput{Tuning: auto, Now: now, Profile: fresh(sample(2), sample(1),
			v1alpha1.ProbeSample{Stripes: 2, Streams: 2, BufferBytes: 1 << 20, BitsPerSecond: 3e9},
			v1alpha1.ProbeSample{Streams: 1, BufferBytes: 2 << 20, BitsPerSecond: 1e9})},
			&contract.ProbeDirective{MaxConcurrency: dcc, MaxStreams: 32, SampleSeconds: 5, BufferBytes: []int64{1 << 20}, Known: []contract.Sample{
				{Stripes: 1, Streams: 1, BufferBytes: 1 << 20, BitsPerSecond: int64(stripeRate(1, 1<<20))},
				{Stripes: 1, Streams: 2, BufferBytes: 1 << 20, BitsPerSecond: int64(stripeRate(2, 1<<20))}}}},
		"stale profile is cold": {ProbeInput{Tuning: auto, Now: now.Add(48 * time.Hour), Profile: fresh(sample(1), sample(2), sample(4), sample(8))},
			&contract.ProbeDirective{MaxConcurrency: dcc, MaxStreams: 32, SampleSeconds: 5, BufferBytes: autotuningThenSweep(0, 0), MaxStripes: ProbeMaxStripes}},
		// a profile that chose autotuning: its stream samples at 0 complete the probe
		"fresh with autotuning, complete": {ProbeInput{Tuning: auto, Now: now, Profile: autotuned(1, 2, 4)}, nil},
		// … or leave the rest to measure with autotuning: no buffer phase at all
		"fresh with autotuning, partial": {ProbeInput{Tuning: auto, Now: now, Profile: autotuned(1)},
			&contract.ProbeDirective{MaxConcurrency: dcc, MaxStreams: 32, SampleSeconds: 5, Known: []contract.Sample{{Stripes: 1, Streams: 1, BitsPerSecond: 900e6}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ProbeDirective(tc.in); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("ProbeDirective =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestLearn(t *testing.T) {
	now := time.Unix(200_000, 0)
	prev := v1alpha1.PathProfileStatus{BestBitsPerSecond: 5e9, ContributingJobs: []string{"a/one", "b/two"}}
	for i := 0; i < 60; i++ {
		prev.Samples = append(prev.Samples, v1alpha1.ProbeSample{Streams: 1, BitsPerSecond: int64(i)})
	}
	plan := basePlan()
	plan.Model = &v1alpha1.StreamModel{Name: v1alpha1.StreamModelDinda, A: "1e-18", B: "3e-18", OptimalStreams: 8}
	plan.SourceCPU = &v1alpha1.CPUModel{InterceptMillicores: 10, MillicoresPerGbps: 100, Samples: 5}
	plan.DestinationCPU = &v1alpha1.CPUModel{InterceptMillicores: 100, MillicoresPerGbps: 250} // a default: not learned
	newSamples := []v1alpha1.ProbeSample{{Streams: 2, BitsPerSecond: 100}, {Streams: 4, BitsPerSecond: 101}, {Streams: 8, BitsPerSecond: 102}, {Streams: 16, BitsPerSecond: 103}, {Streams: 32, BitsPerSecond: 104}}
	got := Learn(prev, "a/one", &plan, newSamples, 4e9, now)
	if got.Model == nil || got.Model.OptimalStreams != 8 || got.BufferBytes != 1<<20 || got.SourceCPU.Samples != 5 || got.DestinationCPU != nil {
		t.Errorf("learned %+v", got)
	}
	if len(got.Samples) != 64 || got.Samples[63].BitsPerSecond != 104 || got.Samples[0].BitsPerSecond != 1 {
		t.Errorf("samples: %d, last %d, first %d; want the 64 newest", len(got.Samples), got.Samples[63].BitsPerSecond, got.Samples[0].BitsPerSecond)
	}
	if got.BestBitsPerSecond != 5e9 || !reflect.DeepEqual(got.ContributingJobs, []string{"b/two", "a/one"}) || !got.LastUpdateTime.Time.Equal(now) {
		t.Errorf("best %d, jobs %v, time %v", got.BestBitsPerSecond, got.ContributingJobs, got.LastUpdateTime)
	}
	if len(prev.Samples) != 60 || len(prev.ContributingJobs) != 2 {
		t.Error("Learn modified its input")
	}
	// a plan that kept autotuning replaces a fixed buffer learned before: 0 is a choice
	plan.BufferBytes = 0
	if again := Learn(got, "c/three", &plan, nil, 4e9, now); again.BufferBytes != 0 {
		t.Errorf("after a plan with autotuning the profile's buffer is %d, want 0", again.BufferBytes)
	}
}
