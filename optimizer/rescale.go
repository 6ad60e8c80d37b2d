package optimizer

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"time"
)

// The rescale policy turns measurements into an intent to add or remove stripes,
// change the streams per stripe, or hold. The papers plan once from samples; they say
// nothing about re-planning while a transfer runs beyond ProMC's channel moves (whose
// "three consecutive periods" rule inspires the hysteresis here) and NDM'13 §4.2's
// finding that more streams hold up better under loss. Everything in this file is
// therefore our design, documented here and on RescaleConfig, and tested by
// simulation (rescale_sim_test.go).
//
// Each round the policy reads the median of a window of measurements taken since the
// last change had time to settle, and compares the per-stripe rate with the stream
// curve's prediction:
//
//   - stripes at (nearly) their predicted rate mean the end systems, not the path,
//     limit each stripe: add stripes up to OPT_B's planned count (PathHasRoom);
//   - under heavy loss, stripes short of their rate get twice the streams first
//     (HighLoss), and the model's count back when loss subsides (LossSubsided) —
//     unless their round trip says the loss is a full bottleneck queue's overflow
//     (QueuedRTT), which more streams share but do not make room in;
//   - stripes well below it mean the path limits them (capacity fell, a flow
//     competes): remove down to the count that puts them mid-band (PathSaturated);
//   - more stripes than planned at the planned rate: shed the extra;
//   - below the planned rate with nothing else to try: probe one step up
//     (BelowPlannedRate) — never above the path's capacity that the samples showed
//     (RescaleInput.PathBitsPerSecond), which a plan at that capacity has reached;
//   - otherwise hold. The gap between the add and remove thresholds is hysteresis.
//
// No stripe is added while the running stripes hold every unit left (NoWorkToShare):
// it would be given nothing to move.
//
// No rule changes the shape of a job that ends before a change could settle (the
// dataset left, at the window's rate, ends within Settle: EndingSoon): the change could
// never be judged, and a stripe needs its pods started, its connections made and slow
// start behind it before it carries anything — on the local cluster's four competing
// flows, PathHasRoom added a stripe whose pods lived 2.7 s of a 56 s job.
//
// Every change is then judged on what it did: an addition that did not bring half a
// stripe's worth (or stayed within the noise of the window), a removal that lost more
// than 10 %, or more streams that gained less than 5 % are undone, and the same move
// is blocked with a back-off of 2, 4, 8, 16 minutes — and the opposite move too when
// it has failed at this level before (a competing flow: fewer stripes lose share,
// more gain too little), so that the two do not take turns. A move that worked blocks its
// opposite the same way (more stripes carried more, so fewer would carry less). A
// block ends early when the aggregate leaves the ±20 % band it was set in, or loss
// that was high halves. A cool-down separates changes, so ±10 % noise neither
// triggers nor undoes anything, and the user's limits are enforced at once.
//
// The settle and cool-down are for the policy's own changes, whose effect takes time
// to show. A path that moves under the job is not: when the last Window reports all lie
// more than BlockBand away from the level the policy last held at (or the rate a plan
// just started at), on the same side, the capacity fell or came back, or a flow came
// or went, and the policy answers in that round with those reports as its window —
// whatever change of its own was still settling is neither judged nor blocked, since
// what came after the move says nothing of it. bench-cluster's rate schedule (1 Gbit/s,
// then 400 Mbit/s for 40 s) cut the rate 2 s after `send --auto` applied its plan, and
// the job ran its two streams at 0.87× what 32 streams carried for the 30 s that the
// plan's cool-down kept the policy from looking. For the same reason a change is not
// judged on a window that spans a move (its reports spread beyond BlockBand): the
// window slides on until the rate holds. A change made on the move is judged like any
// other: left unjudged (tried), the streams HighLoss doubled at a 400 Mbit/s cut stood,
// the full queue's loss doubled them again when the cool-down ended, and 16 streams ran
// the returning 1 Gbit/s at 0.92× the fixed setting's rate. Two things keep a move's
// transient out of a judgment: the answer to a move waits until its reports hold
// (spread within BlockBand: PathMoving until then), so that a change is judged against
// the level the path went to rather than a point on the way there; and streams that
// HighLoss raised go back unblocked when the window that would judge them spanned a
// move (PathMovedWhileSettling), since the move and not the streams made the
// difference the window shows — twelve streams a cut's doubling left standing, judged
// on the returning capacity as a gain of 397 → 825 Mbit/s, ran the 1 Gbit/s path at
// 0.83× the fixed setting. Other changes are judged once the rate holds: the stripes
// the plan's count supports need no such doubt.

// Action is what an intent asks for.
type Action string

const (
	Hold          Action = "Hold"
	AddStripes    Action = "AddStripes"
	RemoveStripes Action = "RemoveStripes"
	ChangeStreams Action = "ChangeStreams"
)

// Shape is the part of a plan the rescale policy changes.
type Shape struct {
	Stripes          int
	StreamsPerStripe int
}

// Intent is the policy's decision. To is authoritative; Action names the main change
// (when the user lowers both limits at once, a removal also lowers the streams).
type Intent struct {
	Action Action
	// Stripes is how many stripes to add or remove (positive).
	Stripes int
	// To is the shape after the intent (equal to the current shape for Hold).
	To Shape
	// Reason is a CamelCase word for why (it goes into v1alpha1.Replan.Reason).
	Reason string
	// Message explains the decision for people.
	Message string
}

// StripeMeasurement is one stripe over the last report interval.
type StripeMeasurement struct {
	BitsPerSecond float64
	LossPPM       float64
	Connected     bool
	// RTT is the stripe's smoothed round-trip time over the interval (its streams'
	// mean); 0 when it did not say.
	RTT time.Duration
}

