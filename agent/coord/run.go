package coord

import (
	"context"
	"errors"
	"math"
	"slices"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/wire"
	"github.com/dtnflow/dtnflow/optimizer"
)

// ProbePlanner chooses the next probe sample from those taken and the dataset (what is
// worth exploring depends on it); done ends probing.
type ProbePlanner func(d contract.ProbeDirective, samples []contract.Sample, ds contract.Dataset) (next wire.ProbeRequest, done bool)

// Runner follows a Channel's directives and publishes reports until the job ends.
type Runner struct {
	Core     *Core
	Channel  Channel
	Interval time.Duration
	Probe    ProbePlanner
	// Grace is how long to keep serving after the job ended, so that every stripe
	// hears that it is finished.
	Grace time.Duration
	// LocalLimits are this host's socket buffer limits (nil: unknown). Until the probe
	// stripe reports both ends', they stand for both in choosing the buffer its streams
	// connect with (firstBuffer).
	LocalLimits *wire.SocketLimits

	// Started is when the process's CPU time began to count (ProcessStart for a
	// coordinator's own process): its first CPU window runs from there, so that the
	// dataset's listing counts and the first figure goes out a cpuWindow after the
	// start. Zero: the first report starts the first window.
	Started time.Time
	// StartedCPUSeconds is the process's CPU time at Started (ProcessStartCPUSeconds
	// with ProcessStart), which the first window does not count. A claimed warm
	// coordinator's first figure counted its standby's CPU too, over a window of a
	// second: 77 millicores asked for a second where it used 4, on a 37 s job 2 of the
	// 7 millicores it asked on average.
	StartedCPUSeconds float64
	// CPUSeconds is the process's CPU time so far (nil: metrics.CPUSeconds); Now the
	// time (nil: time.Now). Tests set them.
	CPUSeconds func() float64
	Now        func() time.Time

	applied int64
	use     cpuUse
	probing context.CancelFunc
	// probed is the probe directive the running (or finished) probe follows.
	probed *contract.ProbeDirective
}

// Watcher is a Channel that can tell, sooner than the report interval, that the
// directive may have changed (PodChannel watches its pod).
type Watcher interface {
	// Watch returns a channel that receives after each change it sees, until ctx ends.
	Watch(ctx context.Context) <-chan struct{}
}

// Prepare applies the directive as it stands; call it before serving stripes. A
// stripe's session dials its streams with the parameters of its first configuration,
// and one that joins before the directive is applied (the coordinator listens at
// once, its senders are already retrying) dials them with the parameters before it,
// then redials them with the directive's buffer (a buffer change needs new
// connections). Run applies the directive itself otherwise.
func (r *Runner) Prepare(ctx context.Context) { r.directive(ctx) }

