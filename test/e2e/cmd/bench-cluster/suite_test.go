package main

import (
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/test/topology"

	"github.com/dtnflow/dtnflow/test/bench/wan"
)

// played is a stopped trace of a run whose first byte arrived at t0 and whose rate d
// after it was rateAt(d), read every 250 ms up to until.
func played(t0 time.Time, until time.Duration, rateAt func(d time.Duration) float64) *trace {
	tr := &trace{t0: t0, stopped: make(chan struct{}), done: make(chan struct{})}
	close(tr.done)
	var bits float64
	const tick = 250 * time.Millisecond
	for d := time.Duration(0); d <= until; d += tick {
		tr.times, tr.bytes = append(tr.times, t0.Add(d)), append(tr.bytes, int64(bits/8))
		bits += rateAt(d) * tick.Seconds()
	}
	return tr
}

// TestPerSecond: a run whose first byte arrives 1.5 s after its start, then moves 800
// Mbit/s for 2 s and 400 Mbit/s for 1.25 s, and whose destination is cleared after
// its end, reads as the seconds from its start: nothing, half a second of 800, 800,
// 400 over the two windows straddling the change, and the last quarter second alone.
func TestPerSecond(t *testing.T) {
	begun := time.Unix(1000, 0)
	tr := played(begun.Add(1500*time.Millisecond), 5*time.Second, func(d time.Duration) float64 {
		switch {
		case d < 2*time.Second:
			return 800e6
		case d < 3250*time.Millisecond:
			return 400e6
		}
		return 0
	})
	tr.begun = begun
	for i, at := range tr.times {
		if at.Sub(tr.t0) > 4*time.Second {
			tr.bytes[i] = 0 // cleared once done
		}
	}
	_ = tr.stop(scenario{})
	// seconds [0,1) nothing; [1,2) 0.5 s at 800 = 400; [2,3) 800; [3,4) 0.5 s at 800
	// and 0.5 s at 400 = 600; [4,4.75) 400 (the run ends at 4.75 s, its last byte)
	want := []int64{0, 400, 800, 600, 400}
	got := tr.perSecond()
	if len(got) != len(want) {
		t.Fatalf("per second %v, want %v", got, want)
	}
	for i := range want {
		if d := got[i] - want[i]; d < -1 || d > 1 {
			t.Errorf("per second %v, want %v", got, want)
			break
		}
	}
	if got := (&trace{begun: begun}).perSecond(); got != nil {
		t.Errorf("a run that delivered nothing: %v, want none", got)
	}
}

// TestPhaseRates: a run's bytes at the destination through the suite's schedule (1
// Gbit/s, 400 Mbit/s from 10 s, 1 Gbit/s again from 50 s), the tool adapting 3 s after
// each change — each phase is read from 10 s after its change to 10 s later (the first
// from 5 s to the change), so the adaptation falls outside the windows.
func TestPhaseRates(t *testing.T) {
	s := scenario{Scenario: wan.Scenario{RateBitsPerSecond: 1e9}, Schedule: defaultSchedule(1e9)}
	tr := played(time.Unix(1000, 0), 68*time.Second, func(d time.Duration) float64 {
		switch {
		case d < 13*time.Second:
			return 1e9
		case d < 53*time.Second:
			return 400e6
		}
		return 950e6
	})
	got := tr.stop(s)
	want := []phaseRate{
		{FromSeconds: 5, ToSeconds: 10, LinkBitsPerSecond: 1e9, BitsPerSecond: 1e9},
		{FromSeconds: 20, ToSeconds: 30, LinkBitsPerSecond: 400e6, BitsPerSecond: 400e6},
		{FromSeconds: 60, ToSeconds: 68, LinkBitsPerSecond: 1e9, BitsPerSecond: 950e6},
	}
	if len(got) != len(want) {
		t.Fatalf("phases %+v, want %+v", got, want)
	}
	for i := range want {
		g, w := got[i], want[i]
		if g.FromSeconds != w.FromSeconds || g.ToSeconds != w.ToSeconds || g.LinkBitsPerSecond != w.LinkBitsPerSecond ||
			g.BitsPerSecond < w.BitsPerSecond*999/1000 || g.BitsPerSecond > w.BitsPerSecond*1001/1000 {
			t.Errorf("phase %d: %+v, want %+v", i, g, w)
		}
	}
	if got := phasesSummary(got); got != "1000→1000, 400→400, 1000→950 Mbit/s (link→rate, 10–20 s after each change)" {
		t.Errorf("summary %q", got)
	}
	// a run that clears its destination once done (bench-wan's tools, while the trace
	// still samples) ends at its last byte: the last phase is measured to 66 s, not read
	// as a fall
	cleared := &trace{stopped: make(chan struct{}), done: make(chan struct{}), t0: tr.t0}
	close(cleared.done)
	for i, at := range tr.times {
		if d := at.Sub(tr.t0); d <= 66*time.Second {
			cleared.times, cleared.bytes = append(cleared.times, at), append(cleared.bytes, tr.bytes[i])
		} else {
			cleared.times, cleared.bytes = append(cleared.times, at), append(cleared.bytes, 0)
		}
	}
	if got := cleared.stop(s); len(got) != 3 || got[2].ToSeconds != 66 || got[2].BitsPerSecond < 950e6*999/1000 || got[2].BitsPerSecond > 950e6*1001/1000 {
		t.Errorf("a run whose destination was cleared at 66 s: %+v, want its last phase from 60 to 66 s at 950 Mbit/s", got)
	}
	// a run that ends before a window's second is up has no row for it
	short := &trace{stopped: make(chan struct{}), done: make(chan struct{}), t0: tr.t0, times: tr.times[:4*15], bytes: tr.bytes[:4*15]}
	close(short.done)
	if got := short.stop(s); len(got) != 1 || got[0].ToSeconds != 10 {
		t.Errorf("a 15 s run: %+v, want the first phase only", got)
	}
}

