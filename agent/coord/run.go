package coord

import (
	"context"
	"math"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// ProbePlanner chooses the next probe sample from those taken; done ends probing.
type ProbePlanner func(d contract.ProbeDirective, samples []contract.Sample) (next wire.ProbeRequest, done bool)

// Runner follows a Channel's directives and publishes reports until the job ends.
type Runner struct {
	Core     *Core
	Channel  Channel
	Interval time.Duration
	Probe    ProbePlanner
	// Grace is how long to keep serving after the job ended, so that every stripe
	// hears that it is finished.
	Grace time.Duration

	applied int64
	probing context.CancelFunc
}

// Run returns when the job is Complete or Failed (after the grace period), or ctx ends.
func (r *Runner) Run(ctx context.Context) contract.Phase {
	c := r.Core
	if r.Interval <= 0 {
		r.Interval = 2 * time.Second
	}
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	last := contract.Phase("")
	publish := func() contract.Phase {
		rep := c.Report()
		if err := r.Channel.Publish(ctx, rep); err != nil {
			c.log.Warn("Could not publish the report", "err", err.Error())
		}
		last = rep.Phase
		return rep.Phase
	}
	r.directive(ctx)
	publish()
	for {
		ch := c.Changed()
		select {
		case <-ctx.Done():
			return last
		case <-t.C:
			r.directive(ctx)
			publish()
		case <-ch:
			if p := c.Phase(); p != last {
				publish()
			}
		}
		if last == contract.PhaseComplete || last == contract.PhaseFailed {
			g := time.NewTimer(r.Grace)
			defer g.Stop()
			for {
				c.mu.Lock()
				n := len(c.members)
				c.mu.Unlock()
				if n == 0 {
					return last
				}
				select {
				case <-g.C:
					return last
				case <-ctx.Done():
					return last
				case <-c.Changed():
				}
			}
		}
	}
}

func (r *Runner) directive(ctx context.Context) {
	d, err := r.Channel.Directive(ctx)
	if err != nil {
		r.Core.log.Warn("Could not read the directive", "err", err.Error())
		return
	}
	if d == nil || d.Generation <= r.applied {
		return
	}
	r.applied = d.Generation
	r.Core.SetGeneration(d.Generation)
	if r.probing != nil && d.Mode != contract.ModeProbe {
		r.probing()
		r.probing = nil
	}
	switch d.Mode {
	case contract.ModeTransfer:
		r.Core.SetParams(ParamsFromDirective(*d, r.Core.params))
		r.Core.SetPhase(contract.PhaseTransferring)
	case contract.ModePause:
		r.Core.SetPhase(contract.PhasePaused)
	case contract.ModeProbe:
		if d.Probe == nil || r.Probe == nil {
			r.Core.log.Warn("Probe directive without a probe planner or parameters")
			return
		}
		pctx, cancel := context.WithCancel(ctx)
		r.probing = cancel
		r.Core.SetPhase(contract.PhaseProbing)
		go r.runProbe(pctx, *d.Probe)
	}
	r.Core.log.Info("Applied a directive", "generation", d.Generation, "mode", d.Mode, "streams", d.StreamsPerStripe, "bufferBytes", d.BufferBytes)
}

// ParamsFromDirective turns a transfer directive into parameters; what it leaves out
// keeps its value.
func ParamsFromDirective(d contract.Directive, old Params) Params {
	p := old
	if d.StreamsPerStripe > 0 {
		p.Streams = d.StreamsPerStripe
	}
	p.BufferBytes = d.BufferBytes
	p.MaxBitsPerSecond = d.MaxBitsPerSecond
	if len(d.SizeClasses) > 0 {
		p.SizeClasses = d.SizeClasses
		p.Concurrency, p.Pipelining = 0, 0
		for _, sc := range d.SizeClasses {
			p.Concurrency = max(p.Concurrency, sc.Concurrency, sc.Channels)
			p.Pipelining = max(p.Pipelining, sc.Pipelining)
		}
	}
	return p
}

// RunProbe takes the samples a probe directive asks for with the lowest stripe and
// records them; the phase becomes Probed.
func (r *Runner) runProbe(ctx context.Context, d contract.ProbeDirective) {
	c := r.Core
	for ctx.Err() == nil {
		m := c.ProbeMember()
		if m == nil {
			select {
			case <-c.Changed():
				continue
			case <-ctx.Done():
				return
			}
		}
		next, done := r.Probe(d, c.Samples())
		if done {
			c.SetPhase(contract.PhaseProbed)
			return
		}
		res, err := m.Probe(ctx, next)
		if err != nil {
			return
		}
		if res.Error != "" {
			c.log.Warn("A probe sample failed", "streams", next.Streams, "err", res.Error)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		c.AddSample(res.Sample)
		c.log.Info("Probe sample", "streams", res.Sample.Streams, "bufferBytes", res.Sample.BufferBytes, "rate", HumanRate(res.Sample.BitsPerSecond),
			"seconds", math.Round(res.Seconds*100)/100, "settled", res.Settled, "rttMicros", res.Sample.RTTMicros,
			"sourceMillicores", res.Sample.SourceMillicores, "destinationMillicores", res.Sample.DestinationMillicores)
	}
}
