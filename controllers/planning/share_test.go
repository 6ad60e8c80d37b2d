package planning

import (
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/api/v1alpha1"
)

// TestPlanForAShare plans the same path alone and for a third of it: the plan for the
// share is OPT_B for that rate — no more stripes than it needs, CPU requests sized for
// its rate, bound by the share, which it records — and the directive paces the agents
// to it.
func TestPlanForAShare(t *testing.T) {
	d := ProbeDirective(ProbeInput{Tuning: v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto}, NICBitsPerSecond: 10e9, RTT: 2 * time.Millisecond})
	samples := probe(t, d)
	in := Input{Tuning: v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto}, Samples: samples,
		SourceNodes: tenGigNodes("src-", 2), DestinationNodes: tenGigNodes("dst-", 2), RTT: 2 * time.Millisecond}
	alone, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	in.ShareBitsPerSecond = alone.PathBitsPerSecond / 3
	shared, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("alone: %d × %d streams, %d bit/s, %d m per sender; a third: %d × %d streams, %d bit/s, %d m", Stripes(alone), alone.StreamsPerStripe,
		alone.PredictedBitsPerSecond, alone.SourceCPUMillicores, Stripes(shared), shared.StreamsPerStripe, shared.PredictedBitsPerSecond, shared.SourceCPUMillicores)
	if shared.ShareBitsPerSecond != in.ShareBitsPerSecond || shared.BindingResource != v1alpha1.BindingShare {
		t.Errorf("share %d bound by %s, want %d bound by Share", shared.ShareBitsPerSecond, shared.BindingResource, in.ShareBitsPerSecond)
	}
	if shared.PredictedBitsPerSecond > in.ShareBitsPerSecond || shared.PredictedBitsPerSecond < in.ShareBitsPerSecond*98/100 {
		t.Errorf("predicted %d for a share of %d", shared.PredictedBitsPerSecond, in.ShareBitsPerSecond)
	}
	if Stripes(shared) > Stripes(alone) || shared.StreamsPerStripe > alone.StreamsPerStripe || shared.SourceCPUMillicores >= alone.SourceCPUMillicores ||
		shared.DestinationCPUMillicores >= alone.DestinationCPUMillicores {
		t.Errorf("the plan for a third of the path is not smaller than the plan for all of it")
	}
	if alone.ShareBitsPerSecond != 0 {
		t.Errorf("a plan without a share records %d", alone.ShareBitsPerSecond)
	}
	if got := Directive(shared, nil).MaxBitsPerSecond; got != in.ShareBitsPerSecond {
		t.Errorf("the directive paces at %d, want the share %d", got, in.ShareBitsPerSecond)
	}
	// the user's own lower limit stays what binds and paces
	in.Tuning.Limits = &v1alpha1.TuningLimits{MaxBitsPerSecond: ptr(in.ShareBitsPerSecond / 2)}
	capped, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	if capped.BindingResource != v1alpha1.BindingUserLimit || Directive(capped, in.Tuning.Limits).MaxBitsPerSecond != in.ShareBitsPerSecond/2 {
		t.Errorf("below the user's limit: bound by %s, paced at %d", capped.BindingResource, Directive(capped, in.Tuning.Limits).MaxBitsPerSecond)
	}

	// Fixed mode keeps its shape and is paced to the share
	fixed := Input{Tuning: v1alpha1.TransferTuning{Mode: v1alpha1.TuningFixed, Fixed: &v1alpha1.FixedTuning{Nodes: 1, StripesPerNode: 2, StreamsPerStripe: 4,
		Concurrency: 2, Pipelining: 4}}, SourceNodes: tenGigNodes("src-", 1), DestinationNodes: tenGigNodes("dst-", 1), ShareBitsPerSecond: 3e8}
	fp, err := Plan(fixed)
	if err != nil {
		t.Fatal(err)
	}
	if Stripes(fp) != 2 || fp.ShareBitsPerSecond != 3e8 || fp.PredictedBitsPerSecond > 3e8 || Directive(fp, nil).MaxBitsPerSecond != 3e8 {
		t.Errorf("fixed plan for a share: %d stripes, share %d, predicted %d, paced %d", Stripes(fp), fp.ShareBitsPerSecond, fp.PredictedBitsPerSecond, Directive(fp, nil).MaxBitsPerSecond)
	}
}