// Run returns when the job is Complete or Failed (after the grace period), or ctx ends.
func (r *Runner) Run(ctx context.Context) contract.Phase {
	c := r.Core
	if r.Interval <= 0 {
		r.Interval = 2 * time.Second
	}
	t := time.NewTicker(r.Interval)
	defer t.Stop()
	// the size classes' scheduler moves channels once a period (channels.go)
	realloc := time.NewTicker(optimizer.ReallocationPeriod)
	defer realloc.Stop()
	var watch <-chan struct{}
	if w, ok := r.Channel.(Watcher); ok {
		watch = w.Watch(ctx)
	}
	last := contract.Phase("")
	var lastKey reportKey
	publish := func() contract.Phase {
		lastKey = c.reportKey()
		rep := c.Report()
		rep.CoordinatorMillicores = r.millicores()
		if err := r.Channel.Publish(ctx, rep); err != nil {
			c.log.Warn("Could not publish the report", "err", err.Error())
		}
		last = rep.Phase
		return rep.Phase
	}
	r.directive(ctx)
	if !r.Started.IsZero() {
		r.use = cpuUse{at: r.Started, seconds: r.StartedCPUSeconds}
	}
	publish()
	// the coordinator's first CPU figure goes out as soon as its window ends, not at the
	// next report interval: until the controller hears it, the pod asks what the
	// manager's default says (5 millicores), and a small-file job's coordinator uses
	// 100 and more from its listing on
	firstCPU := time.NewTimer(max(r.use.at.Add(cpuWindow).Sub(r.now()), 0))
	defer firstCPU.Stop()
	for {
		// The channel is taken before the state is compared with the last report. A
		// change made while a report was being published (the probe's last sample
		// published, then Probed while the patch was on its way) closed the channel
		// taken before it, and the loop then waited on a new one until the next report
		// interval: on the local cluster the plan's directive came 1.7 and 2.1 s after
		// the probe ended, where it comes 0.2 s after when the change is heard.
		ch := c.Changed()
		if c.reportKey() != lastKey {
			// a change the controller acts on is published at once: it should not
			// wait for the next report interval to hear of it
			publish()
		} else {
			select {
			case <-ctx.Done():
				return last
			case <-firstCPU.C:
				publish()
			case <-t.C:
				r.directive(ctx)
				publish()
			case now := <-realloc.C:
				c.Rebalance(now)
			case <-watch:
				r.directive(ctx)
			case <-ch:
			}
		}
		if last.Finished() {
			g := time.NewTimer(r.Grace)
			defer g.Stop()
			for {
				ch := c.Changed() // before the count: a stripe that leaves after it closes ch
				c.mu.Lock()
				n := len(c.members)
				c.mu.Unlock()
				if n == 0 {
					return last
				}
				select {
				case <-g.C:
					// The job is done and verified; a stripe still here has not
					// heard so or is stuck ending its session. Say which, so that
					// a late exit can be traced; the caller stops them.
					c.log.Warn("Stripes still connected after the grace that follows the job's end; stopping them",
						"stripes", c.memberStripes(), "grace", r.Grace.String(), "phase", last)
					return last
				case <-ctx.Done():
					return last
				case <-ch:
				}
			}
		}
	}
}

// ProcessStart is about when this process started (its packages' initialisation).
var ProcessStart = time.Now()

// ProcessStartCPUSeconds is the process's CPU time at ProcessStart. It is not zero when
// the process ran before this program: a warm agent (`dtnflow-agent standby`) execs its
// role in the same process, and the CPU it spent waiting for its claim stays in the
// process's rusage across the exec.
var ProcessStartCPUSeconds = metrics.CPUSeconds()

// millicores is the process's CPU over its latest window of at least cpuWindow.
func (r *Runner) millicores() int64 {
	cpu := metrics.CPUSeconds
	if r.CPUSeconds != nil {
		cpu = r.CPUSeconds
	}
	return r.use.read(r.now(), cpu())
}

func (r *Runner) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// cpuWindow is the shortest window the coordinator's CPU is measured over: reports
// also go out at once on a change, and a rate over milliseconds is noise.
const cpuWindow = time.Second

// cpuUse measures a process's CPU in millicores over windows of at least cpuWindow,
// keeping the last window's figure between them.
type cpuUse struct {
	at         time.Time
	seconds    float64
	millicores int64
}