// Measurement is one report of the running job.
type Measurement struct {
	Time                   time.Time
	AggregateBitsPerSecond float64
	Stripes                []StripeMeasurement
	// RemainingBytes is what the job had still to move when the report was made; 0
	// when the report did not say (a dataset still being listed).
	RemainingBytes int64
	// UnitsUnleased is how many units no stripe held when the report was made: what
	// a stripe added now could be given. nil when the report did not say.
	UnitsUnleased *int64
}

// RescaleInput is one round of the policy.
type RescaleInput struct {
	Now     time.Time
	Current Shape
	// MinStripes and MaxStripes bound the stripe count (nodes × stripes per node
	// within the limits and free slots); MaxStreams bounds streams per stripe.
	MinStripes, MaxStripes, MaxStreams int
	// MaxBitsPerSecond is the user's rate cap; 0 means none.
	MaxBitsPerSecond float64
	// Curve is the per-stripe stream curve the plan was made from.
	Curve Curve
	// PlannedStripes is OPT_B's stripe count: what the resources are predicted to
	// carry. Stripes running at their predicted rate are added up to it, not beyond.
	PlannedStripes int
	// PlannedBitsPerSecond is OPT_B's predicted aggregate; below it (by ProbeBelow)
	// the policy probes with one more stripe step. 0 disables probing.
	PlannedBitsPerSecond float64
	// PathBitsPerSecond is the aggregate the samples showed the path to carry (the
	// plan's PathCapacity); 0 means unknown. The policy never climbs or probes
	// towards more: a planned rate above it is read as it, and stripes running at it
	// are not added to (AtPathCapacity).
	PathBitsPerSecond float64
	// Measurement is the latest report; one already seen is ignored, so calling the
	// policy again with the same report is harmless.
	Measurement Measurement
}

// RescaleConfig tunes the policy; zero fields take the defaults named.
type RescaleConfig struct {
	// Settle: measurements this soon after a change are ignored (default 15 s: a new
	// stripe needs a few round trips and slow start before it shows its rate).
	Settle time.Duration
	// CoolDown is the least time between two changes (default 30 s).
	CoolDown time.Duration
	// Window is the number of measurements whose median the policy reads (default 3).
	Window int
	// AddAbove: stripes at or above this fraction of their predicted rate are not held
	// back by the path (default 0.85).
	AddAbove float64
	// RemoveBelow: stripes at or below this fraction are held back by it (default 0.55).
	RemoveBelow float64
	// MinGain is the fraction of a stripe's rate an added stripe must add (default 0.5).
	MinGain float64
	// MaxDrop is the loss of aggregate rate that undoes a removal or a streams change
	// (default 0.10).
	MaxDrop float64
	// StreamsGain is the gain more streams must bring (default 0.05).
	StreamsGain float64
	// ProbeBelow: an aggregate more than this fraction below the planned rate is
	// probed with one more stripe step (default 0.1).
	ProbeBelow float64
	// HighLossPPM is the loss at which more streams are tried before fewer stripes
	// (default 1000, 0.1 %: NDM'13 §4.2 saw streams matter from 0.1 % on).
	HighLossPPM float64
	// QueuedRTT: stripes whose round trip is at least this multiple of the smallest
	// the job has seen are behind a queue (default 1.5): their loss is a full
	// bottleneck's, which more streams do not make room in, and HighLoss leaves them.
	QueuedRTT float64
	// BackoffMin and BackoffMax bound how long a failed move is blocked (default
	// 2 min, doubling to 16 min).
	BackoffMin, BackoffMax time.Duration
	// BlockBand: a block expires early when the aggregate moves more than this
	// fraction away from where it was set, and reports that all lie further than this
	// from the level the policy last held at are a move of the path (default 0.2).
	BlockBand float64
	// Granularity makes every stripe change a multiple of it (default 1); the API
	// expresses stripes as nodes × stripes per node, so controllers/planning sets it
	// to the node count.
	Granularity int
}

func (c RescaleConfig) withDefaults() RescaleConfig {
	def := func(v *float64, d float64) {
		if !(*v > 0) {
			*v = d
		}
	}
	if c.Settle <= 0 {
		c.Settle = 15 * time.Second
	}
	if c.CoolDown <= 0 {
		c.CoolDown = 30 * time.Second
	}
	if c.Window <= 0 {
		c.Window = 3
	}
	def(&c.AddAbove, 0.85)
	def(&c.RemoveBelow, 0.55)
	def(&c.MinGain, 0.5)
	def(&c.MaxDrop, 0.10)
	def(&c.StreamsGain, 0.05)
	def(&c.ProbeBelow, 0.1)
	def(&c.HighLossPPM, 1000)
	def(&c.QueuedRTT, 1.5)
	def(&c.BlockBand, 0.2)
	if c.BackoffMin <= 0 {
		c.BackoffMin = 2 * time.Minute
	}
	if c.BackoffMax < c.BackoffMin {
		c.BackoffMax = max(16*time.Minute, c.BackoffMin)
	}
	if c.Granularity <= 0 {
		c.Granularity = 1
	}
	return c
}

// observation is one smoothed-over measurement.
type observation struct {
	Time      time.Time
	Aggregate float64
	LossPPM   float64
	// Stripes is how many stripes were connected; -1 when the report did not say.
	Stripes int
	// RTT is the connected stripes' median round trip; 0 when none said.
	RTT time.Duration
}

// pending is a change waiting to be judged.
type pending struct {
	Action          Action
	From            Shape
	Stripes         int
	BeforeAggregate float64
	BeforeLossPPM   float64
	Reason          string
	// Spanned: a window read while this change was judged spread beyond BlockBand —
	// the path moved while the change settled.
	Spanned bool
}

