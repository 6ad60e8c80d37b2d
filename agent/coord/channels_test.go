package coord

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/wire"
	"github.com/dtnflow/dtnflow/optimizer"
)

// mixedCore is a job of 20 small files (10 bytes: one frame each) and 3 large ones of
// 10 chunks, classed Small (≤ 100 bytes) and Large, under sched.
func mixedCore(t *testing.T, sched optimizer.Scheduler, smallChannels, largeChannels int32) (*Core, *Member) {
	t.Helper()
	files := map[string]int{"d/big1": 3000, "d/big2": 3000, "d/big3": 3000}
	for i := range 20 {
		files[fmt.Sprintf("d/s%02d", i)] = 10
	}
	c := newCore(t, files)
	c.SetParams(ParamsFromDirective(contract.Directive{Mode: contract.ModeTransfer, StreamsPerStripe: 2, Scheduler: string(sched),
		SizeClasses: []contract.SizeClassParam{
			{Class: "Small", MaxBytes: 100, Pipelining: 2, Parallelism: 1, Concurrency: 4, Channels: smallChannels},
			{Class: "Large", Pipelining: 1, Parallelism: 2, Concurrency: 2, Channels: largeChannels}}}, c.Params()))
	m := c.Join(0)
	m.Summary(wire.Summary{Last: true})
	return c, m
}

func byClass(units []wire.Unit) map[string]int {
	out := map[string]int{}
	for _, u := range units {
		out[u.Class]++
	}
	return out
}

func TestProMCMovesChannelsAtRunTime(t *testing.T) {
	c, m := mixedCore(t, optimizer.ProActiveMultiChunk, 1, 3)
	if p := c.Params(); p.Concurrency != 4 {
		t.Errorf("workers per stripe %d, want every channel of every class (4)", p.Concurrency)
	}
	// leases follow channels × pipelining (at least 2): Large 3 × 2, Small 1 × 2
	g := request(t, m, 100)
	if got := byClass(g.Units); got["Large"] != 6 || got["Small"] != 2 {
		t.Fatalf("first grant %v, want 6 Large and 2 Small", got)
	}
	t0 := time.Unix(1000, 0)
	period := optimizer.ReallocationPeriod
	if moves := c.Rebalance(t0); len(moves) != 0 {
		t.Fatalf("moved %v in the first period, before any rate", moves)
	}
	// Large moves a chunk per channel each period; Small a file per period: Small's
	// ETA is many times Large's, period after period
	held := g.Units
	var moves []contract.ChannelMove
	for p := 1; p <= optimizer.ReallocationPeriods; p++ {
		var done, kept []wire.Unit
		small := 0
		for _, u := range held {
			if u.Class == "Large" || (u.Class == "Small" && small == 0) {
				done = append(done, u)
				if u.Class == "Small" {
					small++
				}
				continue
			}
			kept = append(kept, u)
		}
		m.Done(ok(done...))
		g, _ := c.request(m, 100)
		held = append(kept, g.Units...)
		moves = c.Rebalance(t0.Add(time.Duration(p) * period))
		if p < optimizer.ReallocationPeriods && len(moves) != 0 {
			t.Fatalf("period %d: moved %v before %d periods", p, moves, optimizer.ReallocationPeriods)
		}
	}
	if len(moves) != 1 || moves[0].From != "Large" || moves[0].To != "Small" || moves[0].Channels != 1 {
		t.Fatalf("after %d periods: moves %+v, want one channel Large → Small", optimizer.ReallocationPeriods, moves)
	}
	r := c.Report()
	if r.Scheduler != "ProMC" || r.ChannelMoves != 1 || len(r.RecentMoves) != 1 || r.RecentMoves[0].Reason == "" {
		t.Fatalf("report: scheduler %q, %d moves, recent %+v", r.Scheduler, r.ChannelMoves, r.RecentMoves)
	}
	channels := map[string]int32{}
	for _, cl := range r.Classes {
		channels[cl.Class] = cl.Channels
	}
	if channels["Small"] != 2 || channels["Large"] != 2 {
		t.Fatalf("classes in the report %+v, want Small 2, Large 2", r.Classes)
	}
	// the new caps hold at once: Small 2 × 2 = 4 units per stripe
	if lim := c.leaseLimits(); lim["Small"] != 4 || lim["Large"] != 4 {
		t.Fatalf("lease caps %v after the move", lim)
	}

	// Large hands everything out (Small moves nothing meanwhile): its channels go to
	// Small at the next period
	for {
		var large, rest []wire.Unit
		for _, u := range held {
			if u.Class == "Large" {
				large = append(large, u)
			} else {
				rest = append(rest, u)
			}
		}
		m.Done(ok(large...))
		g, ok := c.request(m, 100)
		held = append(rest, g.Units...)
		if !ok || byClass(g.Units)["Large"] == 0 {
			break
		}
	}
	for _, u := range c.pending {
		if u.u.Class == "Large" {
			t.Fatalf("Large still has %s pending", u.u.Dest)
		}
	}
	moves = c.Rebalance(t0.Add(10 * period))
	if len(moves) != 1 || moves[0].From != "Large" || moves[0].To != "Small" || moves[0].Channels != 2 {
		t.Fatalf("Large handed out: moves %+v, want its 2 channels to Small", moves)
	}
	if lim := c.leaseLimits(); lim["Small"] != 8 {
		t.Fatalf("Small's cap %d after the hand-over, want 4 channels × 2", lim["Small"])
	}
	if c.Report().ChannelMoves != 2 {
		t.Fatalf("moves counted %d, want 2", c.Report().ChannelMoves)
	}
}

