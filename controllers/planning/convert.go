package planning

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/optimizer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Node is one node a side may use, in the API's integer units.
type Node struct {
	Name                string
	NICBitsPerSecond    int64
	CPUBudgetMillicores int64 // 0: no budget, CPU does not bind
	DiskBitsPerSecond   int64 // 0: unknown, disk does not bind
	// PlacedStripes counts stripes of other jobs already on the node (they use its
	// stripe slots).
	PlacedStripes int
	// OthersBitsPerSecond is the rate other jobs' plans put through the node, and
	// OthersMillicores the CPU their agents there are planned to use: they come off
	// its NIC, disk and CPU budget (optimizer.Node).
	OthersBitsPerSecond, OthersMillicores int64
	// MaxStripes is the endpoint's cap on stripes per node over every job; 0: none.
	MaxStripes int
	// Preferred marks a node the job already runs agents on (optimizer.Node.Preferred).
	Preferred bool
}

func toOptimizerNodes(nodes []Node) []optimizer.Node {
	out := make([]optimizer.Node, len(nodes))
	for i, n := range nodes {
		out[i] = optimizer.Node{Name: n.Name, NICBitsPerSecond: float64(n.NICBitsPerSecond), CPUBudgetMillicores: float64(n.CPUBudgetMillicores),
			DiskBitsPerSecond: float64(n.DiskBitsPerSecond), PlacedStripes: n.PlacedStripes, MaxStripes: n.MaxStripes,
			OthersBitsPerSecond: float64(n.OthersBitsPerSecond), OthersMillicores: float64(n.OthersMillicores), Preferred: n.Preferred}
	}
	return out
}

// externalNodes stand in for a destination outside the cluster (an agent started by
// hand): as many as the source has, each unbounded, so that the destination never
// binds. Their names are empty and never reach a plan.
func externalNodes(n int) []optimizer.Node {
	out := make([]optimizer.Node, max(n, 1))
	for i := range out {
		out[i] = optimizer.Node{Name: fmt.Sprintf("external-%d", i), NICBitsPerSecond: math.MaxFloat64 / 1e6}
	}
	return out
}

// SamplesFromProbe converts the API's one-stripe probe samples for the optimizer: the
// stream curve of one stripe. Samples of several stripes together are the path's
// aggregate, not a point of that curve (StripeRates reads them), and neither is a
// sample taken just after the streams were cut (optimizer.StreamCurveSamples).
func SamplesFromProbe(ss []v1alpha1.ProbeSample) []optimizer.Sample {
	out := make([]optimizer.Sample, 0, len(ss))
	for _, s := range ss {
		if s.Stripes > 1 {
			continue
		}
		out = append(out, optimizer.Sample{Streams: int(s.Streams), BufferBytes: s.BufferBytes, BitsPerSecond: float64(s.BitsPerSecond),
			SourceMillicores: float64(s.SourceMillicores), DestinationMillicores: float64(s.DestinationMillicores),
			WindowLimitedPercent: int(s.WindowLimitedPercent)})
	}
	return optimizer.StreamCurveSamples(out)
}

