package optimizer

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
)

func nodes(prefix string, n int, nd Node) []Node {
	out := make([]Node, n)
	for i := range out {
		out[i] = nd
		out[i].Name = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

// flat is a stripe that carries 1 Gbit/s from 4 streams on (0.4 and 0.7 Gbit/s with 1
// and 2): its plateau. The plan takes the fewest streams within 2 % of it, 4.
var flat = EmpiricalCurve{{Streams: 1, BitsPerSecond: 0.4e9}, {Streams: 2, BitsPerSecond: 0.7e9}, {Streams: 4, BitsPerSecond: 1e9}}

func TestOptBTable(t *testing.T) {
	tenG := Node{NICBitsPerSecond: 10e9}
	tests := map[string]struct {
		in          FlowInput
		wantNodes   int
		wantStripes int // per node
		wantStreams int
		wantRate    float64
		wantBinding Binding
	}{
		// 10 Gbit/s NICs, 1 Gbit/s stripes, no CPU budget: 10 stripes fill a node's
		// NIC, and both nodes are used (20 Gbit/s)
		"NIC bound, all nodes used": {
			in:        FlowInput{Curve: flat, SourceNodes: nodes("s", 2, tenG), DestinationNodes: nodes("d", 2, tenG)},
			wantNodes: 2, wantStripes: 10, wantStreams: 4, wantRate: 20e9, wantBinding: BindingNIC,
		},
		// CPU: 2000 m budget, 100 m + 400 m/Gbit/s per stripe: k stripes carry
		// min(k, (2000 − 100k)/400) Gbit/s; k = 4 gives min(4, 4) = 4 Gbit/s per node.
		"CPU bound": {
			in: FlowInput{Curve: flat, SourceCPU: CPUModel{InterceptMillicores: 100, MillicoresPerGbps: 400},
				SourceNodes:      nodes("s", 1, Node{NICBitsPerSecond: 10e9, CPUBudgetMillicores: 2000}),
				DestinationNodes: nodes("d", 1, tenG)},
			wantNodes: 1, wantStripes: 4, wantStreams: 4, wantRate: 4e9, wantBinding: BindingCPU,
		},
		// 3 stripes per node fill the 2.5 Gbit/s disk with 3 streams each (0.85 Gbit/s
		// per stripe on the curve), so the fourth stream is not spent
		"disk bound at the destination": {
			in: FlowInput{Curve: flat, SourceNodes: nodes("s", 3, tenG),
				DestinationNodes: nodes("d", 3, Node{NICBitsPerSecond: 10e9, DiskBitsPerSecond: 2.5e9})},
			wantNodes: 3, wantStripes: 3, wantStreams: 3, wantRate: 7.5e9, wantBinding: BindingDisk,
		},
		"user rate cap": {
			in:        FlowInput{Curve: flat, SourceNodes: nodes("s", 4, tenG), DestinationNodes: nodes("d", 4, tenG), Limits: Limits{MaxBitsPerSecond: 3e9}},
			wantNodes: 1, wantStripes: 3, wantStreams: 4, wantRate: 3e9, wantBinding: BindingUserLimit,
		},
		"user node and stripe limits": {
			in:        FlowInput{Curve: flat, SourceNodes: nodes("s", 4, tenG), DestinationNodes: nodes("d", 4, tenG), Limits: Limits{MaxNodes: 2, MaxStripesPerNode: 3}},
			wantNodes: 2, wantStripes: 3, wantStreams: 4, wantRate: 6e9, wantBinding: BindingUserLimit,
		},
		"user stream limit below the optimum": {
			in: FlowInput{Curve: StreamFit{Model: FullSecondOrder, A: fsoA, B: fsoB, C: fsoC, OptimalStreams: 4},
				SourceNodes: nodes("s", 1, Node{NICBitsPerSecond: 10e9, MaxStripes: 1}), DestinationNodes: nodes("d", 1, tenG),
				Limits: Limits{MaxStreamsPerStripe: 2}},
			wantNodes: 1, wantStripes: 1, wantStreams: 2, wantRate: predict(FullSecondOrder, fsoA, fsoB, fsoC, 2), wantBinding: BindingUserLimit,
		},
		// the endpoint allows 2 stripes per node and there is one node: what binds is
		// the lack of slots, not a user limit
		"no slots left": {
			in:        FlowInput{Curve: flat, SourceNodes: nodes("s", 1, Node{NICBitsPerSecond: 10e9, MaxStripes: 2}), DestinationNodes: nodes("d", 1, tenG)},
			wantNodes: 1, wantStripes: 2, wantStreams: 4, wantRate: 2e9, wantBinding: BindingNodes,
		},
		"path capacity known": {
			in:        FlowInput{Curve: flat, SourceNodes: nodes("s", 2, tenG), DestinationNodes: nodes("d", 2, tenG), PathBitsPerSecond: 5e9},
			wantNodes: 1, wantStripes: 5, wantStreams: 4, wantRate: 5e9, wantBinding: BindingPath,
		},
		// other jobs' 2 stripes are planned at 3 Gbit/s through the node: we get the
		// 7 Gbit/s they leave, with 7 stripes of 1 Gbit/s — more stripes would take
		// no more of the node (with the old split by stripe count, k/(k+2) of it, 10
		// stripes took 8.3 Gbit/s)
		"other jobs' planned rate comes off the node": {
			in: FlowInput{Curve: flat, SourceNodes: nodes("s", 1, Node{NICBitsPerSecond: 10e9, PlacedStripes: 2, OthersBitsPerSecond: 3e9, MaxStripes: 12}),
				DestinationNodes: nodes("d", 1, tenG)},
			wantNodes: 1, wantStripes: 7, wantStreams: 4, wantRate: 7e9, wantBinding: BindingNIC,
		},
		"other jobs' planned rate comes off the disk too": {
			in: FlowInput{Curve: flat, SourceNodes: nodes("s", 1, tenG),
				DestinationNodes: nodes("d", 1, Node{NICBitsPerSecond: 10e9, DiskBitsPerSecond: 4e9, OthersBitsPerSecond: 1.5e9})},
			wantNodes: 1, wantStripes: 3, wantStreams: 3, wantRate: 2.5e9, wantBinding: BindingDisk,
		},
		// a 4-core budget with 3 cores planned for others: the 1000 m left carry
		// (1000 − 100·k)/250 Gbit/s over k stripes with the CPU model 100 m + 250 m
		// per Gbit/s, and a stripe carries 1 Gbit/s at most: 1, 2, 2.8, 2.4 Gbit/s
		// with 1…4 stripes — 3, bound by CPU
		"other jobs' planned CPU comes off the budget": {
			in: FlowInput{Curve: flat, SourceCPU: CPUModel{InterceptMillicores: 100, MillicoresPerGbps: 250},
				SourceNodes: nodes("s", 1, Node{NICBitsPerSecond: 10e9, CPUBudgetMillicores: 4000, OthersMillicores: 3000}), DestinationNodes: nodes("d", 1, tenG)},
			wantNodes: 1, wantStripes: 3, wantStreams: 4, wantRate: 2.8e9, wantBinding: BindingCPU,
		},
		// the path carried 1 Gbit/s with one stripe and 1.8 with two, and four did not
		// pay: two stripes, bound by the path, though the NIC would take ten
		"path capacity measured by stripe": {
			in: FlowInput{Curve: flat, SourceNodes: nodes("s", 1, tenG), DestinationNodes: nodes("d", 1, tenG),
				Path: &PathCapacity{StripeBitsPerSecond: 1e9, Gains: []StripeGain{{1, 1}, {2, 1.8}}}},
			wantNodes: 1, wantStripes: 2, wantStreams: 4, wantRate: 1.8e9, wantBinding: BindingPath,
		},
		// the same path with the stripes still rising at two: the path caps the
		// prediction (2.7 Gbit/s at most, measured), but the user's limit of two
		// stripes is what binds
		"path still rising at the stripe limit": {
			in: FlowInput{Curve: flat, SourceNodes: nodes("s", 1, tenG), DestinationNodes: nodes("d", 1, tenG), Limits: Limits{MaxStripesPerNode: 2},
				Path: &PathCapacity{StripeBitsPerSecond: 1e9, Gains: []StripeGain{{1, 1}, {2, 2}}, StillRising: true}},
			wantNodes: 1, wantStripes: 2, wantStreams: 4, wantRate: 2e9, wantBinding: BindingUserLimit,
		},
		// one stripe's plateau is the path's capacity when no stripe count beyond one
		// was measured: one stripe, and the fewest streams within 2 % of the plateau
		"one stripe's plateau": {
			in: FlowInput{Curve: EmpiricalCurve{{1, 0.5e9}, {2, 0.985e9}, {4, 1e9}}, SourceNodes: nodes("s", 2, tenG), DestinationNodes: nodes("d", 2, tenG),
				Path: &PathCapacity{StripeBitsPerSecond: 1e9, Gains: []StripeGain{{1, 1}}}},
			wantNodes: 1, wantStripes: 1, wantStreams: 2, wantRate: 0.985e9, wantBinding: BindingPath,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := OptB(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if p.Nodes != tc.wantNodes || p.StripesPerNode != tc.wantStripes || p.StreamsPerStripe != tc.wantStreams ||
				!relClose(p.PredictedBitsPerSecond, tc.wantRate, 1e-9) || p.Binding != tc.wantBinding {
				t.Errorf("got %s [%s], want %d × %d × %d at %g bit/s bound by %s",
					p.Reason, p.Binding, tc.wantNodes, tc.wantStripes, tc.wantStreams, tc.wantRate, tc.wantBinding)
			}
			if len(p.SourceNodes) != p.Nodes || len(p.DestinationNodes) != p.Nodes {
				t.Errorf("node lists %v / %v for %d nodes", p.SourceNodes, p.DestinationNodes, p.Nodes)
			}
			if !relClose(p.StripeBitsPerSecond*float64(p.Stripes()), p.PredictedBitsPerSecond, 1e-12) {
				t.Errorf("stripe rate %g × %d stripes ≠ aggregate %g", p.StripeBitsPerSecond, p.Stripes(), p.PredictedBitsPerSecond)
			}
		})
	}
}

func TestOptBChoosesTheBestNodesAndSizesCPU(t *testing.T) {
	cpu := CPUModel{InterceptMillicores: 50, MillicoresPerGbps: 200}
	in := FlowInput{Curve: flat, SourceCPU: cpu, DestinationCPU: CPUModel{InterceptMillicores: 20, MillicoresPerGbps: 100},
		SourceNodes:      []Node{{Name: "slow", NICBitsPerSecond: 1e9}, {Name: "fast-b", NICBitsPerSecond: 10e9}, {Name: "fast-a", NICBitsPerSecond: 10e9}},
		DestinationNodes: []Node{{Name: "busy", NICBitsPerSecond: 10e9, PlacedStripes: 8, OthersBitsPerSecond: 8e9}, {Name: "idle", NICBitsPerSecond: 10e9}},
		Limits:           Limits{MaxNodes: 1}}
	p, err := OptB(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(p.SourceNodes, []string{"fast-a"}) || !reflect.DeepEqual(p.DestinationNodes, []string{"idle"}) {
		t.Errorf("nodes %v → %v, want the fastest source (ties by name) and the idle destination", p.SourceNodes, p.DestinationNodes)
	}
	// CPU per agent is each side's model at the planned stripe rate
	if want := cpu.Millicores(p.StripeBitsPerSecond); !relClose(p.SourceMillicoresPerStripe, want, 1e-12) {
		t.Errorf("source CPU per stripe %g, want %g", p.SourceMillicoresPerStripe, want)
	}
	if want := 20 + 100*p.StripeBitsPerSecond/1e9; !relClose(p.DestinationMillicoresPerStripe, want, 1e-12) {
		t.Errorf("destination CPU per stripe %g, want %g", p.DestinationMillicoresPerStripe, want)
	}
}

func TestOptBPrefersNodesTheJobAlreadyUses(t *testing.T) {
	tenG := Node{NICBitsPerSecond: 10e9}
	preferred := func(name string) Node { n := tenG; n.Name, n.Preferred = name, true; return n }
	tests := map[string]struct {
		source, destination []Node
		wantSource, wantDst []string
	}{
		// equal nodes: the probe stripe's nodes win over the first by name
		"ties go to the preferred node": {
			source:      []Node{{Name: "a", NICBitsPerSecond: 10e9}, preferred("b")},
			destination: []Node{{Name: "c", NICBitsPerSecond: 10e9}, preferred("d")},
			wantSource:  []string{"b"}, wantDst: []string{"d"},
		},
		// a node that carries more still wins: preference only breaks ties
		"a better node beats a preferred one": {
			source:      []Node{{Name: "a", NICBitsPerSecond: 10e9}, {Name: "b", NICBitsPerSecond: 1e9, Preferred: true}},
			destination: []Node{{Name: "c", NICBitsPerSecond: 10e9}},
			wantSource:  []string{"a"}, wantDst: []string{"c"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, err := OptB(FlowInput{Curve: flat, SourceNodes: tc.source, DestinationNodes: tc.destination, Limits: Limits{MaxNodes: 1}})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.SourceNodes, tc.wantSource) || !reflect.DeepEqual(p.DestinationNodes, tc.wantDst) {
				t.Errorf("nodes %v → %v, want %v → %v", p.SourceNodes, p.DestinationNodes, tc.wantSource, tc.wantDst)
			}
		})
	}
}

func TestOptBErrors(t *testing.T) {
	ok := nodes("n", 1, Node{NICBitsPerSecond: 1e9})
	tests := map[string]struct {
		in   FlowInput
		want error
	}{
		"no source nodes":        {FlowInput{Curve: flat, DestinationNodes: ok}, ErrNoNodes},
		"nodes without NIC":      {FlowInput{Curve: flat, SourceNodes: nodes("s", 2, Node{}), DestinationNodes: ok}, ErrNoNodes},
		"nodes without slots":    {FlowInput{Curve: flat, SourceNodes: nodes("s", 1, Node{NICBitsPerSecond: 1e9, PlacedStripes: 4, MaxStripes: 4}), DestinationNodes: ok}, ErrNoNodes},
		"stripe carries nothing": {FlowInput{Curve: EmpiricalCurve{{1, 0}}, SourceNodes: ok, DestinationNodes: ok}, ErrNoCapacity},
		"CPU below intercept": {FlowInput{Curve: flat, SourceCPU: CPUModel{InterceptMillicores: 500, MillicoresPerGbps: 100},
			SourceNodes: nodes("s", 1, Node{NICBitsPerSecond: 1e9, CPUBudgetMillicores: 400}), DestinationNodes: ok}, ErrNoCapacity},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := OptB(tc.in); !errors.Is(err, tc.want) {
				t.Errorf("error = %v, want %v", err, tc.want)
			}
		})
	}
	if _, err := EvaluateShape(FlowInput{Curve: flat, SourceNodes: ok, DestinationNodes: ok}, 2, 1, 1); !errors.Is(err, ErrNoNodes) {
		t.Errorf("EvaluateShape with 2 nodes of 1: %v", err)
	}
}
