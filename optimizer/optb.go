package optimizer

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"strings"
)

// Node is one DTN node a side may use.
type Node struct {
	Name string
	// NICBitsPerSecond is the capacity of the node's interface for transfers; a node
	// without it (≤ 0) is not used.
	NICBitsPerSecond float64
	// CPUBudgetMillicores is the CPU dtnflow's agents may use on the node over every
	// stripe; 0 means no budget, and CPU does not bind.
	CPUBudgetMillicores float64
	// DiskBitsPerSecond is the rate the node's storage reads or writes; 0 means
	// unknown, and disk does not bind.
	DiskBitsPerSecond float64
	// PlacedStripes counts stripes of other jobs already on the node; they use its
	// stripe slots (MaxStripes), and nothing else: what they use of the node is
	// OthersBitsPerSecond and OthersMillicores.
	PlacedStripes int
	// OthersBitsPerSecond is the rate other jobs' plans put through the node (their
	// planned rate per stripe times their stripes here); it comes off the NIC's and
	// the disk's capacity.
	OthersBitsPerSecond float64
	// OthersMillicores is the CPU other jobs' agents on the node are planned to use
	// (their CPU requests); it comes off CPUBudgetMillicores.
	OthersMillicores float64
	// MaxStripes is the endpoint's cap on stripes per node over every job; 0: none.
	MaxStripes int
	// Preferred marks a node the job already runs agents on. Among nodes that carry
	// the same, a preferred one is chosen first, so that planning after the probe (or
	// re-planning) does not move a stripe to an equal node for nothing. OPT_B itself
	// is silent on which of equal nodes to use.
	Preferred bool
}

// Binding names what limits a plan's predicted rate. The first five are the API's
// v1alpha1.BindingResource values.
type Binding string

const (
	BindingPath      Binding = "Path"
	BindingNIC       Binding = "NIC"
	BindingCPU       Binding = "CPU"
	BindingDisk      Binding = "Disk"
	BindingUserLimit Binding = "UserLimit"
	// BindingNodes: every stripe runs at the rate the path gives one stripe and there is
	// no node or stripe slot left to add another (the endpoint's maxStripesPerNode or
	// too few nodes). The API has no such value yet; controllers/planning reports it
	// as UserLimit.
	BindingNodes Binding = "Nodes"
)

// FlowInput is what OPT_B plans from.
type FlowInput struct {
	// Curve is the per-stripe throughput-vs-streams curve (a StreamFit, or the
	// fallbacks of curve.go).
	Curve Curve
	// SourceCPU and DestinationCPU are the per-side CPU models, U = a + b·Th per stripe;
	// a part that is not a finite, non-negative number is read as 0.
	SourceCPU, DestinationCPU CPUModel
	// SourceNodes and DestinationNodes are the nodes available at each side.
	SourceNodes, DestinationNodes []Node
	// Limits are the user's limits (unset fields take the Default* ceilings).
	Limits Limits
	// PathBitsPerSecond is a capacity of the path known whatever the stripe count
	// (configured, or stored in a plan); 0 means unknown.
	PathBitsPerSecond float64
	// Path is the path's capacity as the samples show it, by stripe count
	// (NewPathCapacity: one stripe's plateau, more only where more stripes were
	// measured to pay); nil means unknown. MakePlan always sets it.
	Path *PathCapacity
	// MinStreams is the fewest streams per stripe the plan may use (0 and 1: one),
	// within Limits' maxStreamsPerStripe: fewer were measured held back by their
	// windows, not by the path (StreamsPastTheWindow), so the curve's rate there is
	// not what they carry once the job runs.
	MinStreams int
}

// FlowPlan is OPT_B's answer.
type FlowPlan struct {
	StreamsPerStripe int
	StripesPerNode   int
	// Nodes is the number of nodes at each side; the names are SourceNodes and
	// DestinationNodes, best first.
	Nodes                         int
	SourceNodes, DestinationNodes []string
	// StripeBitsPerSecond is the predicted rate of each stripe (aggregate/stripes).
	StripeBitsPerSecond float64
	// PredictedBitsPerSecond is the predicted aggregate rate.
	PredictedBitsPerSecond float64
	// Binding is what stops the rate from going higher.
	Binding Binding
	// SourceMillicoresPerStripe and DestinationMillicoresPerStripe are the CPU each
	// sending and receiving agent needs at StripeBitsPerSecond (the per-side CPU
	// models).
	SourceMillicoresPerStripe, DestinationMillicoresPerStripe float64
	// Reason explains the plan for people.
	Reason string
}

