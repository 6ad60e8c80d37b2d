package coord

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/fsroot"
	"github.com/dtnflow/dtnflow/agent/wire"
	"github.com/dtnflow/dtnflow/optimizer"
)

// checkLeases compares the coordinator's bookkeeping of who holds what with the units
// themselves: each stripe's leases are exactly the units leased to it, every unit not
// done is either pending once or held by a stripe still in the job, and the per-class
// counts of pending units are the queue's.
func checkLeases(t *testing.T, c *Core, step string) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	inQueue := map[*cunit]int{}
	byClass := map[string]int{}
	for _, u := range c.pending {
		inQueue[u]++
		byClass[u.u.Class]++
		if u.leased != nil {
			t.Fatalf("%s: unit %d is pending and leased to stripe %d", step, u.u.ID, u.leased.stripe)
		}
	}
	for class, n := range c.pendingByClass {
		if n != byClass[class] {
			t.Fatalf("%s: pendingByClass[%q] = %d, the queue holds %d", step, class, n, byClass[class])
		}
	}
	for class, n := range byClass {
		if c.pendingByClass[class] != n {
			t.Fatalf("%s: pendingByClass[%q] = %d, the queue holds %d", step, class, c.pendingByClass[class], n)
		}
	}
	held := map[*cunit]bool{}
	for m := range c.members {
		for u := range m.leases {
			if u.leased != m {
				t.Fatalf("%s: stripe %d lists unit %d, which is leased to %v", step, m.stripe, u.u.ID, u.leased)
			}
			if u.done {
				t.Fatalf("%s: stripe %d holds unit %d, which is done", step, m.stripe, u.u.ID)
			}
			held[u] = true
		}
	}
	for id, u := range c.units {
		if u.done {
			t.Fatalf("%s: unit %d is done but still in the job's units", step, id)
		}
		switch {
		case inQueue[u] > 1:
			t.Fatalf("%s: unit %d is pending %d times", step, id, inQueue[u])
		case inQueue[u] == 1 && held[u]:
			t.Fatalf("%s: unit %d is both pending and held", step, id)
		case inQueue[u] == 0 && !held[u]:
			t.Fatalf("%s: unit %d is neither pending nor held by a stripe of the job (leased to %v): it would never be sent", step, id, u.leased)
		}
	}
}

