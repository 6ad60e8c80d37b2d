package planning

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/optimizer"
)

// runningPlan is a plan of 2 nodes × 4 stripes of the test path's stripes (1.41
// Gbit/s at 4 streams) on 10 Gbit/s nodes with up to 8 slots, as if stripes had been
// measured to pay up to 8 (the path's capacity 11.3 Gbit/s). Plan itself, with only
// the stored model to go on, plans one stripe at the model's plateau.
func runningPlan(t *testing.T) (v1alpha1.TransferPlan, Input) {
	t.Helper()
	fit := optimizer.StreamFit{Model: optimizer.FullSecondOrder, A: 1e-18, B: -4e-18, C: 8e-18, OptimalStreams: 4}
	in := Input{Tuning: v1alpha1.TransferTuning{Mode: v1alpha1.TuningAuto, Limits: &v1alpha1.TuningLimits{MaxNodes: ptr[int32](2), MaxStripesPerNode: ptr[int32](4)}},
		Profile:     &v1alpha1.PathProfileStatus{Model: StreamModel(&fit), BufferBytes: 1 << 20},
		SourceNodes: tenGigNodes("s", 2), DestinationNodes: tenGigNodes("d", 2)}
	plan, err := Plan(in)
	if err != nil {
		t.Fatal(err)
	}
	stripe := int64(stripeRate(4, 1<<20))
	if Stripes(plan) != 1 || plan.StreamsPerStripe != 4 || plan.PathBitsPerSecond != stripe || plan.PredictedBitsPerSecond != stripe {
		t.Fatalf("plan %d stripes × %d streams, %d bit/s within %d: want one stripe × 4 at the plateau %d", Stripes(plan), plan.StreamsPerStripe,
			plan.PredictedBitsPerSecond, plan.PathBitsPerSecond, stripe)
	}
	plan.SourceNodes, plan.DestinationNodes = []string{"s0", "s1"}, []string{"d0", "d1"}
	plan.StripesPerNode = 4
	plan.PredictedBitsPerSecond, plan.PathBitsPerSecond = 8*stripe, 8*stripe
	plan.Hash = Hash(plan)
	return plan, in
}

func report(at time.Time, plan v1alpha1.TransferPlan, aggregate int64) contract.Report {
	r := contract.Report{Time: at, Phase: contract.PhaseTransferring, BitsPerSecond: aggregate}
	for i := int32(0); i < Stripes(plan); i++ {
		r.Stripes = append(r.Stripes, contract.StripeReport{Index: i, Connected: true, Streams: plan.StreamsPerStripe,
			BitsPerSecond: aggregate / int64(Stripes(plan)), LossPPM: 300})
	}
	return r
}