// Stripes is the total number of stripes.
func (p FlowPlan) Stripes() int { return p.Nodes * p.StripesPerNode }

// ErrNoNodes is returned when a side has no usable node.
var ErrNoNodes = errors.New("optimizer: a side has no usable node (NIC capacity > 0 and a free stripe slot, with NIC, disk and CPU budget left by other jobs' plans)")

// ErrNoCapacity is returned when every shape is predicted to move nothing (a stripe
// curve at 0, or CPU budgets below the CPU model's intercept).
var ErrNoCapacity = errors.New("optimizer: no plan is predicted to move any data")

// planTolerance: among shapes within 2 % of the best predicted rate, the one with the
// fewest stripes, then the fewest nodes, then the fewest streams is chosen, so that a
// stripe, node or stream that adds next to nothing is not spent: fewer connections and
// less CPU for the same rate (issue 11). 2 % is below what a probe sample resolves
// (ExpSelection's α is 5 %).
const planTolerance = 0.02

// OptB plans streams per stripe, stripes per node and nodes per side — OPT_B of
// Yildirim & Kosar (Condor Week 2011, "Flow Model of End-to-end Throughput" and
// "OPT_B Algorithm for Homogeneous Resources"):
//
//  1. Streams: N_opt from the stripe curve (the model's optimum), bounded by
//     maxStreamsPerStripe; U_f = Th(N_opt) is the most one stripe (flow) carries.
//  2. Each node with k of the job's stripes carries
//     min(k·U_f, NIC, disk, CPU-bound rate), where the CPU-bound rate solves
//     k·(a + b·x) ≤ budget for the per-stripe rate x with the side's CPU model
//     U_cpu = a + b·Th. The intercept a makes each stripe cost CPU of its own, so
//     stripes stop paying once the CPU budget binds.
//  3. N nodes at each side carry N times the weakest chosen node; the aggregate is the
//     smaller side, capped by the path (U_network: Path by stripe count, and
//     PathBitsPerSecond) and maxBitsPerSecond. With the path's capacity from the
//     samples, stripes stop being added once the aggregate reaches it.
//  4. Every (N, k) within the limits and the nodes' free slots is evaluated at N_opt;
//     the best of them sets the rate to reach. The plan is then the shape with the
//     fewest stripes, then fewest nodes, then fewest streams (n ≤ N_opt) that comes
//     within 2 % of it (planTolerance). The case study fills stripes on one node
//     before adding the second, which this order reproduces. No plan has fewer
//     streams than MinStreams (fewer were held by their windows).
//
// Where the slides are silent we choose:
//   - Heterogeneous nodes (OPT_B assumes homogeneous ones): the N best nodes are used
//     with the same number of stripes each, so the weakest of them sets the pace.
//   - Other jobs on a node hold what their plans use of it — their planned rate off
//     its NIC and disk, their agents' planned CPU off its CPU budget — and their
//     stripes use its slots. A node is divided by planned rate and CPU, not by stripe
//     count, so a job cannot take more of a node by asking for more stripes, and the
//     planned load of a node never exceeds its budgets (issue 13). A node with
//     nothing left of its NIC, disk or CPU budget is not used.
//   - Both sides use the same number of nodes (a stripe is a sender and a receiver).
func OptB(in FlowInput) (FlowPlan, error) {
	if in.Curve == nil {
		return FlowPlan{}, errors.New("optimizer: OptB needs a stripe curve")
	}
	in.SourceCPU, in.DestinationCPU = in.SourceCPU.sanitized(), in.DestinationCPU.sanitized()
	lim := in.Limits.WithDefaults()
	top := bestStreamsWithin(in.Curve, lim.MaxStreamsPerStripe)
	if p := in.Path; p != nil && len(p.Gains) > 1 && p.StripeStreams > top && p.StripeStreams <= lim.MaxStreamsPerStripe {
		// the stripes' gain was measured with more streams each than the stripe curve
		// asks for, and holds only with as many (PathCapacity.At): those streams are
		// in reach. A probe on small files measures its stripes at its most streams
		// while the curve's two samples are flat (autotune.Tuner).
		top = p.StripeStreams
	}
	least := min(max(in.MinStreams, 1), lim.MaxStreamsPerStripe)
	top = max(top, least)
	u := in.Curve.BitsPerSecond(top)
	if !(u > 0) {
		return FlowPlan{}, ErrNoCapacity
	}
	maxK := lim.MaxStripesPerNode
	src := newSideTable(in.SourceNodes, in.SourceCPU, u, maxK)
	dst := newSideTable(in.DestinationNodes, in.DestinationCPU, u, maxK)
	if src.usable(1) == 0 || dst.usable(1) == 0 {
		return FlowPlan{}, ErrNoNodes
	}

	// the best rate any shape reaches, at N_opt: a stripe that carries more never
	// lowers the aggregate
	type shape struct{ n, k, streams int }
	best := shape{streams: top}
	bestRate := -1.0
	for k := 1; k <= maxK; k++ {
		maxN := min(lim.MaxNodes, src.usable(k), dst.usable(k))
		for n := 1; n <= maxN; n++ {
			if r := in.aggregate(src, dst, n, k, top, lim); r > bestRate {
				bestRate, best = r, shape{n, k, top}
			}
		}
	}
	if !(bestRate > 0) {
		return FlowPlan{}, ErrNoCapacity
	}
	// the fewest stripes, nodes and streams within the tolerance: streams from one up,
	// each with the side tables of its stripe rate
	target := (1 - planTolerance) * bestRate
	chosen := best
	chosenSrc, chosenDst := src, dst
	fewer := func(a, b shape) bool {
		if a.n*a.k != b.n*b.k {
			return a.n*a.k < b.n*b.k
		}
		if a.n != b.n {
			return a.n < b.n
		}
		return a.streams < b.streams
	}
	prevU := 0.0
	for streams := least; streams <= top; streams++ {
		us := in.Curve.BitsPerSecond(streams)
		if streams < top && !(us > prevU) {
			continue // no more than fewer streams carry
		}
		prevU = us
		s, d := src, dst
		if streams != top {
			s = newSideTable(in.SourceNodes, in.SourceCPU, us, maxK)
			d = newSideTable(in.DestinationNodes, in.DestinationCPU, us, maxK)
		}
		for k := 1; k <= maxK; k++ {
			maxN := min(lim.MaxNodes, s.usable(k), d.usable(k))
			for n := 1; n <= maxN; n++ {
				cand := shape{n, k, streams}
				if !fewer(cand, chosen) {
					continue
				}
				if in.aggregate(s, d, n, k, streams, lim) >= target {
					chosen, chosenSrc, chosenDst = cand, s, d
				}
			}
		}
	}
	plan := in.planFor(chosenSrc, chosenDst, chosen.n, chosen.k, chosen.streams, lim)
	// What binds is what stops the best shape from going higher.
	plan.Binding = in.binding(src, dst, best.n, best.k, top, lim)
	plan.Reason = plan.describe()
	return plan, nil
}

