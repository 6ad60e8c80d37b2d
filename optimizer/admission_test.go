package optimizer

import (
	"fmt"
	"sort"
	"testing"
	"time"
)

func TestAdmit(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	path := []string{"a.b", "a", "b"}
	other := []string{"c.d", "c", "d"}
	type want struct {
		admitted   bool
		position   int
		waitingFor string
		preempted  string
		filesOf    string
	}
	writes := func(ep, p string) []Tree { return []Tree{{Endpoint: ep, Path: p, Writes: true}} }
	reads := func(ep, p string) []Tree { return []Tree{{Endpoint: ep, Path: p}} }
	cases := map[string]struct {
		limits map[string]int
		cands  []AdmissionCandidate
		want   map[string]want
	}{
		"no limit admits everyone": {
			cands: []AdmissionCandidate{{ID: "j1", Created: at(0), Links: path}, {ID: "j2", Created: at(1), Links: path}},
			want:  map[string]want{"j1": {admitted: true}, "j2": {admitted: true}},
		},
		"equal priority: first come, first served": {
			limits: map[string]int{"a.b": 2},
			cands: []AdmissionCandidate{{ID: "late", Created: at(9), Links: path}, {ID: "first", Created: at(1), Links: path},
				{ID: "second", Created: at(2), Links: path}, {ID: "third", Created: at(3), Links: path}},
			want: map[string]want{"first": {admitted: true}, "second": {admitted: true},
				"third": {position: 1, waitingFor: "a.b"}, "late": {position: 2, waitingFor: "a.b"}},
		},
		"higher priority first, whenever it came": {
			limits: map[string]int{"a": 1},
			cands: []AdmissionCandidate{{ID: "bulk", Priority: 1, Created: at(1), Links: path},
				{ID: "express", Priority: 5, Created: at(8), Links: path}},
			want: map[string]want{"express": {admitted: true}, "bulk": {position: 1, waitingFor: "a"}},
		},
		"a running job keeps its slot against a higher priority": {
			limits: map[string]int{"a.b": 1},
			cands: []AdmissionCandidate{{ID: "running", Priority: 1, Created: at(1), Running: true, Links: path},
				{ID: "express", Priority: 5, Created: at(8), Links: path}},
			want: map[string]want{"running": {admitted: true}, "express": {position: 1, waitingFor: "a.b"}},
		},
		"running jobs keep their slots past a limit lowered since": {
			limits: map[string]int{"a.b": 1},
			cands: []AdmissionCandidate{{ID: "r1", Created: at(1), Running: true, Links: path}, {ID: "r2", Created: at(2), Running: true, Links: path},
				{ID: "q", Created: at(3), Links: path}},
			want: map[string]want{"r1": {admitted: true}, "r2": {admitted: true}, "q": {position: 1, waitingFor: "a.b"}},
		},
		"a class that preempts takes the slot of the lowest priority, started last": {
			limits: map[string]int{"a.b": 2},
			cands: []AdmissionCandidate{{ID: "mid", Priority: 3, Created: at(1), Running: true, Links: path},
				{ID: "low-old", Priority: 1, Created: at(2), Running: true, Links: path},
				{ID: "low-new", Priority: 1, Created: at(3), Running: true, Links: path},
				{ID: "urgent", Priority: 9, Created: at(9), Preempts: true, Links: path}},
			// a limit of 2 with three running: two must go for urgent to fit
			want: map[string]want{"mid": {admitted: true}, "urgent": {admitted: true},
				"low-old": {position: 1, waitingFor: "a.b", preempted: "urgent"}, "low-new": {position: 2, waitingFor: "a.b", preempted: "urgent"}},
		},
		"a running preemptor over the limit: the job whose place it took learns it": {
			// urgent was admitted by preempting low; in low's own pass both run
			limits: map[string]int{"a": 1},
			cands: []AdmissionCandidate{{ID: "low", Priority: 1, Created: at(1), Running: true, Links: path},
				{ID: "urgent", Priority: 9, Created: at(9), Running: true, Preempts: true, Links: path}},
			want: map[string]want{"urgent": {admitted: true}, "low": {position: 1, waitingFor: "a", preempted: "urgent"}},
		},
		"no preemption without a lower priority to take from": {
			limits: map[string]int{"a.b": 1},
			cands: []AdmissionCandidate{{ID: "peer", Priority: 9, Created: at(1), Running: true, Links: path},
				{ID: "urgent", Priority: 9, Created: at(9), Preempts: true, Links: path}},
			want: map[string]want{"peer": {admitted: true}, "urgent": {position: 1, waitingFor: "a.b"}},
		},
		"a waiting job keeps its place: a later one does not overtake it where it waits": {
			// big waits for a's slot; small would fit on a.b's limit but also uses a
			limits: map[string]int{"a": 1, "a.b": 3},
			cands: []AdmissionCandidate{{ID: "running", Created: at(0), Running: true, Links: []string{"a.c", "a", "c"}},
				{ID: "big", Created: at(1), Links: path}, {ID: "small", Created: at(2), Links: []string{"a.e", "a", "e"}},
				{ID: "elsewhere", Created: at(3), Links: other}},
			want: map[string]want{"running": {admitted: true}, "big": {position: 1, waitingFor: "a"},
				"small": {position: 2, waitingFor: "a"}, "elsewhere": {admitted: true}},
		},
		"positions count only the jobs queued on a shared link": {
			limits: map[string]int{"a.b": 1, "c.d": 1},
			cands: []AdmissionCandidate{{ID: "ab0", Created: at(0), Running: true, Links: path}, {ID: "cd0", Created: at(0), Running: true, Links: other},
				{ID: "ab1", Created: at(1), Links: path}, {ID: "cd1", Created: at(2), Links: other}, {ID: "ab2", Created: at(3), Links: path}},
			want: map[string]want{"ab0": {admitted: true}, "cd0": {admitted: true},
				"ab1": {position: 1, waitingFor: "a.b"}, "cd1": {position: 1, waitingFor: "c.d"}, "ab2": {position: 2, waitingFor: "a.b"}},
		},
		"a job writing where a running job writes waits for it, with no limit anywhere": {
			cands: []AdmissionCandidate{{ID: "first", Created: at(1), Running: true, Links: path, Trees: writes("b", "archive/run1")},
				{ID: "same", Created: at(2), Links: path, Trees: writes("b", "archive/run1")},
				{ID: "beside", Created: at(3), Links: path, Trees: writes("b", "archive/run2")}},
			want: map[string]want{"first": {admitted: true}, "same": {position: 1, waitingFor: FilesLink, filesOf: "first"},
				"beside": {admitted: true}},
		},
		"a tree inside another's overlaps it, whichever is the wider; reading beside a writer waits too": {
			cands: []AdmissionCandidate{{ID: "wide", Created: at(1), Running: true, Links: path, Trees: writes("b", "archive")},
				{ID: "inside", Created: at(2), Links: path, Trees: writes("b", "./archive/run1/")},
				{ID: "reader", Created: at(3), Links: other, Trees: reads("b", "archive/run7")},
				{ID: "other-endpoint", Created: at(4), Links: other, Trees: writes("d", "archive")}},
			want: map[string]want{"wide": {admitted: true}, "inside": {position: 1, waitingFor: FilesLink, filesOf: "wide"},
				"reader": {position: 1, waitingFor: FilesLink, filesOf: "wide"}, "other-endpoint": {admitted: true}},
		},
		"readers of one tree run together": {
			cands: []AdmissionCandidate{{ID: "r1", Created: at(1), Running: true, Links: path, Trees: reads("a", "data")},
				{ID: "r2", Created: at(2), Links: other, Trees: reads("a", "data/x")}},
			want: map[string]want{"r1": {admitted: true}, "r2": {admitted: true}},
		},
		"a job keeps its place for files: a later one using them waits behind it, first come first served": {
			cands: []AdmissionCandidate{{ID: "running", Created: at(0), Running: true, Links: path, Trees: writes("b", "x")},
				{ID: "second", Created: at(1), Links: path, Trees: writes("b", "x/y")},
				{ID: "third", Created: at(2), Links: other, Trees: writes("b", "x/y/z")}},
			want: map[string]want{"running": {admitted: true}, "second": {position: 1, waitingFor: FilesLink, filesOf: "running"},
				"third": {position: 2, waitingFor: FilesLink, filesOf: "running"}},
		},
		"once the writer ended, the first waiting takes the files and the next waits for it": {
			cands: []AdmissionCandidate{{ID: "second", Created: at(1), Links: path, Trees: writes("b", "x/y")},
				{ID: "third", Created: at(2), Links: other, Trees: writes("b", "x/y/z")}},
			want: map[string]want{"second": {admitted: true}, "third": {position: 1, waitingFor: FilesLink, filesOf: "second"}},
		},
		"higher priority first for files too, but it does not preempt a writer": {
			cands: []AdmissionCandidate{{ID: "writer", Priority: 1, Created: at(0), Running: true, Links: path, Trees: writes("b", "x")},
				{ID: "bulk", Priority: 1, Created: at(1), Links: path, Trees: writes("b", "x")},
				{ID: "urgent", Priority: 9, Created: at(5), Preempts: true, Links: path, Trees: writes("b", "x")}},
			want: map[string]want{"writer": {admitted: true}, "urgent": {position: 1, waitingFor: FilesLink, filesOf: "writer"},
				"bulk": {position: 2, waitingFor: FilesLink, filesOf: "writer"}},
		},
		"running jobs that overlap both keep running": {
			cands: []AdmissionCandidate{{ID: "a", Created: at(0), Running: true, Links: path, Trees: writes("b", "x")},
				{ID: "b", Created: at(1), Running: true, Links: path, Trees: writes("b", "x")}},
			want: map[string]want{"a": {admitted: true}, "b": {admitted: true}},
		},
		"a job that waits for files does not hold a link's place": {
			limits: map[string]int{"a.b": 2},
			cands: []AdmissionCandidate{{ID: "writer", Created: at(0), Running: true, Links: path, Trees: writes("b", "x")},
				{ID: "same", Created: at(1), Links: path, Trees: writes("b", "x")},
				{ID: "beside", Created: at(2), Links: path, Trees: writes("b", "y")}},
			want: map[string]want{"writer": {admitted: true}, "same": {position: 1, waitingFor: FilesLink, filesOf: "writer"},
				"beside": {admitted: true}},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			got := Admit(tc.limits, tc.cands)
			for i, a := range got {
				if a.ID != tc.cands[i].ID {
					t.Fatalf("answer %d is of %s, want %s", i, a.ID, tc.cands[i].ID)
				}
				w := tc.want[a.ID]
				if a.Admitted != w.admitted || a.Position != w.position || a.WaitingFor != w.waitingFor || a.PreemptedBy != w.preempted || a.FilesOf != w.filesOf {
					t.Errorf("%s: %+v, want %+v", a.ID, a, w)
				}
			}
		})
	}
}