// StripeRates are the aggregate rates the samples measured against the stripe count
// (StreamPoint.Streams holds the stripes), at the streams and buffer the most stripes
// ran with: every sample of several stripes there, and the one-stripe sample of the
// same streams and buffer when there is one (the newest of each count). They are what
// lets a plan have more than one stripe: the optimizer adds stripes only as far as a
// doubling paid (optimizer.NewPathCapacity). Nil when no sample ran several stripes.
// streams is what each stripe ran with (0 with no rates): a gain of several stripes
// holds for stripes of that many streams (optimizer.PathCapacity.StripeStreams).
func StripeRates(ss []v1alpha1.ProbeSample) (rates []optimizer.StreamPoint, streams int) {
	type at struct {
		streams int32
		buffer  int64
	}
	var best at
	most := int32(1)
	for _, s := range ss {
		if s.Stripes > most {
			most, best = s.Stripes, at{s.Streams, s.BufferBytes}
		}
	}
	if most <= 1 {
		return nil, 0
	}
	byStripes := map[int32]int64{}
	for _, s := range ss {
		if (at{s.Streams, s.BufferBytes}) == best && s.BitsPerSecond > 0 {
			byStripes[max(s.Stripes, 1)] = s.BitsPerSecond // the newest, samples being oldest first
		}
	}
	out := make([]optimizer.StreamPoint, 0, len(byStripes))
	for k, bps := range byStripes {
		out = append(out, optimizer.StreamPoint{Streams: int(k), BitsPerSecond: float64(bps)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Streams < out[j].Streams })
	return out, int(best.streams)
}

// SamplesFromContract converts a coordinator's one-stripe report samples for the
// optimizer (as SamplesFromProbe).
func SamplesFromContract(ss []contract.Sample) []optimizer.Sample {
	return optimizer.StreamCurveSamples(OneStripeSamplesFromContract(ss))
}

// OneStripeSamplesFromContract converts every one-stripe sample of a coordinator's
// report, those taken after the path moved under the probe included: the stripe
// stage's one-stripe level is one of them.
func OneStripeSamplesFromContract(ss []contract.Sample) []optimizer.Sample {
	out := make([]optimizer.Sample, 0, len(ss))
	for _, s := range ss {
		if s.Stripes > 1 {
			continue
		}
		out = append(out, optimizer.Sample{Streams: int(s.Streams), BufferBytes: s.BufferBytes, BitsPerSecond: float64(s.BitsPerSecond),
			SourceMillicores: float64(s.SourceMillicores), DestinationMillicores: float64(s.DestinationMillicores),
			WindowLimitedPercent: int(s.WindowLimitedPercent)})
	}
	return out
}

// ProbeSamplesFromContract converts a coordinator's report samples into the API's,
// for TransferJob and PathProfile status (ProbeSampleFromContract each).
func ProbeSamplesFromContract(ss []contract.Sample) []v1alpha1.ProbeSample {
	out := make([]v1alpha1.ProbeSample, 0, len(ss))
	for _, s := range ss {
		out = append(out, ProbeSampleFromContract(s))
	}
	return out
}

// MeasurementFromReport is what the rescale policy reads of a coordinator's report:
// the aggregate and each stripe's rate, loss, connection and round trip. The operator
// and `send --auto` both follow their plans through it.
func MeasurementFromReport(rep contract.Report) optimizer.Measurement {
	m := optimizer.Measurement{Time: rep.Time, AggregateBitsPerSecond: float64(rep.BitsPerSecond)}
	if rep.BytesTotal > 0 && rep.BytesDone < rep.BytesTotal {
		m.RemainingBytes = rep.BytesTotal - rep.BytesDone
	}
	if rep.UnitsUnleased != nil {
		u := max(*rep.UnitsUnleased, 0)
		m.UnitsUnleased = &u
	}
	for _, s := range rep.Stripes {
		m.Stripes = append(m.Stripes, optimizer.StripeMeasurement{BitsPerSecond: float64(s.BitsPerSecond), LossPPM: float64(s.LossPPM),
			Connected: s.Connected, RTT: time.Duration(s.RTTMicros) * time.Microsecond})
	}
	return m
}

// ProbeSampleFromContract converts one report sample into the API's, every figure the
// planner reads included. Values the API's validation would refuse (streams below 1,
// negative figures, a share above 100 %) are brought within its bounds; a zero time is
// left absent.
func ProbeSampleFromContract(s contract.Sample) v1alpha1.ProbeSample {
	p := v1alpha1.ProbeSample{Stripes: stripesOf(s.Stripes), Streams: max(s.Streams, 1), BufferBytes: max(s.BufferBytes, 0), BitsPerSecond: max(s.BitsPerSecond, 0),
		SourceMillicores: max(s.SourceMillicores, 0), DestinationMillicores: max(s.DestinationMillicores, 0),
		WindowLimitedPercent: min(max(s.WindowLimitedPercent, 0), 100)}
	if !s.Time.IsZero() {
		t := metav1.NewTime(s.Time)
		p.Time = &t
	}
	return p
}

// ContractSampleFromProbe is ProbeSampleFromContract's inverse, for the samples of a
// PathProfile a probe continues from (contract.ProbeDirective.Known).
func ContractSampleFromProbe(p v1alpha1.ProbeSample) contract.Sample {
	s := contract.Sample{Stripes: max(p.Stripes, 1), Streams: p.Streams, BufferBytes: p.BufferBytes, BitsPerSecond: p.BitsPerSecond,
		SourceMillicores: p.SourceMillicores, DestinationMillicores: p.DestinationMillicores, WindowLimitedPercent: p.WindowLimitedPercent}
	if p.Time != nil {
		s.Time = p.Time.Time
	}
	return s
}

// stripesOf is a report sample's stripe count as the API keeps it: absent for one
// (older samples have none), else within the API's bound.
func stripesOf(n int32) int32 {
	if n <= 1 {
		return 0
	}
	return min(n, MaxSampleStripes)
}

// MaxSampleStripes is the API's bound on a probe sample's stripes.
const MaxSampleStripes = 4096

// Histogram converts a coordinator's dataset summary; nil gives an empty histogram.
func Histogram(d *contract.Dataset) optimizer.Histogram {
	if d == nil {
		return optimizer.Histogram{}
	}
	h := optimizer.Histogram{Files: d.Files, Bytes: d.Bytes}
	for _, b := range d.Buckets {
		h.Buckets = append(h.Buckets, optimizer.Bucket{Log2: int(b.Log2), Files: b.Files, Bytes: b.Bytes})
	}
	return h
}

// Limits converts the user's limits; nil means none.
func Limits(l *v1alpha1.TuningLimits) optimizer.Limits {
	var out optimizer.Limits
	if l == nil {
		return out
	}
	if l.MaxNodes != nil {
		out.MaxNodes = int(*l.MaxNodes)
	}
	if l.MaxStripesPerNode != nil {
		out.MaxStripesPerNode = int(*l.MaxStripesPerNode)
	}
	if l.MaxStreamsPerStripe != nil {
		out.MaxStreamsPerStripe = int(*l.MaxStreamsPerStripe)
	}
	if l.MaxConcurrency != nil {
		out.MaxConcurrency = int(*l.MaxConcurrency)
	}
	if l.MaxBitsPerSecond != nil {
		out.MaxBitsPerSecond = float64(*l.MaxBitsPerSecond)
	}
	return out
}

// FormatDecimal writes a coefficient as the API's Decimal (strconv 'g', shortest
// representation that reads back exactly).
func FormatDecimal(x float64) v1alpha1.Decimal {
	return v1alpha1.Decimal(strconv.FormatFloat(x, 'g', -1, 64))
}

// StreamModel converts a fit for the API; nil gives nil.
func StreamModel(f *optimizer.StreamFit) *v1alpha1.StreamModel {
	if f == nil {
		return nil
	}
	m := &v1alpha1.StreamModel{Name: v1alpha1.StreamModelName(f.Model), A: FormatDecimal(f.A), B: FormatDecimal(f.B),
		OptimalStreams: int32(min(max(f.OptimalStreams, 1), math.MaxInt32)), FitErrorBitsPerSecond: roundNonNegative(f.FitErrorBitsPerSecond),
		PeakBitsPerSecond: roundNonNegative(f.PeakBitsPerSecond)}
	if f.Model != optimizer.Dinda && f.Model != optimizer.Plateau {
		m.C = FormatDecimal(f.C)
	}
	return m
}

// Fit reads an API stream model back (a PathProfile's, for a warm start). It checks
// that the coefficients parse and are valid for the model (DADC'09 §3.1.1), since a
// stored model is input like any other.
func Fit(m *v1alpha1.StreamModel) (*optimizer.StreamFit, error) {
	if m == nil {
		return nil, nil
	}
	parse := func(field string, d v1alpha1.Decimal) (float64, error) {
		if d == "" {
			return 0, nil
		}
		v, err := strconv.ParseFloat(string(d), 64)
		if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
			return 0, fmt.Errorf("stream model %s: %q is not a finite number", field, d)
		}
		return v, nil
	}
	a, err := parse("a", m.A)
	if err != nil {
		return nil, err
	}
	b, err := parse("b", m.B)
	if err != nil {
		return nil, err
	}
	c, err := parse("c", m.C)
	if err != nil {
		return nil, err
	}
	model := optimizer.Model(m.Name)
	if !optimizer.Valid(model, a, b, c) {
		return nil, fmt.Errorf("stream model %s with a=%g b=%g c=%g is outside the model's valid range", m.Name, a, b, c)
	}
	fit := &optimizer.StreamFit{Model: model, A: a, B: b, C: c, OptimalStreams: int(max(m.OptimalStreams, 1)),
		FitErrorBitsPerSecond: float64(m.FitErrorBitsPerSecond), MaxSampledStreams: int(max(m.OptimalStreams, 1))}
	fit.PeakBitsPerSecond = fit.BitsPerSecond(fit.OptimalStreams)
	// the stored peak is the model's, but no more than the samples showed: it caps a
	// warm plan as it capped the plan it came from (optimizer.NewPathCapacity)
	if m.PeakBitsPerSecond > 0 {
		fit.BestSampledBitsPerSecond = float64(m.PeakBitsPerSecond)
		fit.PeakBitsPerSecond = min(fit.PeakBitsPerSecond, fit.BestSampledBitsPerSecond)
	}
	return fit, nil
}

