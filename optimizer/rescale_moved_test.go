package optimizer

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"
)

// movedPath is the schedule scenario of bench-cluster as `send --auto` met it: one
// stripe's samples on the 1 Gbit/s, 50 ms path (886.5, 913.4 and 889.1 Mbit/s at 1, 2
// and 4 streams), a plan of 1 × 2 bound by the path, reports every 2 s.
func movedPath(now time.Time, cur Shape, m Measurement) RescaleInput {
	curve := EmpiricalCurve{{1, 886.5e6}, {2, 913.4e6}, {4, 889.1e6}}
	return RescaleInput{Now: now, Current: cur, MinStripes: 1, MaxStripes: 4, MaxStreams: 64, Curve: curve,
		PlannedStripes: 1, PathBitsPerSecond: 913.4e6, Measurement: m}
}

// report is one report of stripes connected stripes sharing bps.
func report(at time.Time, bps, lossPPM float64, stripes int) Measurement {
	m := Measurement{Time: at, AggregateBitsPerSecond: bps}
	for range stripes {
		m.Stripes = append(m.Stripes, StripeMeasurement{BitsPerSecond: bps / float64(stripes), LossPPM: lossPPM, Connected: true})
	}
	return m
}

// TestRescaleAnswersAPathThatMoved: the bottleneck falls from 1 Gbit/s to 400 Mbit/s
// 3 s after the plan was applied. The policy used to wait out the plan's settle and
// cool-down (30 s) before it looked; the bench's job then ran 2 streams at 0.87× what
// 32 streams carried for the whole 10–20 s after the cut. Now three reports below the
// plan's level are the path moving, answered once they hold: 612, 411 and 360 Mbit/s are
// the way down (a change decided on them would be judged against the transient), 411,
// 360 and 380 the level it went to.
func TestRescaleAnswersAPathThatMoved(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 0, 48, 57, 0, time.UTC)
	seq := []struct {
		after   time.Duration
		bps     float64
		lossPPM float64
	}{{2 * time.Second, 914e6, 50}, {4 * time.Second, 612e6, 90000}, {6 * time.Second, 411e6, 99000}, {8 * time.Second, 360e6, 99254}, {10 * time.Second, 380e6, 98000}}
	run := func(st RescaleState) (Intent, time.Duration, []string) {
		cur := Shape{Stripes: 1, StreamsPerStripe: 2}
		var reasons []string
		for _, s := range seq {
			now := t0.Add(s.after)
			it, next := RescalePolicy{}.Decide(st, movedPath(now, cur, report(now, s.bps, s.lossPPM, 1)))
			st = next
			reasons = append(reasons, it.Reason)
			if it.Action != Hold {
				return it, s.after, reasons
			}
		}
		return Intent{}, 0, reasons
	}

	it, at, reasons := run(AfterPlan(t0, 913.4e6, 913.4e6, 0))
	if it.Action != ChangeStreams || it.Reason != "HighLoss" || it.To != (Shape{Stripes: 1, StreamsPerStripe: 4}) || at != 10*time.Second {
		t.Fatalf("got %s %s → %+v at +%s, want HighLoss to 1 × 4 at +10s (the first three reports below 80 %% of 913 Mbit/s that hold): %s", it.Action, it.Reason, it.To, at, it.Message)
	}
	if want := []string{"CoolingDown", "CoolingDown", "CoolingDown", "PathMoving", "HighLoss"}; !slices.Equal(reasons, want) {
		t.Errorf("reasons %v, want %v", reasons, want)
	}
	if !strings.Contains(it.Message, "the path moved from 913 Mbit/s to 380 Mbit/s") {
		t.Errorf("message %q does not say the path moved to the level it holds at", it.Message)
	}
	// without a level to compare with (the plan's rate unknown) the policy waits as
	// before: nothing in the first 30 s
	if it, at, _ := run(AfterPlan(t0, 0, 0, 0)); it.Action != "" {
		t.Errorf("with no level: %s %s at +%s, want holds until the cool-down ends", it.Action, it.Reason, at)
	}
	// a plan of two stripes whose second has not connected yet (its pod is starting)
	// carries half its level: not a move of the path
	st := AfterPlan(t0, 913.4e6, 913.4e6, 0)
	two := Shape{Stripes: 2, StreamsPerStripe: 2}
	for i := 1; i <= 10; i++ {
		now := t0.Add(time.Duration(2*i) * time.Second)
		m := report(now, 450e6, 10, 2)
		m.Stripes[1] = StripeMeasurement{}
		var it Intent
		if it, st = (RescalePolicy{}).Decide(st, movedPath(now, two, m)); it.Action != Hold || it.Reason != "CoolingDown" {
			t.Fatalf("+%ds with a stripe not yet connected: %s %s (%s)", 2*i, it.Action, it.Reason, it.Message)
		}
	}
}

