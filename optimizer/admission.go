package optimizer

import (
	"path"
	"slices"
	"sort"
	"strings"
	"time"
)

// AdmissionCandidate is a job that runs or wants to run.
type AdmissionCandidate struct {
	ID string
	// Priority orders the queue: higher first.
	Priority int
	// Created orders jobs of equal priority: first come, first served (then ID).
	Created time.Time
	// Running says the job holds its slots now (it was admitted and has not ended or
	// been suspended). A running job keeps them, even past a limit lowered since,
	// unless a job that may preempt takes them.
	Running bool
	// Preempts says the job may take the slots of running jobs of lower priority when
	// there is no room (its priority class allows it).
	Preempts bool
	// Links are the names of what the job counts against (its path, its endpoints).
	Links []string
	// Trees are the directory trees the job reads and writes. Two jobs whose trees
	// overlap where one of them writes never run at once: the later waits until the
	// earlier ends (Admission.FilesOf), as it would for a link of limit 1.
	Trees []Tree
}

// Tree is a directory tree of an endpoint that a job reads (its source paths) or writes
// (where they land at its destination).
type Tree struct {
	Endpoint string
	// Path is relative to the endpoint's storage root; "" or "." is the whole root.
	Path   string
	Writes bool
}

// Overlaps says whether t and u share a file at the same endpoint — one path is the
// other or lies under it — and at least one of them writes it: a job writing there would
// change what the other reads or writes.
func (t Tree) Overlaps(u Tree) bool {
	if t.Endpoint != u.Endpoint || !t.Writes && !u.Writes {
		return false
	}
	a, b := path.Clean("/"+t.Path), path.Clean("/"+u.Path)
	return a == b || a == "/" || b == "/" || strings.HasPrefix(a, b+"/") || strings.HasPrefix(b, a+"/")
}

// Overlap finds the first tree of a that overlaps a tree of b (Tree.Overlaps), and
// that tree of b.
func Overlap(a, b []Tree) (Tree, Tree, bool) {
	for _, t := range a {
		for _, u := range b {
			if t.Overlaps(u) {
				return t, u, true
			}
		}
	}
	return Tree{}, Tree{}, false
}

// treesOverlap says whether any tree of a overlaps any tree of b.
func treesOverlap(a, b []Tree) bool {
	_, _, ok := Overlap(a, b)
	return ok
}

// FilesLink is Admission.WaitingFor of a job that waits for another job's files.
const FilesLink = "files"

// Admission is the decision for one candidate.
type Admission struct {
	ID       string
	Admitted bool
	// Position is the job's place among the queued jobs it waits behind (1 is next):
	// one more than the queued jobs before it in the order that share a link with it.
	// 0 when admitted.
	Position int
	// WaitingFor names the link that has no room for the job, or, when a job earlier
	// in the queue holds its place there, that link too, or FilesLink when the job's
	// trees overlap those of a job admitted or queued before it (FilesOf); "" when
	// admitted.
	WaitingFor string
	// FilesOf is the job whose trees overlap this one's and that it waits for (running,
	// or before it in the queue); "" unless WaitingFor is FilesLink.
	FilesOf string
	// PreemptedBy is set on a running job that loses its slots to a job of higher
	// priority whose class allows it; Admitted is then false.
	PreemptedBy string
}