func (u *cpuUse) read(now time.Time, seconds float64) int64 {
	switch dt := now.Sub(u.at); {
	case u.at.IsZero():
		u.at, u.seconds = now, seconds
	case dt >= cpuWindow:
		u.millicores = max(int64(math.Round((seconds-u.seconds)/dt.Seconds()*1000)), 0)
		u.at, u.seconds = now, seconds
	}
	return u.millicores
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
	onData := d.Mode == contract.ModeTransfer && d.Probe != nil && r.Probe != nil
	if r.probing != nil && (d.Mode == contract.ModeProbe || !onData || !sameProbe(r.probed, d.Probe)) {
		r.probing()
		r.probing, r.probed = nil, nil
	}
	if !onData {
		r.Core.SetProbe("")
	}
	switch d.Mode {
	case contract.ModeTransfer:
		if onData && r.probed != nil {
			// the same probe goes on: its sample's streams and buffer stand until it
			// ends, the rest of the directive applies
			cur := r.Core.Params()
			p := ParamsFromDirective(*d, cur)
			p.Streams, p.BufferBytes, p.SampleStripes = cur.Streams, cur.BufferBytes, cur.SampleStripes
			r.Core.SetParams(p)
			r.Core.SetGeneration(d.Generation)
			break
		}
		p := ParamsFromDirective(*d, r.Core.Params())
		if onData {
			p.BufferBytes = r.firstBuffer(*d.Probe, p.BufferBytes)
		}
		r.Core.SetParams(p)
		r.Core.SetPhase(contract.PhaseTransferring)
		if onData {
			pctx, cancel := context.WithCancel(ctx)
			r.probing, r.probed = cancel, d.Probe
			r.Core.SetProbe(contract.PhaseProbing)
			go r.runProbeOnData(pctx, *d.Probe)
		}
		r.Core.SetGeneration(d.Generation)
	case contract.ModePause:
		r.Core.SetPhase(contract.PhasePaused)
		r.Core.SetGeneration(d.Generation)
	case contract.ModeProbe:
		r.Core.SetGeneration(d.Generation)
		if d.Probe == nil || r.Probe == nil {
			r.Core.log.Warn("Probe directive without a probe planner or parameters")
			return
		}
		pctx, cancel := context.WithCancel(ctx)
		r.probing = cancel // r.probed stays nil: it names probes on the job's data
		r.Core.SetPhase(contract.PhaseProbing)
		go r.runProbe(pctx, *d.Probe)
	}
	r.Core.log.Info("Applied a directive", "generation", d.Generation, "mode", d.Mode, "streams", d.StreamsPerStripe, "bufferBytes", d.BufferBytes)
}

// firstBuffer is the buffer a probing job's stripes connect with: the first sample's,
// as the probe planner would choose it if both ends had this host's socket limits, so
// that the first sample usually keeps the streams the stripe dialled when its session
// began. A buffer change redials them (the window scale is set at connect): on a long
// path a handshake and a second slow start before the sample can begin. Where the
// limits the stripe reports differ, the first sample redials, as it always did;
// without the host's limits, or where the first sample's buffer does not hinge on
// them, fallback stands.
func (r *Runner) firstBuffer(d contract.ProbeDirective, fallback int64) int64 {
	if r.LocalLimits == nil || !hingesOnLimits(d) || len(r.Core.Samples()) > 0 {
		return fallback
	}
	d.BufferBytes = wire.UsefulBuffers(d.BufferBytes, *r.LocalLimits, r.LocalLimits)
	first, done := r.Probe(d, nil, r.Core.Dataset())
	if done {
		return fallback
	}
	return first.BufferBytes
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
	// a directive's stripes are pods: the probe's helpers leave, unless the plan keeps
	// them to the job's end
	p.SampleStripes = 0
	if d.HelperStripes > 0 {
		p.SampleStripes = d.HelperStripes + 1
	}
	if len(d.SizeClasses) > 0 {
		p.SizeClasses, p.Scheduler = d.SizeClasses, d.Scheduler
		p.Concurrency, p.Pipelining = 0, 0
		for _, sc := range d.SizeClasses {
			p.Concurrency = max(p.Concurrency, sc.Concurrency, sc.Channels)
			p.Pipelining = max(p.Pipelining, sc.Pipelining)
		}
		// MC and ProMC run every class's channels at once: the stripe needs a worker
		// for each (a channel moved between classes keeps its worker)
		p.Concurrency = max(p.Concurrency, workersFor(p))
	}
	return p
}

