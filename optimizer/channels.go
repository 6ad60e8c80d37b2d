package optimizer

import (
	"fmt"
	"math"
	"time"
)

// Scheduler names how channels (concurrent file transfers) are shared among chunks
// (Arslan & Kosar §3.2–3.4).
type Scheduler string

const (
	// SingleChunk transfers the chunks one after another, each with its own
	// Algorithm 1 concurrency (§3.2).
	SingleChunk Scheduler = "SC"
	// MultiChunk runs the chunks together and deals maxCC channels round-robin over
	// Huge, Small, Large, Medium (§3.3, Algorithm 2).
	MultiChunk Scheduler = "MC"
	// ProActiveMultiChunk deals maxCC channels in proportion to δ × chunk size with
	// δ = 6, 3, 2, 1 for Small, Medium, Large, Huge (§3.4, Algorithm 3).
	ProActiveMultiChunk Scheduler = "ProMC"
)

// ProMCWeight is δ of Algorithm 3 for each class.
var ProMCWeight = map[SizeClass]float64{Small: 6, Medium: 3, Large: 2, Huge: 1}

// mcOrder is Algorithm 2's round-robin order.
var mcOrder = []SizeClass{Huge, Small, Large, Medium}

// ReallocationPeriod is how often ProMC compares the chunks' completion times
// (§3.4: "by default, it is set to check every five seconds").
const ReallocationPeriod = 5 * time.Second

// AllocateChannels returns the channels of each chunk (same order as chunks) for a
// scheduler. total is the channel budget maxCC; like the authors' client it is first
// bounded by the number of files. params are each chunk's Algorithm 1 parameters and
// are only read by SingleChunk, which runs one chunk at a time with its own
// concurrency.
//
// ProMC follows Algorithm 3, ⌊wᵢ/W · maxCC⌋, then (as the client does) gives a channel
// to each chunk left with none while channels remain, and the rest one by one to the
// chunks with the fewest. Where that still leaves a chunk with none, a channel moves
// to it from the chunk with the most, provided that one keeps at least one: no chunk
// waits while another holds spare channels. Only with fewer channels than chunks do
// some chunks wait (they receive channels when others finish; see Reallocate).
func AllocateChannels(chunks []Chunk, params []ClassParams, total int, s Scheduler) []int {
	out := make([]int, len(chunks))
	if len(chunks) == 0 {
		return out
	}
	var files int64
	for _, c := range chunks {
		files += max(c.Files, 0)
	}
	total = int(min(int64(max(total, 0)), files))
	switch s {
	case SingleChunk:
		for i := range chunks {
			cc := 1
			if i < len(params) {
				cc = max(params[i].Concurrency, 1)
			}
			out[i] = cc
		}
		return out
	case MultiChunk:
		// round-robin over Huge, Small, Large, Medium; a chunk never gets more channels
		// than files (the client's check)
		given := 0
		for given < total {
			progressed := false
			for _, class := range mcOrder {
				for i, c := range chunks {
					if c.Class == class && given < total && int64(out[i]) < c.Files {
						out[i]++
						given++
						progressed = true
					}
				}
			}
			if !progressed {
				break
			}
		}
		return out
	}
	// ProActiveMultiChunk
	weights := make([]float64, len(chunks))
	var sumW float64
	for i, c := range chunks {
		w, ok := ProMCWeight[c.Class]
		if !ok {
			w = 1
		}
		weights[i] = w * float64(max(c.Bytes, 0))
		sumW += weights[i]
	}
	remaining := total
	for i := range chunks {
		share := 1 / float64(len(chunks))
		if sumW > 0 {
			share = weights[i] / sumW
		}
		out[i] = min(remaining, int(math.Floor(share*float64(total))))
		remaining -= out[i]
	}
	for i := range out {
		if out[i] == 0 && remaining > 0 {
			out[i]++
			remaining--
		}
	}
	for remaining > 0 {
		lowest := 0
		for i := range out {
			if out[i] < out[lowest] {
				lowest = i
			}
		}
		out[lowest]++
		remaining--
	}
	for i := range out {
		if out[i] > 0 {
			continue
		}
		most := 0
		for j := range out {
			if out[j] > out[most] {
				most = j
			}
		}
		if out[most] > 1 {
			out[most]--
			out[i]++
		}
	}
	return out
}