func TestMCHandsOnlyFinishedClassesOn(t *testing.T) {
	c, m := mixedCore(t, optimizer.MultiChunk, 1, 3)
	g := request(t, m, 100)
	t0 := time.Unix(1000, 0)
	for p := 0; p <= 2*optimizer.ReallocationPeriods; p++ {
		var large []wire.Unit
		for _, u := range g.Units {
			if u.Class == "Large" {
				large = append(large, u)
			}
		}
		m.Done(ok(large...))
		next, _ := c.request(m, 100)
		g.Units = append(g.Units[:0], next.Units...)
		pendingLarge := false
		for _, u := range c.pending {
			pendingLarge = pendingLarge || u.u.Class == "Large"
		}
		moves := c.Rebalance(t0.Add(time.Duration(p) * optimizer.ReallocationPeriod))
		if pendingLarge && len(moves) != 0 {
			t.Fatalf("period %d: MC moved %v between running classes", p, moves)
		}
		if !pendingLarge {
			if len(moves) != 1 || moves[0].From != "Large" || moves[0].Channels != 3 {
				t.Fatalf("period %d: Large handed out, moves %+v, want its 3 channels on", p, moves)
			}
			return
		}
	}
	t.Fatal("Large never finished handing out")
}

func TestSCRunsOneClassAtATime(t *testing.T) {
	c, m := mixedCore(t, optimizer.SingleChunk, 0, 0)
	// Large first (the long tails), with its own concurrency × pipelining in files,
	// 2 × 2 (all three here), and chunks up to the stripe's chunk cap: 2 × 4
	g := request(t, m, 100)
	if got := byClass(g.Units); got["Large"] != 8 || got["Small"] != 0 {
		t.Fatalf("first grant %v, want 8 Large and no Small", got)
	}
	for {
		m.Done(ok(g.Units...))
		var ok bool
		if g, ok = c.request(m, 100); !ok {
			t.Fatal("no work")
		}
		if byClass(g.Units)["Small"] > 0 {
			break
		}
	}
	// Small starts once Large has handed everything out, with 4 × 2 in flight
	if got := byClass(g.Units); got["Small"] != 8 {
		t.Fatalf("Small's first grant %v, want 8 (concurrency 4 × pipelining 2)", got)
	}
	if moves := c.Rebalance(time.Unix(1000, 0)); len(moves) != 0 {
		t.Fatalf("SC moved %v", moves)
	}
}