// EvaluateShape predicts a given shape without choosing it: Fixed mode, and the rescale
// policy's what-ifs. nodes and stripesPerNode are bounded by what the nodes allow;
// streams is used as given.
func EvaluateShape(in FlowInput, nodes, stripesPerNode, streams int) (FlowPlan, error) {
	if in.Curve == nil {
		return FlowPlan{}, errors.New("optimizer: EvaluateShape needs a stripe curve")
	}
	if nodes < 1 || stripesPerNode < 1 || streams < 1 {
		return FlowPlan{}, fmt.Errorf("optimizer: shape %d nodes × %d stripes × %d streams has a count below 1", nodes, stripesPerNode, streams)
	}
	in.SourceCPU, in.DestinationCPU = in.SourceCPU.sanitized(), in.DestinationCPU.sanitized()
	lim := in.Limits.WithDefaults()
	u := in.Curve.BitsPerSecond(streams)
	src := newSideTable(in.SourceNodes, in.SourceCPU, u, stripesPerNode)
	dst := newSideTable(in.DestinationNodes, in.DestinationCPU, u, stripesPerNode)
	if src.usable(stripesPerNode) < nodes || dst.usable(stripesPerNode) < nodes {
		return FlowPlan{}, fmt.Errorf("optimizer: %d nodes with %d free stripe slots each are not available at both sides: %w", nodes, stripesPerNode, ErrNoNodes)
	}
	// A fixed shape may exceed the user's limits only if the caller allows it; the
	// rate cap still applies.
	plan := in.planFor(src, dst, nodes, stripesPerNode, streams, lim)
	plan.Binding = in.binding(src, dst, nodes, stripesPerNode, streams, lim)
	plan.Reason = plan.describe()
	return plan, nil
}

// sideTable holds, for one side and each stripes-per-node count k, the nodes sorted by
// what they carry with k stripes.
type sideTable struct {
	nodes []Node
	cpu   CPUModel
	u     float64
	// byK[k-1] are the indexes of nodes usable with k stripes, best first, and cap[k-1]
	// what each carries.
	byK  [][]int
	capK [][]float64
	term [][]Binding
}

