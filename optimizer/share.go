package optimizer

import (
	"math"
	"sort"
)

// SharedLink is something the traffic of several jobs crosses and whose capacity they
// divide: a path (source endpoint → destination endpoint, its capacity learned from its
// jobs), or a site's WAN link (an endpoint's configured rate limit).
type SharedLink struct {
	Name string
	// CapacityBitsPerSecond is what the link carries in total; a value that is not a
	// positive finite number means unknown, and the link divides nothing.
	CapacityBitsPerSecond float64
	// Limit marks a rate an admin set (a site's WAN, a path's maxBitsPerSecond) rather
	// than one measured: a job bound by it is held to its share even when it is the
	// link's only job, where a measured capacity only divides between jobs (see
	// JobShare.Paced).
	Limit bool
}

// ShareClaim is one job's claim on the links it crosses.
type ShareClaim struct {
	ID string
	// Weight is the job's priority; shares are in proportion to it. Below 1 counts
	// as 1.
	Weight int
	// DemandBitsPerSecond is the most the job can use whatever its share (its own
	// rate limit, or what its nodes carry); a value that is not a positive finite
	// number means unbounded.
	DemandBitsPerSecond float64
	// Links are the names of the links the job crosses; a name no SharedLink has is
	// ignored.
	Links []string
}

// JobShare is one job's share.
type JobShare struct {
	ID string
	// BitsPerSecond is the job's share: +Inf when neither a link of known capacity
	// nor its demand bounds it.
	BitsPerSecond float64
	// BoundBy is the link whose capacity set the share; "" when the job's demand did,
	// or nothing did.
	BoundBy string
	// Sharers is how many jobs (this one included) cross BoundBy.
	Sharers int
	// Paced says the agents should hold the job to BitsPerSecond: the link that bound
	// it is an admin's limit, or other jobs cross it, so that taking more would take
	// from them. A job alone on a measured path is not held to the measurement: the
	// path may carry more than was measured, and nobody else would lose by it.
	Paced bool
}

// Shares divides the links' capacity between the claims by weighted max-min fairness
// (progressive filling, Bertsekas & Gallager §6.5.2, with weights as FTS3's activity
// shares and Kueue's fair sharing weigh tenants): every claim's rate rises in
// proportion to its weight until a link it crosses is full or it reaches its demand;
// those claims are frozen and the rest go on rising. So on one path jobs get
// capacity × weight / Σ weights; a job that can use less than that (its demand) leaves
// the rest to the others; and a job whose site's WAN limit binds first takes less of
// the path, which the path's other jobs share. The answer is in the order of claims.
func Shares(links []SharedLink, claims []ShareClaim) []JobShare {
	capacity := map[string]float64{}
	limit := map[string]bool{}
	for _, l := range links {
		if c := l.CapacityBitsPerSecond; c > 0 && !math.IsInf(c, 0) && !math.IsNaN(c) {
			capacity[l.Name] = c
			limit[l.Name] = l.Limit
		}
	}
	n := len(claims)
	out := make([]JobShare, n)
	weight := make([]float64, n)
	demand := make([]float64, n)
	// the links of each claim that bind (known capacity), without repeats
	crosses := make([][]string, n)
	sharers := map[string]int{}
	for i, c := range claims {
		out[i] = JobShare{ID: c.ID, BitsPerSecond: math.Inf(1)}
		weight[i] = float64(max(c.Weight, 1))
		demand[i] = math.Inf(1)
		if d := c.DemandBitsPerSecond; d > 0 && !math.IsInf(d, 0) && !math.IsNaN(d) {
			demand[i] = d
		}
		seen := map[string]bool{}
		for _, name := range c.Links {
			if _, ok := capacity[name]; ok && !seen[name] {
				seen[name] = true
				crosses[i] = append(crosses[i], name)
				sharers[name]++
			}
		}
		sort.Strings(crosses[i])
	}

	frozen := make([]bool, n)
	used := map[string]float64{} // by frozen claims
	level := 0.0                 // rate per unit of weight of the claims not frozen
	for {
		// the next level at which a link fills or a claim reaches its demand
		next := math.Inf(1)
		live := map[string]float64{} // Σ weights of the live claims on each link
		anyLive := false
		for i := range claims {
			if frozen[i] {
				continue
			}
			anyLive = true
			next = math.Min(next, demand[i]/weight[i])
			for _, l := range crosses[i] {
				live[l] += weight[i]
			}
		}
		if !anyLive {
			break
		}
		full := map[string]bool{}
		for l, w := range live {
			t := math.Max(0, capacity[l]-used[l]) / w
			switch {
			case t < next*(1-1e-12):
				next = t
				full = map[string]bool{l: true}
			case t <= next*(1+1e-12):
				full[l] = true
			}
		}
		if math.IsInf(next, 1) {
			// nothing bounds the claims left
			break
		}
		level = math.Max(level, next)
		for i := range claims {
			if frozen[i] {
				continue
			}
			rate := weight[i] * level
			var by string
			for _, l := range crosses[i] {
				if full[l] {
					by = l
					break
				}
			}
			atDemand := rate >= demand[i]*(1-1e-12)
			if by == "" && !atDemand {
				continue
			}
			frozen[i] = true
			if atDemand {
				rate, by = demand[i], ""
			}
			out[i].BitsPerSecond = rate
			out[i].BoundBy = by
			if by != "" {
				out[i].Sharers = sharers[by]
				out[i].Paced = limit[by] || sharers[by] > 1
			}
			for _, l := range crosses[i] {
				used[l] += rate
			}
		}
	}
	return out
}