func TestADirectiveWithTheSamePlanKeepsTheMoves(t *testing.T) {
	c, m := mixedCore(t, optimizer.ProActiveMultiChunk, 1, 3)
	_ = request(t, m, 100)
	c.mu.Lock()
	c.ch.byClass["Small"].channels, c.ch.byClass["Large"].channels = 3, 1 // as if moved
	planned := c.params.SizeClasses
	c.mu.Unlock()
	// a rescale resends the plan with other streams: the moves stand
	c.SetParams(ParamsFromDirective(contract.Directive{Mode: contract.ModeTransfer, StreamsPerStripe: 8, Scheduler: "ProMC", SizeClasses: planned}, c.Params()))
	if lim := c.leaseLimits(); lim["Small"] != 6 || lim["Large"] != 2 {
		t.Fatalf("caps %v after a directive with the same classes, want the moved ones (Small 6, Large 2)", lim)
	}
	// a new plan starts from its own channels
	replanned := append([]contract.SizeClassParam(nil), planned...)
	replanned[0].Channels, replanned[1].Channels = 2, 2
	c.SetParams(ParamsFromDirective(contract.Directive{Mode: contract.ModeTransfer, StreamsPerStripe: 8, Scheduler: "ProMC", SizeClasses: replanned}, c.Params()))
	if lim := c.leaseLimits(); lim["Small"] != 4 || lim["Large"] != 4 {
		t.Fatalf("caps %v after a new plan, want its channels (Small 4, Large 4)", lim)
	}
}

func TestAClassWithoutChannelsStillMovesWhatItHas(t *testing.T) {
	_, m := mixedCore(t, optimizer.ProActiveMultiChunk, 0, 4)
	g := request(t, m, 100)
	if got := byClass(g.Units); got["Small"] != 2 {
		t.Fatalf("grant %v: a class with units to hand out and no channel must still get one (2 units)", got)
	}
}

// leaseLimits is leaseLimitsLocked for tests.
func (c *Core) leaseLimits() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.leaseLimitsLocked()
}

func TestClassesWithoutAScheduler(t *testing.T) {
	// Fixed mode's classes: every class at once up to its concurrency × pipelining
	c, m := mixedCore(t, "", 0, 0)
	g := request(t, m, 100)
	if got := byClass(g.Units); got["Large"] != 4 || got["Small"] != 8 {
		t.Fatalf("grant %v, want 4 Large (2 × 2) and 8 Small (4 × 2)", got)
	}
	c.Rebalance(time.Unix(1000, 0))
	if moves := c.Rebalance(time.Unix(1100, 0)); len(moves) != 0 || c.Report().Scheduler != "" {
		t.Fatalf("moves %v, scheduler %q without a scheduler", moves, c.Report().Scheduler)
	}
}

func TestEarlyClassesForSmallFiles(t *testing.T) {
	// 500 small files and one of 200 kB, on a path of 100 Mbit/s and 50 ms (BDP
	// 625 kB): small files, classed from the first sample
	files := map[string]int{"d/big": 200_000}
	for i := range 500 {
		files[fmt.Sprintf("d/s%03d", i)] = 1000
	}
	c := newCore(t, files)
	if !c.ApplyEarlyClasses(100e6, 50*time.Millisecond, 16) {
		t.Fatal("no early classes for a dataset of small files")
	}
	p := c.Params()
	if len(p.SizeClasses) == 0 || p.SizeClasses[0].Class != "Small" || p.SizeClasses[0].Pipelining < 100 || p.Scheduler == "" {
		t.Fatalf("early classes %+v, scheduler %q: want Small first with Algorithm 1's pipelining (BDP/avg = 625)", p.SizeClasses, p.Scheduler)
	}
	for _, sc := range p.SizeClasses {
		if sc.Parallelism != 0 {
			t.Errorf("class %+v bounds parallelism during the probe", sc)
		}
	}
	// the plan's classes are not replaced, nor applied twice
	if c.ApplyEarlyClasses(100e6, 50*time.Millisecond, 16) {
		t.Error("early classes applied over classes")
	}
	// one large file: nothing before the plan
	big := newCore(t, map[string]int{"d/big": 64 << 20})
	if big.ApplyEarlyClasses(100e6, 50*time.Millisecond, 16) || len(big.Params().SizeClasses) != 0 {
		t.Error("early classes for a large file")
	}
}