func newSideTable(nodes []Node, cpu CPUModel, u float64, maxK int) *sideTable {
	t := &sideTable{nodes: nodes, cpu: cpu, u: u, byK: make([][]int, maxK), capK: make([][]float64, maxK), term: make([][]Binding, maxK)}
	for k := 1; k <= maxK; k++ {
		idx := make([]int, 0, len(nodes))
		caps := make([]float64, len(nodes))
		terms := make([]Binding, len(nodes))
		for i, nd := range nodes {
			c, b, ok := nodeCapacity(nd, cpu, u, k)
			if !ok {
				continue
			}
			caps[i], terms[i] = c, b
			idx = append(idx, i)
		}
		sort.SliceStable(idx, func(a, b int) bool {
			if caps[idx[a]] != caps[idx[b]] {
				return caps[idx[a]] > caps[idx[b]]
			}
			if nodes[idx[a]].Preferred != nodes[idx[b]].Preferred {
				return nodes[idx[a]].Preferred
			}
			return nodes[idx[a]].Name < nodes[idx[b]].Name
		})
		t.byK[k-1], t.capK[k-1], t.term[k-1] = idx, caps, terms
	}
	return t
}

func (t *sideTable) usable(k int) int {
	if k < 1 || k > len(t.byK) {
		return 0
	}
	return len(t.byK[k-1])
}

// weakest returns what the n-th best node carries with k stripes and its binding term.
func (t *sideTable) weakest(n, k int) (float64, Binding) {
	i := t.byK[k-1][n-1]
	return t.capK[k-1][i], t.term[k-1][i]
}

// bindingStripes marks the per-stripe term (k·U_f) internally; it never leaves OptB.
const bindingStripes Binding = "stripes"

// nodeCapacity is what one node carries with k of the job's stripes (OPT_B step 2),
// within what other jobs' plans leave of its NIC, disk and CPU budget.
func nodeCapacity(nd Node, cpu CPUModel, u float64, k int) (float64, Binding, bool) {
	if !(nd.NICBitsPerSecond > 0) || math.IsNaN(nd.NICBitsPerSecond) {
		return 0, "", false
	}
	placed := max(0, nd.PlacedStripes)
	if nd.MaxStripes > 0 && placed+k > nd.MaxStripes {
		return 0, "", false
	}
	free := func(total, used float64) float64 {
		if !(used > 0) { // none, or not a number
			return total
		}
		return total - used
	}
	nic := free(nd.NICBitsPerSecond, nd.OthersBitsPerSecond)
	if !(nic > 0) {
		return 0, "", false
	}
	// On a tie a resource binds rather than the stripe count: another stripe would
	// not add anything.
	best, term := float64(k)*u, bindingStripes
	if nic <= best {
		best, term = nic, BindingNIC
	}
	if nd.DiskBitsPerSecond > 0 {
		disk := free(nd.DiskBitsPerSecond, nd.OthersBitsPerSecond)
		if !(disk > 0) {
			return 0, "", false
		}
		if disk <= best {
			best, term = disk, BindingDisk
		}
	}
	if nd.CPUBudgetMillicores > 0 {
		budget := free(nd.CPUBudgetMillicores, nd.OthersMillicores)
		if !(budget > 0) {
			return 0, "", false
		}
		if v := float64(k) * cpu.BitsPerSecond(budget/float64(k)); v <= best {
			best, term = v, BindingCPU
		}
	}
	if math.IsNaN(best) || best < 0 {
		best = 0
	}
	return best, term, true
}

// aggregate is the predicted rate of n nodes × k stripes (OPT_B step 3).
func (in FlowInput) aggregate(src, dst *sideTable, n, k, streams int, lim Limits) float64 {
	s, _ := src.weakest(n, k)
	d, _ := dst.weakest(n, k)
	r := float64(n) * math.Min(s, d)
	if p := in.pathAt(n*k, streams); p > 0 {
		r = math.Min(r, p)
	}
	if lim.MaxBitsPerSecond > 0 {
		r = math.Min(r, lim.MaxBitsPerSecond)
	}
	if math.IsInf(r, 0) || math.IsNaN(r) {
		return 0
	}
	return r
}

// pathAt is the path's capacity with the given stripes of streams each, 0 when
// unknown.
func (in FlowInput) pathAt(stripes, streams int) float64 {
	p := math.Inf(1)
	if in.PathBitsPerSecond > 0 {
		p = in.PathBitsPerSecond
	}
	if in.Path != nil {
		if v := in.Path.At(stripes, streams); v > 0 {
			p = math.Min(p, v)
		}
	}
	if math.IsInf(p, 0) || math.IsNaN(p) {
		return 0
	}
	return p
}

