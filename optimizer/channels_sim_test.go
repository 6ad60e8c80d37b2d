package optimizer

import (
	"bytes"
	"fmt"
	"path/filepath"
	"testing"
	"time"
)

// simClass is one size class of a simulated transfer: its bytes, and what one of its
// channels moves per second on its own (small files pay a round trip and a file open per
// file, so a channel of small files moves less than one of large ones).
type simClass struct {
	class      SizeClass
	files      int64
	bytes      int64
	perChannel float64 // bits per second one channel moves, the path permitting
}

// simTransfer runs the size classes of a dataset over a path of capacity bits per
// second under a scheduler, with Rebalance called every ReallocationPeriod (moves true)
// or never (the plan's channels kept), as the coordinator runs them: each class's rate
// is channels × its per-channel rate, all scaled down together when they would exceed
// the path; the rate Rebalance sees is what the class moved over the last period. It
// checks the invariants every period and returns the time the last class finished and a
// log of the moves and of each class's end.
func simTransfer(t *testing.T, classes []simClass, capacity float64, maxCC int, s Scheduler, moves bool) (time.Duration, string) {
	t.Helper()
	const dt = 100 * time.Millisecond
	chunks := make([]Chunk, len(classes))
	for i, c := range classes {
		chunks[i] = Chunk{Class: c.class, Files: c.files, Bytes: c.bytes}
	}
	channels := AllocateChannels(chunks, nil, maxCC, s)
	total := 0
	for _, n := range channels {
		total += n
	}
	left := make([]float64, len(classes)) // bits
	lastLeft := make([]float64, len(classes))
	done := make([]time.Duration, len(classes))
	for i, c := range classes {
		left[i] = float64(c.bytes) * 8
		lastLeft[i] = left[i]
	}
	var log bytes.Buffer
	fmt.Fprintf(&log, "%s, moves %v: channels %v of %d\n", s, moves, channels, total)
	var st ReallocState
	var now time.Duration
	for step := 1; ; step++ {
		now = time.Duration(step) * dt
		var demand float64
		for i, c := range classes {
			if left[i] > 0 {
				demand += float64(channels[i]) * c.perChannel
			}
		}
		scale := 1.0
		if demand > capacity {
			scale = capacity / demand
		}
		finished := true
		for i, c := range classes {
			if left[i] <= 0 {
				continue
			}
			left[i] -= float64(channels[i]) * c.perChannel * scale * dt.Seconds()
			if left[i] <= 0 {
				left[i], done[i] = 0, now
				fmt.Fprintf(&log, "%6.1fs %s done\n", now.Seconds(), c.class)
			}
			finished = finished && left[i] <= 0
		}
		if finished {
			break
		}
		if now > 2*time.Hour {
			t.Fatalf("%s: not finished after 2 h: %v bits left, channels %v", s, left, channels)
		}
		if !moves || now%ReallocationPeriod != 0 {
			continue
		}
		progress := make([]ClassProgress, len(classes))
		for i, c := range classes {
			progress[i] = ClassProgress{Class: c.class, RemainingBytes: int64(left[i] / 8), Channels: channels[i],
				BitsPerSecond: (lastLeft[i] - left[i]) / ReallocationPeriod.Seconds()}
			lastLeft[i] = left[i]
		}
		var ms []ChannelMove
		ms, st = Rebalance(s, st, progress)
		for _, m := range ms {
			from, to := classIndex(classes, m.From), classIndex(classes, m.To)
			if from < 0 || to < 0 || from == to || m.Channels < 1 || m.Channels > channels[from] {
				t.Fatalf("%s at %v: move %+v with channels %v", s, now, m, channels)
			}
			if left[to] <= 0 {
				t.Fatalf("%s at %v: channels moved to %s, which has finished", s, now, m.To)
			}
			if s == ProActiveMultiChunk && left[from] > 0 && channels[from]-m.Channels < 1 {
				t.Fatalf("%s at %v: %s, with data left, gave its last channel", s, now, m.From)
			}
			channels[from] -= m.Channels
			channels[to] += m.Channels
			fmt.Fprintf(&log, "%6.1fs %d %s → %s: %v\n", now.Seconds(), m.Channels, m.From, m.To, channels)
		}
		sum := 0
		for _, n := range channels {
			if n < 0 {
				t.Fatalf("%s at %v: channels %v", s, now, channels)
			}
			sum += n
		}
		if sum != total {
			t.Fatalf("%s at %v: %d channels, the plan had %d", s, now, sum, total)
		}
	}
	fmt.Fprintf(&log, "complete in %.1fs\n", now.Seconds())
	return now, log.String()
}

func classIndex(classes []simClass, c SizeClass) int {
	for i, sc := range classes {
		if sc.class == c {
			return i
		}
	}
	return -1
}