func TestFilesInFlightUnlessTheJobSaysHowMany(t *testing.T) {
	// 2000 small files and one large one on bench-cluster's path (1 Gbit/s, 50 ms:
	// BDP/avg far above any maxCC, so maxCC is what Algorithm 1 gives the small ones)
	files := map[string]int{"d/big": 64 << 20}
	for i := range 2000 {
		files[fmt.Sprintf("d/s%04d", i)] = 64 << 10
	}
	for _, tc := range []struct {
		name        string
		concurrency int32 // what the job (send --concurrency) said; 0: nothing
		wantFixed   int32 // files in flight per stripe before any class exists
		wantSmall   int32 // the early Small class's concurrency
	}{
		{"unset: fixed stripes keep 4, small files' classes may use 8", 0, optimizer.DefaultConcurrency, optimizer.DefaultMaxConcurrency},
		{"set: the job's number for both", 2, 2, 2},
		{"set above the default maxCC", 16, 16, 16},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t, files)
			c.SetParams(Params{Concurrency: tc.concurrency})
			if got := c.Params().Concurrency; got != tc.wantFixed {
				t.Fatalf("files in flight %d, want %d", got, tc.wantFixed)
			}
			if !c.ApplyEarlyClasses(1e9, 50*time.Millisecond, int(tc.concurrency)) {
				t.Fatal("no early classes for a dataset of small files")
			}
			classes := c.Params().SizeClasses
			i := slices.IndexFunc(classes, func(sc contract.SizeClassParam) bool { return sc.Class == "Small" })
			if i < 0 || classes[i].Concurrency != tc.wantSmall {
				t.Fatalf("early classes %+v: want Small with concurrency %d", classes, tc.wantSmall)
			}
		})
	}
}

// TestSCCountsAFilesChunksAsOneSlot: under SC a class's concurrency × pipelining is
// files in flight (Algorithm 1), however many of a file's chunks a stripe holds; the
// chunks are bounded by the stripe's chunk cap, two per slot of
// optimizer.DefaultConcurrency at least. A huge file's class of concurrency 1 held a
// stripe to two chunks, and its streams idled while the slowest of them brought the
// last block of the older one (issue 11's four competing flows, twentieth session).
func TestSCCountsAFilesChunksAsOneSlot(t *testing.T) {
	const chunkSize = 300 // newCore's
	for _, tc := range []struct {
		name        string
		files       map[string]int
		concurrency int32 // the Large class's, pipelining 1 (2 leases per slot)
		wantChunks  int
		wantFiles   int
	}{
		{"one huge file, concurrency 1: the chunk cap, not two chunks", map[string]int{"d/huge": 16 * chunkSize}, 1, 8, 1},
		{"files of three chunks, concurrency 1: two files' chunks", map[string]int{"d/a": 3 * chunkSize, "d/b": 3 * chunkSize, "d/c": 3 * chunkSize}, 1, 6, 2},
		{"files of three chunks, concurrency 2: the chunk cap across three files", map[string]int{"d/a": 3 * chunkSize, "d/b": 3 * chunkSize, "d/c": 3 * chunkSize, "d/e": 3 * chunkSize}, 2, 8, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t, tc.files)
			c.SetParams(ParamsFromDirective(contract.Directive{Mode: contract.ModeTransfer, StreamsPerStripe: 2, Scheduler: string(optimizer.SingleChunk),
				SizeClasses: []contract.SizeClassParam{{Class: "Large", Pipelining: 1, Parallelism: 2, Concurrency: tc.concurrency}}}, c.Params()))
			m := c.Join(0)
			m.Summary(wire.Summary{Last: true})
			g := request(t, m, 100)
			files := map[string]bool{}
			for _, u := range g.Units {
				if u.Kind != wire.UnitChunk {
					t.Fatalf("granted %+v, want chunks only", u)
				}
				files[string(u.Source)] = true
			}
			if len(g.Units) != tc.wantChunks || len(files) != tc.wantFiles {
				t.Fatalf("granted %d chunks of %d files, want %d of %d", len(g.Units), len(files), tc.wantChunks, tc.wantFiles)
			}
			if tc.wantFiles == len(tc.files) {
				return
			}
			// a chunk done frees no file slot while its file has others in flight; the
			// file's last chunk and its rename done do
			first := g.Units[0].Source
			var firstChunks []wire.Unit
			for _, u := range g.Units {
				if u.Source == first {
					firstChunks = append(firstChunks, u)
				}
			}
			m.Done(ok(firstChunks[0]))
			if g2, ok := c.request(m, 100); ok {
				for _, u := range g2.Units {
					if !files[string(u.Source)] {
						t.Fatalf("one chunk of %s done, %s granted: %d files in flight, want %d", first, u.Source, len(files)+1, tc.wantFiles)
					}
				}
			}
			m.Done(ok(firstChunks[1:]...))
			g3, _ := c.request(m, 100)
			if len(g3.Units) == 1 && g3.Units[0].Kind == wire.UnitFinalize && g3.Units[0].Source == first {
				// the file's rename holds its slot until it is done
				m.Done(ok(g3.Units...))
				g3, _ = c.request(m, 100)
			}
			if !slices.ContainsFunc(g3.Units, func(u wire.Unit) bool { return u.Kind == wire.UnitChunk && !files[string(u.Source)] }) {
				t.Fatalf("every chunk of %s done: granted %+v, want chunks of a file not yet held", first, g3.Units)
			}
		})
	}
}

