package main

import (
	"context"
	"log/slog"
	"math"
	"sync/atomic"
	"time"

	"github.com/dtnflow/dtnflow/agent/autotune"
	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/coord"
	"github.com/dtnflow/dtnflow/agent/share"
)

// sharedSend is `send --auto --share-dir`: a job that shares its path with the other
// jobs writing to the same directory (package share). It waits while another job
// probes a cold path, plans from the path's profile when there is one, and re-plans
// for its share whenever a job arrives or leaves or the capacity changes.
type sharedSend struct {
	dir    *share.Dir
	tuner  *autotune.Tuner
	stripe *localStripes
	// maxStripes bounds the plan (--stripes); userRate is --max-rate (0: none).
	maxStripes int
	userRate   int64
	every      time.Duration
	log        *slog.Logger

	state atomic.Value // string: Joining, Probing, WaitingForPathProbe, Transferring
	// done is closed once the job has left the path (its member file removed).
	done chan struct{}
}

// joinSettle is how long a job that has just joined waits before it looks at the
// others: jobs started together then see each other, and only the first probes.
const joinSettle = 500 * time.Millisecond

// sharePoll is how often a job waiting for the path's probe looks for its profile.
const sharePoll = 500 * time.Millisecond

// replanGain is how much a share must change before the job re-plans for it.
const replanGain = 0.02

func (s *sharedSend) setState(st string) { s.state.Store(st) }

func (s *sharedSend) stateNow() string {
	if v, ok := s.state.Load().(string); ok {
		return v
	}
	return "Joining"
}

// rateWindow is how many heartbeats the rate a member writes is averaged over: the
// path's highest aggregate is the sum of its members' rates, and a sum of one-interval
// rates, each at its own moment of a bursty transfer, overstates what the path
// carries (by 5–10 % on bench-sharing-wan's path), which then oversubscribes the
// shares.
const rateWindow = 5

