package optimizer

import (
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
)

func TestBucketOfMatchesContract(t *testing.T) {
	// contract.Dataset: Buckets[i] counts the files whose size s satisfies
	// 2^(i-1) < s <= 2^i (bucket 0 holds empty and 1-byte files)
	tests := map[int64]int{0: 0, 1: 0, 2: 1, 3: 2, 4: 2, 5: 3, 8: 3, 9: 4, 1 << 20: 20, 1<<20 + 1: 21, 1 << 40: 40}
	for size, want := range tests {
		if got := BucketOf(size); got != want {
			t.Errorf("BucketOf(%d) = %d, want %d", size, got, want)
		}
	}
}

func TestClassThresholds(t *testing.T) {
	// 10 Gbit/s: BW = 1.25 GB/s; Small ≤ 62.5 MB, Medium ≤ 250 MB, Large ≤ 2.5 GB
	th := ClassThresholds(10e9)
	if th != (Thresholds{SmallMax: 62.5e6, MediumMax: 250e6, LargeMax: 2.5e9}) {
		t.Errorf("ClassThresholds(10 Gbit/s) = %+v", th)
	}
	tests := map[float64]SizeClass{1e6: Small, 62.5e6: Small, 100e6: Medium, 1e9: Large, 2.5e9: Large, 3e9: Huge}
	for size, want := range tests {
		if got := th.Classify(size); got != want {
			t.Errorf("Classify(%g) = %s, want %s", size, got, want)
		}
	}
}

// assignByMaxBytes puts each file in the first chunk whose MaxBytes it does not exceed,
// as the agents do with contract.SizeClassParam.
func assignByMaxBytes(chunks []Chunk, sizes []int64) []int64 {
	counts := make([]int64, len(chunks))
	for _, s := range sizes {
		for i, c := range chunks {
			if c.MaxBytes == 0 || s <= c.MaxBytes {
				counts[i]++
				break
			}
		}
	}
	return counts
}

func TestPartitionMixedDataset(t *testing.T) {
	// 10 Gbit/s, 40 ms (Stampede–Comet of Arslan & Kosar Table 2): BDP 50 MB
	const bw, bdp = 10e9, 50e6
	var sizes []int64
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 4000; i++ {
		sizes = append(sizes, 1<<20+rng.Int64N(4<<20)) // 1–5 MiB: Small
	}
	for i := 0; i < 300; i++ {
		sizes = append(sizes, 100e6+rng.Int64N(100e6)) // Medium
	}
	for i := 0; i < 40; i++ {
		sizes = append(sizes, 1e9+rng.Int64N(1e9)) // Large
	}
	for i := 0; i < 2; i++ {
		sizes = append(sizes, 9e9) // two Huge files: merged into Large
	}
	h := HistogramOf(sizes)
	chunks := Partition(h, bw, bdp)
	var classes []SizeClass
	var files int64
	for _, c := range chunks {
		classes = append(classes, c.Class)
		files += c.Files
	}
	if want := []SizeClass{Small, Medium, Large}; !reflect.DeepEqual(classes, want) {
		t.Fatalf("classes %v, want %v (the 2 Huge files merge into Large): %v", classes, want, chunks)
	}
	if files != int64(len(sizes)) {
		t.Errorf("chunks hold %d files, dataset has %d", files, len(sizes))
	}
	if chunks[2].Files != 42 || chunks[len(chunks)-1].MaxBytes != 0 {
		t.Errorf("Large chunk %v: want the 40 Large and 2 Huge files, unbounded", chunks[2])
	}
	// the agents' MaxBytes rule puts every file where the planner counted it
	got := assignByMaxBytes(chunks, sizes)
	for i, c := range chunks {
		if got[i] != c.Files {
			t.Errorf("MaxBytes rule puts %d files in %s, the planner counted %d", got[i], c.Class, c.Files)
		}
	}
	// a list and its histogram give the same chunks
	if again := Partition(HistogramOf(sizes), bw, bdp); !reflect.DeepEqual(again, chunks) {
		t.Errorf("Partition is not deterministic")
	}
}