// TestRescaleLevelAfterOwnChange: a change of the policy's own has no level until its
// window is judged, so the doubling an added stripe brings is judged as a change (and
// a move of the path is not read into it), and a capacity that comes back after a
// loss-driven change is answered once that change was judged and held.
func TestRescaleLevelAfterOwnChange(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	// an addition from 1 to 2 stripes just made at t0: rates double during its settle
	st := RescaleState{LastChange: t0, Pending: &pending{Action: AddStripes, From: Shape{1, 2}, Stripes: 1, BeforeAggregate: 450e6}}
	cur := Shape{Stripes: 2, StreamsPerStripe: 2}
	for i := 1; i <= 14; i++ {
		now := t0.Add(time.Duration(i) * 2 * time.Second)
		it, next := RescalePolicy{}.Decide(st, movedPath(now, cur, report(now, 900e6, 10, 2)))
		st = next
		if it.Action != Hold || strings.Contains(it.Message, "moved") {
			t.Fatalf("+%ds: %s %s (%s) during the addition's settle and cool-down", 2*i, it.Action, it.Reason, it.Message)
		}
	}
	if st.Pending == nil {
		t.Fatal("the addition was dropped instead of judged")
	}

	// 1 × 4 after HighLoss, judged and held at 390 Mbit/s; the capacity comes back
	st = RescaleState{Level: 390e6, LastChange: t0, CurveOptimum: 2}
	cur = Shape{Stripes: 1, StreamsPerStripe: 4}
	var it Intent
	for i, bps := range []float64{985e6, 990e6, 981e6} {
		now := t0.Add(time.Duration(2*i+2) * time.Second)
		it, st = RescalePolicy{}.Decide(st, movedPath(now, cur, report(now, bps, 20, 1)))
	}
	if it.Reason != "LossSubsided" || it.To != (Shape{Stripes: 1, StreamsPerStripe: 2}) || !strings.Contains(it.Message, "the path moved from 390 Mbit/s to 985 Mbit/s") {
		t.Fatalf("capacity back: got %s %s → %+v (%s), want LossSubsided to the model's 1 × 2 at the third report", it.Action, it.Reason, it.To, it.Message)
	}
}

// TestRescalePathMovedNeedsEveryReport: over random sequences, the policy answers
// before its cool-down ends only when each of the last Window reports lies beyond
// BlockBand of its level on one side; reports within the band (±19 % noise) never
// change anything.
func TestRescalePathMovedNeedsEveryReport(t *testing.T) {
	cfg := RescaleConfig{}.withDefaults()
	rng := rand.New(rand.NewPCG(7, 11))
	t0 := time.Unix(1e9, 0)
	level := 913.4e6
	for seq := range 2000 {
		st := AfterPlan(t0, level, 0, 0)
		cur := Shape{Stripes: 1, StreamsPerStripe: 2}
		noiseOnly := seq%2 == 0
		var recent []float64
		for i := 1; i*2 < int(cfg.CoolDown/time.Second); i++ {
			now := t0.Add(time.Duration(2*i) * time.Second)
			f := 1 + 0.38*(rng.Float64()-0.5) // within ±19 %
			if !noiseOnly {
				f = 0.2 + 1.6*rng.Float64()
			}
			bps := f * level
			recent = append(recent, bps)
			it, next := RescalePolicy{}.Decide(st, movedPath(now, cur, report(now, bps, 10, 1)))
			st = next
			last := recent[max(len(recent)-cfg.Window, 0):]
			beyond := len(last) == cfg.Window
			above, below := 0, 0
			for _, r := range last {
				if r > (1+cfg.BlockBand)*level {
					above++
				}
				if r < (1-cfg.BlockBand)*level {
					below++
				}
			}
			beyond = beyond && (above == cfg.Window || below == cfg.Window)
			if moved := it.Reason != "CoolingDown"; moved != beyond {
				t.Fatalf("sequence %d, report %d (%v of a level of %.0f): answered %v (%s %s), want %v", seq, i, recent, level, moved, it.Reason, it.Message, beyond)
			}
			if noiseOnly && it.Action != Hold {
				t.Fatalf("sequence %d: %s within the noise band", seq, it.Action)
			}
			if beyond {
				break // the level is the new one from here on
			}
		}
	}
}