// RunProbe takes the samples a probe directive asks for with the lowest stripe and
// records them; the phase becomes Probed.
func (r *Runner) runProbe(ctx context.Context, d contract.ProbeDirective) {
	c := r.Core
	var limits probeLimits
	for ctx.Err() == nil {
		ch := c.Changed() // before the look: a stripe that joins after it closes ch
		m := c.ProbeMember()
		if m == nil {
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return
			}
		}
		limits.learnFromStats(c, m)
		next, done := r.Probe(limits.useful(c, d), withKnown(d, c.Samples()), c.Dataset())
		if done {
			c.SetPhase(contract.PhaseProbed)
			return
		}
		res, err := m.Probe(ctx, next)
		if errors.Is(err, errStripeLeft) {
			continue // the next stripe to join takes the sample
		}
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
		limits.learn(res)
		c.AddSample(res.Sample)
		c.log.Info("Probe sample", "streams", res.Sample.Streams, "bufferBytes", res.Sample.BufferBytes, "rate", HumanRate(res.Sample.BitsPerSecond),
			"seconds", math.Round(res.Seconds*100)/100, "settled", res.Settled, "rttMicros", res.Sample.RTTMicros,
			"sourceMillicores", res.Sample.SourceMillicores, "destinationMillicores", res.Sample.DestinationMillicores)
	}
}

// probeLimits are the socket buffer limits the probe stripe reported with its latest
// sample: the sender's host's and its receiver's.
type probeLimits struct {
	source, destination *wire.SocketLimits
	logged              bool
}

func (l *probeLimits) learn(res wire.ProbeResult) {
	if res.SourceLimits != nil {
		l.source, l.destination = res.SourceLimits, res.DestinationLimits
	}
}

// learnFromStats takes the limits from the probe stripe's stats, which its sender
// sends from the session's first moment: known before the first sample, they decide
// whether autotuning is sampled at all (wire.UsefulBuffers). It says whether the
// stripe has reported (an older sender reports no limits: the probe goes on without).
func (l *probeLimits) learnFromStats(c *Core, m *Member) bool {
	st, ok := c.StripeStats(m.stripe)
	if ok && l.source == nil && st.SourceLimits != nil {
		l.source, l.destination = st.SourceLimits, st.DestinationLimits
	}
	return ok
}

// hingesOnLimits says whether the buffer sizes d samples depend on the hosts' limits:
// autotuning listed beside a fixed size (which may outgrow it, or be outgrown).
func hingesOnLimits(d contract.ProbeDirective) bool {
	return slices.Contains(d.BufferBytes, 0) && slices.ContainsFunc(d.BufferBytes, func(b int64) bool { return b > 0 })
}

// useful is d without the buffer sizes that would take the same effect as another, or
// that autotuning outgrows, at these hosts (wire.UsefulBuffers): the controller lists
// sizes around the BDP without knowing the nodes' kernel limits, and a size sampled
// for nothing costs a sample's length at a rate already known, and autotuning is not
// sampled where a fixed size outgrows it. d itself until the stripe's stats or a sample
// have said the limits.
func (l *probeLimits) useful(c *Core, d contract.ProbeDirective) contract.ProbeDirective {
	if l.source == nil {
		return d
	}
	kept := wire.UsefulBuffers(d.BufferBytes, *l.source, l.destination)
	if len(kept) < len(d.BufferBytes) && !l.logged {
		l.logged = true
		c.log.Info("Buffer sizes that take no different effect on these hosts are not sampled", "asked", d.BufferBytes, "sampled", kept,
			"sndMax", l.source.SndMax, "sndAutotuneMax", l.source.SndAutotuneMax)
	}
	d.BufferBytes = kept
	return d
}

// sameProbe says whether two probe directives ask for the same probe.
func sameProbe(a, b *contract.ProbeDirective) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.MaxStreams == b.MaxStreams && a.SampleSeconds == b.SampleSeconds && a.MaxStripes == b.MaxStripes && a.MaxConcurrency == b.MaxConcurrency &&
		slices.Equal(a.BufferBytes, b.BufferBytes) && slices.Equal(a.Known, b.Known)
}

// withKnown is the samples a probe steps from: those the directive's PathProfile
// already holds (contract.ProbeDirective.Known), then the job's own.
func withKnown(d contract.ProbeDirective, own []contract.Sample) []contract.Sample {
	if len(d.Known) == 0 {
		return own
	}
	return append(slices.Clone(d.Known), own...)
}