// TestAFileOfSeveralChunksRunsTwoOnAStripe: Algorithm 1 gives a class of one file a
// concurrency of 1 (min(…, files, maxCC)), and a stripe of one worker opens each chunk
// with a round trip to its receiver while its streams idle. Where a class has one file
// left and it moves as several chunks, the stripes run two workers (two chunks of the
// one file: still one file in flight); a class of several files keeps its concurrency,
// a cap of 1 included, and so does a file of one chunk.
func TestAFileOfSeveralChunksRunsTwoOnAStripe(t *testing.T) {
	const chunkSize = 300 // newCore's
	small := func(n int) map[string]int {
		files := map[string]int{}
		for i := range n {
			files[fmt.Sprintf("d/s%02d", i)] = 50
		}
		return files
	}
	with := func(files map[string]int, more map[string]int) map[string]int {
		for p, n := range more {
			files[p] = n
		}
		return files
	}
	for _, tc := range []struct {
		name    string
		files   map[string]int
		classes []contract.SizeClassParam
		want    int32 // the stripes' workers (wire.JobConfig.Concurrency)
	}{
		{"one file of 16 chunks, concurrency 1", map[string]int{"d/huge": 16 * chunkSize},
			[]contract.SizeClassParam{{Class: "Large", Pipelining: 1, Concurrency: 1}}, 2},
		{"one file of 2 chunks, concurrency 1", map[string]int{"d/two": chunkSize + 1},
			[]contract.SizeClassParam{{Class: "Large", Pipelining: 1, Concurrency: 1}}, 2},
		{"two files of several chunks, the job's cap of 1", map[string]int{"d/a": 3 * chunkSize, "d/b": 3 * chunkSize},
			[]contract.SizeClassParam{{Class: "Large", Pipelining: 1, Concurrency: 1}}, 1},
		{"one file of one chunk, concurrency 1", map[string]int{"d/one": chunkSize},
			[]contract.SizeClassParam{{Class: "Large", Pipelining: 1, Concurrency: 1}}, 1},
		{"the Huge class's one file beside small files", with(small(20), map[string]int{"d/huge": 16 * chunkSize}),
			[]contract.SizeClassParam{{Class: "Small", MaxBytes: 100, Pipelining: 8, Concurrency: 1}, {Class: "Huge", Pipelining: 1, Concurrency: 1}}, 2},
		{"small files of one class, concurrency 6", small(20),
			[]contract.SizeClassParam{{Class: "Small", Pipelining: 8, Concurrency: 6}}, 6},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newCore(t, tc.files)
			m := c.Join(0)
			c.SetParams(ParamsFromDirective(contract.Directive{Mode: contract.ModeTransfer, StreamsPerStripe: 2, Scheduler: string(optimizer.SingleChunk),
				SizeClasses: tc.classes}, c.Params()))
			var cfg wire.JobConfig
			select {
			case cfg = <-m.Configs():
			default:
				t.Fatal("the stripe was sent no configuration")
			}
			if cfg.Concurrency != tc.want || c.Params().Concurrency != tc.want {
				t.Fatalf("the stripe's workers %d (params %d), want %d", cfg.Concurrency, c.Params().Concurrency, tc.want)
			}
			// the classes stay Algorithm 1's: what the plan said, for its status
			for i, sc := range cfg.SizeClasses {
				if sc.Concurrency != tc.classes[i].Concurrency {
					t.Errorf("class %s sent with concurrency %d, the plan's %d", sc.Class, sc.Concurrency, tc.classes[i].Concurrency)
				}
			}
		})
	}
}