func TestTreeOverlaps(t *testing.T) {
	w := func(p string) Tree { return Tree{Endpoint: "e", Path: p, Writes: true} }
	r := func(p string) Tree { return Tree{Endpoint: "e", Path: p} }
	for _, tc := range []struct {
		a, b Tree
		want bool
	}{
		{w("a/b"), w("a/b"), true},
		{w("a/b"), w("a/b/c"), true},
		{w("a/b/c"), w("a/b"), true},
		{w("a/b"), w("a/bc"), false}, // a name that begins like the other's is not inside it
		{w("a/bc"), r("a/b"), false},
		{w("."), r("z/y"), true}, // the whole root
		{r("z"), w(""), true},
		{w("./a//b/"), r("a/b/c"), true}, // paths compared cleaned
		{r("a"), r("a"), false},          // two readers share
		{w("a"), Tree{Endpoint: "f", Path: "a", Writes: true}, false},
		{r("a/b"), w("a"), true},
	} {
		if got := tc.a.Overlaps(tc.b); got != tc.want {
			t.Errorf("%+v overlaps %+v: %v, want %v", tc.a, tc.b, got, tc.want)
		}
		if got := tc.b.Overlaps(tc.a); got != tc.want {
			t.Errorf("%+v overlaps %+v: %v, want %v (the other way round)", tc.b, tc.a, got, tc.want)
		}
	}
}