// CPUModel converts a CPU model for the API, rounding to whole millicores.
func CPUModel(m optimizer.CPUModel) *v1alpha1.CPUModel {
	return &v1alpha1.CPUModel{InterceptMillicores: int64(math.Round(finiteOr(m.InterceptMillicores, 0))),
		MillicoresPerGbps: roundNonNegative(m.MillicoresPerGbps), Samples: int32(min(max(m.Samples, 0), math.MaxInt32))}
}

// CPUModelFromAPI reads an API CPU model back; nil gives nil.
func CPUModelFromAPI(m *v1alpha1.CPUModel) *optimizer.CPUModel {
	if m == nil {
		return nil
	}
	return &optimizer.CPUModel{InterceptMillicores: float64(m.InterceptMillicores), MillicoresPerGbps: float64(m.MillicoresPerGbps), Samples: int(m.Samples)}
}

func roundNonNegative(x float64) int64 {
	x = finiteOr(x, 0)
	if x <= 0 {
		return 0
	}
	if x >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(math.Round(x))
}

// ceilMillicores rounds a CPU figure up to whole millicores: a request slightly too
// large costs nothing, one slightly too small throttles the agent. A figure within a
// billionth of a whole number is that number: a model calibrated on a sample of 80
// millicores gives it back as 80.00000000000001 after its scaling, and asking 81 for it
// would be the arithmetic's error, not the agent's need.
func ceilMillicores(x float64) int64 {
	x = finiteOr(x, 0)
	if x <= 0 {
		return 0
	}
	if x >= math.MaxInt64 {
		return math.MaxInt64
	}
	return int64(math.Ceil(x - x*1e-9))
}

func finiteOr(x, def float64) float64 {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return def
	}
	return x
}
