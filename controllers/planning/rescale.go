package planning

import (
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/optimizer"
)

// RescaleState is the rescale policy's memory of one job: keep it in memory per job
// (nil the first time and after a restart, which only costs a fresh settle and
// measurement window).
type RescaleState = optimizer.RescaleState

// RescaleInput is one round of the rescale policy at the API's level.
type RescaleInput struct {
	Tuning v1alpha1.TransferTuning
	// Plan is the job's current plan.
	Plan v1alpha1.TransferPlan
	// Report is the coordinator's latest report.
	Report contract.Report
	// SourceNodes and DestinationNodes are the nodes as observed now (their
	// PlacedStripes count other jobs' stripes only).
	SourceNodes, DestinationNodes []Node
	ExternalDestination           bool
	Now                           time.Time
	// ShareBitsPerSecond is the job's share when it is held to it (Input
	// .ShareBitsPerSecond); the policy climbs no higher.
	ShareBitsPerSecond int64
}

// RescaleDecision is the policy's answer.
type RescaleDecision struct {
	// Plan is the new plan, nil to hold.
	Plan *v1alpha1.TransferPlan
	// Action is what changes (optimizer.Hold when Plan is nil).
	Action optimizer.Action
	// Reason is a CamelCase word and Message a sentence, for v1alpha1.Replan and
	// events.
	Reason, Message string
	// From and To are the shapes before and after.
	From, To v1alpha1.PlanShape
}