func TestRescaleFollowsThePath(t *testing.T) {
	plan, in := runningPlan(t)
	// 20 million files of 64 KiB (1.3 TB, 16 minutes at 11 Gbit/s: the job does not
	// end within the run, which would hold every change, TestRescaleHoldsAJobEndingSoon):
	// the coordinator's request follows the predicted rate
	const files, bytes = 20_000_000, 20_000_000 << 16
	plan.CoordinatorCPUMillicores = coordinatorCPU(files, bytes, plan.PredictedBitsPerSecond)
	start := time.Unix(300_000, 0)
	var state *RescaleState
	var replans []RescaleDecision
	capacity := func(round int) int64 {
		if round < 30 {
			return 11_000_000_000 // the 8 stripes carry their 11.3 Gbit/s
		}
		return 5_000_000_000 // the path halves
	}
	for round := 0; round < 60; round++ {
		now := start.Add(time.Duration(round) * 10 * time.Second)
		agg := min(capacity(round), int64(float64(Stripes(plan))*stripeRate(int(plan.StreamsPerStripe), 1<<20)))
		rep := report(now, plan, agg)
		rep.FilesTotal, rep.BytesTotal = files, bytes
		dec, next := Rescale(state, RescaleInput{Tuning: in.Tuning, Plan: plan, Report: rep,
			SourceNodes: in.SourceNodes, DestinationNodes: in.DestinationNodes, Now: now})
		state = next
		if dec.Plan == nil {
			if dec.Action != optimizer.Hold || dec.Reason == "" || dec.From != dec.To {
				t.Fatalf("round %d: hold decision %+v", round, dec)
			}
			continue
		}
		replans = append(replans, dec)
		t.Logf("round %d: %s %+v → %+v: %s", round, dec.Reason, dec.From, dec.To, dec.Message)
		p := *dec.Plan
		if len(p.SourceNodes) != 2 || p.StripesPerNode < 1 || p.StripesPerNode > 4 || p.Hash != Hash(p) || p.Hash == plan.Hash {
			t.Fatalf("round %d: new plan %+v outside the limits or with a stale hash", round, p)
		}
		if dec.To.Stripes != Stripes(p) || dec.From.Stripes != Stripes(plan) || dec.To.Stripes%2 != 0 {
			t.Fatalf("round %d: shapes %+v → %+v for %d → %d stripes (a whole node's worth at a time)", round, dec.From, dec.To, Stripes(plan), Stripes(p))
		}
		if p.PredictedBitsPerSecond <= 0 || p.SourceCPUMillicores <= 0 {
			t.Fatalf("round %d: new plan without predictions: %+v", round, p)
		}
		// the coordinator settles files as fast as the rate brings them: its request
		// moves with the prediction (4 + 0.125 per file/s, rounded up)
		if want := int64(math.Ceil(4 + float64(p.PredictedBitsPerSecond)/8/(1<<16)*0.125)); p.CoordinatorCPUMillicores != want ||
			(p.PredictedBitsPerSecond < plan.PredictedBitsPerSecond) != (p.CoordinatorCPUMillicores < plan.CoordinatorCPUMillicores) {
			t.Fatalf("round %d: coordinator %d millicores at %d bit/s (was %d at %d), want %d", round, p.CoordinatorCPUMillicores, p.PredictedBitsPerSecond,
				plan.CoordinatorCPUMillicores, plan.PredictedBitsPerSecond, want)
		}
		plan = p
	}
	if len(replans) == 0 || replans[0].Action != optimizer.RemoveStripes || replans[0].Reason != "PathSaturated" {
		t.Fatalf("replans %+v: want stripes removed when the path halved", replans)
	}
	if Stripes(plan) >= 8 {
		t.Errorf("still %d stripes on a path that carries 5 of their 11 Gbit/s", Stripes(plan))
	}
}

func TestRescaleHolds(t *testing.T) {
	plan, in := runningPlan(t)
	now := time.Unix(400_000, 0)
	fixed := in.Tuning
	fixed.Mode = v1alpha1.TuningFixed
	if dec, _ := Rescale(nil, RescaleInput{Tuning: fixed, Plan: plan, Report: report(now, plan, 1), Now: now}); dec.Plan != nil || dec.Reason != "FixedTuning" {
		t.Errorf("Fixed mode: %+v", dec)
	}
	if dec, _ := Rescale(nil, RescaleInput{Tuning: in.Tuning, Plan: plan, Report: report(now, plan, 1), SourceNodes: in.SourceNodes[:1],
		DestinationNodes: in.DestinationNodes, Now: now}); dec.Plan != nil || dec.Reason != "NodesChanged" {
		t.Errorf("a node gone: %+v", dec)
	}
	// the user lowers maxStripesPerNode to 2: at once, without waiting for measurements
	lowered := in.Tuning
	lowered.Limits = &v1alpha1.TuningLimits{MaxStripesPerNode: ptr[int32](2)}
	dec, _ := Rescale(nil, RescaleInput{Tuning: lowered, Plan: plan, Report: report(now, plan, 1), SourceNodes: in.SourceNodes, DestinationNodes: in.DestinationNodes, Now: now})
	if dec.Plan == nil || dec.Plan.StripesPerNode != 2 || dec.Reason != "LimitsChanged" || !strings.Contains(dec.Message, "exceed") {
		t.Errorf("lowered limit: %+v", dec)
	}
}