// block stops one kind of move until it expires. An expired block is kept (Expired)
// so that the next failure of the same move doubles its back-off; a move that works,
// or a change of conditions, clears it.
type block struct {
	Until   time.Time
	Level   float64 // smoothed aggregate when set
	LossPPM float64
	Backoff time.Duration
	Expired bool
}

func (b *block) active() bool { return b != nil && !b.Expired }

// RescaleState is what the policy remembers between rounds. It is plain data: keep it
// in memory per job; losing it (a controller restart) only costs a fresh settle and
// window before the next change.
type RescaleState struct {
	Window      []observation
	LastSeen    time.Time
	LastChange  time.Time
	Pending     *pending
	AddBlock    *block
	RemoveBlock *block
	StreamBlock *block
	// CurveOptimum is the stream count the curve recommended when last looked at; a
	// new curve with another optimum (a re-probe) changes the streams.
	CurveOptimum int
	// Level is the aggregate of the last window the policy judged and held at, or of
	// the shape it was started on (AfterPlan); 0 while unknown (after a change of its
	// own, until that change's window is judged).
	Level float64
	// Recent are the latest measurements, settling or not: when every one of them lies
	// on the same side of Level by more than BlockBand, the path changed under the job
	// (its capacity fell or came back, a flow came or left) and the policy answers at
	// once instead of after the settle and cool-down of a change of its own.
	Recent []observation
	// MinRTT is the path's round trip with the least queue the job has seen: the
	// probe's least (AfterPlan's baseRTT) or a report's smaller smoothed one, against
	// which a queue is told (0: none yet). The reports' alone are not enough: BBR's
	// streams keep the bottleneck's queue standing whenever they fill the path, and
	// the rate schedule's stripes reported 66–101 ms at 1 Gbit/s on a 50 ms path from
	// their first second to the cut.
	MinRTT time.Duration
}

// AfterPlan is the state of a policy that starts following a plan at now: the plan
// counts as a change made now (it settles and cools down like one), and the rate it
// predicts, within the path's capacity the samples showed (0: unknown), is the level
// against which a change of the path is seen during that wait — the bound the
// policy's input gets (RescaleInput.PathBitsPerSecond). baseRTT is the least round
// trip the probe's samples saw (TCP's min_rtt; 0: unknown).
func AfterPlan(now time.Time, predicted, path float64, baseRTT time.Duration) RescaleState {
	level := sanitizeInput(RescaleInput{PlannedBitsPerSecond: predicted, PathBitsPerSecond: path}).PlannedBitsPerSecond
	return RescaleState{LastChange: now, Level: level, MinRTT: max(baseRTT, 0)}
}

// RescalePolicy is the rescale policy with its configuration.
type RescalePolicy struct {
	Config RescaleConfig
}

// Decide runs one round: it records the measurement and returns the intent and the
// state for the next round. The intent's shape is always within
// [MinStripes, MaxStripes] × [1, MaxStreams].
func (p RescalePolicy) Decide(st RescaleState, in RescaleInput) (Intent, RescaleState) {
	in = sanitizeInput(in)
	it, next := p.decide(st, in)
	return clampIntent(it, in), next
}

// clampIntent keeps an intent's shape within the bounds whatever led to it (a revert
// to a shape the limits have since excluded, for instance) and makes its action and
// count agree with the shape.
func clampIntent(it Intent, in RescaleInput) Intent {
	it.To.Stripes = min(max(it.To.Stripes, in.MinStripes), in.MaxStripes)
	it.To.StreamsPerStripe = min(max(it.To.StreamsPerStripe, 1), in.MaxStreams)
	cur := in.Current
	switch {
	case it.To == cur:
		if it.Action != Hold {
			it.Action, it.Stripes = Hold, 0
		}
	case it.To.Stripes > cur.Stripes:
		it.Action, it.Stripes = AddStripes, it.To.Stripes-cur.Stripes
	case it.To.Stripes < cur.Stripes:
		it.Action, it.Stripes = RemoveStripes, cur.Stripes-it.To.Stripes
	default:
		it.Action, it.Stripes = ChangeStreams, 0
	}
	return it
}

