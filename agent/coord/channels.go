package coord

import (
	"fmt"
	"slices"
	"sort"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/wire"
	"github.com/dtnflow/dtnflow/optimizer"
)

// channels is how the size classes share each stripe's channels while the job runs:
// Arslan & Kosar's SC, MC or ProMC at run time. A channel is one file of the class in
// flight at once per stripe; with the class's pipelining, a stripe may hold channels ×
// pipelining units of the class (the lease cap of Core.request). Every
// ReallocationPeriod the coordinator measures each class (what it has left, what it
// moved over the last periods) and asks optimizer.Rebalance which channels move; the
// moves change the lease caps of every stripe at once, counted in the agent's metrics
// (dtnflow_agent_channel_moves_total, dtnflow_agent_class_channels) and the report.
type channels struct {
	sched optimizer.Scheduler
	// planned is the directive's classes the state was set from: a directive with the
	// same classes (a rescale, a resent directive) keeps the moves made since.
	planned []contract.SizeClassParam
	// order is the classes from large to small, the order SC runs them in (the order
	// the coordinator lists units: the long tails start first).
	order    []string
	byClass  map[string]*classRun
	state    optimizer.ReallocState
	lastTick time.Time
}

// classRun is one class at run time.
type classRun struct {
	class       string
	channels    int
	pipelining  int
	concurrency int
	// marks are the class's bytes done at each of the last periods (oldest first), for
	// its rate over a window of ReallocationPeriods periods.
	marks []classMark
}

type classMark struct {
	at   time.Time
	done int64
}

// static is no scheduler: every class at once, each up to its own concurrency ×
// pipelining per stripe, nothing moved (Fixed mode's classes).
const static optimizer.Scheduler = ""

// schedulerFor reads a directive's scheduler: the named one, else ProMC when the
// classes carry channels (an older controller's directive, whose plans were ProMC's)
// and static when they do not.
func schedulerFor(p Params) optimizer.Scheduler {
	switch s := optimizer.Scheduler(p.Scheduler); s {
	case optimizer.SingleChunk, optimizer.MultiChunk, optimizer.ProActiveMultiChunk:
		return s
	}
	for _, sc := range p.SizeClasses {
		if sc.Channels > 0 {
			return optimizer.ProActiveMultiChunk
		}
	}
	return static
}

// setChannelsLocked sets the classes' channels from new parameters, keeping the moves
// made so far when the classes are the plan's they were set from.
func (c *Core) setChannelsLocked(p Params) {
	if len(p.SizeClasses) == 0 {
		c.ch = nil
		return
	}
	sched := schedulerFor(p)
	if c.ch != nil && c.ch.sched == sched && slices.Equal(c.ch.planned, p.SizeClasses) {
		return
	}
	ch := &channels{sched: sched, planned: slices.Clone(p.SizeClasses), byClass: map[string]*classRun{}}
	for _, sc := range p.SizeClasses {
		// A channel keeps its next unit leased while the one in hand finishes
		// (pipelining at least 2): a unit is done only once its receiver confirmed it
		// durable (and verified), a round trip and a read-back after its last byte
		// left, and a channel of Algorithm 1's pipelining 1 (large files: BDP/avg < 1)
		// would wait that long idle before each chunk or file.
		r := &classRun{class: sc.Class, channels: int(sc.Channels), pipelining: int(max(sc.Pipelining, 2)), concurrency: int(max(sc.Concurrency, 1))}
		if sched == optimizer.SingleChunk || sched == static {
			r.channels = r.concurrency
		}
		ch.byClass[sc.Class] = r
		ch.order = append(ch.order, sc.Class)
		metrics.ClassChannels.WithLabelValues(sc.Class).Set(float64(r.channels))
	}
	slices.Reverse(ch.order) // the API lists them small to large
	c.ch = ch
}

// workersFor is the concurrency a stripe runs with under the scheduler: every class's
// channels at once for MC and ProMC (maxCC), the largest class concurrency for SC.
func workersFor(p Params) int32 {
	if s := schedulerFor(p); len(p.SizeClasses) == 0 || s == optimizer.SingleChunk || s == static {
		return 0
	}
	var sum int32
	for _, sc := range p.SizeClasses {
		sum += max(sc.Channels, 0)
	}
	return sum
}