// heartbeat writes the job's member file every interval: its state and its rate over
// the last rateWindow intervals. A file not written for share.DefaultStale counts as
// a job gone.
func (s *sharedSend) heartbeat(ctx context.Context) {
	t := time.NewTicker(min(s.every, share.DefaultStale/4))
	defer t.Stop()
	var rates []int64
	for {
		var bps int64
		if s.stateNow() == "Transferring" {
			rates = append(rates, s.tuner.Core.Report().BitsPerSecond)
			if len(rates) > rateWindow {
				rates = rates[1:]
			}
			// a rate is written once the window is full: the first intervals of a
			// transfer are its ramp, not what it carries
			if len(rates) == rateWindow {
				var sum int64
				for _, r := range rates {
					sum += r
				}
				bps = sum / rateWindow
			}
		}
		if err := s.dir.Write(s.stateNow(), bps); err != nil {
			s.log.Warn("Could not write the job's share file", "err", err.Error())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// run takes the job from joining to its end (ctx's), then leaves the path.
func (s *sharedSend) run(ctx context.Context) {
	defer close(s.done)
	s.setState("Joining")
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		s.heartbeat(ctx)
	}()
	defer func() {
		<-ctx.Done()
		<-beat // no write after the file is removed
		if err := s.dir.Leave(); err != nil {
			s.log.Warn("Could not remove the job's share file", "err", err.Error())
		}
	}()
	select {
	case <-ctx.Done():
		return
	case <-time.After(joinSettle):
	}
	if out, ok := s.start(ctx); ok {
		s.follow(ctx, out)
	}
}

// start waits for a fresh profile or probes the path itself when it is the first job
// on it, then makes the job's first plan.
func (s *sharedSend) start(ctx context.Context) (autotune.Outcome, bool) {
	waiting := false
	for {
		if p, ok := s.dir.Profile(); ok {
			members, _ := s.dir.Members()
			sh := share.ShareOf(members, s.dir.Job, p.CapacityBitsPerSecond())
			s.tuner.Params.MaxBitsPerSecond = s.cap(sh.BitsPerSecond, sh.Paced)
			out, err := s.tuner.Warm(fromProfile(p))
			if err != nil {
				s.log.Warn("Could not plan from the path's profile; probing instead", "err", err.Error())
				break
			}
			s.setState("Transferring")
			s.log.Info("Planned from the path's profile", "probedBy", p.ProbedBy, "jobsOnPath", len(members),
				"pathCapacity", coord.HumanRate(int64(p.CapacityBitsPerSecond())), "share", rateOrNone(sh.BitsPerSecond), "paced", sh.Paced)
			return out, true
		}
		members, err := s.dir.Members()
		if err != nil || share.Prober(members, s.dir.Job) {
			break
		}
		if !waiting {
			waiting = true
			s.setState("WaitingForPathProbe")
			s.log.Info("Waiting for the path's probe", "prober", members[0].Job, "jobsOnPath", len(members))
		}
		select {
		case <-ctx.Done():
			return autotune.Outcome{}, false
		case <-time.After(sharePoll):
		}
	}
	s.setState("Probing")
	out, err := s.tuner.OnData(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Warn("Auto-tuning failed; the transfer goes on with the parameters it has", "err", err.Error())
		s.setState("Transferring")
		return out, false
	case out.Finished || err != nil && (s.tuner.Core.Phase() == contract.PhaseComplete || s.tuner.Core.Phase() == contract.PhasePartiallyComplete):
		// the job ended while it probed (seen by the probe, or by the context its end
		// cancels first): what it sampled still spares the others a probe of their own
		if len(out.Samples) > 0 {
			if err := s.dir.SaveProbe(toProfile(out)); err != nil {
				s.log.Warn("Could not write the path's profile", "err", err.Error())
			}
		}
		return out, false
	case err != nil:
		return out, false
	}
	s.setState("Transferring")
	if err := s.dir.SaveProbe(toProfile(out)); err != nil {
		s.log.Warn("Could not write the path's profile", "err", err.Error())
	}
	return out, true
}

// follow re-plans for the job's share whenever it changed (looking every sharePoll)
// and runs the rescale policy every report interval in between, until the job ends.
func (s *sharedSend) follow(ctx context.Context, out autotune.Outcome) {
	a := newAdapter(out.Plan, s.maxStripes, out.RTT)
	cap := s.tuner.Params.MaxBitsPerSecond
	members, _ := s.dir.Members()
	jobs := len(members)
	// the path's files are read every sharePoll, not every report interval: a job
	// that joins waits joinSettle before it sends, and the others are to have made
	// room for it by then (else the path carries the new job on top of the old shares
	// for up to an interval, its queue overflows and a flow backs off)
	t := time.NewTicker(min(s.every, sharePoll))
	defer t.Stop()
	lastStep := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if s.tuner.Core.Phase() != contract.PhaseTransferring {
			continue
		}
		members, err := s.dir.Members()
		if err != nil {
			s.log.Warn("Could not read the path's jobs", "err", err.Error())
			continue
		}
		if _, err := s.dir.LearnAggregate(members); err != nil {
			s.log.Warn("Could not record the path's aggregate rate", "err", err.Error())
		}
		p, ok := s.dir.Profile()
		if !ok {
			p = toProfile(out)
		}
		sh := share.ShareOf(members, s.dir.Job, p.CapacityBitsPerSecond())
		want := s.cap(sh.BitsPerSecond, sh.Paced)
		if changed(cap, want) {
			reason := "ShareChanged"
			switch {
			case len(members) > jobs:
				reason = "PathJobArrived"
			case len(members) < jobs:
				reason = "PathJobLeft"
			}
			next, err := s.tuner.Replan(out, want)
			if err != nil {
				s.log.Warn("Could not re-plan for the job's share", "err", err.Error())
				continue
			}
			out, cap, jobs = next, want, len(members)
			a = newAdapter(out.Plan, s.maxStripes, out.RTT)
			s.log.Info("Re-planned", "action", "Share", "reason", reason, "jobsOnPath", len(members),
				"pathCapacity", coord.HumanRate(int64(p.CapacityBitsPerSecond())), "share", rateOrNone(sh.BitsPerSecond), "paced", sh.Paced,
				"stripes", out.Stripes, "streams", out.Plan.Flow.StreamsPerStripe)
			continue
		}
		jobs = len(members)
		if time.Since(lastStep) >= s.every {
			lastStep = time.Now()
			s.stripe.step(ctx, a)
		}
	}
}

// cap is the job's rate cap for a share: the share when the job is held to it, within
// --max-rate.
func (s *sharedSend) cap(shareBPS float64, paced bool) int64 {
	c := s.userRate
	if paced && shareBPS > 0 && !math.IsInf(shareBPS, 0) && (c <= 0 || int64(shareBPS) < c) {
		c = int64(shareBPS)
	}
	return c
}

// changed says whether a new cap differs enough from the one planned for.
func changed(old, next int64) bool {
	if (old <= 0) != (next <= 0) {
		return true
	}
	if old <= 0 {
		return false
	}
	return math.Abs(float64(next-old)) > replanGain*float64(old)
}

func rateOrNone(bps float64) string {
	if math.IsInf(bps, 0) || !(bps > 0) {
		return "none"
	}
	return coord.HumanRate(int64(bps))
}

func toProfile(out autotune.Outcome) share.Profile {
	// the capacity the probe found, else what its plan predicts; at least its best sample
	plateau := 0.0
	for _, c := range []float64{out.PathBitsPerSecond, out.Plan.Path.Max(), out.Plan.Flow.PredictedBitsPerSecond} {
		if c > 0 && !math.IsInf(c, 0) {
			plateau = c
			break
		}
	}
	for _, smp := range out.Samples {
		plateau = max(plateau, smp.BitsPerSecond)
	}
	return share.Profile{Samples: out.Samples, Prober: out.Prober, StripeRates: out.StripeRates, StripeStreams: out.StripeStreams, Noise: out.Noise,
		RTTMicros: out.RTT.Microseconds(), PlateauBitsPerSecond: plateau}
}

func fromProfile(p share.Profile) autotune.Outcome {
	return autotune.Outcome{Samples: p.Samples, Prober: p.Prober, StripeRates: p.StripeRates, StripeStreams: p.StripeStreams, Noise: p.Noise,
		RTT: time.Duration(p.RTTMicros) * time.Microsecond}
}