// TestRescaleJudgesNoWindowThatSpansAMove: the bench's HighLoss change (2 → 4 streams
// at 411 Mbit/s) was judged on a window the returning capacity cut through (about 400,
// 453 and 980 Mbit/s), read as a failure within the noise, undone and blocked for two
// minutes. A window spread beyond BlockBand judges nothing; once the rate holds, the
// streams HighLoss raised go back unblocked, since what they did cannot be told from
// the move.
func TestRescaleJudgesNoWindowThatSpansAMove(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	cfg := RescaleConfig{}.withDefaults()
	for _, tc := range []struct {
		name           string
		from, raised   int
		before, loss   float64
		rates          []float64
		lossAfter      float64
		wantBackTo     int
		wantReasonsEnd string
	}{
		// the loss gone after the return: LossSubsided would have taken them back too
		{"the loss gone", 2, 4, 411e6, 166768, []float64{400e6, 453e6, 980e6, 985e6, 990e6}, 20, 2, "PathMovedWhileSettling"},
		// the eighteenth session's schedule run: 6 → 12 at the cut's 397 Mbit/s, the link
		// back 8 s later, twelve streams' full queue keeping the loss above HighLoss's
		// half. Judged on the returned rate, the doubling read as a gain of 397 → 825
		// and stood for the rest of the run.
		{"the loss still there", 6, 12, 397e6, 100980, []float64{398e6, 401e6, 825e6, 820e6, 830e6}, 4000, 6, "PathMovedWhileSettling"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := RescaleState{LastChange: t0, CurveOptimum: 2,
				Pending: &pending{Action: ChangeStreams, From: Shape{1, tc.from}, BeforeAggregate: tc.before, BeforeLossPPM: tc.loss, Reason: "HighLoss"}}
			cur := Shape{Stripes: 1, StreamsPerStripe: tc.raised}
			start := t0.Add(cfg.CoolDown - 4*time.Second)
			var got []string
			var it Intent
			for i, bps := range tc.rates {
				now := start.Add(time.Duration(2*i) * time.Second)
				before, snapshot := st.Pending, *st.Pending
				it, st = RescalePolicy{}.Decide(st, movedPath(now, cur, report(now, bps, tc.lossAfter, 1)))
				got = append(got, it.Reason)
				if *before != snapshot {
					t.Fatalf("report %d changed the caller's state: %+v → %+v", i, snapshot, *before)
				}
				if it.Action != Hold {
					break
				}
			}
			want := []string{"CoolingDown", "CoolingDown", "Unsteady", "Unsteady", tc.wantReasonsEnd}
			if !slices.Equal(got, want) {
				t.Fatalf("reasons %v, want %v", got, want)
			}
			if it.To != (Shape{Stripes: 1, StreamsPerStripe: tc.wantBackTo}) || !strings.Contains(it.Message, "cannot be told from the move") {
				t.Fatalf("%s → %+v (%s), want back to 1 × %d", it.Reason, it.To, it.Message, tc.wantBackTo)
			}
			if st.StreamBlock != nil || st.Pending != nil {
				t.Errorf("after the move: stream block %+v, pending %+v; want neither (nothing was judged)", st.StreamBlock, st.Pending)
			}
		})
	}
	// a change of another kind is judged once the rate holds, as before: an addition
	// the returning capacity lifted stands
	st := RescaleState{LastChange: t0, Pending: &pending{Action: AddStripes, From: Shape{1, 2}, Stripes: 1, BeforeAggregate: 400e6, Reason: "BelowPlannedRate"}}
	cur := Shape{Stripes: 2, StreamsPerStripe: 2}
	start := t0.Add(cfg.CoolDown - 4*time.Second)
	for i, bps := range []float64{600e6, 610e6, 980e6, 985e6, 990e6} {
		now := start.Add(time.Duration(2*i) * time.Second)
		var it Intent
		if it, st = (RescalePolicy{}).Decide(st, movedPath(now, cur, report(now, bps, 20, 2))); it.Action != Hold {
			t.Fatalf("report %d: %s %s (%s), want the addition judged and kept", i, it.Action, it.Reason, it.Message)
		}
	}
	if st.Pending != nil || st.RemoveBlock == nil {
		t.Errorf("the addition was not judged as one that helped: pending %+v, remove block %+v", st.Pending, st.RemoveBlock)
	}
}