// leaseLimitsLocked is how many units of each class one stripe may hold now; a class
// absent from the map is not limited. SC leases only the first class, from large to
// small, with units left to hand out (the next starts once the one before has handed
// everything out). MC and ProMC lease every class up to its channels × pipelining; a
// class with units to hand out keeps at least one channel, so that units given back
// by a stripe that left never wait on a class whose channels were handed on.
func (c *Core) leaseLimitsLocked() map[string]int {
	if c.ch == nil {
		return nil
	}
	limit := map[string]int{}
	if c.ch.sched == optimizer.SingleChunk {
		current := ""
		for _, class := range c.ch.order {
			if c.pendingByClass[class] > 0 {
				current = class
				break
			}
		}
		for class, r := range c.ch.byClass {
			limit[class] = 0
			if class == current {
				limit[class] = r.concurrency * r.pipelining
			}
		}
		return limit
	}
	for class, r := range c.ch.byClass {
		n := r.channels
		if c.pendingByClass[class] > 0 {
			n = max(n, 1)
		}
		limit[class] = n * r.pipelining
	}
	return limit
}

// moving says whether the scheduler moves channels at run time.
func (ch *channels) moving() bool {
	return ch.sched == optimizer.MultiChunk || ch.sched == optimizer.ProActiveMultiChunk
}

func unitBytes(u wire.Unit) int64 {
	switch u.Kind {
	case wire.UnitFile:
		return u.Size
	case wire.UnitChunk:
		return u.Length
	}
	return 0
}

// classProgressLocked measures every class now: what it has not handed out (which
// decides the moves: data already in flight finishes on the channels it has), what it
// has not finished (for the report) and its rate over the window of marks.
func (c *Core) classProgressLocked(now time.Time) (progress []optimizer.ClassProgress, left map[string]int64) {
	unhanded := map[string]int64{}
	left = map[string]int64{}
	for _, u := range c.units {
		if u.done {
			continue
		}
		b := unitBytes(u.u)
		left[u.u.Class] += b
		if u.leased == nil {
			// a unit of no bytes (a finalize) still keeps its class running
			unhanded[u.u.Class] += max(b, 1)
		}
	}
	for _, class := range c.ch.order {
		r := c.ch.byClass[class]
		done := c.classDone[class]
		var bps float64
		if n := len(r.marks); n > 0 {
			// units complete whole (a chunk is 64 MiB): a window shorter than a
			// period would read one unit's bytes as a burst of rate
			first := r.marks[0]
			if dt := now.Sub(first.at); dt >= optimizer.ReallocationPeriod/2 {
				bps = float64(done-first.done) * 8 / dt.Seconds()
			}
		}
		progress = append(progress, optimizer.ClassProgress{Class: optimizer.SizeClass(class), RemainingBytes: unhanded[class], BitsPerSecond: bps, Channels: r.channels})
	}
	return progress, left
}

// Rebalance runs the scheduler's online step (optimizer.Rebalance) once: it is called
// every ReallocationPeriod while the job transfers. It returns the moves made.
func (c *Core) Rebalance(now time.Time) []contract.ChannelMove {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ch == nil || !c.ch.moving() || c.opts.NoChannelMoves || !c.built || c.phase != contract.PhaseTransferring {
		return nil
	}
	progress, _ := c.classProgressLocked(now)
	var moves []optimizer.ChannelMove
	if len(c.ch.byClass[c.ch.order[0]].marks) > 0 || c.ch.sched == optimizer.MultiChunk {
		// the first period has no rate yet: only hand-overs, which need none
		moves, c.ch.state = optimizer.Rebalance(c.ch.sched, c.ch.state, progress)
	}
	for _, class := range c.ch.order {
		r := c.ch.byClass[class]
		r.marks = append(r.marks, classMark{at: now, done: c.classDone[class]})
		if len(r.marks) > optimizer.ReallocationPeriods+1 {
			r.marks = r.marks[1:]
		}
	}
	c.ch.lastTick = now
	var out []contract.ChannelMove
	for _, m := range moves {
		from, to := c.ch.byClass[string(m.From)], c.ch.byClass[string(m.To)]
		if from == nil || to == nil || min(m.Channels, from.channels) <= 0 {
			continue
		}
		n := min(m.Channels, from.channels)
		from.channels -= n
		to.channels += n
		cm := contract.ChannelMove{Time: now.UTC(), From: from.class, To: to.class, Channels: int32(n), Reason: m.Reason}
		out = append(out, cm)
		c.moves++
		c.recentMoves = append(c.recentMoves, cm)
		if len(c.recentMoves) > contract.MaxRecentMoves {
			c.recentMoves = c.recentMoves[len(c.recentMoves)-contract.MaxRecentMoves:]
		}
		metrics.ChannelMovesTotal.WithLabelValues(from.class, to.class).Add(float64(n))
		metrics.ClassChannels.WithLabelValues(from.class).Set(float64(from.channels))
		metrics.ClassChannels.WithLabelValues(to.class).Set(float64(to.channels))
		c.log.Info("Moved channels between size classes", "scheduler", c.ch.sched, "from", from.class, "to", to.class, "channels", n,
			"fromChannels", from.channels, "toChannels", to.channels, "reason", m.Reason)
	}
	if len(out) > 0 {
		c.signalLocked()
	}
	return out
}