func (in FlowInput) planFor(src, dst *sideTable, n, k, streams int, lim Limits) FlowPlan {
	r := in.aggregate(src, dst, n, k, streams, lim)
	p := FlowPlan{StreamsPerStripe: streams, StripesPerNode: k, Nodes: n, PredictedBitsPerSecond: r,
		StripeBitsPerSecond: r / float64(n*k)}
	for i := 0; i < n; i++ {
		p.SourceNodes = append(p.SourceNodes, src.nodes[src.byK[k-1][i]].Name)
		p.DestinationNodes = append(p.DestinationNodes, dst.nodes[dst.byK[k-1][i]].Name)
	}
	p.SourceMillicoresPerStripe = in.SourceCPU.Millicores(p.StripeBitsPerSecond)
	p.DestinationMillicoresPerStripe = in.DestinationCPU.Millicores(p.StripeBitsPerSecond)
	return p
}

// binding names the smallest term of shape (n, k); when that is the stripes
// themselves, it asks why there are not more: the user's limits, or no nodes/slots.
func (in FlowInput) binding(src, dst *sideTable, n, k, streams int, lim Limits) Binding {
	s, sb := src.weakest(n, k)
	d, db := dst.weakest(n, k)
	side, term := s, sb
	if d < s {
		side, term = d, db
	}
	r := float64(n) * side
	const eps = 1e-9
	path := in.pathAt(n*k, streams)
	if lim.MaxBitsPerSecond > 0 && lim.MaxBitsPerSecond <= r*(1+eps) &&
		(path <= 0 || lim.MaxBitsPerSecond <= path) {
		return BindingUserLimit
	}
	// a capacity the stripes were still rising towards binds only where it is below
	// what they carry: it is what was measured, not where the path ends
	if path > 0 && path <= r*(1+eps) && (in.Path == nil || !in.Path.StillRising || path < r*(1-eps)) {
		return BindingPath
	}
	if term != bindingStripes {
		return term
	}
	// The stripes bind: more of them (or more streams) would carry more.
	if streams < max(1, in.Curve.Optimal()) && streams >= lim.MaxStreamsPerStripe {
		return BindingUserLimit
	}
	moreNodes := n < min(src.usable(k), dst.usable(k))
	moreStripes := k < len(src.byK) && src.usable(k+1) >= n && dst.usable(k+1) >= n
	switch {
	case moreNodes && n >= lim.MaxNodes:
		return BindingUserLimit
	case moreStripes && k >= lim.MaxStripesPerNode:
		return BindingUserLimit
	case !moreNodes && !moreStripes && k >= lim.MaxStripesPerNode:
		// no slot left, and the user's limit would stop us anyway
		return BindingUserLimit
	}
	return BindingNodes
}

func (p FlowPlan) describe() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d node(s) × %d stripe(s) × %d stream(s): %s predicted (%s per stripe)",
		p.Nodes, p.StripesPerNode, p.StreamsPerStripe, FormatBitsPerSecond(p.PredictedBitsPerSecond), FormatBitsPerSecond(p.StripeBitsPerSecond))
	switch p.Binding {
	case BindingPath:
		b.WriteString(", bound by the path's capacity")
	case BindingNIC:
		b.WriteString(", bound by the nodes' NIC capacity")
	case BindingCPU:
		b.WriteString(", bound by the nodes' CPU budget")
	case BindingDisk:
		b.WriteString(", bound by the nodes' storage rate")
	case BindingUserLimit:
		b.WriteString(", bound by the job's limits")
	case BindingNodes:
		b.WriteString(", bound by the nodes and stripe slots available")
	}
	return b.String()
}

// FormatBitsPerSecond writes a rate for people, for example "941 Mbit/s".
func FormatBitsPerSecond(bps float64) string {
	switch {
	case math.IsInf(bps, 0) || math.IsNaN(bps):
		return "unknown"
	case bps >= 1e12:
		return fmt.Sprintf("%.3g Tbit/s", bps/1e12)
	case bps >= 1e9:
		return fmt.Sprintf("%.3g Gbit/s", bps/1e9)
	case bps >= 1e6:
		return fmt.Sprintf("%.3g Mbit/s", bps/1e6)
	case bps >= 1e3:
		return fmt.Sprintf("%.3g kbit/s", bps/1e3)
	}
	return fmt.Sprintf("%.3g bit/s", bps)
}