func (p RescalePolicy) decide(st RescaleState, in RescaleInput) (Intent, RescaleState) {
	cfg := p.Config.withDefaults()
	cur := in.Current
	hold := func(reason, msg string) (Intent, RescaleState) {
		return Intent{Action: Hold, To: cur, Reason: reason, Message: msg}, st
	}
	changed := func(it Intent) (Intent, RescaleState) {
		st.LastChange = in.Now
		st.Window, st.Recent, st.Level = nil, nil, 0
		return it, st
	}

	// 1. limits first, without waiting
	if it, ok := enforceLimits(in, cfg); ok {
		st.Pending = nil
		return changed(it)
	}

	// 2. record the measurement. A report in which nothing moved is no rate of the path:
	// a stall (the stripes' stall timeout redials them) or a gap in the stripes' own
	// reports, which neither more stripes nor more streams answer. On the local
	// cluster three such reports just after a plan (the probe's helper stripes
	// draining, the job moving 4 GiB at 936 Mbit/s on average) read as "the path moved
	// from 972 Mbit/s to 0 bit/s" and added a stripe the path had no room for.
	m := in.Measurement
	if m.Time.After(st.LastSeen) && usable(m.AggregateBitsPerSecond) {
		st.LastSeen = m.Time
		o := observation{Time: m.Time, Aggregate: m.AggregateBitsPerSecond, LossPPM: medianLoss(m.Stripes), Stripes: connected(m.Stripes), RTT: medianRTT(m.Stripes)}
		if o.RTT > 0 && (st.MinRTT == 0 || o.RTT < st.MinRTT) {
			st.MinRTT = o.RTT
		}
		st.Recent = lastN(append(st.Recent, o), cfg.Window)
		if st.LastChange.IsZero() || !m.Time.Before(st.LastChange.Add(cfg.Settle)) {
			st.Window = lastN(append(st.Window, o), cfg.Window)
		}
	}
	if st.CurveOptimum == 0 && in.Curve != nil {
		st.CurveOptimum = bestStreamsWithin(in.Curve, in.MaxStreams)
	}
	// 2b. a path that moved under the job is answered now: the recent measurements
	// are the window, and a change made before the move cannot be judged by what came
	// after it (neither undone nor blocked)
	moved := pathMoved(st, cfg, cur.Stripes)
	if moved {
		st.Window = slices.Clone(st.Recent)
		st.Pending = nil
	} else {
		if !st.LastChange.IsZero() && in.Now.Before(st.LastChange.Add(cfg.CoolDown)) {
			return hold("CoolingDown", fmt.Sprintf("waiting %s after the last change before judging it", st.LastChange.Add(cfg.CoolDown).Sub(in.Now).Round(time.Second)))
		}
		if len(st.Window) < cfg.Window {
			return hold("Measuring", fmt.Sprintf("%d of %d measurements since the last change", len(st.Window), cfg.Window))
		}
	}
	agg, loss, noise := windowStats(st.Window)
	rtt := windowRTT(st.Window)
	perStripe := agg / float64(cur.Stripes)
	predicted := math.Inf(1)
	if in.Curve != nil {
		predicted = in.Curve.BitsPerSecond(cur.StreamsPerStripe)
	}
	// the stripes that carry the planned rate at the current streams: OPT_B's count,
	// or more when the streams changed since (more under loss) and each stripe is
	// predicted to carry less
	planned := in.PlannedStripes
	if !(predicted > 0) || math.IsInf(predicted, 0) || math.IsNaN(predicted) {
		predicted = perStripe // nothing to compare with: read the stripes as on target
	} else if in.PlannedBitsPerSecond > 0 {
		planned = max(planned, int(math.Ceil(in.PlannedBitsPerSecond/predicted-1e-9)))
	}
	planned = min(planned, in.MaxStripes)
	ratio := 0.0
	if predicted > 0 {
		ratio = perStripe / predicted
	}
	rate := fmt.Sprintf("%s over %d stripes (%.0f %% of the predicted %s per stripe)",
		FormatBitsPerSecond(agg), cur.Stripes, 100*ratio, FormatBitsPerSecond(predicted))
	if moved {
		rate = fmt.Sprintf("the path moved from %s to %s: %s", FormatBitsPerSecond(st.Level), FormatBitsPerSecond(agg), rate)
	}

	// 2c. a move is answered from the level the path moved to, not from the way there:
	// reports still falling or rising (spread beyond BlockBand) are a transient, and a
	// change decided on it is judged against it. The rate schedule's cut read 254, 347
	// Mbit/s on its way down to 400; HighLoss doubled the streams "at 347", and the
	// doubling read as a gain once the cut had settled at 397.
	if moved && noise > cfg.BlockBand*agg {
		return hold("PathMoving", fmt.Sprintf("the path moved from %s: the last %d reports spread ±%s around %s; waiting for the rate to hold before answering",
			FormatBitsPerSecond(st.Level), len(st.Window), FormatBitsPerSecond(noise), FormatBitsPerSecond(agg)))
	}

	// 3. judge the last change — not on a window that spans a move of the path (its
	// spread beyond BlockBand either way): what it measured is neither the change's
	// effect nor its failure; the window slides on and judges once the rate holds
	if st.Pending != nil && noise > cfg.BlockBand*agg {
		spanned := *st.Pending // the state is plain data: the caller's copy stays as it was
		spanned.Spanned = true
		st.Pending = &spanned
		return hold("Unsteady", fmt.Sprintf("%s, but the window's reports spread ±%s: waiting for the rate to hold before judging the %s",
			rate, FormatBitsPerSecond(noise), st.Pending.Reason))
	}
	if it, ok := judgeLastChange(&st, in, cfg, agg, loss, noise); ok {
		return changed(it)
	}

	// 4. expire blocks
	st.AddBlock = expire(st.AddBlock, in.Now, agg, loss, cfg)
	st.RemoveBlock = expire(st.RemoveBlock, in.Now, agg, loss, cfg)
	st.StreamBlock = expire(st.StreamBlock, in.Now, agg, loss, cfg)

	optimum := 0
	if in.Curve != nil {
		optimum = bestStreamsWithin(in.Curve, in.MaxStreams)
	}
	r := &round{cfg: cfg, in: in, st: &st, cur: cur, agg: agg, loss: loss, rtt: rtt, predicted: predicted, planned: planned,
		ratio: ratio, rate: rate, optimum: optimum,
		nearPlan: in.PlannedBitsPerSecond > 0 && agg >= (1-cfg.ProbeBelow)*in.PlannedBitsPerSecond,
		atPath:   in.PathBitsPerSecond > 0 && agg >= (1-cfg.ProbeBelow)*in.PathBitsPerSecond}

	// the level a move of the path is seen against: this window's, unless a change
	// follows (changed resets it until that change is judged)
	st.Level = agg

	// 5. the rules, in order: the first that applies decides
	for _, rule := range rescaleRules {
		if it, ok := rule(r); ok {
			if it.Action == Hold {
				return it, st
			}
			st.Pending = &pending{Action: it.Action, From: cur, Stripes: it.Stripes, BeforeAggregate: agg, BeforeLossPPM: loss, Reason: it.Reason}
			return changed(it)
		}
	}
	if ratio <= cfg.RemoveBelow {
		return hold("PathBound", fmt.Sprintf("%s: the path limits the stripes and no change is open", rate))
	}
	return hold("Steady", rate)
}