// Rescale runs one round of optimizer.RescalePolicy for a running job and turns its
// intent into a plan. The plan keeps its nodes; stripes change a whole node's worth
// at a time (Granularity = nodes), since TransferPlan places the same number of
// stripes on every node, up to maxStripesPerNode and the nodes' free slots. The
// planned stripe count and rate the policy climbs towards are OPT_B's over the plan's
// own nodes, within the path's capacity the plan recorded (pathBitsPerSecond): a plan
// at that capacity is not grown towards a rate the samples never showed. Fixed mode
// never re-plans. The new plan's predictions and CPU per agent are re-evaluated for
// the new shape; size classes keep their parameters, with
// parallelism bounded by the new streams per stripe.
func Rescale(state *RescaleState, in RescaleInput) (RescaleDecision, *RescaleState) {
	if state == nil {
		state = &RescaleState{}
	}
	plan := in.Plan
	nodes := int(max(len(plan.SourceNodes), 1))
	shape := v1alpha1.PlanShape{Nodes: int32(nodes), Stripes: Stripes(plan), StreamsPerStripe: plan.StreamsPerStripe}
	hold := func(reason, msg string) (RescaleDecision, *RescaleState) {
		return RescaleDecision{Action: optimizer.Hold, Reason: reason, Message: msg, From: shape, To: shape}, state
	}
	if in.Tuning.Mode == v1alpha1.TuningFixed {
		return hold("FixedTuning", "spec.tuning.mode is Fixed: the plan is not changed while the job runs")
	}

	limits, _ := limitsWithShare(in.Tuning, in.ShareBitsPerSecond)
	lim := limits.WithDefaults()
	src := pick(toOptimizerNodes(in.SourceNodes), plan.SourceNodes)
	dst := externalNodes(len(src))
	if !in.ExternalDestination {
		dst = pick(toOptimizerNodes(in.DestinationNodes), plan.DestinationNodes)
	}
	if len(src) < nodes || len(dst) < nodes {
		return hold("NodesChanged", fmt.Sprintf("%d of the plan's %d node(s) are available at each side; the job needs a new plan, not a rescale", min(len(src), len(dst)), nodes))
	}
	curve := curveOf(plan)
	srcCPU, dstCPU := cpuOrDefault(plan.SourceCPU), cpuOrDefault(plan.DestinationCPU)
	// the path's capacity the samples showed bounds what the stripes climb towards and
	// every prediction of a new shape
	flowIn := optimizer.FlowInput{Curve: curve, SourceCPU: srcCPU, DestinationCPU: dstCPU, SourceNodes: src, DestinationNodes: dst, Limits: limits,
		PathBitsPerSecond: float64(plan.PathBitsPerSecond)}

	// OPT_B over these nodes: what the stripes climb towards
	plannedStripes, plannedRate := int(shape.Stripes), float64(plan.PredictedBitsPerSecond)
	restricted := flowIn
	restricted.Limits.MaxNodes = nodes
	if opt, err := optimizer.OptB(restricted); err == nil && opt.Nodes == nodes {
		plannedStripes, plannedRate = opt.Stripes(), opt.PredictedBitsPerSecond
	}
	maxPerNode := min(lim.MaxStripesPerNode, slots(src), slots(dst))
	m := MeasurementFromReport(in.Report)
	policy := optimizer.RescalePolicy{Config: optimizer.RescaleConfig{Granularity: nodes}}
	intent, next := policy.Decide(*state, optimizer.RescaleInput{Now: in.Now, Current: optimizer.Shape{Stripes: int(shape.Stripes), StreamsPerStripe: int(plan.StreamsPerStripe)},
		MinStripes: nodes, MaxStripes: nodes * max(maxPerNode, 1), MaxStreams: lim.MaxStreamsPerStripe, MaxBitsPerSecond: limits.MaxBitsPerSecond,
		Curve: curve, PlannedStripes: plannedStripes, PlannedBitsPerSecond: plannedRate, PathBitsPerSecond: float64(plan.PathBitsPerSecond), Measurement: m})
	*state = next
	if intent.Action == optimizer.Hold {
		return hold(intent.Reason, intent.Message)
	}

	perNode := max(intent.To.Stripes/nodes, 1)
	flow, err := optimizer.EvaluateShape(flowIn, nodes, perNode, intent.To.StreamsPerStripe)
	if err != nil {
		return hold("NoRoom", fmt.Sprintf("%s, but the nodes cannot take it: %v", intent.Message, err))
	}
	out := plan
	out.SourceNodes = slices.Clone(plan.SourceNodes)
	out.DestinationNodes = slices.Clone(plan.DestinationNodes)
	out.StripesPerNode = int32(perNode)
	out.StreamsPerStripe = int32(intent.To.StreamsPerStripe)
	out.PredictedBitsPerSecond = roundNonNegative(flow.PredictedBitsPerSecond)
	out.BindingResource = bindingResource(flow.Binding)
	out.SourceCPUMillicores = ceilMillicores(flow.SourceMillicoresPerStripe)
	out.DestinationCPUMillicores = ceilMillicores(flow.DestinationMillicoresPerStripe)
	if plan.CoordinatorCPUMillicores > 0 && in.Report.FilesTotal > 0 {
		out.CoordinatorCPUMillicores = coordinatorCPU(in.Report.FilesTotal, in.Report.BytesTotal, out.PredictedBitsPerSecond)
	}
	out.SizeClasses = slices.Clone(plan.SizeClasses)
	for i := range out.SizeClasses {
		out.SizeClasses[i].Parallelism = min(out.SizeClasses[i].Parallelism, out.StreamsPerStripe)
	}
	out.Hash = Hash(out)
	to := v1alpha1.PlanShape{Nodes: int32(nodes), Stripes: Stripes(out), StreamsPerStripe: out.StreamsPerStripe}
	return RescaleDecision{Plan: &out, Action: intent.Action, Reason: intent.Reason, Message: intent.Message, From: shape, To: to}, state
}

// pick returns the nodes named, in the plan's order; names not found are left out.
func pick(nodes []optimizer.Node, names []string) []optimizer.Node {
	var out []optimizer.Node
	for _, name := range names {
		for _, n := range nodes {
			if n.Name == name {
				out = append(out, n)
				break
			}
		}
	}
	return out
}

// slots is the most stripes of this job every node can hold (MaxInt32 when no node
// has a cap).
func slots(nodes []optimizer.Node) int {
	s := math.MaxInt32
	for _, n := range nodes {
		if n.MaxStripes > 0 {
			s = min(s, n.MaxStripes-max(n.PlacedStripes, 0))
		}
	}
	return s
}

// curveOf is the plan's stream model, or a flat stripe at the plan's predicted rate
// per stripe when it has none (or a corrupt one).
func curveOf(p v1alpha1.TransferPlan) optimizer.Curve {
	if fit, err := Fit(p.Model); err == nil && fit != nil {
		return *fit
	}
	return optimizer.FlatCurve{Rate: float64(p.PredictedBitsPerSecond) / float64(Stripes(p)), Streams: int(p.StreamsPerStripe)}
}

func cpuOrDefault(m *v1alpha1.CPUModel) optimizer.CPUModel {
	if c := CPUModelFromAPI(m); c != nil {
		return *c
	}
	return optimizer.DefaultCPUModel
}