// TestRescaleHoldsAJobEndingSoon: the path halves under the running plan, which
// removes stripes (PathSaturated) while the job has minutes left; with less than a
// change's settle left at the rate, it holds (EndingSoon), and a report that does not
// say what is left (a dataset still listed) does not.
func TestRescaleHoldsAJobEndingSoon(t *testing.T) {
	start := time.Unix(500_000, 0)
	decide := func(total, done int64) RescaleDecision {
		plan, in := runningPlan(t)
		var state *RescaleState
		var dec RescaleDecision
		for round := 0; round < 6 && dec.Plan == nil; round++ {
			now := start.Add(time.Duration(round) * 10 * time.Second)
			rep := report(now, plan, 5_000_000_000) // 5 of the plan's 11.3 Gbit/s
			rep.BytesTotal, rep.BytesDone = total, done
			dec, state = Rescale(state, RescaleInput{Tuning: in.Tuning, Plan: plan, Report: rep,
				SourceNodes: in.SourceNodes, DestinationNodes: in.DestinationNodes, Now: now})
		}
		return dec
	}
	if dec := decide(1e12, 0); dec.Plan == nil || dec.Reason != "PathSaturated" {
		t.Fatalf("1 TB left at 5 Gbit/s: %s %q, want PathSaturated", dec.Reason, dec.Message)
	}
	if dec := decide(0, 0); dec.Plan == nil || dec.Reason != "PathSaturated" {
		t.Fatalf("nothing said of what is left: %s %q, want PathSaturated", dec.Reason, dec.Message)
	}
	// 6.25 GB left at 5 Gbit/s: 10 s, within the 15 s a change needs to settle
	dec := decide(1e12, 1e12-6_250_000_000)
	if dec.Plan != nil || dec.Reason != "EndingSoon" || !strings.Contains(dec.Message, "6250 MB left end in 10s") {
		t.Fatalf("10 s left: %s %q, want EndingSoon saying what is left and when it ends", dec.Reason, dec.Message)
	}
}

// TestRescaleReadsTheStripesRoundTrip: the coordinator's report carries each stripe's
// round trip, and the policy reads it: heavy loss with the round trip three times the
// least the job has seen is a full bottleneck queue, which more streams do not answer;
// the same loss at the path's own round trip is random loss, which they do.
func TestRescaleReadsTheStripesRoundTrip(t *testing.T) {
	plan, in := runningPlan(t)
	decide := func(cutRTT time.Duration) RescaleDecision {
		start := time.Unix(500_000, 0)
		var state *RescaleState
		var dec RescaleDecision
		for round := 0; round < 12; round++ {
			now := start.Add(time.Duration(round) * 10 * time.Second)
			agg, rtt, loss := plan.PredictedBitsPerSecond, 50*time.Millisecond, int64(300)
			if round >= 6 {
				agg, rtt, loss = plan.PredictedBitsPerSecond/3, cutRTT, 50_000
			}
			rep := report(now, plan, agg)
			for i := range rep.Stripes {
				rep.Stripes[i].RTTMicros, rep.Stripes[i].LossPPM = rtt.Microseconds(), loss
			}
			dec, state = Rescale(state, RescaleInput{Tuning: in.Tuning, Plan: plan, Report: rep,
				SourceNodes: in.SourceNodes, DestinationNodes: in.DestinationNodes, Now: now})
			if dec.Plan != nil {
				return dec
			}
		}
		return dec
	}
	if dec := decide(150 * time.Millisecond); dec.Reason == "HighLoss" {
		t.Errorf("behind a full queue: %s (%s), want no more streams", dec.Reason, dec.Message)
	}
	if dec := decide(51 * time.Millisecond); dec.Reason != "HighLoss" || dec.To.StreamsPerStripe != 2*plan.StreamsPerStripe {
		t.Errorf("at the path's round trip: %s %+v (%s), want HighLoss doubling the streams", dec.Reason, dec.To, dec.Message)
	}
}
