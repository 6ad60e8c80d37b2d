package share

import (
	"math"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/optimizer"
)

// clock is a fake clock the test moves.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

// join opens job on the path under dir at the clock's time.
func join(t *testing.T, dir string, c *clock, job string, priority int) *Dir {
	t.Helper()
	d := &Dir{Root: filepath.Join(dir, "10.0.0.2"), Job: job, Priority: priority, Now: c.now}
	if err := os.MkdirAll(filepath.Join(d.Root, "members"), 0o755); err != nil {
		t.Fatal(err)
	}
	d.joined = c.now()
	if err := d.Write("Joining", 0); err != nil {
		t.Fatal(err)
	}
	return d
}

func names(ms []Member) []string {
	var out []string
	for _, m := range ms {
		out = append(out, m.Job)
	}
	return out
}

func TestMembersLiveInJoinOrderAndTheFirstProbes(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	b := join(t, dir, c, "b", 1)
	a := join(t, dir, c, "a", 1) // joined at the same instant: the name orders them
	c.t = c.t.Add(time.Second)
	late := join(t, dir, c, "late", 1)

	ms, err := late.Members()
	if err != nil {
		t.Fatal(err)
	}
	if got := names(ms); len(got) != 3 || got[0] != "a" || got[1] != "b" || got[2] != "late" {
		t.Fatalf("members %v, want [a b late]", got)
	}
	if !Prober(ms, "a") || Prober(ms, "b") || Prober(ms, "late") {
		t.Fatalf("only a, the first to join, probes a cold path")
	}

	// a stops writing (killed): once its file is stale, b is the prober
	c.t = c.t.Add(DefaultStale)
	for _, d := range []*Dir{b, late} {
		if err := d.Write("WaitingForPathProbe", 0); err != nil {
			t.Fatal(err)
		}
	}
	c.t = c.t.Add(time.Second)
	ms, _ = late.Members()
	if got := names(ms); len(got) != 2 || got[0] != "b" {
		t.Fatalf("members after a went stale %v, want [b late]", got)
	}
	if !Prober(ms, "b") {
		t.Fatalf("b must take over the probe")
	}

	// leaving removes the file at once
	if err := b.Leave(); err != nil {
		t.Fatal(err)
	}
	if err := b.Leave(); err != nil {
		t.Fatalf("leaving twice: %v", err)
	}
	ms, _ = late.Members()
	if got := names(ms); len(got) != 1 || got[0] != "late" {
		t.Fatalf("members after b left %v, want [late]", got)
	}
	_ = a
}

func TestProfileFreshnessAndHighestAggregate(t *testing.T) {
	dir := t.TempDir()
	c := &clock{t: time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)}
	a := join(t, dir, c, "a", 1)
	b := join(t, dir, c, "b", 1)
	if _, ok := a.Profile(); ok {
		t.Fatal("a cold path has no profile")
	}
	if err := a.SaveProbe(Profile{PlateauBitsPerSecond: 900e6, Samples: []optimizer.Sample{{Streams: 1, BitsPerSecond: 800e6}}}); err != nil {
		t.Fatal(err)
	}
	p, ok := b.Profile()
	if !ok || p.ProbedBy != "a" || p.CapacityBitsPerSecond() != 900e6 || len(p.Samples) != 1 {
		t.Fatalf("profile %+v (fresh %v), want a's probe with capacity 900 Mbit/s", p, ok)
	}

	transferring := func(rates ...int64) []Member {
		var ms []Member
		for i, r := range rates {
			ms = append(ms, Member{Job: string(rune('a' + i)), State: "Transferring", BitsPerSecond: r})
		}
		return ms
	}
	for _, tc := range []struct {
		name    string
		members []Member
		wrote   bool
		want    float64
	}{
		{"one job measures no aggregate", transferring(950e6), false, 900e6},
		{"below the plateau: recorded, the plateau still the capacity", transferring(400e6, 400e6), true, 900e6},
		{"above the plateau", transferring(480e6, 470e6), true, 950e6},
		{"within 2 % of the highest", transferring(480e6, 485e6), false, 950e6},
		{"higher by more than 2 %", transferring(490e6, 500e6), true, 990e6},
		{"waiting jobs do not count", append(transferring(600e6), Member{Job: "w", State: "WaitingForPathProbe", BitsPerSecond: 900e6}), false, 990e6},
	} {
		wrote, err := b.LearnAggregate(tc.members)
		if err != nil {
			t.Fatal(err)
		}
		p, _ := a.Profile()
		if wrote != tc.wrote || p.CapacityBitsPerSecond() != tc.want {
			t.Errorf("%s: wrote %v, capacity %.0f; want %v, %.0f", tc.name, wrote, p.CapacityBitsPerSecond(), tc.wrote, tc.want)
		}
	}

	// the highest aggregate keeps the profile fresh; past MaxAge of both it is stale
	c.t = c.t.Add(DefaultProfileMaxAge - time.Minute)
	if _, ok := a.Profile(); !ok {
		t.Fatal("profile stale before its age")
	}
	c.t = c.t.Add(2 * time.Minute)
	if _, ok := a.Profile(); ok {
		t.Fatal("profile fresh past its age")
	}
}

func TestShareOf(t *testing.T) {
	m := func(job string, w int) Member { return Member{Job: job, Priority: w} }
	for _, tc := range []struct {
		name    string
		members []Member
		job     string
		want    float64
		paced   bool
	}{
		{"alone: the whole path, not held to it", []Member{m("a", 1)}, "a", 1000e6, false},
		{"four equal", []Member{m("a", 1), m("b", 1), m("c", 1), m("d", 1)}, "c", 250e6, true},
		{"2:1, the heavier", []Member{m("a", 2), m("b", 1)}, "a", 1000e6 * 2 / 3, true},
		{"2:1, the lighter", []Member{m("a", 2), m("b", 1)}, "b", 1000e6 / 3, true},
		{"not yet among the members (its file unread)", []Member{m("a", 1)}, "b", 500e6, true},
	} {
		got := ShareOf(tc.members, tc.job, 1000e6)
		if math.Abs(got.BitsPerSecond-tc.want) > 1 || got.Paced != tc.paced {
			t.Errorf("%s: share %.0f paced %v, want %.0f paced %v", tc.name, got.BitsPerSecond, got.Paced, tc.want, tc.paced)
		}
	}
	if got := ShareOf([]Member{m("a", 1), m("b", 1)}, "a", 0); !math.IsInf(got.BitsPerSecond, 1) || got.Paced {
		t.Errorf("unknown capacity: share %v paced %v, want unbounded and not paced", got.BitsPerSecond, got.Paced)
	}
}

func TestPathKey(t *testing.T) {
	for in, want := range map[string]string{
		"10.250.2.10:7300":       "10.250.2.10",
		"dtn1.example.org:47000": "dtn1.example.org",
		"[fd00::1]:7000":         "fd00__1",
		"dtn2":                   "dtn2",
	} {
		if got := PathKey(in); got != want {
			t.Errorf("PathKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestOpenRefusesJobNamesThatAreNotFileNames(t *testing.T) {
	for _, job := range []string{"", "a/b", "..", "."} {
		if _, err := Open(t.TempDir(), "p", job, 1); err == nil {
			t.Errorf("job %q accepted", job)
		}
	}
	d, err := Open(t.TempDir(), "p", "ok", 3)
	if err != nil {
		t.Fatal(err)
	}
	ms, err := d.Members()
	if err != nil || len(ms) != 1 || ms[0].Priority != 3 || ms[0].State != "Joining" {
		t.Fatalf("after Open: %+v %v", ms, err)
	}
}
