package optimizer

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"testing"
	"time"
)

func TestShares(t *testing.T) {
	const g = 1e9
	inf := math.Inf(1)
	type want struct {
		bps     float64
		boundBy string
		paced   bool
	}
	cases := map[string]struct {
		links  []SharedLink
		claims []ShareClaim
		want   map[string]want
	}{
		"one job alone on a measured path takes it and is not held to it": {
			links:  []SharedLink{{Name: "a.b", CapacityBitsPerSecond: g}},
			claims: []ShareClaim{{ID: "j1", Links: []string{"a.b"}}},
			want:   map[string]want{"j1": {g, "a.b", false}},
		},
		"one job alone under an admin's limit is held to it": {
			links:  []SharedLink{{Name: "site-a", CapacityBitsPerSecond: 0.4 * g, Limit: true}, {Name: "a.b", CapacityBitsPerSecond: g}},
			claims: []ShareClaim{{ID: "j1", Links: []string{"a.b", "site-a"}}},
			want:   map[string]want{"j1": {0.4 * g, "site-a", true}},
		},
		"four equal jobs get a quarter each": {
			links: []SharedLink{{Name: "a.b", CapacityBitsPerSecond: g}},
			claims: []ShareClaim{{ID: "j1", Links: []string{"a.b"}}, {ID: "j2", Links: []string{"a.b"}},
				{ID: "j3", Links: []string{"a.b"}}, {ID: "j4", Links: []string{"a.b"}}},
			want: map[string]want{"j1": {g / 4, "a.b", true}, "j2": {g / 4, "a.b", true}, "j3": {g / 4, "a.b", true}, "j4": {g / 4, "a.b", true}},
		},
		"weights 2:1 share 2:1": {
			links:  []SharedLink{{Name: "a.b", CapacityBitsPerSecond: 0.9 * g}},
			claims: []ShareClaim{{ID: "hi", Weight: 2, Links: []string{"a.b"}}, {ID: "lo", Weight: 1, Links: []string{"a.b"}}},
			want:   map[string]want{"hi": {0.6 * g, "a.b", true}, "lo": {0.3 * g, "a.b", true}},
		},
		"a weight below 1 counts as 1": {
			links:  []SharedLink{{Name: "a.b", CapacityBitsPerSecond: g}},
			claims: []ShareClaim{{ID: "j1", Weight: 0, Links: []string{"a.b"}}, {ID: "j2", Weight: -3, Links: []string{"a.b"}}},
			want:   map[string]want{"j1": {g / 2, "a.b", true}, "j2": {g / 2, "a.b", true}},
		},
		"a job that can use less leaves the rest to the others": {
			links: []SharedLink{{Name: "a.b", CapacityBitsPerSecond: g}},
			claims: []ShareClaim{{ID: "capped", DemandBitsPerSecond: 0.1 * g, Links: []string{"a.b"}},
				{ID: "j2", Links: []string{"a.b"}}, {ID: "j3", Links: []string{"a.b"}}},
			want: map[string]want{"capped": {0.1 * g, "", false}, "j2": {0.45 * g, "a.b", true}, "j3": {0.45 * g, "a.b", true}},
		},
		"a site's WAN limit binds the jobs of two paths first; the third path's job takes the rest of its path": {
			// a→b and a→c leave through site a's 0.6 Gbit/s; d→b shares site b's WAN
			// (1 Gbit/s) with a→b, which site a holds to 0.3.
			links: []SharedLink{{Name: "a.b", CapacityBitsPerSecond: g}, {Name: "a.c", CapacityBitsPerSecond: g}, {Name: "d.b", CapacityBitsPerSecond: g},
				{Name: "site-a", CapacityBitsPerSecond: 0.6 * g, Limit: true}, {Name: "site-b", CapacityBitsPerSecond: g, Limit: true}},
			claims: []ShareClaim{{ID: "ab", Links: []string{"a.b", "site-a", "site-b"}}, {ID: "ac", Links: []string{"a.c", "site-a"}},
				{ID: "db", Links: []string{"d.b", "site-b"}}},
			want: map[string]want{"ab": {0.3 * g, "site-a", true}, "ac": {0.3 * g, "site-a", true}, "db": {0.7 * g, "site-b", true}},
		},
		"a path of unknown capacity divides nothing": {
			links:  []SharedLink{{Name: "a.b", CapacityBitsPerSecond: math.NaN()}},
			claims: []ShareClaim{{ID: "j1", Links: []string{"a.b"}}, {ID: "j2", Links: []string{"a.b"}, DemandBitsPerSecond: 5e8}},
			want:   map[string]want{"j1": {inf, "", false}, "j2": {5e8, "", false}},
		},
		"a link named twice by a job counts once": {
			links:  []SharedLink{{Name: "a.b", CapacityBitsPerSecond: g}},
			claims: []ShareClaim{{ID: "j1", Links: []string{"a.b", "a.b"}}, {ID: "j2", Links: []string{"a.b", "nowhere"}}},
			want:   map[string]want{"j1": {g / 2, "a.b", true}, "j2": {g / 2, "a.b", true}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Shares(tc.links, tc.claims)
			if len(got) != len(tc.claims) {
				t.Fatalf("%d shares for %d claims", len(got), len(tc.claims))
			}
			for i, s := range got {
				w := tc.want[s.ID]
				if s.ID != tc.claims[i].ID {
					t.Errorf("share %d is of %s, want %s", i, s.ID, tc.claims[i].ID)
				}
				if !(math.IsInf(w.bps, 1) && math.IsInf(s.BitsPerSecond, 1)) && math.Abs(s.BitsPerSecond-w.bps) > 1 {
					t.Errorf("%s: %g bit/s, want %g", s.ID, s.BitsPerSecond, w.bps)
				}
				if s.BoundBy != w.boundBy || s.Paced != w.paced {
					t.Errorf("%s: bound by %q, paced %v; want %q, %v", s.ID, s.BoundBy, s.Paced, w.boundBy, w.paced)
				}
			}
		})
	}
}