// FuzzAdmit checks the rules on random queues: no link over its limit unless by jobs
// that were running already, running jobs admitted unless preempted by a job of
// higher priority that may preempt, queued jobs numbered 1, 2, … on each link, and no
// waiting job overtaken on a link it waits for by a job after it in the order.
func FuzzAdmit(f *testing.F) {
	f.Add(uint64(1), uint8(12))
	f.Add(uint64(7), uint8(40))
	f.Fuzz(func(t *testing.T, seed uint64, n uint8) {
		x := seed*6364136223846793005 + 1442695040888963407
		next := func(k int) int {
			x ^= x >> 33
			x *= 0xff51afd7ed558ccd
			x ^= x >> 33
			return int(x % uint64(k))
		}
		links := []string{"p0", "p1", "p2", "e0", "e1", "e2"}
		limits := map[string]int{}
		for _, l := range links {
			limits[l] = next(4) // 0: no limit
		}
		var cands []AdmissionCandidate
		for i := range int(n % 48) {
			c := AdmissionCandidate{ID: fmt.Sprintf("j%02d", i), Priority: next(4), Created: time.Unix(int64(next(20)), 0),
				Running: next(3) == 0, Preempts: next(4) == 0}
			p := next(3)
			c.Links = []string{links[p], links[3+p], links[3+(p+1+next(2))%3]}
			for range next(3) {
				c.Trees = append(c.Trees, Tree{Endpoint: links[3+next(3)], Path: []string{"", "x", "x/y", "x/z", "w"}[next(5)], Writes: next(2) == 0})
			}
			cands = append(cands, c)
		}
		got := Admit(limits, cands)
		held := map[string]int{}
		heldBefore := map[string]int{}
		for i, a := range got {
			c := cands[i]
			if c.Running {
				for _, l := range uniqueLinks(c.Links) {
					heldBefore[l]++
				}
			}
			if c.Running && !a.Admitted {
				if a.PreemptedBy == "" {
					t.Fatalf("%s was running and lost its slot without being preempted", c.ID)
				}
				// (the preemptor may itself have lost its place to one of higher
				// priority still)
				by := cands[indexOf(cands, a.PreemptedBy)]
				if !by.Preempts || by.Priority <= c.Priority {
					t.Fatalf("%s preempted by %+v", c.ID, by)
				}
			}
			if a.Admitted {
				if a.Position != 0 || a.WaitingFor != "" {
					t.Fatalf("%s admitted with %+v", c.ID, a)
				}
				for _, l := range uniqueLinks(c.Links) {
					held[l]++
				}
			} else if a.Position < 1 || a.WaitingFor == "" {
				t.Fatalf("%s waits with %+v", c.ID, a)
			}
		}
		for l, k := range held {
			if limits[l] >= 1 && k > max(limits[l], heldBefore[l]) {
				t.Fatalf("link %s (limit %d, %d running before) holds %d", l, limits[l], heldBefore[l], k)
			}
		}
		// files: no job admitted beside another whose trees overlap unless both were
		// running; a job waiting for files names one admitted, or queued before it,
		// whose trees overlap its own
		for i, a := range got {
			for j, b := range got {
				if i < j && a.Admitted && b.Admitted && !(cands[i].Running && cands[j].Running) && treesOverlap(cands[i].Trees, cands[j].Trees) {
					t.Fatalf("%s and %s admitted together on overlapping trees %+v, %+v", cands[i].ID, cands[j].ID, cands[i].Trees, cands[j].Trees)
				}
			}
			if a.WaitingFor == FilesLink {
				k := indexOf(cands, a.FilesOf)
				if k < 0 || !treesOverlap(cands[i].Trees, cands[k].Trees) || (!got[k].Admitted && !queuedBefore(cands[k], cands[i]) && !cands[k].Running) {
					t.Fatalf("%s waits for the files of %q: %+v", cands[i].ID, a.FilesOf, a)
				}
			} else if a.FilesOf != "" {
				t.Fatalf("%s names files of %s waiting for %s", cands[i].ID, a.FilesOf, a.WaitingFor)
			}
		}
		// order on each link a job waits for: nobody after it in the order was admitted
		// there unless it was running already
		var order []int
		for i := range cands {
			order = append(order, i)
		}
		sort.SliceStable(order, func(a, b int) bool { return queuedBefore(cands[order[a]], cands[order[b]]) })
		for k, i := range order {
			if got[i].Admitted || cands[i].Running {
				continue
			}
			for _, j := range order[k+1:] {
				if got[j].Admitted && !cands[j].Running && shareALink([]string{got[i].WaitingFor}, cands[j].Links) {
					t.Fatalf("%s overtook %s, waiting for %s", cands[j].ID, cands[i].ID, got[i].WaitingFor)
				}
			}
		}
	})
}

func indexOf(cands []AdmissionCandidate, id string) int {
	for i, c := range cands {
		if c.ID == id {
			return i
		}
	}
	return -1
}