// TestLeaseBookkeepingUnderRandomSequences plays stripes that ask for work, finish
// some of it, give some back for a retry, leave with what they hold and are replaced,
// while the plan's size classes change, and checks after every step that no unit is
// lost or held twice; every job ends with all its files done.
func TestLeaseBookkeepingUnderRandomSequences(t *testing.T) {
	scheds := []optimizer.Scheduler{"", optimizer.SingleChunk, optimizer.MultiChunk, optimizer.ProActiveMultiChunk}
	for seed := range uint64(40) {
		sched := scheds[seed%uint64(len(scheds))]
		t.Run(fmt.Sprintf("seed%d-%s", seed, sched), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 7))
			files := map[string]int{}
			for i := range 30 + rng.IntN(40) {
				files[fmt.Sprintf("d/s%03d", i)] = 1 + rng.IntN(100)
			}
			for i := range 1 + rng.IntN(4) {
				files[fmt.Sprintf("d/big%d", i)] = 301 + rng.IntN(3000) // chunks of 300 bytes
			}
			c := newCore(t, files)
			classes := func(smallMax int64) Params {
				if sched == "" {
					return ParamsFromDirective(contract.Directive{Mode: contract.ModeTransfer, StreamsPerStripe: 2}, c.Params())
				}
				return ParamsFromDirective(contract.Directive{Mode: contract.ModeTransfer, StreamsPerStripe: 2, Scheduler: string(sched),
					SizeClasses: []contract.SizeClassParam{
						{Class: "Small", MaxBytes: smallMax, Pipelining: 1 + int32(rng.IntN(4)), Parallelism: 1, Concurrency: 2, Channels: 1 + int32(rng.IntN(2))},
						{Class: "Large", Pipelining: 1, Parallelism: 2, Concurrency: 2, Channels: 1 + int32(rng.IntN(2))}}}, c.Params())
			}
			c.SetParams(classes(100))
			held := map[*Member][]wire.Unit{}
			join := func(stripe int32) {
				m := c.Join(stripe)
				m.Summary(wire.Summary{Last: true})
				held[m] = nil
			}
			for k := range int32(3) {
				join(k)
			}
			next := int32(3)
			for step := 0; !c.phase.Finished() && !c.checkingLocked(); step++ {
				if step > 20000 {
					t.Fatalf("no end after %d steps: %d units left", step, len(c.units))
				}
				var m *Member
				for x := range held {
					if m == nil || rng.IntN(2) == 0 {
						m = x
					}
				}
				name := ""
				switch r := rng.IntN(100); {
				case r < 45:
					name = "request"
					if g, ok := c.request(m, 1+rng.IntN(8)); ok {
						held[m] = append(held[m], g.Units...)
					}
				case r < 80 && len(held[m]) > 0:
					name = "done"
					n := 1 + rng.IntN(len(held[m]))
					var rs []wire.UnitResult
					for _, u := range held[m][:n] {
						rs = append(rs, wire.UnitResult{ID: u.ID, OK: rng.IntN(8) != 0, Retry: true})
					}
					held[m] = held[m][n:]
					m.Done(rs)
				case r < 85:
					name = "leave"
					m.Leave()
					if late := held[m]; len(late) > 0 && rng.IntN(2) == 0 {
						// results that arrive after the stripe's leave gave its
						// units back: the units are done, and must not be sent again
						// nor held by anyone
						name = "leave, then late results"
						c.done(m, ok(late[:1+rng.IntN(len(late))]...))
					}
					delete(held, m)
					join(next)
					next++
				case r < 88:
					name = "reclass"
					c.SetParams(classes(int64(10 + rng.IntN(200))))
				default:
					continue
				}
				checkLeases(t, c, fmt.Sprintf("step %d (%s, stripe %d)", step, name, m.stripe))
			}
			if c.filesDone != int64(len(files)) {
				t.Fatalf("%d of %d files done at the end", c.filesDone, len(files))
			}
		})
	}
}

// BenchmarkLeasesOfManySmallFiles is the coordinator's work per file for jobs of many
// small files on one stripe that keeps 64 in flight: lease, then done. The cost per
// file must not grow with the job (it did: every request walked all the job's units).
func BenchmarkLeasesOfManySmallFiles(b *testing.B) {
	for _, files := range []int{5000, 20000, 80000} {
		b.Run(fmt.Sprintf("files=%d", files), func(b *testing.B) { benchmarkLeases(b, files) })
	}
}

func benchmarkLeases(b *testing.B, files int) {
	c := newCore(b, map[string]int{"d/x": 1})
	m := c.Join(0)
	m.Summary(wire.Summary{Last: true})
	for b.Loop() {
		b.StopTimer()
		clear(c.units)
		c.pending = c.pending[:0]
		clear(c.pendingByClass)
		c.filesDone, c.bytesDone, c.firstByte = 0, 0, time.Time{}
		c.dataset.Files = int64(files) + 2 // the job is not over when the last unit is done: its check would start
		for i := range files {
			f := &cfile{f: fsroot.File{Path: fmt.Sprintf("d/f%05d", i), Size: 65536}, dest: fmt.Sprintf("out/f%05d", i), chunks: 1}
			c.addUnitLocked(f, wire.Unit{Kind: wire.UnitFile}, false)
		}
		b.StartTimer()
		var held []wire.Unit
		for len(c.units) > 0 {
			if g, ok := c.request(m, 64-len(held)); ok {
				held = append(held, g.Units...)
			}
			n := min(len(held), 4)
			c.done(m, ok(held[:n]...))
			held = held[n:]
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*files), "ns/file")
}