// TestRescaleWithinAShare: a job held to its share measures its share; the rescale
// policy does not add stripes towards the rate the path would give it alone.
func TestRescaleWithinAShare(t *testing.T) {
	d := ProbeDirective(ProbeInput{Tuning: v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto}, NICBitsPerSecond: 10e9, RTT: 2 * time.Millisecond})
	in := Input{Tuning: v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto}, Samples: probe(t, d),
		SourceNodes: tenGigNodes("src-", 2), DestinationNodes: tenGigNodes("dst-", 2), RTT: 2 * time.Millisecond}
	alone, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	in.ShareBitsPerSecond = alone.PathBitsPerSecond / 4
	plan, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	var state *RescaleState
	now := time.Unix(10_000, 0)
	for round := range 30 {
		now = now.Add(10 * time.Second)
		rep := report(now, plan, in.ShareBitsPerSecond)
		dec, next := Rescale(state, RescaleInput{Tuning: in.Tuning, Plan: plan, Report: rep, SourceNodes: in.SourceNodes, DestinationNodes: in.DestinationNodes,
			Now: now, ShareBitsPerSecond: in.ShareBitsPerSecond})
		state = next
		if dec.Plan != nil {
			t.Fatalf("round %d: %s: %s (%v → %v) while the job moves its share", round, dec.Reason, dec.Message, dec.From, dec.To)
		}
	}
}

func TestLearnTwiceAndCapacity(t *testing.T) {
	plan := basePlan()
	plan.Model = &v1alpha1.StreamModel{Name: v1alpha1.StreamModelDinda, A: "1e-18", B: "3e-18", OptimalStreams: 8}
	plan.PathBitsPerSecond = 9e8
	samples := []v1alpha1.ProbeSample{{Streams: 1, BitsPerSecond: 4e8}, {Streams: 2, BitsPerSecond: 7e8}}
	planned := time.Unix(1000, 0)
	atPlan := Learn(v1alpha1.PathProfileStatus{}, "n/j", &plan, samples, 0, planned)
	if atPlan.Capacity == nil || atPlan.Capacity.PlateauBitsPerSecond != 9e8 || !atPlan.Capacity.PlateauTime.Time.Equal(planned) {
		t.Fatalf("capacity after planning: %+v", atPlan.Capacity)
	}
	atEnd := Learn(atPlan, "n/j", &plan, samples, 8e8, planned.Add(time.Hour))
	if len(atEnd.Samples) != 2 || atEnd.BestBitsPerSecond != 8e8 || len(atEnd.ContributingJobs) != 1 {
		t.Errorf("after learning twice from one job: %d samples, best %d, jobs %v", len(atEnd.Samples), atEnd.BestBitsPerSecond, atEnd.ContributingJobs)
	}
}

// TestStrictFairness: a job in Strict fairness is planned as one TCP stream, whatever
// its limits allow, with the buffer the probe settled on; the rescale policy adds none.
func TestStrictFairness(t *testing.T) {
	d := ProbeDirective(ProbeInput{Tuning: v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto}, NICBitsPerSecond: 10e9, RTT: 2 * time.Millisecond})
	in := Input{Tuning: v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto, Fairness: v1alpha1.FairnessStrict,
		Limits: &v1alpha1.TuningLimits{MaxStreamsPerStripe: ptr[int32](16)}}, Samples: probe(t, d),
		SourceNodes: tenGigNodes("src-", 2), DestinationNodes: tenGigNodes("dst-", 2), RTT: 2 * time.Millisecond}
	plan, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	if Stripes(plan) != 1 || plan.StreamsPerStripe != 1 || plan.BufferBytes != 1<<20 {
		t.Fatalf("Strict plan: %d stripes × %d streams, buffer %d; want one stream with the probe's 1 MiB", Stripes(plan), plan.StreamsPerStripe, plan.BufferBytes)
	}
	var state *RescaleState
	now := time.Unix(10_000, 0)
	for round := range 20 {
		now = now.Add(10 * time.Second)
		dec, next := Rescale(state, RescaleInput{Tuning: in.Tuning, Plan: plan, Report: report(now, plan, plan.PredictedBitsPerSecond/3),
			SourceNodes: in.SourceNodes, DestinationNodes: in.DestinationNodes, Now: now})
		state = next
		if dec.Plan != nil && (Stripes(*dec.Plan) != 1 || dec.Plan.StreamsPerStripe != 1) {
			t.Fatalf("round %d: %s to %d stripes × %d streams", round, dec.Reason, Stripes(*dec.Plan), dec.Plan.StreamsPerStripe)
		}
	}
}