func TestPartitionMergeRules(t *testing.T) {
	const bw = 10e9 // Small ≤ 62.5 MB, Medium ≤ 250 MB
	tests := map[string]struct {
		sizes []int64
		bdp   float64
		want  []SizeClass
	}{
		"two files only: one chunk": {[]int64{1 << 20, 200e6}, 0, []SizeClass{Medium}},
		// 100 small files of 1 MiB are 105 MB < 5·BDP = 250 MB: merged into the large
		// files' chunk, which is classed again by its mean, 20.1 GB/110 = 183 MB: Medium
		"small chunk under 5 BDP merges": {append(repeat(1<<20, 100), repeat(2e9, 10)...), 50e6, []SizeClass{Medium}},
		"small chunk over 5 BDP stays":   {append(repeat(1<<20, 1000), repeat(2e9, 10)...), 50e6, []SizeClass{Small, Large}},
		"empty dataset":                  {nil, 50e6, nil},
		"empty files are Small":          {repeat(0, 10), 0, []SizeClass{Small}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var got []SizeClass
			for _, c := range Partition(HistogramOf(tc.sizes), bw, tc.bdp) {
				got = append(got, c.Class)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("classes %v, want %v", got, tc.want)
			}
		})
	}
}

func repeat(size int64, n int) []int64 {
	out := make([]int64, n)
	for i := range out {
		out[i] = size
	}
	return out
}