// TestAfterPlanLevel: the level a plan starts at is its prediction, held to the path's
// capacity the samples showed (a NIC-bound 10 Gbit/s plan on a 913 Mbit/s path starts
// at 913), and unknown for a plan without a usable prediction.
func TestAfterPlanLevel(t *testing.T) {
	t0 := time.Unix(1e9, 0)
	for _, tc := range []struct{ predicted, path, want float64 }{
		{10e9, 913.4e6, 913.4e6}, {900e6, 913.4e6, 900e6}, {900e6, 0, 900e6}, {0, 913.4e6, 0}, {math.Inf(1), 0, 0}, {math.NaN(), 1e9, 0},
	} {
		if st := AfterPlan(t0, tc.predicted, tc.path, 0); st.Level != tc.want || !st.LastChange.Equal(t0) {
			t.Errorf("AfterPlan(%v, %v): level %v since %v, want %v since the plan", tc.predicted, tc.path, st.Level, st.LastChange, tc.want)
		}
	}
}

// TestRescaleReadsNoRateInAReportOfNothingMoved: the operator's job on the clean path
// (eleventh session, a 4 GiB file at 936 Mbit/s on average): three reports just after
// its plan of 1 × 3 (predicting 972 Mbit/s) said 0 bit/s with the stripe connected, and
// the policy added a stripe ("the path moved from 972 Mbit/s to 0 bit/s"). A report of
// nothing moved is no measurement of the path: the policy waits for ones that are,
// and what they say decides, from the same level.
func TestRescaleReadsNoRateInAReportOfNothingMoved(t *testing.T) {
	t0 := time.Date(2026, 11, 29, 6, 5, 47, 0, time.UTC)
	cur := Shape{Stripes: 1, StreamsPerStripe: 3}
	in := func(now time.Time, bps float64) RescaleInput {
		return RescaleInput{Now: now, Current: cur, MinStripes: 1, MaxStripes: 4, MaxStreams: 64,
			Curve: EmpiricalCurve{{1, 884e6}, {2, 893e6}, {4, 975e6}, {8, 994e6}}, PlannedStripes: 1, PlannedBitsPerSecond: 972e6,
			PathBitsPerSecond: 994e6, Measurement: report(now, bps, 0, 1)}
	}
	st := AfterPlan(t0, 972e6, 994e6, 0)
	for i := 1; i <= 20; i++ {
		now := t0.Add(time.Duration(2*i) * time.Second)
		bps := 0.0
		if i > 5 {
			bps = 950e6
		}
		var it Intent
		if it, st = (RescalePolicy{}).Decide(st, in(now, bps)); it.Action != Hold {
			t.Fatalf("+%ds, %v bit/s: %s %s (%s), want holds", 2*i, bps, it.Action, it.Reason, it.Message)
		}
	}
	// the path that does move is read from the reports that measured it, the ones of
	// nothing moved between them left out: the window 950, 400, 390 Mbit/s
	for i, bps := range []float64{0, 400e6, 0, 390e6} {
		now := t0.Add(time.Duration(42+2*i) * time.Second)
		var it Intent
		it, st = (RescalePolicy{}).Decide(st, in(now, bps))
		if i < 3 && it.Action != Hold {
			t.Fatalf("report %d (%v bit/s): %s %s, want a hold while one report of a rate says less", i, bps, it.Action, it.Reason)
		}
		if i == 3 && (it.Action == Hold || !strings.HasPrefix(it.Message, "400 Mbit/s over 1 stripes")) {
			t.Fatalf("the second report at 400 Mbit/s: %s %s (%s), want a change read from the window's median of 400 Mbit/s", it.Action, it.Reason, it.Message)
		}
	}
}

