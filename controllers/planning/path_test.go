package planning

import (
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/optimizer"
)

// e2eSamples are what the e2e's cold job sampled on the 500 Mbit/s WAN on a fresh
// machine (issues 10 and 11): 497 Mbit/s with one stream and autotuning, 501 with one
// stream and 4 MiB buffers, 474 and 469 with 2 and 4 streams at autotuning.
var e2eSamples = []v1alpha1.ProbeSample{
	{Streams: 1, BufferBytes: 0, BitsPerSecond: 497_000_000},
	{Streams: 1, BufferBytes: 4 << 20, BitsPerSecond: 501_000_000},
	{Streams: 2, BufferBytes: 0, BitsPerSecond: 474_000_000},
	{Streams: 4, BufferBytes: 0, BitsPerSecond: 469_000_000},
}

// e2eNodes are the local cluster's sites: one node each, NICs capped at 1 Gbit/s and
// 800 Mbit/s.
func e2eNodes() (src, dst []Node) {
	return []Node{{Name: "site-a-1", NICBitsPerSecond: 1_000_000_000, CPUBudgetMillicores: 2000}},
		[]Node{{Name: "site-b-1", NICBitsPerSecond: 800_000_000, CPUBudgetMillicores: 1000}}
}

// TestPlanWithinThePath is the operator's plan from the e2e's samples: before, no
// model, 2 stripes × 1 stream predicting 800 Mbit/s (the NIC); now the Plateau model
// of a path one stream fills, one stripe of one stream at 497 Mbit/s, bound by the
// path, and all of it in status.plan.
func TestPlanWithinThePath(t *testing.T) {
	src, dst := e2eNodes()
	plan, err := Plan(Input{Tuning: v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto}, Samples: e2eSamples, SourceNodes: src, DestinationNodes: dst})
	if err != nil {
		t.Fatal(err)
	}
	m := plan.Model
	want := v1alpha1.StreamModel{Name: v1alpha1.StreamModelPlateau, A: "4.048435482107939e-18", B: "4.048435482107939e-18",
		OptimalStreams: 1, FitErrorBitsPerSecond: 17_000_000, PeakBitsPerSecond: 497_000_000,
		Reason: "the rate does not rise with more streams (497 Mbit/s, 474 Mbit/s and 469 Mbit/s at 1, 2 and 4 streams): one stream fills the path"}
	if m == nil || *m != want {
		t.Errorf("model %+v, want %+v", m, want)
	}
	if Stripes(plan) != 1 || plan.StreamsPerStripe != 1 || plan.BufferBytes != 0 || plan.PredictedBitsPerSecond != 497_000_000 ||
		plan.PathBitsPerSecond != 497_000_000 || plan.BindingResource != v1alpha1.BindingPath {
		t.Errorf("plan %d stripe(s) × %d stream(s), buffer %d, predicted %d within %d, bound by %s; want 1 × 1, autotuning, 497 Mbit/s, Path",
			Stripes(plan), plan.StreamsPerStripe, plan.BufferBytes, plan.PredictedBitsPerSecond, plan.PathBitsPerSecond, plan.BindingResource)
	}
	// the model reads back (a warm start) and predicts the same
	fit, err := Fit(m)
	if err != nil || fit.Model != optimizer.Plateau || fit.BitsPerSecond(1) != fit.BitsPerSecond(8) || int64(fit.PeakBitsPerSecond+0.5) != 497_000_000 {
		t.Errorf("model read back: %+v, %v", fit, err)
	}
}

// TestWarmStartFromAPlateau: the cold job's plan is learned into the PathProfile, and a
// job planned from that profile alone (no probe) gets the same model and plan.
func TestWarmStartFromAPlateau(t *testing.T) {
	src, dst := e2eNodes()
	auto := v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto}
	cold, err := Plan(Input{Tuning: auto, Samples: e2eSamples, SourceNodes: src, DestinationNodes: dst})
	if err != nil {
		t.Fatal(err)
	}
	now := time.Unix(1_800_000_000, 0)
	profile := Learn(v1alpha1.PathProfileStatus{}, "e2e/mixed", &cold, e2eSamples, 470_000_000, now)
	if profile.Model == nil || *profile.Model != *cold.Model {
		t.Fatalf("profile model %+v, want the plan's %+v", profile.Model, cold.Model)
	}
	if d := ProbeDirective(ProbeInput{Tuning: auto, Profile: &v1alpha1.PathProfile{Status: profile}, Now: now}); d != nil {
		t.Errorf("a fresh profile with the e2e's samples still asks for a probe: %+v", d)
	}
	warm, err := Plan(Input{Tuning: auto, Profile: &profile, SourceNodes: src, DestinationNodes: dst})
	if err != nil {
		t.Fatal(err)
	}
	if *warm.Model != *cold.Model || warm.PredictedBitsPerSecond != cold.PredictedBitsPerSecond || Stripes(warm) != 1 || warm.PathBitsPerSecond != 497_000_000 {
		t.Errorf("warm plan %+v, want the cold plan's model and shape %+v", warm, cold)
	}
	// the stored model alone (its samples gone) plans the same
	profile.Samples = nil
	if warm, err = Plan(Input{Tuning: auto, Profile: &profile, SourceNodes: src, DestinationNodes: dst}); err != nil ||
		warm.Model.Name != v1alpha1.StreamModelPlateau || warm.PredictedBitsPerSecond != 497_000_000 || Stripes(warm) != 1 {
		t.Errorf("plan from the stored model alone: %+v, %v", warm, err)
	}
}