// ClassProgress is one chunk during a transfer.
type ClassProgress struct {
	Class          SizeClass
	RemainingBytes int64
	// BitsPerSecond is the chunk's throughput over the last period (all its channels).
	BitsPerSecond float64
	Channels      int
}

// ETA is the chunk's estimated completion time: remaining data over its throughput
// (§3.3). It is 0 for a finished chunk and +Inf for a chunk that is not moving.
func (p ClassProgress) ETA() time.Duration {
	if p.RemainingBytes <= 0 {
		return 0
	}
	if !(p.BitsPerSecond > 0) || math.IsInf(p.BitsPerSecond, 0) {
		return time.Duration(math.MaxInt64)
	}
	s := float64(p.RemainingBytes) * 8 / p.BitsPerSecond
	if s >= math.MaxInt64/float64(time.Second) {
		return time.Duration(math.MaxInt64)
	}
	return time.Duration(s * float64(time.Second))
}

// ReallocState is what online re-allocation remembers between periods.
type ReallocState struct {
	// Slow and Fast are the pair compared last period and Streak the number of
	// consecutive periods the slow one was at least twice as slow.
	Slow, Fast SizeClass
	Streak     int
}

// ChannelMove moves channels from one chunk to another.
type ChannelMove struct {
	From, To SizeClass
	Channels int
	Reason   string
}

// Reallocation thresholds of §3.4.
const (
	// ReallocationPeriods is how many consecutive periods the imbalance must last.
	ReallocationPeriods = 3
	// ReallocationRatio is how much slower the slow chunk must be.
	ReallocationRatio = 2.0
)

// ChooseScheduler picks SC, MC or ProMC for a dataset's chunks as Arslan & Kosar's
// evaluation reads (§4.1–4.2), with the reason for people:
//
//   - One chunk: SingleChunk. With nothing to co-schedule the schedulers differ only in
//     how the one chunk is sized, and SC gives it its own Algorithm 1 parameters (§3.2).
//   - Several chunks, small files dominating (the Small and Medium chunks hold at least
//     half of the bytes): ProActiveMultiChunk. "As the small files dominate the dataset,
//     channel allocation policy becomes more important … ProMC still can achieve up to
//     10% higher throughput than MC for small file dominated dataset" (§4.2, Figure 12).
//   - Several chunks otherwise: MultiChunk. MC and ProMC "perform similar" there
//     (Figures 10–11), and MC's round robin gives the few small files the same share
//     as the large ones without the δ weights' guess.
//
// The paper does not define "dominate"; half of the bytes is our reading (its
// small-dominated dataset is its mixed one with the small files' sizes doubled).
func ChooseScheduler(chunks []Chunk) (Scheduler, string) {
	if len(chunks) <= 1 {
		return SingleChunk, "one size class: it runs alone with its Algorithm 1 parameters (Arslan & Kosar §3.2)"
	}
	var small, all int64
	for _, c := range chunks {
		all += max(c.Bytes, 0)
		if c.Class == Small || c.Class == Medium {
			small += max(c.Bytes, 0)
		}
	}
	if all > 0 && 2*small >= all {
		return ProActiveMultiChunk, fmt.Sprintf("%d size classes, small and medium files %.0f %% of the bytes: ProMC weighs channels towards them and moves them online (§3.4, §4.2)",
			len(chunks), 100*float64(small)/float64(all))
	}
	return MultiChunk, fmt.Sprintf("%d size classes, large files %.0f %% of the bytes: MC shares channels round robin and hands a finished class's channels on (§3.3)",
		len(chunks), 100*float64(all-small)/float64(max(all, 1)))
}