// classReportLocked is the classes for the report, small to large.
func (c *Core) classReportLocked(now time.Time) []contract.ClassReport {
	if c.ch == nil {
		return nil
	}
	progress, left := c.classProgressLocked(now)
	out := make([]contract.ClassReport, 0, len(progress))
	for _, p := range progress {
		r := c.ch.byClass[string(p.Class)]
		n := r.channels
		if c.ch.sched == optimizer.SingleChunk {
			n = 0
			if lim := c.leaseLimitsLocked(); lim[r.class] > 0 {
				n = r.concurrency
			}
		}
		out = append(out, contract.ClassReport{Class: r.class, Channels: int32(n), RemainingBytes: left[r.class], BitsPerSecond: int64(p.BitsPerSecond)})
	}
	sort.SliceStable(out, func(i, j int) bool { return classRank(out[i].Class) < classRank(out[j].Class) })
	return out
}

func classRank(class string) int {
	for i, s := range optimizer.SizeClasses {
		if string(s) == class {
			return i
		}
	}
	return len(optimizer.SizeClasses)
}

// String names the scheduler and the channels of each class, for logs.
func (ch *channels) String() string {
	s := string(ch.sched)
	for _, class := range ch.order {
		s += fmt.Sprintf(" %s=%d", class, ch.byClass[class].channels)
	}
	return s
}

// ApplyEarlyClasses gives a dataset of small files (SmallFiles) its size classes as soon
// as the first probe sample has measured the path's rate and RTT, instead of when the
// plan comes: Algorithm 1's pipelining and concurrency for each class and the scheduler
// the dataset calls for (optimizer.PlanChunks at that rate, maxCC channels), with no
// bound on parallelism (the stream samples set the streams). For small files the
// requests in flight are what fills the path (the coordinator's defaults keep 4 × 16),
// so the samples that follow, and the data they move, run as the plan will. A job
// that has classes already, or whose files are not small, keeps what it has. It
// reports whether it applied classes.
func (c *Core) ApplyEarlyClasses(bitsPerSecond float64, rtt time.Duration, maxCC int) bool {
	ds := c.Dataset()
	if !SmallFiles(ds, bitsPerSecond, rtt) {
		return false
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.params.SizeClasses) > 0 {
		return false
	}
	h := histogramOf(ds)
	bdp := optimizer.StripeBDP(bitsPerSecond, rtt, c.params.BufferBytes)
	sched, _ := optimizer.ChooseScheduler(optimizer.Partition(h, bitsPerSecond, bdp))
	if maxCC <= 0 {
		maxCC = optimizer.DefaultMaxConcurrency
	}
	p := c.params
	p.SizeClasses, p.Scheduler = nil, string(sched)
	for _, ch := range optimizer.PlanChunks(h, bitsPerSecond, bdp, p.BufferBytes, 0, maxCC, sched) {
		p.SizeClasses = append(p.SizeClasses, contract.SizeClassParam{Class: string(ch.Class), MaxBytes: ch.MaxBytes, Pipelining: int32(ch.Params.Pipelining),
			Concurrency: int32(ch.Params.Concurrency), Channels: int32(ch.Channels)})
	}
	p.Concurrency, p.Pipelining = 0, 0
	for _, sc := range p.SizeClasses {
		p.Concurrency = max(p.Concurrency, sc.Concurrency, sc.Channels)
		p.Pipelining = max(p.Pipelining, sc.Pipelining)
	}
	p.Concurrency = max(p.Concurrency, workersFor(p))
	c.setParamsLocked(p)
	c.signalLocked()
	c.log.Info("Small files: size classes from the first sample", "scheduler", sched, "classes", c.ch.String())
	return true
}