// TestRescaleLeavesAFullQueuesLossAlone: the schedule runs of the nineteenth session.
// A plan ran at 965 Mbit/s; the cut to 400 Mbit/s overran the bottleneck's queue
// (182 871 ppm lost, the stripes' round trip 2–3.5× the path's) and HighLoss doubled
// the streams twice, leaving twelve for the returning 1 Gbit/s (786 Mbit/s, 0.79× the
// fixed setting). Behind a full queue the loss is the bottleneck's overflow and the
// streams stay; the same loss at the path's own round trip (random loss) still doubles
// them. The path's round trip is the probe's least (AfterPlan's baseRTT): BBR's
// streams at full rate keep a queue standing, and the bench's reports read 66–101 ms
// on the 50 ms path before the cut as during it. (The curve is movedPath's, whose
// plan is 1 × 2.)
func TestRescaleLeavesAFullQueuesLossAlone(t *testing.T) {
	t0 := time.Date(2026, 11, 30, 2, 37, 0, 0, time.UTC)
	cur := Shape{Stripes: 1, StreamsPerStripe: 2}
	run := func(baseRTT, planRTT time.Duration, cutRTTs ...time.Duration) (Intent, RescaleState) {
		st := AfterPlan(t0, 965e6, 978e6, baseRTT)
		var it Intent
		step := func(i int, bps, loss float64, rtt time.Duration) {
			now := t0.Add(time.Duration(2*i) * time.Second)
			m := report(now, bps, loss, 1)
			m.Stripes[0].RTT = rtt
			it, st = RescalePolicy{}.Decide(st, movedPath(now, cur, m))
		}
		// the cut comes 20 s after the plan, within its cool-down: the policy answers
		// the move once three reports show it, as in the bench
		i := 1
		for ; i <= 10; i++ {
			step(i, 965e6, 30, planRTT)
			if it.Action != Hold {
				t.Fatalf("+%ds at the plan's rate: %s %s (%s)", 2*i, it.Action, it.Reason, it.Message)
			}
		}
		// the first change on the cut, or the last hold
		for k, bps := range []float64{190e6, 185e6, 195e6, 192e6} {
			step(i, bps, 182871, cutRTTs[k%len(cutRTTs)])
			if it.Action != Hold {
				break
			}
			i++
		}
		return it, st
	}
	const ms = time.Millisecond
	for _, tc := range []struct {
		name              string
		base, plan        time.Duration
		cut               []time.Duration
		wantHighLoss      bool
		wantLeastAtTheEnd time.Duration
	}{
		{"the queue full through the window", 0, 52 * ms, []time.Duration{175 * ms}, false, 52 * ms},
		// the fourth run's reports as the cut began: 58.6, 77.4 and 95.3 ms
		{"the queue filling during the window", 0, 52 * ms, []time.Duration{59 * ms, 77 * ms, 95 * ms}, false, 52 * ms},
		// the sixth run: every report from the plan on behind BBR's standing queue,
		// the probe's least 50 ms
		{"a standing queue from the start", 50 * ms, 100 * ms, []time.Duration{70 * ms, 89 * ms, 99 * ms}, false, 50 * ms},
		{"random loss at the path's round trip", 0, 52 * ms, []time.Duration{53 * ms}, true, 52 * ms},
		{"random loss, the probe's round trip known", 50 * ms, 52 * ms, []time.Duration{55 * ms}, true, 50 * ms},
	} {
		t.Run(tc.name, func(t *testing.T) {
			it, st := run(tc.base, tc.plan, tc.cut...)
			if got := it.Reason == "HighLoss"; got != tc.wantHighLoss || (got && it.To != (Shape{Stripes: 1, StreamsPerStripe: 4})) {
				t.Errorf("%s %s → %+v (%s), want HighLoss to 1 × 4: %v", it.Action, it.Reason, it.To, it.Message, tc.wantHighLoss)
			}
			if !tc.wantHighLoss && it.Action != Hold {
				t.Errorf("%s %s (%s), want holds", it.Action, it.Reason, it.Message)
			}
			if st.MinRTT != tc.wantLeastAtTheEnd {
				t.Errorf("least round trip %s, want %s", st.MinRTT, tc.wantLeastAtTheEnd)
			}
		})
	}
}