func TestAlgorithm1(t *testing.T) {
	tests := map[string]struct {
		avg, bdp, buf float64
		files         int64
		maxCC         int
		want          ClassParams
	}{
		// XSEDE Lonestar–Gordon (Table 1): BDP 75 MB, buffer 32 MB. 1 MB files: the pipe
		// holds 75 of them; one stream suffices for a file smaller than the buffer.
		"XSEDE small files": {1e6, 75e6, 32e6, 10000, 64, ClassParams{Pipelining: 75, Parallelism: 1, Concurrency: 64}},
		// 10 GB files: ⌈75/32⌉ = 3 streams fill the pipe, concurrency floors at 2
		"XSEDE huge files": {10e9, 75e6, 32e6, 100, 64, ClassParams{Pipelining: 1, Parallelism: 3, Concurrency: 2}},
		// §4.1: on Stampede–Comet (10 Gbit/s, 40 ms, BDP 50 MB) a Medium chunk
		// (62.5–250 MB) gets concurrency 2 whatever maxCC
		"Stampede-Comet medium": {150e6, 50e6, 32e6, 500, 32, ClassParams{Pipelining: 1, Parallelism: 2, Concurrency: 2}},
		// tiny files: pipelining capped at 100, concurrency by maxCC and file count
		"tiny files, few": {1e3, 50e6, 32e6, 5, 32, ClassParams{Pipelining: 100, Parallelism: 1, Concurrency: 5}},
		// autotuning (buffer 0) reads as 4 MiB: ⌈50 MB / 4 MiB⌉ = 12
		"autotuned buffer": {1e9, 50e6, 0, 50, 8, ClassParams{Pipelining: 1, Parallelism: 12, Concurrency: 2}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Algorithm1(tc.avg, tc.bdp, tc.buf, tc.files, tc.maxCC); got != tc.want {
				t.Errorf("Algorithm1 = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func chunksOf(classes []SizeClass, files, bytes []int64) []Chunk {
	out := make([]Chunk, len(classes))
	for i := range classes {
		out[i] = Chunk{Class: classes[i], Files: files[i], Bytes: bytes[i]}
	}
	return out
}

func TestAllocateChannels(t *testing.T) {
	all := []SizeClass{Small, Medium, Large, Huge}
	many := []int64{1000, 1000, 1000, 1000}
	tests := map[string]struct {
		chunks []Chunk
		params []ClassParams
		total  int
		s      Scheduler
		want   []int
	}{
		// §3.3's example: maxCC 8 over Small, Medium, Large gives (3, 2, 3)
		"MC paper example": {chunksOf([]SizeClass{Small, Medium, Large}, many[:3], []int64{1e9, 1e9, 1e9}), nil, 8, MultiChunk, []int{3, 2, 3}},
		"MC all four":      {chunksOf(all, many, []int64{1, 1, 1, 1}), nil, 6, MultiChunk, []int{2, 1, 1, 2}},
		"MC few files":     {chunksOf([]SizeClass{Small, Large}, []int64{1, 10}, []int64{1, 1}), nil, 8, MultiChunk, []int{1, 7}},
		// equal sizes: weights 6:3:2:1 of 12 channels
		"ProMC equal sizes": {chunksOf(all, many, []int64{10e9, 10e9, 10e9, 10e9}), nil, 12, ProActiveMultiChunk, []int{6, 3, 2, 1}},
		// 8 channels: ⌊4, 2, 1.33, 0.67⌋ = 4, 2, 1, 0; the spare channel goes to Huge
		"ProMC no class without a channel": {chunksOf(all, many, []int64{10e9, 10e9, 10e9, 10e9}), nil, 8, ProActiveMultiChunk, []int{4, 2, 1, 1}},
		// a huge chunk dominates by size: Small still gets one
		"ProMC tiny small chunk": {chunksOf([]SizeClass{Small, Huge}, []int64{100, 100}, []int64{1e6, 1e12}), nil, 4, ProActiveMultiChunk, []int{1, 3}},
		// the budget is bounded by the file count
		"ProMC few files": {chunksOf([]SizeClass{Small, Huge}, []int64{1, 2}, []int64{1e6, 1e12}), nil, 16, ProActiveMultiChunk, []int{1, 2}},
		"SC own concurrency": {chunksOf([]SizeClass{Small, Large}, many[:2], []int64{1, 1}),
			[]ClassParams{{Concurrency: 12}, {Concurrency: 2}}, 16, SingleChunk, []int{12, 2}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := AllocateChannels(tc.chunks, tc.params, tc.total, tc.s); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("AllocateChannels = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestReallocate(t *testing.T) {
	// Small: 8 GB left at 1 Gbit/s = 64 s; Large: 2 GB at 4 Gbit/s = 4 s (16× faster)
	slow := ClassProgress{Class: Small, RemainingBytes: 8e9, BitsPerSecond: 1e9, Channels: 2}
	fast := ClassProgress{Class: Large, RemainingBytes: 2e9, BitsPerSecond: 4e9, Channels: 3}
	var st ReallocState
	var moves []ChannelMove
	for period := 1; period <= 2; period++ {
		moves, st = Reallocate(st, []ClassProgress{slow, fast})
		if len(moves) != 0 {
			t.Fatalf("period %d: moved %v before three periods", period, moves)
		}
	}
	moves, st = Reallocate(st, []ClassProgress{slow, fast})
	if want := []ChannelMove{{From: Large, To: Small, Channels: 1}}; len(moves) != 1 || moves[0].From != want[0].From || moves[0].To != want[0].To || moves[0].Channels != 1 {
		t.Fatalf("third period: moves %v, want one channel Large → Small", moves)
	}
	if st.Streak != 0 {
		t.Errorf("streak not reset after a move: %+v", st)
	}

	// an interruption (ratio below 2) restarts the count
	st = ReallocState{}
	balanced := ClassProgress{Class: Small, RemainingBytes: 2e9, BitsPerSecond: 2.5e9, Channels: 2} // 6.4 s vs 4 s
	_, st = Reallocate(st, []ClassProgress{slow, fast})
	_, st = Reallocate(st, []ClassProgress{slow, fast})
	_, st = Reallocate(st, []ClassProgress{balanced, fast})
	if moves, _ = Reallocate(st, []ClassProgress{slow, fast}); len(moves) != 0 {
		t.Errorf("moved %v one period after the imbalance came back", moves)
	}

	// a fast chunk with a single channel keeps it
	single := fast
	single.Channels = 1
	st = ReallocState{}
	for i := 0; i < 5; i++ {
		if moves, st = Reallocate(st, []ClassProgress{slow, single}); len(moves) != 0 {
			t.Fatalf("took the last channel of a running chunk: %v", moves)
		}
	}

	// a finished chunk's channels go to the largest ETA at once
	done := ClassProgress{Class: Medium, RemainingBytes: 0, Channels: 4}
	moves, _ = Reallocate(ReallocState{}, []ClassProgress{fast, done, slow})
	if len(moves) != 1 || moves[0].From != Medium || moves[0].To != Small || moves[0].Channels != 4 {
		t.Errorf("finished chunk: moves %v, want 4 channels Medium → Small", moves)
	}

	// a waiting chunk (no channels, no rate) is the slowest and gets one
	waiting := ClassProgress{Class: Huge, RemainingBytes: 1e12, Channels: 0}
	st = ReallocState{}
	for i := 0; i < 3; i++ {
		moves, st = Reallocate(st, []ClassProgress{fast, waiting})
	}
	if len(moves) != 1 || moves[0].To != Huge {
		t.Errorf("waiting chunk: moves %v, want one channel to Huge", moves)
	}
}

func TestClassProgressETA(t *testing.T) {
	if got := (ClassProgress{RemainingBytes: 1e9, BitsPerSecond: 8e9}).ETA(); got != time.Second {
		t.Errorf("ETA = %v, want 1s", got)
	}
	if got := (ClassProgress{RemainingBytes: 0}).ETA(); got != 0 {
		t.Errorf("finished ETA = %v", got)
	}
}

func TestChooseScheduler(t *testing.T) {
	tests := map[string]struct {
		chunks []Chunk
		want   Scheduler
	}{
		"one class":                 {chunksOf([]SizeClass{Huge}, []int64{1}, []int64{4 << 30}), SingleChunk},
		"no class":                  {nil, SingleChunk},
		"large files dominate":      {chunksOf([]SizeClass{Small, Large, Huge}, []int64{300, 4, 2}, []int64{30e6, 256e6, 2e9}), MultiChunk},
		"small files dominate":      {chunksOf([]SizeClass{Small, Huge}, []int64{20000, 1}, []int64{1.3e9, 1e9}), ProActiveMultiChunk},
		"half small and medium":     {chunksOf([]SizeClass{Small, Medium, Large}, []int64{10, 10, 10}, []int64{1e9, 1e9, 2e9}), ProActiveMultiChunk},
		"just under half the bytes": {chunksOf([]SizeClass{Medium, Large}, []int64{10, 10}, []int64{999, 1000}), MultiChunk},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, why := ChooseScheduler(tc.chunks)
			if got != tc.want || why == "" {
				t.Errorf("ChooseScheduler = %s (%q), want %s", got, why, tc.want)
			}
		})
	}
}

func TestRebalance(t *testing.T) {
	slow := ClassProgress{Class: Small, RemainingBytes: 8e9, BitsPerSecond: 1e9, Channels: 2}
	fast := ClassProgress{Class: Large, RemainingBytes: 2e9, BitsPerSecond: 4e9, Channels: 3}
	done := ClassProgress{Class: Medium, RemainingBytes: 0, Channels: 4}
	// MC: a finished class hands its channels on; the 2× rule is ProMC's alone
	var st ReallocState
	for i := 0; i < 5; i++ {
		var moves []ChannelMove
		if moves, st = Rebalance(MultiChunk, st, []ClassProgress{slow, fast}); len(moves) != 0 {
			t.Fatalf("MC moved %v between running classes", moves)
		}
	}
	if moves, _ := Rebalance(MultiChunk, ReallocState{}, []ClassProgress{fast, done, slow}); len(moves) != 1 || moves[0].From != Medium || moves[0].To != Small || moves[0].Channels != 4 {
		t.Errorf("MC, finished class: moves %v, want 4 channels Medium → Small", moves)
	}
	// ProMC: both rules
	st = ReallocState{}
	var moves []ChannelMove
	for i := 0; i < ReallocationPeriods; i++ {
		moves, st = Rebalance(ProActiveMultiChunk, st, []ClassProgress{slow, fast})
	}
	if len(moves) != 1 || moves[0].From != Large || moves[0].To != Small {
		t.Errorf("ProMC: moves %v after %d periods, want one channel Large → Small", moves, ReallocationPeriods)
	}
	// SC: one class at a time, nothing moves
	if moves, _ := Rebalance(SingleChunk, ReallocState{}, []ClassProgress{fast, done, slow}); len(moves) != 0 {
		t.Errorf("SC moved %v", moves)
	}
}