// TestRescaleAtPathCapacity: the operator's plan sits at the capacity its samples
// showed; reports at that rate (±3 %) for five minutes change nothing. Before, the
// plan predicted 800 Mbit/s and the policy added a stripe ("below the planned 800
// Mbit/s: trying more"); a plan of that kind with the capacity recorded is not chased
// either.
func TestRescaleAtPathCapacity(t *testing.T) {
	src, dst := e2eNodes()
	auto := v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto}
	plan, err := Plan(Input{Tuning: auto, Samples: e2eSamples, SourceNodes: src, DestinationNodes: dst})
	if err != nil {
		t.Fatal(err)
	}
	older := plan
	older.StripesPerNode, older.PredictedBitsPerSecond, older.BindingResource = 2, 800_000_000, v1alpha1.BindingNIC
	older.Hash = Hash(older)
	start := time.Unix(1_800_000_000, 0)
	for name, p := range map[string]v1alpha1.TransferPlan{"plan within the path": plan, "older plan predicting the NIC": older} {
		t.Run(name, func(t *testing.T) {
			var state *RescaleState
			for round := 0; round < 150; round++ {
				now := start.Add(time.Duration(round) * 2 * time.Second)
				agg := int64(495_000_000 * (1 + 0.03*float64(round%3-1)))
				rep := contract.Report{Time: now, Phase: contract.PhaseTransferring, BitsPerSecond: agg}
				for i := int32(0); i < Stripes(p); i++ {
					rep.Stripes = append(rep.Stripes, contract.StripeReport{Index: i, Connected: true, Streams: p.StreamsPerStripe, BitsPerSecond: agg / int64(Stripes(p))})
				}
				dec, next := Rescale(state, RescaleInput{Tuning: auto, Plan: p, Report: rep, SourceNodes: src, DestinationNodes: dst, Now: now})
				state = next
				if dec.Plan != nil && dec.Action == optimizer.AddStripes {
					t.Fatalf("round %d at %d bit/s: %s %+v → %+v: %s", round, agg, dec.Reason, dec.From, dec.To, dec.Message)
				}
				if dec.Plan != nil {
					// the older plan's extra stripe is shed: the plan's one carries the rate
					if name != "older plan predicting the NIC" || dec.Reason != "MoreStripesThanPlanned" || dec.Plan.PredictedBitsPerSecond != 497_000_000 {
						t.Fatalf("round %d: %s → %+v: %s", round, dec.Reason, dec.To, dec.Message)
					}
					p = *dec.Plan
				}
			}
			if Stripes(p) != 1 {
				t.Errorf("%d stripes after five minutes at the path's capacity", Stripes(p))
			}
		})
	}
}

// TestPeakWithinTheSamples: Newton through 1.2, 2.29 and 2.39 Gbit/s at 1, 2 and 4
// streams peaks at 3 streams at 2.73 Gbit/s, between two samples and 14 % above both.
// The plan and status.plan.model.peakBitsPerSecond count on the best sample, 2.39
// Gbit/s (3 streams reach it by the model), and so does a warm start from the stored
// model alone, which before predicted the model's 2.73.
func TestPeakWithinTheSamples(t *testing.T) {
	samples := []v1alpha1.ProbeSample{{Streams: 1, BitsPerSecond: 1_200_000_000}, {Streams: 2, BitsPerSecond: 2_290_000_000},
		{Streams: 4, BitsPerSecond: 2_390_000_000}}
	nodes := []Node{{Name: "n", NICBitsPerSecond: 10_000_000_000}}
	auto := v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto}
	cold, err := Plan(Input{Tuning: auto, Samples: samples, SourceNodes: nodes, DestinationNodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	m := cold.Model
	if m == nil || m.Name != v1alpha1.StreamModelNewton || m.OptimalStreams != 3 || m.PeakBitsPerSecond != 2_390_000_000 {
		t.Fatalf("model %+v, want Newton, optimum 3, peak 2.39 Gbit/s", m)
	}
	if want := "Newton fits the samples best (BestCmb, mean error 0 bit/s); its peak, 2.73 Gbit/s at 3 streams, lies above every sample: the plan counts on the best sample, 2.39 Gbit/s"; m.Reason != want {
		t.Errorf("reason %q, want %q", m.Reason, want)
	}
	fit, err := Fit(m)
	if err != nil {
		t.Fatal(err)
	}
	if got := int64(fit.BitsPerSecond(3) / 1e7); got != 273 {
		t.Errorf("the model at 3 streams: %d × 10 Mbit/s, want 273", got)
	}
	if cold.StreamsPerStripe != 3 || cold.PredictedBitsPerSecond != 2_390_000_000 || cold.PathBitsPerSecond != 2_390_000_000 {
		t.Errorf("cold plan %d streams, predicted %d within %d; want 3 streams at 2.39 Gbit/s", cold.StreamsPerStripe, cold.PredictedBitsPerSecond, cold.PathBitsPerSecond)
	}
	profile := Learn(v1alpha1.PathProfileStatus{}, "n/peak", &cold, samples, 2_300_000_000, time.Unix(1_800_000_000, 0))
	profile.Samples = nil
	warm, err := Plan(Input{Tuning: auto, Profile: &profile, SourceNodes: nodes, DestinationNodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	if warm.StreamsPerStripe != 3 || warm.PredictedBitsPerSecond != 2_390_000_000 || warm.PathBitsPerSecond != 2_390_000_000 {
		t.Errorf("warm plan %d streams, predicted %d within %d; want the cold plan's 3 streams at 2.39 Gbit/s", warm.StreamsPerStripe, warm.PredictedBitsPerSecond, warm.PathBitsPerSecond)
	}
}