func TestParseFixed(t *testing.T) {
	cases := map[string]struct {
		config string
		want   wan.DtnflowConfig
		ok     bool
	}{
		"grid row":      {"--streams 8 --stripes 2", wan.DtnflowConfig{Streams: 8, Stripes: 2}, true},
		"with a buffer": {"--streams 4 --stripes 1 --buffer 4194304", wan.DtnflowConfig{Streams: 4, Stripes: 1, Buffer: 4 << 20}, true},
		"no streams":    {"--stripes 2", wan.DtnflowConfig{}, false},
		"not a setting": {"probe Buffer: 1 stripe(s)", wan.DtnflowConfig{}, false},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			got, ok := parseFixed(c.config)
			if ok != c.ok || ok && got != c.want {
				t.Errorf("parseFixed(%q) = %+v, %v; want %+v, %v", c.config, got, ok, c.want, c.ok)
			}
		})
	}
}

func TestHostsFile(t *testing.T) {
	a := topology.Host{Name: "site-a-1", Addr: netip.MustParseAddr("10.78.1.11")}
	b := topology.Host{Name: "site-b-1", Addr: netip.MustParseAddr("10.78.2.11")}
	got := hostsFile("127.0.0.1 localhost", a, b, topology.Host{Name: "no-address"})
	want := "127.0.0.1 localhost\n# dtnflow bench-cluster: the sites' nodes\n10.78.1.11 site-a-1\n10.78.2.11 site-b-1\n"
	if got != want {
		t.Errorf("hostsFile:\n%s\nwant:\n%s", got, want)
	}
}

// TestPodCPURequestIsTimeWeighted: a pod that asked 250 millicores for its first 10 s
// (the probe stripe) and 80 for the next 30 (resized to the plan) asked 122.5 on
// average, which is what its use is compared with.
func TestPodCPURequestIsTimeWeighted(t *testing.T) {
	start := time.Unix(1000, 0)
	w := &cpuWatcher{pods: map[string]*podReading{"u": {role: "sender", name: "s0", firstRequest: 250, first: start, last: start}}}
	r := w.pods["u"]
	r.observe(250, 1e9, start.Add(1*time.Second))
	r.observe(250, 4e9, start.Add(10*time.Second))
	r.observe(80, 5e9, start.Add(25*time.Second))
	r.observe(80, 6e9, start.Add(40*time.Second))
	got := w.results()
	if len(got) != 1 {
		t.Fatalf("results %+v", got)
	}
	// 6 CPU seconds over 40 s: 150 millicores used; (250·10 + 80·30)/40 = 122.5 asked
	want := podCPU{Role: "sender", Name: "s0", RequestMillicores: 123, FirstRequestMillicores: 250, LastRequestMillicores: 80, UsedMillicores: 150, Seconds: 40, Ratio: 150 / 122.5}
	if got[0] != want {
		t.Errorf("got %+v, want %+v", got[0], want)
	}
}

// TestPodCPURatioOfSmallFigures: a coordinator that used 2.4 millicores where it asked
// 2.6 used 0.92 of its request; whole millicores (2 of 3) would read 0.67.
func TestPodCPURatioOfSmallFigures(t *testing.T) {
	start := time.Unix(1000, 0)
	w := &cpuWatcher{pods: map[string]*podReading{"c": {role: "coordinator", name: "c", firstRequest: 3, first: start, last: start}}}
	r := w.pods["c"]
	r.observe(3, 0, start.Add(60*time.Second))
	r.observe(2, 240e6, start.Add(100*time.Second)) // 0.24 CPU seconds over 100 s
	got := w.results()
	if len(got) != 1 {
		t.Fatalf("results %+v", got)
	}
	// asked (3·60 + 2·40)/100 = 2.6, used 2.4
	if g := got[0]; g.RequestMillicores != 3 || g.UsedMillicores != 2 || math.Abs(g.Ratio-2.4/2.6) > 1e-12 {
		t.Errorf("got %+v, want 3 and 2 millicores shown and a ratio of %.4f", g, 2.4/2.6)
	}
}

// TestTreeBytesCountsWhatWasWritten: a file whose far chunk has landed and whose first
// has not holds the far chunk's bytes, not its size; a whole file counts its size.
func TestTreeBytesCountsWhatWasWritten(t *testing.T) {
	dir := t.TempDir()
	sparse, err := os.Create(filepath.Join(dir, "chunked.dtnpart"))
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 4 << 20
	if _, err := sparse.WriteAt(make([]byte, chunk), 255*chunk); err != nil { // the last of 256 chunks, 1 GiB
		t.Fatal(err)
	}
	sparse.Close()
	if got := treeBytes(dir); got != chunk {
		t.Errorf("treeBytes = %d after one chunk at the end of a 1 GiB file, want %d", got, chunk)
	}
	if err := os.WriteFile(filepath.Join(dir, "whole"), make([]byte, 10_000), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := treeBytes(dir); got != chunk+10_000 {
		t.Errorf("treeBytes = %d with a whole file of 10 000 bytes beside it, want %d", got, chunk+10_000)
	}
}
