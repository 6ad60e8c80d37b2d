package optimizer

import (
	"testing"
	"time"
)

// TestRescaleRules checks each rule of the policy on its own: where it applies (and
// what it says) and where it leaves the round to the next rule.
func TestRescaleRules(t *testing.T) {
	now := time.Unix(1e9, 0)
	// base: 2 stripes of 4 streams at their predicted 400 Mbit/s each, planned 4 for
	// 1.6 Gbit/s, no loss, a curve whose best is 4 streams
	base := func() *round {
		return &round{cfg: RescaleConfig{}.withDefaults(), st: &RescaleState{CurveOptimum: 4},
			in:  RescaleInput{Now: now, MinStripes: 1, MaxStripes: 8, MaxStreams: 16, PlannedBitsPerSecond: 1.6e9},
			cur: Shape{Stripes: 2, StreamsPerStripe: 4}, agg: 8e8, predicted: 4e8, ratio: 1, planned: 4, optimum: 4, rate: "800 Mbit/s"}
	}
	blocked := &block{Until: now.Add(time.Minute), Backoff: time.Minute}
	tests := []struct {
		name   string
		rule   func(*round) (Intent, bool)
		edit   func(r *round)
		want   string // the reason; "" when the rule must not apply
		action Action
		to     Shape
	}{
		{"under the cap", atRateLimit, func(r *round) { r.in.MaxBitsPerSecond = 1e9 }, "", "", Shape{}},
		{"at 95 % of the cap", atRateLimit, func(r *round) { r.in.MaxBitsPerSecond = 8e8 / 0.95 }, "AtRateLimit", Hold, Shape{2, 4}},

		// 800 Mbit/s: 1.4 GB is 14 s, 1.5 GB 15 s (the default Settle)
		{"ending before a change settles", endingSoon, func(r *round) { r.in.Measurement.RemainingBytes = 1_400_000_000 }, "EndingSoon", Hold, Shape{2, 4}},
		{"... a settle's worth left", endingSoon, func(r *round) { r.in.Measurement.RemainingBytes = 1_500_000_000 }, "", "", Shape{}},
		{"... nothing said of what is left", endingSoon, nil, "", "", Shape{}},
		{"... no rate", endingSoon, func(r *round) { r.in.Measurement.RemainingBytes, r.agg = 1e6, 0 }, "", "", Shape{}},

		{"the optimum it knows", modelOptimumChanged, nil, "", "", Shape{}},
		{"a new optimum", modelOptimumChanged, func(r *round) { r.optimum = 8 }, "ModelOptimumChanged", ChangeStreams, Shape{2, 8}},
		{"a new optimum already in use", modelOptimumChanged, func(r *round) { r.optimum, r.cur.StreamsPerStripe = 8, 8 }, "", "", Shape{}},

		{"more streams than the optimum, loss gone", lossSubsided, func(r *round) { r.cur.StreamsPerStripe, r.loss = 8, 100 }, "LossSubsided", ChangeStreams, Shape{2, 4}},
		{"... loss still there", lossSubsided, func(r *round) { r.cur.StreamsPerStripe, r.loss = 8, 600 }, "", "", Shape{}},
		{"... stream changes blocked", lossSubsided, func(r *round) { r.cur.StreamsPerStripe, r.st.StreamBlock = 8, blocked }, "", "", Shape{}},

		{"6 stripes at the planned rate", moreStripesThanPlanned, func(r *round) { r.cur.Stripes, r.agg, r.nearPlan = 6, 1.6e9, true }, "MoreStripesThanPlanned", RemoveStripes, Shape{4, 4}},
		{"8 stripes at the planned rate: sheds the 4 extra", moreStripesThanPlanned, func(r *round) { r.cur.Stripes, r.nearPlan = 8, true }, "MoreStripesThanPlanned", RemoveStripes, Shape{4, 4}},
		{"... below the planned rate", moreStripesThanPlanned, func(r *round) { r.cur.Stripes = 6 }, "", "", Shape{}},
		{"... removals blocked", moreStripesThanPlanned, func(r *round) { r.cur.Stripes, r.nearPlan, r.st.RemoveBlock = 6, true, blocked }, "", "", Shape{}},

		{"at their rate, room to the plan", stripesAtTheirRate, nil, "PathHasRoom", AddStripes, Shape{4, 4}},
		{"... one stripe doubles at most", stripesAtTheirRate, func(r *round) { r.cur.Stripes = 1 }, "PathHasRoom", AddStripes, Shape{2, 4}},
		{"... units left to give a new stripe", stripesAtTheirRate, func(r *round) { r.in.Measurement.UnitsUnleased = new(int64(3)) }, "PathHasRoom", AddStripes, Shape{4, 4}},
		{"... every unit held by the running stripes", stripesAtTheirRate, func(r *round) { r.in.Measurement.UnitsUnleased = new(int64(0)) }, "NoWorkToShare", Hold, Shape{2, 4}},
		{"... at the path's capacity", stripesAtTheirRate, func(r *round) { r.atPath = true }, "AtPathCapacity", Hold, Shape{2, 4}},
		{"... at the planned stripes", stripesAtTheirRate, func(r *round) { r.cur.Stripes = 4 }, "AtPlannedStripes", Hold, Shape{4, 4}},
		{"... additions blocked", stripesAtTheirRate, func(r *round) { r.st.AddBlock = blocked }, "AdditionBlocked", Hold, Shape{2, 4}},
		{"... no whole step fits", stripesAtTheirRate, func(r *round) { r.cfg.Granularity, r.planned = 4, 3 }, "AtPlannedStripes", Hold, Shape{2, 4}},
		{"short of their rate", stripesAtTheirRate, func(r *round) { r.ratio = 0.8 }, "", "", Shape{}},

		{"heavy loss", highLoss, func(r *round) { r.ratio, r.loss = 0.6, 2000 }, "HighLoss", ChangeStreams, Shape{2, 8}},
		{"... at the most streams", highLoss, func(r *round) { r.loss, r.cur.StreamsPerStripe, r.in.MaxStreams = 2000, 12, 12 }, "", "", Shape{}},
		{"... doubling capped", highLoss, func(r *round) { r.loss, r.in.MaxStreams = 2000, 6 }, "HighLoss", ChangeStreams, Shape{2, 6}},
		{"... stream changes blocked", highLoss, func(r *round) { r.loss, r.st.StreamBlock = 2000, blocked }, "", "", Shape{}},
		{"light loss", highLoss, func(r *round) { r.loss = 900 }, "", "", Shape{}},

		{"4 stripes at half their rate", pathSaturated, func(r *round) { r.cur.Stripes, r.agg, r.ratio = 4, 8e8, 0.5 }, "PathSaturated", RemoveStripes, Shape{3, 4}},
		{"8 stripes at a fifth: halve at most", pathSaturated, func(r *round) { r.cur.Stripes, r.agg, r.ratio = 8, 6.4e8, 0.2 }, "PathSaturated", RemoveStripes, Shape{4, 4}},
		{"... at the fewest stripes", pathSaturated, func(r *round) { r.cur.Stripes, r.in.MinStripes, r.ratio = 2, 2, 0.3 }, "", "", Shape{}},
		{"... removals blocked", pathSaturated, func(r *round) { r.cur.Stripes, r.ratio, r.st.RemoveBlock = 4, 0.5, blocked }, "", "", Shape{}},
		{"above RemoveBelow", pathSaturated, func(r *round) { r.ratio = 0.6 }, "", "", Shape{}},

		{"below the planned rate", belowPlannedRate, nil, "BelowPlannedRate", AddStripes, Shape{3, 4}},
		{"... every unit held by the running stripes", belowPlannedRate, func(r *round) { r.in.Measurement.UnitsUnleased = new(int64(0)) }, "NoWorkToShare", Hold, Shape{2, 4}},
		{"... near it", belowPlannedRate, func(r *round) { r.nearPlan = true }, "", "", Shape{}},
		{"... no planned rate", belowPlannedRate, func(r *round) { r.in.PlannedBitsPerSecond = 0 }, "", "", Shape{}},
		{"... at the most stripes", belowPlannedRate, func(r *round) { r.cur.Stripes = 8 }, "", "", Shape{}},
		{"... additions blocked", belowPlannedRate, func(r *round) { r.st.AddBlock = blocked }, "", "", Shape{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := base()
			if tc.edit != nil {
				tc.edit(r)
			}
			it, ok := tc.rule(r)
			if !ok {
				if tc.want != "" {
					t.Fatalf("did not apply, want %s", tc.want)
				}
				return
			}
			if tc.want == "" {
				t.Fatalf("applied (%s: %s), want the next rule to decide", it.Reason, it.Message)
			}
			if it.Reason != tc.want || it.Action != tc.action || it.To != tc.to || it.Message == "" {
				t.Errorf("intent %+v, want %s %s to %+v with a message", it, tc.action, tc.want, tc.to)
			}
		})
	}
}