// runProbeOnData takes the samples a Transfer directive's probe asks for as stretches
// of the job's own transfer on the lowest stripe: for each, the job's streams and
// buffer become the sample's (every stripe applies them without restarting) and the
// stripe measures what its receiver acknowledged once it runs with them. The probe is
// Probed when the planner has what it needs; the parameters of the last sample stand
// until the controller's plan replaces them.
func (r *Runner) runProbeOnData(ctx context.Context, d contract.ProbeDirective) {
	c := r.Core
	var limits probeLimits
	for ctx.Err() == nil {
		if p := c.Phase(); p.Finished() {
			return
		}
		ch := c.Changed()
		m := c.ProbeMember()
		if m == nil {
			select {
			case <-ch:
				continue
			case <-ctx.Done():
				return
			}
		}
		samples := c.Samples()
		if reported := limits.learnFromStats(c, m); !reported && len(samples) == 0 && hingesOnLimits(d) {
			// The first sample's buffer depends on the hosts' limits, which the stripe
			// reports once its session with the receiver is up — before that no byte
			// moves, so waiting for them costs nothing.
			select {
			case <-ch:
			case <-ctx.Done():
			}
			continue
		}
		all := withKnown(d, samples)
		next, done := r.Probe(limits.useful(c, d), all, c.Dataset())
		if !done && len(all) > 0 && ProbeOutlasts(c.Remaining(), bestRate(all), contract.LeastRTT(all), time.Duration(d.SampleSeconds)*time.Second) {
			c.log.Info("Probing stops: the dataset left ends before more samples could pay", "remainingBytes", c.Remaining(), "samples", len(samples), "known", len(d.Known))
			done = true
		}
		if done {
			c.SetProbe(contract.PhaseProbed)
			c.log.Info("Probed on the job's own data", "samples", len(samples), "known", len(d.Known))
			return
		}
		next.OnData, next.Settle = true, true
		next.Generation = c.SetSampleParams(next.Streams, next.BufferBytes, next.Stripes)
		res, err := m.Probe(ctx, next)
		if errors.Is(err, errStripeLeft) {
			continue
		}
		if err != nil {
			return
		}
		if res.Error != "" {
			c.log.Warn("A probe sample on the job's data failed", "streams", next.Streams, "err", res.Error)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		res.Sample.Stripes = max(res.Sample.Stripes, 1)
		limits.learn(res)
		if res.Sample.BitsPerSecond <= 0 {
			// Nothing was acknowledged while it ran: the job's data ran out under the
			// sample (a stripes sample begun as the last files left measured 0 on the
			// cluster's e2e), or the path stopped carrying anything for its length.
			// Either way it says nothing of the path's rate and is not recorded: the
			// probe ends when the data is gone, and takes the sample again otherwise.
			if c.Remaining() <= 0 {
				c.SetProbe(contract.PhaseProbed)
				c.log.Info("Probed on the job's own data: its data ran out under the last sample", "samples", len(samples))
				return
			}
			c.log.Warn("A probe sample on the job's data measured nothing; taking it again", "stripes", res.Sample.Stripes, "streams", res.Sample.Streams)
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
			}
			continue
		}
		c.AddSample(res.Sample)
		if len(samples) == 0 {
			c.ApplyEarlyClasses(float64(res.Sample.BitsPerSecond), time.Duration(res.Sample.RTTMicros)*time.Microsecond, int(d.MaxConcurrency))
		}
		c.log.Info("Probe sample on the job's data", "stripes", res.Sample.Stripes, "streams", res.Sample.Streams, "bufferBytes", res.Sample.BufferBytes,
			"rate", HumanRate(res.Sample.BitsPerSecond), "seconds", math.Round(res.Seconds*100)/100, "settled", res.Settled,
			"rttMicros", res.Sample.RTTMicros, "windowLimitedPercent", res.Sample.WindowLimitedPercent,
			"sourceMillicores", res.Sample.SourceMillicores, "destinationMillicores", res.Sample.DestinationMillicores)
	}
}