// Rebalance is the online part of a scheduler, called once per ReallocationPeriod with
// every chunk's progress: MultiChunk hands a finished chunk's channels to the chunk
// with the largest ETA (§3.3); ProActiveMultiChunk also moves a channel from a fast
// chunk to a slow one (§3.4, Reallocate); SingleChunk runs one chunk at a time with
// its own concurrency and moves nothing.
func Rebalance(s Scheduler, state ReallocState, progress []ClassProgress) ([]ChannelMove, ReallocState) {
	switch s {
	case SingleChunk:
		return nil, ReallocState{}
	case MultiChunk:
		return handOverFinished(progress), ReallocState{}
	}
	return Reallocate(state, progress)
}

// handOverFinished gives each finished chunk's channels to the unfinished chunk with
// the largest ETA, counting the channels already handed on this period.
func handOverFinished(progress []ClassProgress) []ChannelMove {
	var moves []ChannelMove
	channels := make([]int, len(progress))
	for i, p := range progress {
		channels[i] = max(p.Channels, 0)
	}
	slowest := func() int {
		idx := -1
		for i, p := range progress {
			if p.RemainingBytes <= 0 {
				continue
			}
			if idx < 0 || p.ETA() > progress[idx].ETA() {
				idx = i
			}
		}
		return idx
	}
	for i, p := range progress {
		if p.RemainingBytes > 0 || channels[i] == 0 {
			continue
		}
		to := slowest()
		if to < 0 {
			break // everything is finished
		}
		moves = append(moves, ChannelMove{From: p.Class, To: progress[to].Class, Channels: channels[i],
			Reason: fmt.Sprintf("%s finished; its channels go to %s, the chunk with the largest ETA", p.Class, progress[to].Class)})
		channels[to] += channels[i]
		channels[i] = 0
	}
	return moves
}

// Reallocate is ProMC's online channel re-allocation (Arslan & Kosar §3.3–3.4), called
// once per period (ReallocationPeriod) with every chunk's progress:
//
//   - A finished chunk's channels go to the unfinished chunk with the largest ETA
//     ("the channels of the finished chunk are given to a chunk whose estimated
//     completion time is the largest").
//   - Otherwise, if the slowest chunk's ETA is at least twice the fastest's for three
//     consecutive periods (the same pair each time), one channel moves from the fast
//     chunk to the slow one. A chunk keeps at least one channel while it has data.
//
// It returns the moves and the state for the next period; progress is not modified.
func Reallocate(state ReallocState, progress []ClassProgress) ([]ChannelMove, ReallocState) {
	if moves := handOverFinished(progress); len(moves) > 0 {
		return moves, ReallocState{}
	}
	slowest := func() int {
		idx := -1
		for i, p := range progress {
			if p.RemainingBytes <= 0 {
				continue
			}
			if idx < 0 || p.ETA() > progress[idx].ETA() {
				idx = i
			}
		}
		return idx
	}
	channels := make([]int, len(progress))
	for i, p := range progress {
		channels[i] = max(p.Channels, 0)
	}
	slow := slowest()
	fast := -1
	for i, p := range progress {
		if p.RemainingBytes <= 0 || channels[i] < 2 || i == slow {
			continue
		}
		if fast < 0 || p.ETA() < progress[fast].ETA() {
			fast = i
		}
	}
	if slow < 0 || fast < 0 {
		return nil, ReallocState{}
	}
	es, ef := progress[slow].ETA(), progress[fast].ETA()
	if ef == time.Duration(math.MaxInt64) || float64(es) < ReallocationRatio*float64(ef) {
		return nil, ReallocState{}
	}
	next := ReallocState{Slow: progress[slow].Class, Fast: progress[fast].Class, Streak: 1}
	if state.Slow == next.Slow && state.Fast == next.Fast {
		next.Streak = state.Streak + 1
	}
	if next.Streak < ReallocationPeriods {
		return nil, next
	}
	return []ChannelMove{{From: next.Fast, To: next.Slow, Channels: 1,
		Reason: fmt.Sprintf("%s's ETA has been at least %g× %s's for %d periods", next.Slow, ReallocationRatio, next.Fast, ReallocationPeriods)}}, ReallocState{}
}