// TestJudgeLastChange: a change that did what it should is kept (and its opposite
// blocked), one that did not is undone and blocked.
func TestJudgeLastChange(t *testing.T) {
	now := time.Unix(1e9, 0)
	cfg := RescaleConfig{}.withDefaults()
	from := Shape{Stripes: 2, StreamsPerStripe: 4}
	tests := []struct {
		name       string
		pd         pending
		cur        Shape
		agg, noise float64
		want       string // the undoing intent's reason, "" when the change stays
		to         Shape
	}{
		{"2 → 4 stripes doubled the rate", pending{Action: AddStripes, From: from, Stripes: 2, BeforeAggregate: 8e8}, Shape{4, 4}, 1.6e9, 1e7, "", Shape{}},
		{"2 → 4 stripes gained a third of what they should", pending{Action: AddStripes, From: from, Stripes: 2, BeforeAggregate: 8e8}, Shape{4, 4}, 1.06e9, 1e7, "AddedStripesDidNotHelp", from},
		{"2 → 4 stripes gained less than the noise", pending{Action: AddStripes, From: from, Stripes: 2, BeforeAggregate: 8e8}, Shape{4, 4}, 1.3e9, 6e8, "AddedStripesDidNotHelp", from},
		{"4 → 2 stripes kept 95 %", pending{Action: RemoveStripes, From: Shape{4, 4}, Stripes: 2, BeforeAggregate: 8e8}, from, 7.6e8, 0, "", Shape{}},
		{"4 → 2 stripes lost 20 %", pending{Action: RemoveStripes, From: Shape{4, 4}, Stripes: 2, BeforeAggregate: 8e8}, from, 6.4e8, 0, "RemovedStripesHurt", Shape{4, 4}},
		{"streams for loss gained 10 %", pending{Action: ChangeStreams, From: from, BeforeAggregate: 8e8, Reason: "HighLoss"}, Shape{2, 8}, 8.8e8, 1e7, "", Shape{}},
		{"streams for loss gained 2 %", pending{Action: ChangeStreams, From: from, BeforeAggregate: 8e8, Reason: "HighLoss"}, Shape{2, 8}, 8.16e8, 1e7, "StreamsChangeDidNotHelp", from},
		{"streams to a new optimum lost 5 %", pending{Action: ChangeStreams, From: from, BeforeAggregate: 8e8, Reason: "ModelOptimumChanged"}, Shape{2, 8}, 7.6e8, 1e7, "", Shape{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			pd := tc.pd
			st := &RescaleState{Pending: &pd}
			it, undone := judgeLastChange(st, RescaleInput{Now: now, Current: tc.cur}, cfg, tc.agg, 0, tc.noise)
			if st.Pending != nil {
				t.Error("the change is still pending after its judgement")
			}
			if !undone {
				if tc.want != "" {
					t.Fatalf("kept, want %s", tc.want)
				}
				if pd.Action == AddStripes && !st.RemoveBlock.active() || pd.Action == RemoveStripes && !st.AddBlock.active() {
					t.Errorf("a change that worked must block its opposite: %+v", st)
				}
				return
			}
			if it.Reason != tc.want || it.To != tc.to {
				t.Fatalf("undone by %+v, want %s back to %+v", it, tc.want, tc.to)
			}
			blocks := map[Action]*block{AddStripes: st.AddBlock, RemoveStripes: st.RemoveBlock, ChangeStreams: st.StreamBlock}
			if !blocks[pd.Action].active() {
				t.Errorf("%s undone but not blocked", pd.Action)
			}
		})
	}
}