// checkShares asserts what every allocation must hold: no link over its capacity, no
// job over its demand, no NaN or negative share, and max-min fairness — a job is
// frozen only by its demand or by a full link on which no job of a larger share per
// unit of weight could give way to it.
func checkShares(t *testing.T, links []SharedLink, claims []ShareClaim, got []JobShare) {
	t.Helper()
	capOf := map[string]float64{}
	for _, l := range links {
		if l.CapacityBitsPerSecond > 0 && !math.IsInf(l.CapacityBitsPerSecond, 0) && !math.IsNaN(l.CapacityBitsPerSecond) {
			capOf[l.Name] = l.CapacityBitsPerSecond
		}
	}
	load := map[string]float64{}
	for i, s := range got {
		c := claims[i]
		if math.IsNaN(s.BitsPerSecond) || s.BitsPerSecond < 0 {
			t.Fatalf("%s: share %g", s.ID, s.BitsPerSecond)
		}
		if d := c.DemandBitsPerSecond; d > 0 && !math.IsInf(d, 0) && s.BitsPerSecond > d*(1+1e-9) {
			t.Fatalf("%s: share %g above its demand %g", s.ID, s.BitsPerSecond, d)
		}
		for _, l := range uniqueLinks(c.Links) {
			if _, ok := capOf[l]; ok {
				load[l] += s.BitsPerSecond
			}
		}
		if s.BoundBy != "" {
			if _, ok := capOf[s.BoundBy]; !ok {
				t.Fatalf("%s: bound by %q, which has no known capacity", s.ID, s.BoundBy)
			}
		}
	}
	for l, c := range capOf {
		if load[l] > c*(1+1e-9) {
			t.Fatalf("link %s carries %g of its %g", l, load[l], c)
		}
	}
	for i, s := range got {
		if s.BoundBy == "" {
			continue
		}
		if load[s.BoundBy] < capOf[s.BoundBy]*(1-1e-9) {
			t.Fatalf("%s: bound by %s, which is not full (%g of %g)", s.ID, s.BoundBy, load[s.BoundBy], capOf[s.BoundBy])
		}
		// on its bottleneck, nobody has more per unit of weight
		mine := s.BitsPerSecond / float64(max(claims[i].Weight, 1))
		for j, o := range got {
			if j == i || !shareALink(claims[j].Links, []string{s.BoundBy}) {
				continue
			}
			if theirs := o.BitsPerSecond / float64(max(claims[j].Weight, 1)); theirs > mine*(1+1e-9) {
				t.Fatalf("%s (%g per weight) is held by %s where %s has %g per weight", s.ID, mine, s.BoundBy, o.ID, theirs)
			}
		}
	}
}

func FuzzShares(f *testing.F) {
	f.Add(uint64(1), uint8(4), uint8(3))
	f.Add(uint64(99), uint8(30), uint8(7))
	f.Fuzz(func(t *testing.T, seed uint64, nClaims, nLinks uint8) {
		links, claims := randomSharing(seed, int(nClaims%64), int(nLinks%12)+1)
		got := Shares(links, claims)
		if len(got) != len(claims) {
			t.Fatalf("%d shares for %d claims", len(got), len(claims))
		}
		checkShares(t, links, claims, got)
	})
}