// pathMoved reports whether every recent measurement (a full window of them) lies
// beyond BlockBand of the level the policy last held at, all on the same side, with
// all the shape's stripes connected. Noise of ±10 % never does;
// a capacity cut, a returning capacity or a competing flow's arrival does within
// Window reports; stripes still starting (a slow pod) or reconnecting do not.
func pathMoved(st RescaleState, cfg RescaleConfig, stripes int) bool {
	if !(st.Level > 0) || len(st.Recent) < cfg.Window {
		return false
	}
	above, below := 0, 0
	for _, o := range st.Recent {
		if o.Stripes >= 0 && o.Stripes < stripes {
			return false
		}
		switch {
		case o.Aggregate > (1+cfg.BlockBand)*st.Level:
			above++
		case o.Aggregate < (1-cfg.BlockBand)*st.Level:
			below++
		}
	}
	return above == len(st.Recent) || below == len(st.Recent)
}

// lastN is the last n of s.
func lastN(s []observation, n int) []observation {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// judgeLastChange judges the change made before the window now full: a move that
// worked makes its opposite pointless for a while (more stripes carried more, so fewer
// would carry less, and the other way round); a move that did not is undone (the intent
// returned) and blocked with a growing back-off.
func judgeLastChange(st *RescaleState, in RescaleInput, cfg RescaleConfig, agg, loss, noise float64) (Intent, bool) {
	pd := st.Pending
	if pd == nil {
		return Intent{}, false
	}
	st.Pending = nil
	cur := in.Current
	if pd.Spanned && pd.Reason == "HighLoss" {
		// Streams beyond the model's need a gain to stand, and a window after a move
		// shows the move, not the gain: the rate schedule's return read 397 → 825
		// Mbit/s as the doubling's work, and twelve streams where the plan had three
		// ran the returning 1 Gbit/s at 0.83× the fixed setting's rate. The streams go
		// back, unblocked: if the loss is still there, HighLoss asks again on a window
		// that can judge it.
		return Intent{Action: ChangeStreams, To: pd.From, Reason: "PathMovedWhileSettling",
			Message: fmt.Sprintf("the path moved while %d streams per stripe settled (the aggregate was %s before them and is %s now): the change cannot be told from the move; back to %d streams",
				cur.StreamsPerStripe, FormatBitsPerSecond(pd.BeforeAggregate), FormatBitsPerSecond(agg), pd.From.StreamsPerStripe)}, true
	}
	switch pd.Action {
	case AddStripes:
		expected := float64(pd.Stripes) * pd.BeforeAggregate / float64(max(pd.From.Stripes, 1))
		if gain := agg - pd.BeforeAggregate; gain < cfg.MinGain*expected || gain <= noise {
			st.AddBlock = nextBlock(st.AddBlock, in.Now, pd.BeforeAggregate, pd.BeforeLossPPM, cfg)
			if st.RemoveBlock != nil {
				// a removal failed at this level too: neither way helps, hold
				st.RemoveBlock = nextBlock(st.RemoveBlock, in.Now, pd.BeforeAggregate, pd.BeforeLossPPM, cfg)
			}
			return Intent{Action: RemoveStripes, Stripes: pd.Stripes, To: pd.From, Reason: "AddedStripesDidNotHelp",
				Message: fmt.Sprintf("adding %d stripe(s) moved the aggregate from %s to %s, less than %.0f %% of what they should carry or within the noise; back to %d stripes, no more additions for %s",
					pd.Stripes, FormatBitsPerSecond(pd.BeforeAggregate), FormatBitsPerSecond(agg), 100*cfg.MinGain, pd.From.Stripes, st.AddBlock.Backoff)}, true
		}
		st.AddBlock = nil
		st.RemoveBlock = nextBlock(st.RemoveBlock, in.Now, agg, loss, cfg)
	case RemoveStripes:
		if agg < (1-cfg.MaxDrop)*pd.BeforeAggregate {
			st.RemoveBlock = nextBlock(st.RemoveBlock, in.Now, pd.BeforeAggregate, pd.BeforeLossPPM, cfg)
			if st.AddBlock != nil {
				// an addition failed at this level too: neither way helps, hold
				st.AddBlock = nextBlock(st.AddBlock, in.Now, pd.BeforeAggregate, pd.BeforeLossPPM, cfg)
			}
			return Intent{Action: AddStripes, Stripes: pd.Stripes, To: pd.From, Reason: "RemovedStripesHurt",
				Message: fmt.Sprintf("removing %d stripe(s) lowered the aggregate from %s to %s; back to %d stripes, no more removals for %s",
					pd.Stripes, FormatBitsPerSecond(pd.BeforeAggregate), FormatBitsPerSecond(agg), pd.From.Stripes, st.RemoveBlock.Backoff)}, true
		}
		st.RemoveBlock = nil
		st.AddBlock = nextBlock(st.AddBlock, in.Now, agg, loss, cfg)
	case ChangeStreams:
		need := (1 - cfg.MaxDrop) * pd.BeforeAggregate
		if pd.Reason == "HighLoss" {
			need = math.Max((1+cfg.StreamsGain)*pd.BeforeAggregate, pd.BeforeAggregate+noise)
		}
		if agg < need {
			st.StreamBlock = nextBlock(st.StreamBlock, in.Now, pd.BeforeAggregate, pd.BeforeLossPPM, cfg)
			return Intent{Action: ChangeStreams, To: pd.From, Reason: "StreamsChangeDidNotHelp",
				Message: fmt.Sprintf("%d streams per stripe moved the aggregate from %s to %s; back to %d streams, no more stream changes for %s",
					cur.StreamsPerStripe, FormatBitsPerSecond(pd.BeforeAggregate), FormatBitsPerSecond(agg), pd.From.StreamsPerStripe, st.StreamBlock.Backoff)}, true
		}
		st.StreamBlock = nil
	}
	return Intent{}, false
}

// round is what one round of the policy measured and derived, as its rules read it;
// a rule may update the state (st) it keeps.
type round struct {
	cfg      RescaleConfig
	in       RescaleInput
	st       *RescaleState
	cur      Shape
	agg      float64       // the window's aggregate
	loss     float64       // the window's loss, ppm
	rtt      time.Duration // the window's longest round trip, 0 when unknown
	nearPlan bool          // the aggregate is within ProbeBelow of the planned rate
	atPath   bool          // ... of what the samples showed the path to carry
	// predicted is a stripe's rate at the current streams by the curve (the
	// measured one when there is no curve); ratio the measured per-stripe rate over it
	predicted, ratio float64
	planned          int    // the stripes that carry the planned rate at the current streams
	optimum          int    // the curve's best streams per stripe, 0 without a curve
	rate             string // the aggregate against the prediction, for messages
}

func (r *round) hold(reason, msg string) (Intent, bool) {
	return Intent{Action: Hold, To: r.cur, Reason: reason, Message: msg}, true
}

func (r *round) streams(n int, reason, msg string) (Intent, bool) {
	return Intent{Action: ChangeStreams, To: Shape{Stripes: r.cur.Stripes, StreamsPerStripe: n}, Reason: reason, Message: msg}, true
}

func (r *round) add(k int, reason, msg string) (Intent, bool) {
	// A stripe added when every unit is held by the stripes running gets no work:
	// the sender leases as many as the coordinator lets it (eight chunks, the last
	// 512 MiB of a file at the default 64 MiB), so on the four competing flows, with
	// 256 MiB chunks then, a stripe added 22 s before the end moved almost nothing
	// for the 19 s its pods ran.
	if u := r.in.Measurement.UnitsUnleased; u != nil && *u == 0 {
		return r.hold("NoWorkToShare", fmt.Sprintf("%s; %s, but the running stripes hold every unit left: a new stripe would get none", msg, reason))
	}
	to := Shape{Stripes: r.cur.Stripes + k, StreamsPerStripe: r.cur.StreamsPerStripe}
	return Intent{Action: AddStripes, Stripes: k, To: to, Reason: reason,
		Message: fmt.Sprintf("%s; adding %d stripe(s) (%d → %d)", msg, k, r.cur.Stripes, to.Stripes)}, true
}

func (r *round) remove(k int, reason, msg string) (Intent, bool) {
	to := Shape{Stripes: r.cur.Stripes - k, StreamsPerStripe: r.cur.StreamsPerStripe}
	return Intent{Action: RemoveStripes, Stripes: k, To: to, Reason: reason,
		Message: fmt.Sprintf("%s; removing %d stripe(s) (%d → %d)", msg, k, r.cur.Stripes, to.Stripes)}, true
}

// rescaleRules are the policy's rules in the order they are tried; each returns an
// intent when it applies (Kueue's preemption strategies and JobSet's failure-policy
// actions are built the same way).
var rescaleRules = []func(r *round) (Intent, bool){
	atRateLimit,
	endingSoon,
	modelOptimumChanged,
	lossSubsided,
	moreStripesThanPlanned,
	stripesAtTheirRate,
	highLoss,
	pathSaturated,
	belowPlannedRate,
}

// endingSoon holds a job whose dataset left ends, at the window's rate, before a
// change could settle.
func endingSoon(r *round) (Intent, bool) {
	left := r.in.Measurement.RemainingBytes
	if left <= 0 || !(r.agg > 0) {
		return Intent{}, false
	}
	ends := time.Duration(float64(left) * 8 / r.agg * float64(time.Second))
	if ends >= r.cfg.Settle {
		return Intent{}, false
	}
	return r.hold("EndingSoon", fmt.Sprintf("%s: the %.0f MB left end in %s at this rate, before a change could settle (%s)",
		r.rate, float64(left)/1e6, ends.Round(100*time.Millisecond), r.cfg.Settle))
}

// atRateLimit holds a job at its user's cap (spec.tuning.limits.maxBitsPerSecond).
func atRateLimit(r *round) (Intent, bool) {
	if r.in.MaxBitsPerSecond > 0 && r.agg >= 0.95*r.in.MaxBitsPerSecond {
		return r.hold("AtRateLimit", fmt.Sprintf("%s: at the job's cap of %s", r.rate, FormatBitsPerSecond(r.in.MaxBitsPerSecond)))
	}
	return Intent{}, false
}

// modelOptimumChanged follows a new curve (a re-probe) to its best stream count; the
// optimum is remembered whether or not the streams change.
func modelOptimumChanged(r *round) (Intent, bool) {
	if r.optimum == 0 || r.optimum == r.st.CurveOptimum {
		return Intent{}, false
	}
	r.st.CurveOptimum = r.optimum
	if r.optimum == r.cur.StreamsPerStripe {
		return Intent{}, false
	}
	return r.streams(r.optimum, "ModelOptimumChanged",
		fmt.Sprintf("the stream model now peaks at %d streams per stripe; changing from %d", r.optimum, r.cur.StreamsPerStripe))
}

// lossSubsided goes back to the curve's streams once the loss that made HighLoss raise
// them has fallen below half its threshold.
func lossSubsided(r *round) (Intent, bool) {
	if r.optimum > 0 && r.cur.StreamsPerStripe > r.optimum && r.loss < r.cfg.HighLossPPM/2 && !r.st.StreamBlock.active() {
		return r.streams(r.optimum, "LossSubsided",
			fmt.Sprintf("%s with %.0f ppm loss: back to the model's %d streams per stripe", r.rate, r.loss, r.optimum))
	}
	return Intent{}, false
}

// moreStripesThanPlanned sheds stripes beyond the planned count once the planned rate is
// reached (at most half of them at once).
func moreStripesThanPlanned(r *round) (Intent, bool) {
	if !r.nearPlan || r.cur.Stripes <= r.planned || r.st.RemoveBlock.active() {
		return Intent{}, false
	}
	k := roundDown(min(r.cur.Stripes-r.planned, max(r.cur.Stripes/2, 1)), r.cfg.Granularity)
	if k > 0 && r.cur.Stripes-k >= r.in.MinStripes {
		return r.remove(k, "MoreStripesThanPlanned", fmt.Sprintf("%s: the planned %d carry the planned rate", r.rate, r.planned))
	}
	return Intent{}, false
}

// stripesAtTheirRate: stripes that run at their predicted rate mean the path has room,
// so more are added up to the planned count (at most doubling at once), unless the path
// is at what the samples showed it to carry or an addition just failed at this rate.
func stripesAtTheirRate(r *round) (Intent, bool) {
	if r.ratio < r.cfg.AddAbove {
		return Intent{}, false
	}
	target := r.planned
	switch {
	case r.atPath:
		return r.hold("AtPathCapacity", fmt.Sprintf("%s: at the %s the samples showed the path to carry", r.rate, FormatBitsPerSecond(r.in.PathBitsPerSecond)))
	case r.cur.Stripes >= target:
		return r.hold("AtPlannedStripes", fmt.Sprintf("%s: the planned %d stripes run at their predicted rate", r.rate, target))
	case r.st.AddBlock.active():
		return r.hold("AdditionBlocked", fmt.Sprintf("%s: an addition did not help at this rate; trying again after %s", r.rate, r.st.AddBlock.Until.Format(time.RFC3339)))
	}
	if k := roundDown(min(target-r.cur.Stripes, max(r.cur.Stripes, 1)), r.cfg.Granularity); k > 0 {
		return r.add(k, "PathHasRoom", r.rate+": the path is not what limits them")
	}
	return r.hold("AtPlannedStripes", fmt.Sprintf("%s: no whole step of %d stripes fits below the planned %d", r.rate, r.cfg.Granularity, target))
}

// highLoss: stripes short of their rate under heavy loss get more streams first, since
// they cost no pods and recover faster from loss (NDM'13 §4.2).
//
// Not behind a full queue: a round trip well above the least the job has seen
// (QueuedRTT) says the bottleneck's queue is full, and the loss is its overflow — the
// path's capacity, which more streams share but do not raise. On the rate schedule's
// 400 Mbit/s cut the stripes' loss read 5 000–350 000 ppm with every byte of the
// emulated bottleneck's queue waiting; doubled streams there gained 0–3 % in four
// judged runs of five, and in the fifth, judged on the returning capacity, twelve
// streams ran the 1 Gbit/s at 0.79× the fixed setting. Random loss (NDM'13's case, and
// the simulation's random-loss scenario) leaves the round trip where it was.
func highLoss(r *round) (Intent, bool) {
	if r.loss < r.cfg.HighLossPPM || r.cur.StreamsPerStripe >= r.in.MaxStreams || r.st.StreamBlock.active() {
		return Intent{}, false
	}
	if least := r.st.MinRTT; least > 0 && r.rtt > 0 && float64(r.rtt) >= r.cfg.QueuedRTT*float64(least) {
		return Intent{}, false
	}
	n := min(2*r.cur.StreamsPerStripe, r.in.MaxStreams)
	return r.streams(n, "HighLoss", fmt.Sprintf("%s with %.0f ppm loss: more streams recover faster from loss; %d → %d streams per stripe",
		r.rate, r.loss, r.cur.StreamsPerStripe, n))
}

// pathSaturated: stripes well short of their rate mean the path limits them, so fewer
// carry the same (at most half of them removed at once).
func pathSaturated(r *round) (Intent, bool) {
	if r.ratio > r.cfg.RemoveBelow || r.cur.Stripes <= r.in.MinStripes || r.st.RemoveBlock.active() {
		return Intent{}, false
	}
	mid := (r.cfg.AddAbove + r.cfg.RemoveBelow) / 2
	need := int(math.Ceil(r.agg / (r.predicted * mid)))
	need = max(need, r.in.MinStripes, r.cur.Stripes-max(r.cur.Stripes/2, 1)) // at most halve at once
	if k := roundDown(r.cur.Stripes-need, r.cfg.Granularity); k > 0 {
		return r.remove(k, "PathSaturated", r.rate+": the path limits them, so fewer carry the same")
	}
	return Intent{}, false
}

// belowPlannedRate: below the planned rate with nothing else to try, probe one step up.
// If the path is full the addition is undone and blocked with a growing back-off; if
// the stripes are held back by loss or by a competing flow's share, it helps — and
// since each added stripe must bring half a stripe's share, beyond the noise, a
// competing TCP flow is matched, not crowded out.
func belowPlannedRate(r *round) (Intent, bool) {
	if r.in.PlannedBitsPerSecond <= 0 || r.nearPlan || r.cur.Stripes >= r.in.MaxStripes || r.st.AddBlock.active() {
		return Intent{}, false
	}
	if k := roundDown(min(r.cfg.Granularity, r.in.MaxStripes-r.cur.Stripes), r.cfg.Granularity); k > 0 {
		return r.add(k, "BelowPlannedRate", fmt.Sprintf("%s, below the planned %s: trying more", r.rate, FormatBitsPerSecond(r.in.PlannedBitsPerSecond)))
	}
	return Intent{}, false
}

// sanitizeInput makes the bounds consistent and the shape positive.
func sanitizeInput(in RescaleInput) RescaleInput {
	in.MaxStreams = max(in.MaxStreams, 1)
	in.MinStripes = max(in.MinStripes, 1)
	in.MaxStripes = max(in.MaxStripes, in.MinStripes)
	in.Current.Stripes = max(in.Current.Stripes, 1)
	in.Current.StreamsPerStripe = max(in.Current.StreamsPerStripe, 1)
	if in.PlannedStripes <= 0 {
		in.PlannedStripes = in.Current.Stripes
	}
	if !(in.MaxBitsPerSecond > 0) || math.IsInf(in.MaxBitsPerSecond, 0) {
		in.MaxBitsPerSecond = 0
	}
	if !(in.PlannedBitsPerSecond > 0) || math.IsInf(in.PlannedBitsPerSecond, 0) {
		in.PlannedBitsPerSecond = 0
	}
	if !(in.PathBitsPerSecond > 0) || math.IsInf(in.PathBitsPerSecond, 0) {
		in.PathBitsPerSecond = 0
	}
	if in.PathBitsPerSecond > 0 && in.PlannedBitsPerSecond > in.PathBitsPerSecond {
		// a prediction the samples never showed is not chased
		in.PlannedBitsPerSecond = in.PathBitsPerSecond
	}
	return in
}

// enforceLimits brings a shape outside the limits back inside at once (the user
// lowered a limit, or the nodes changed).
func enforceLimits(in RescaleInput, cfg RescaleConfig) (Intent, bool) {
	cur := in.Current
	switch {
	case cur.Stripes > in.MaxStripes:
		return Intent{Action: RemoveStripes, Stripes: cur.Stripes - in.MaxStripes, To: Shape{Stripes: in.MaxStripes, StreamsPerStripe: min(cur.StreamsPerStripe, in.MaxStreams)},
			Reason: "LimitsChanged", Message: fmt.Sprintf("%d stripes exceed the %d allowed; removing %d", cur.Stripes, in.MaxStripes, cur.Stripes-in.MaxStripes)}, true
	case cur.Stripes < in.MinStripes:
		return Intent{Action: AddStripes, Stripes: in.MinStripes - cur.Stripes, To: Shape{Stripes: in.MinStripes, StreamsPerStripe: min(cur.StreamsPerStripe, in.MaxStreams)},
			Reason: "LimitsChanged", Message: fmt.Sprintf("%d stripes are fewer than the %d required; adding %d", cur.Stripes, in.MinStripes, in.MinStripes-cur.Stripes)}, true
	case cur.StreamsPerStripe > in.MaxStreams:
		return Intent{Action: ChangeStreams, To: Shape{Stripes: cur.Stripes, StreamsPerStripe: in.MaxStreams},
			Reason: "LimitsChanged", Message: fmt.Sprintf("%d streams per stripe exceed the %d allowed", cur.StreamsPerStripe, in.MaxStreams)}, true
	}
	return Intent{}, false
}

func nextBlock(prev *block, now time.Time, level, loss float64, cfg RescaleConfig) *block {
	backoff := cfg.BackoffMin
	if prev != nil {
		backoff = min(2*prev.Backoff, cfg.BackoffMax)
	}
	return &block{Until: now.Add(backoff), Level: level, LossPPM: loss, Backoff: backoff}
}

// expire ends a block whose time is up, keeping its back-off for the next failure,
// and clears one whose conditions changed: the aggregate left the band it was set in,
// or loss that was high fell to half.
func expire(b *block, now time.Time, agg, loss float64, cfg RescaleConfig) *block {
	if b == nil {
		return nil
	}
	moved := b.Level > 0 && math.Abs(agg-b.Level) > cfg.BlockBand*b.Level
	lossFell := b.LossPPM >= cfg.HighLossPPM && loss < b.LossPPM/2
	if moved || lossFell {
		return nil
	}
	if !now.Before(b.Until) && !b.Expired {
		e := *b
		e.Expired = true
		return &e
	}
	return b
}

func roundDown(k, g int) int {
	if g <= 1 {
		return k
	}
	return k / g * g
}

// windowStats returns the median aggregate and loss of the window, and its noise:
// half the spread of the aggregates.
func windowStats(w []observation) (agg, loss, noise float64) {
	a := make([]float64, len(w))
	l := make([]float64, len(w))
	lo, hi := math.Inf(1), math.Inf(-1)
	for i, o := range w {
		a[i], l[i] = o.Aggregate, o.LossPPM
		lo, hi = math.Min(lo, o.Aggregate), math.Max(hi, o.Aggregate)
	}
	if len(w) > 0 {
		noise = (hi - lo) / 2
	}
	return median(a), median(l), noise
}

// connected is how many of the stripes are connected; -1 for a report without them.
func connected(s []StripeMeasurement) int {
	if len(s) == 0 {
		return -1
	}
	n := 0
	for _, m := range s {
		if m.Connected {
			n++
		}
	}
	return n
}

// medianRTT is the median round trip of the connected stripes that report one.
func medianRTT(s []StripeMeasurement) time.Duration {
	var v []float64
	for _, m := range s {
		if m.Connected && m.RTT > 0 {
			v = append(v, float64(m.RTT))
		}
	}
	return time.Duration(median(v))
}

// windowRTT is the longest round trip of the window's measurements: whether the
// bottleneck's queue filled during the window. A stripe's round trip is its streams'
// smoothed one at the moment of the report, and BBR's streams dip to the path's own
// every few seconds (ProbeRTT) while the queue stands: on the rate schedule's cut the
// reports read 58.6, 77.4 and 95.3 ms over a window whose queue was full, 101 ms for
// the 30 s after it; the median of the three missed it.
func windowRTT(w []observation) time.Duration {
	var longest time.Duration
	for _, o := range w {
		longest = max(longest, o.RTT)
	}
	return longest
}

// medianLoss is the median loss of the connected stripes (0 when none report it).
func medianLoss(s []StripeMeasurement) float64 {
	var l []float64
	for _, m := range s {
		if m.Connected && m.LossPPM >= 0 && finite(m.LossPPM) {
			l = append(l, m.LossPPM)
		}
	}
	return median(l)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