// TestChannelSchedulerSimulation runs MC and ProMC over two simulated mixed datasets
// on a 1 Gbit/s path with maxCC 8, with and without their moves, checks the
// invariants each period (channels conserved, none negative, none moved to a finished
// class, ProMC's 2× rule never takes a class's last channel), compares the sequence of
// moves with a golden file, and asserts that the moves never make the transfer
// slower than keeping the plan's channels.
func TestChannelSchedulerSimulation(t *testing.T) {
	const capacity, maxCC = 1e9, 8
	datasets := map[string][]simClass{
		// bench-wan's smallmix: 20 000 × 64 KiB and 3 × 300 MiB
		"smallmix": {
			{class: Small, files: 20_000, bytes: 20_000 << 16, perChannel: 30e6},
			{class: Huge, files: 3, bytes: 3 * 300 << 20, perChannel: 400e6},
		},
		// a mixed dataset of every class, large files holding most bytes
		"mixed": {
			{class: Small, files: 3_000, bytes: 3_000 << 16, perChannel: 30e6},
			{class: Medium, files: 200, bytes: 200 << 21, perChannel: 100e6},
			{class: Large, files: 20, bytes: 20 << 26, perChannel: 250e6},
			{class: Huge, files: 2, bytes: 2 << 30, perChannel: 400e6},
		},
	}
	for name, classes := range datasets {
		for _, s := range []Scheduler{MultiChunk, ProActiveMultiChunk} {
			t.Run(fmt.Sprintf("%s-%s", name, s), func(t *testing.T) {
				static, staticLog := simTransfer(t, classes, capacity, maxCC, s, false)
				moved, movedLog := simTransfer(t, classes, capacity, maxCC, s, true)
				if moved > static {
					t.Errorf("with moves %v, without %v: the moves made it slower\n%s", moved, static, movedLog)
				}
				log := fmt.Sprintf("%s%swith moves %.2f× the time without\n", staticLog, movedLog, moved.Seconds()/static.Seconds())
				compareGolden(t, filepath.Join("testdata", "channels", fmt.Sprintf("%s-%s.golden", name, s)), []byte(log))
			})
		}
	}
}

// FuzzRebalance runs the schedulers' online step period after period on fuzzed
// progress (hostile rates, negative channels and bytes included), applying the moves as
// the coordinator does: no panic, every move names two different classes of the
// progress, moves at least one channel and no more than the class holds, goes to a
// class with data left, and the channels add up to what they were.
func FuzzRebalance(f *testing.F) {
	f.Add([]byte{2, 0, 3, 1, 0, 0, 10, 0, 40, 0, 0, 2, 2, 0, 5, 0, 90, 0, 0, 3, 4})
	f.Add([]byte{1, 0, 2, 0, 0, 0, 0, 0, 100, 0, 0, 6, 3, 0, 1, 0, 20, 0, 0, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data}
		s := []Scheduler{SingleChunk, MultiChunk, ProActiveMultiChunk, ""}[in.intn(4)]
		perm := []SizeClass{Small, Medium, Large, Huge}
		for i := len(perm) - 1; i > 0; i-- {
			j := in.intn(i + 1)
			perm[i], perm[j] = perm[j], perm[i]
		}
		progress := make([]ClassProgress, in.intn(5))
		total := 0
		for i := range progress {
			progress[i] = ClassProgress{Class: perm[i], RemainingBytes: int64(in.intn(1<<16)-100) * 1e6, BitsPerSecond: in.rate(), Channels: in.intn(20) - 2}
			total += max(progress[i].Channels, 0)
		}
		var st ReallocState
		for period := 0; period < 12; period++ {
			var moves []ChannelMove
			moves, st = Rebalance(s, st, progress)
			if s == SingleChunk && len(moves) > 0 {
				t.Fatalf("SC moved %v", moves)
			}
			for _, m := range moves {
				from, to := -1, -1
				for i, p := range progress {
					if p.Class == m.From {
						from = i
					}
					if p.Class == m.To {
						to = i
					}
				}
				if from < 0 || to < 0 || from == to || m.Channels < 1 || m.Channels > max(progress[from].Channels, 0) || progress[to].RemainingBytes <= 0 {
					t.Fatalf("period %d: move %+v of %+v", period, m, progress)
				}
				progress[from].Channels = max(progress[from].Channels, 0) - m.Channels
				progress[to].Channels = max(progress[to].Channels, 0) + m.Channels
			}
			sum := 0
			for i := range progress {
				sum += max(progress[i].Channels, 0)
				// the classes move on: some finish, rates change
				if in.intn(4) == 0 {
					progress[i].RemainingBytes = max(progress[i].RemainingBytes-int64(in.intn(1<<16))*1e6, 0)
					progress[i].BitsPerSecond = in.rate()
				}
			}
			if sum != total {
				t.Fatalf("period %d: %d channels, %d at the start: %+v", period, sum, total, progress)
			}
		}
	})
}