// randomSharing draws links (some unknown, some admin limits) and claims crossing up to
// three of them, with weights 1–4 and some demands.
func randomSharing(seed uint64, nClaims, nLinks int) ([]SharedLink, []ShareClaim) {
	x := seed*6364136223846793005 + 1442695040888963407
	next := func(n int) int {
		x ^= x >> 33
		x *= 0xff51afd7ed558ccd
		x ^= x >> 33
		return int(x % uint64(n))
	}
	var links []SharedLink
	for i := range nLinks {
		c := float64(next(1000)+1) * 1e6
		switch next(6) {
		case 0:
			c = 0
		case 1:
			c = math.Inf(1)
		}
		links = append(links, SharedLink{Name: fmt.Sprintf("l%d", i), CapacityBitsPerSecond: c, Limit: next(3) == 0})
	}
	var claims []ShareClaim
	for i := range nClaims {
		c := ShareClaim{ID: fmt.Sprintf("j%d", i), Weight: next(5)}
		if next(3) == 0 {
			c.DemandBitsPerSecond = float64(next(500)) * 1e6
		}
		for range next(3) + 1 {
			c.Links = append(c.Links, fmt.Sprintf("l%d", next(nLinks)))
		}
		claims = append(claims, c)
	}
	return links, claims
}

// TestShareSimulation runs the share allocation through a sequence of arrivals,
// departures and suspensions on two paths that leave through one site, checking the
// invariants after every event, and compares the sequence with a golden file.
func TestShareSimulation(t *testing.T) {
	const g = 1e9
	links := []SharedLink{{Name: "path a.b", CapacityBitsPerSecond: g}, {Name: "path a.c", CapacityBitsPerSecond: 0.5 * g},
		{Name: "site a", CapacityBitsPerSecond: 1.2 * g, Limit: true}}
	type event struct {
		at   time.Duration
		what string
		job  ShareClaim
		drop string
	}
	ab := []string{"path a.b", "site a"}
	ac := []string{"path a.c", "site a"}
	events := []event{
		{0, "j1 starts on a.b", ShareClaim{ID: "j1", Weight: 1, Links: ab}, ""},
		{30 * time.Second, "j2 (weight 2) starts on a.b", ShareClaim{ID: "j2", Weight: 2, Links: ab}, ""},
		{60 * time.Second, "j3 starts on a.c", ShareClaim{ID: "j3", Weight: 1, Links: ac}, ""},
		{90 * time.Second, "j4 (capped at 100 Mbit/s) starts on a.b", ShareClaim{ID: "j4", Weight: 4, DemandBitsPerSecond: 0.1 * g, Links: ab}, ""},
		{120 * time.Second, "j5 (weight 3) starts on a.c", ShareClaim{ID: "j5", Weight: 3, Links: ac}, ""},
		{150 * time.Second, "j2 is suspended", ShareClaim{}, "j2"},
		{180 * time.Second, "j1 completes", ShareClaim{}, "j1"},
		{210 * time.Second, "j5 completes", ShareClaim{}, "j5"},
	}
	var claims []ShareClaim
	var log bytes.Buffer
	for _, e := range events {
		if e.drop != "" {
			for i, c := range claims {
				if c.ID == e.drop {
					claims = append(claims[:i:i], claims[i+1:]...)
					break
				}
			}
		} else {
			claims = append(claims, e.job)
		}
		got := Shares(links, claims)
		checkShares(t, links, claims, got)
		fmt.Fprintf(&log, "t=%-5s %s\n", e.at, e.what)
		load := map[string]float64{}
		for i, s := range got {
			fmt.Fprintf(&log, "  %-3s weight %d  %-14s bound by %-9q paced %v\n", s.ID, max(claims[i].Weight, 1), FormatBitsPerSecond(s.BitsPerSecond), s.BoundBy, s.Paced)
			for _, l := range claims[i].Links {
				load[l] += s.BitsPerSecond
			}
		}
		names := make([]string, 0, len(load))
		for l := range load {
			names = append(names, l)
		}
		sort.Strings(names)
		for _, l := range names {
			fmt.Fprintf(&log, "  %-9s carries %s\n", l, FormatBitsPerSecond(load[l]))
		}
	}
	compareGolden(t, filepath.Join("testdata", "share", "sequence.golden"), log.Bytes())
}