// Admit decides which jobs run, given how many jobs each link allows at once (a link
// not in maxActive, or with a limit below 1, allows any number). Running jobs keep
// their slots; then the others, higher priority first and, at equal priority, first
// come first served, take the free slots of all their links or wait. A job that waits
// keeps its place: no job after it in the order is admitted on a link it waits for,
// so a lower-priority job never overtakes it there, while a job that shares no link
// with it may go ahead. A waiting job that Preempts takes, on each full link, the
// slots of running jobs of the lowest priority below its own (the one started last
// among equals) until it fits; if some full link has not enough of them, nobody is
// preempted and it waits. A running job that Preempts does the same on a link over
// its limit — that is how the job it took the place of learns it, once the preemptor
// runs — while running jobs over a limit with no such job among them keep their
// slots. The answer is in the order of cands.
func Admit(maxActive map[string]int, cands []AdmissionCandidate) []Admission {
	out := make([]Admission, len(cands))
	for i, c := range cands {
		out[i] = Admission{ID: c.ID}
	}
	holders := map[string][]int{} // link → running or admitted candidates on it
	for i, c := range cands {
		if !c.Running {
			continue
		}
		out[i].Admitted = true
		for _, l := range uniqueLinks(c.Links) {
			holders[l] = append(holders[l], i)
		}
	}
	order := make([]int, 0, len(cands))
	for i, c := range cands {
		if !c.Running {
			order = append(order, i)
		}
	}
	sort.SliceStable(order, func(a, b int) bool { return queuedBefore(cands[order[a]], cands[order[b]]) })

	var queued []int
	preempt := func(by int, victims map[int]string) {
		for v, link := range victims {
			out[v].Admitted, out[v].PreemptedBy, out[v].WaitingFor = false, cands[by].ID, link
			for _, l := range uniqueLinks(cands[v].Links) {
				holders[l] = without(holders[l], v)
			}
			queued = append(queued, v)
		}
	}
	// running preemptors, highest priority first, bring the links they hold back to
	// their limits
	var running []int
	for i, c := range cands {
		if c.Running && c.Preempts {
			running = append(running, i)
		}
	}
	sort.SliceStable(running, func(a, b int) bool { return queuedBefore(cands[running[a]], cands[running[b]]) })
	for _, i := range running {
		if !out[i].Admitted {
			continue // preempted by a preemptor of higher priority
		}
		var over []string
		for _, l := range uniqueLinks(cands[i].Links) {
			if maxActive[l] >= 1 && len(holders[l]) > maxActive[l] {
				over = append(over, l)
			}
		}
		if len(over) == 0 {
			continue
		}
		if victims, ok := preemptionVictims(cands, holders, maxActive, over, cands[i].Priority, 0); ok {
			preempt(i, victims)
		}
	}

	reserved := map[string]bool{} // links a job earlier in the order waits for
	for _, i := range order {
		c := cands[i]
		links := uniqueLinks(c.Links)
		var full, blocked []string
		for _, l := range links {
			if reserved[l] {
				blocked = append(blocked, l)
			}
			if maxActive[l] >= 1 && len(holders[l]) >= maxActive[l] {
				full = append(full, l)
			}
		}
		// a job using its files, admitted or queued before it: it waits, and no
		// preemption frees files
		filesOf := -1
		if len(c.Trees) > 0 {
			for j := range cands {
				if j != i && (out[j].Admitted || slices.Contains(queued, j)) && treesOverlap(c.Trees, cands[j].Trees) {
					filesOf = j
					break
				}
			}
		}
		admit := len(full) == 0 && len(blocked) == 0 && filesOf < 0
		if !admit && len(blocked) == 0 && filesOf < 0 && c.Preempts {
			if victims, ok := preemptionVictims(cands, holders, maxActive, full, c.Priority, 1); ok {
				preempt(i, victims)
				admit = true
			}
		}
		if admit {
			out[i].Admitted = true
			for _, l := range links {
				holders[l] = append(holders[l], i)
			}
			continue
		}
		switch {
		case len(blocked) > 0:
			out[i].WaitingFor = blocked[0]
		case len(full) > 0:
			out[i].WaitingFor = full[0]
		default:
			out[i].WaitingFor, out[i].FilesOf = FilesLink, cands[filesOf].ID
		}
		if out[i].FilesOf == "" {
			// a job that waits for files keeps its place by its trees (a later job
			// using them waits behind it), not on links it has room on
			for _, l := range links {
				reserved[l] = true
			}
		}
		queued = append(queued, i)
	}
	// positions: one more than the queued jobs before it that share a link or files
	// with it
	sort.SliceStable(queued, func(a, b int) bool { return queuedBefore(cands[queued[a]], cands[queued[b]]) })
	for k, i := range queued {
		pos := 1
		for _, j := range queued[:k] {
			if shareALink(cands[i].Links, cands[j].Links) || treesOverlap(cands[i].Trees, cands[j].Trees) {
				pos++
			}
		}
		out[i].Position = pos
	}
	return out
}

// queuedBefore orders waiting jobs: higher priority, then earlier, then by ID.
func queuedBefore(a, b AdmissionCandidate) bool {
	if a.Priority != b.Priority {
		return a.Priority > b.Priority
	}
	if !a.Created.Equal(b.Created) {
		return a.Created.Before(b.Created)
	}
	return a.ID < b.ID
}

// preemptionVictims picks, on each full link, holders of the lowest priority below
// prio (the latest created among equals) until the link has room for need more; a
// victim frees every link it holds. It returns each victim with the link it was
// picked for; ok is false when some full link cannot be freed so.
func preemptionVictims(cands []AdmissionCandidate, holders map[string][]int, maxActive map[string]int, full []string, prio, need int) (map[int]string, bool) {
	victims := map[int]string{}
	for _, l := range full {
		for {
			left := 0
			for _, h := range holders[l] {
				if _, ok := victims[h]; !ok {
					left++
				}
			}
			if left+need <= maxActive[l] {
				break
			}
			best := -1
			for _, h := range holders[l] {
				c := cands[h]
				if _, ok := victims[h]; ok || !c.Running || c.Priority >= prio {
					continue
				}
				if best < 0 || c.Priority < cands[best].Priority ||
					(c.Priority == cands[best].Priority && (c.Created.After(cands[best].Created) ||
						(c.Created.Equal(cands[best].Created) && c.ID > cands[best].ID))) {
					best = h
				}
			}
			if best < 0 {
				return nil, false
			}
			victims[best] = l
		}
	}
	return victims, true
}

func without(s []int, v int) []int {
	out := s[:0:0]
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

func shareALink(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

func uniqueLinks(links []string) []string {
	seen := map[string]bool{}
	out := make([]string, 0, len(links))
	for _, l := range links {
		if !seen[l] {
			seen[l] = true
			out = append(out, l)
		}
	}
	return out
}
