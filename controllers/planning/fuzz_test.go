package planning

import (
	"fmt"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/api/v1alpha1"
)

// fuzzInts reads small integers from fuzz input; past the end it reads zeros.
type fuzzInts struct{ b []byte }

func (f *fuzzInts) next(n int) int {
	if len(f.b) == 0 || n <= 0 {
		return 0
	}
	v := int(f.b[0])
	f.b = f.b[1:]
	return v % n
}

// big is a value over many orders of magnitude, sometimes 0 or negative.
func (f *fuzzInts) big() int64 {
	e := f.next(14)
	v := int64(1)
	for i := 0; i < e; i++ {
		v *= 10
	}
	switch f.next(8) {
	case 0:
		return 0
	case 1:
		return -v
	}
	return v * int64(1+f.next(9))
}

// FuzzPlan: whatever the spec, nodes and samples, Plan either fails or returns a plan
// within the limits, with the fixed values in Fixed mode, and a hash that matches.
func FuzzPlan(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("auto plan with a few nodes and samples: 0123456789abcdef0123456789abcdef"))
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzInts{data}
		var tuning v1alpha1.TransferTuning
		if in.next(3) == 0 {
			tuning.Mode = v1alpha1.TuningFixed
			tuning.Fixed = &v1alpha1.FixedTuning{Nodes: int32(in.next(4)), StripesPerNode: int32(in.next(6)), StreamsPerStripe: int32(in.next(20)),
				BufferBytes: int64(in.next(3)) << 20, Concurrency: int32(in.next(10)), Pipelining: int32(in.next(10))}
		}
		if in.next(2) == 0 {
			tuning.Limits = &v1alpha1.TuningLimits{}
			if v := int32(in.next(5)); v > 0 {
				tuning.Limits.MaxNodes = &v
			}
			if v := int32(in.next(9)); v > 0 {
				tuning.Limits.MaxStripesPerNode = &v
			}
			if v := int32(in.next(40)); v > 0 {
				tuning.Limits.MaxStreamsPerStripe = &v
			}
			if v := int32(in.next(40)); v > 0 {
				tuning.Limits.MaxConcurrency = &v
			}
			if v := in.big(); v > 0 {
				tuning.Limits.MaxBitsPerSecond = &v
			}
		}
		nodes := func(prefix string) []Node {
			out := make([]Node, in.next(5))
			for i := range out {
				out[i] = Node{Name: fmt.Sprintf("%s%d", prefix, i), NICBitsPerSecond: in.big(), CPUBudgetMillicores: in.big() % 100000,
					DiskBitsPerSecond: in.big(), PlacedStripes: in.next(6), MaxStripes: in.next(10),
					OthersBitsPerSecond: in.big() / 2, OthersMillicores: in.big() % 50000}
			}
			return out
		}
		pi := Input{Tuning: tuning, SourceNodes: nodes("s"), DestinationNodes: nodes("d"), ExternalDestination: in.next(4) == 0,
			RTT: time.Duration(in.next(200)) * time.Millisecond}
		for i := in.next(12); i > 0; i-- {
			pi.Samples = append(pi.Samples, v1alpha1.ProbeSample{Streams: int32(1 + in.next(64)), BufferBytes: int64(in.next(3)) << 20,
				BitsPerSecond: in.big(), SourceMillicores: in.big() % 10000, DestinationMillicores: in.big() % 10000})
		}
		if in.next(2) == 0 {
			pi.Dataset = &contract.Dataset{}
			for i := in.next(8); i > 0; i-- {
				b := contract.SizeBucket{Log2: int32(in.next(45)), Files: int64(in.next(200))}
				b.Bytes = b.Files << max(b.Log2-1, 0)
				pi.Dataset.Buckets = append(pi.Dataset.Buckets, b)
			}
		}
		plan, err := Plan(pi)
		if err != nil {
			return
		}
		lim := Limits(tuning.Limits).WithDefaults()
		if plan.StripesPerNode < 1 || int(plan.StripesPerNode) > lim.MaxStripesPerNode && tuning.Fixed == nil ||
			plan.StreamsPerStripe < 1 || int(plan.StreamsPerStripe) > lim.MaxStreamsPerStripe && tuning.Fixed == nil ||
			len(plan.SourceNodes) < 1 || len(plan.SourceNodes) > lim.MaxNodes && tuning.Fixed == nil {
			t.Fatalf("plan outside the limits %+v: %+v", lim, plan)
		}
		if !pi.ExternalDestination && len(plan.DestinationNodes) != len(plan.SourceNodes) {
			t.Fatalf("%d source and %d destination nodes", len(plan.SourceNodes), len(plan.DestinationNodes))
		}
		if f := tuning.Fixed; f != nil && (int32(len(plan.SourceNodes)) != f.Nodes || plan.StripesPerNode != f.StripesPerNode ||
			plan.StreamsPerStripe != f.StreamsPerStripe || plan.BufferBytes != f.BufferBytes) {
			t.Fatalf("Fixed plan %+v differs from %+v", plan, *f)
		}
		if plan.PredictedBitsPerSecond < 0 || plan.SourceCPUMillicores < 0 || plan.DestinationCPUMillicores < 0 || plan.Hash != Hash(plan) {
			t.Fatalf("plan %+v", plan)
		}
		if tuning.Limits != nil && tuning.Limits.MaxBitsPerSecond != nil && plan.PredictedBitsPerSecond > *tuning.Limits.MaxBitsPerSecond {
			t.Fatalf("predicted %d over the cap %d", plan.PredictedBitsPerSecond, *tuning.Limits.MaxBitsPerSecond)
		}
		if _, err := Fit(plan.Model); err != nil {
			t.Fatalf("the plan's model does not read back: %v", err)
		}
		d := Directive(plan, tuning.Limits)
		if d.Stripes != Stripes(plan) || len(d.SizeClasses) != len(plan.SizeClasses) {
			t.Fatalf("directive %+v for plan %+v", d, plan)
		}
	})
}
