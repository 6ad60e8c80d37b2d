package planning

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"strings"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/api/v1alpha1"
)

// Hash identifies a plan's decisions: the nodes, stripes per node, streams per stripe,
// buffer, CPU per agent and every size class's parameters. Predictions (rate, binding,
// model, CPU models) are left out, so a re-fit that decides the same keeps the hash.
// It is the first 16 hex digits of a SHA-256 over a canonical text, fit for a label
// value.
func Hash(p v1alpha1.TransferPlan) string {
	var b strings.Builder
	fmt.Fprintf(&b, "src=%s;dst=%s;stripes=%d;streams=%d;buffer=%d;cpu=%d/%d",
		strings.Join(p.SourceNodes, ","), strings.Join(p.DestinationNodes, ","), p.StripesPerNode, p.StreamsPerStripe,
		p.BufferBytes, p.SourceCPUMillicores, p.DestinationCPUMillicores)
	for _, c := range p.SizeClasses {
		fmt.Fprintf(&b, ";%s=%d/%d/%d/%d", c.Class, c.Pipelining, c.Parallelism, c.Concurrency, c.Channels)
	}
	if p.Scheduler != "" {
		// only when set, so that the plans made before schedulers keep their hash
		fmt.Fprintf(&b, ";scheduler=%s", p.Scheduler)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:8])
}

// Stripes is the plan's total number of stripes.
func Stripes(p v1alpha1.TransferPlan) int32 {
	return int32(min(int64(max(len(p.SourceNodes), 1))*int64(max(p.StripesPerNode, 1)), math.MaxInt32))
}

// Directive is the coordinator's transfer directive for a plan (Generation left 0 for
// the caller to set). The rate cap is limits' maxBitsPerSecond or the plan's share
// (TransferPlan.ShareBitsPerSecond), whichever is lower. Each size class carries the
// planner's own upper bound (SizeClassPlan.MaxBytes), so the agents class every file
// exactly as the planner counted it.
func Directive(p v1alpha1.TransferPlan, limits *v1alpha1.TuningLimits) contract.Directive {
	d := contract.Directive{Mode: contract.ModeTransfer, StreamsPerStripe: p.StreamsPerStripe, BufferBytes: p.BufferBytes,
		Stripes: Stripes(p) + p.ProbeHelperStripes, HelperStripes: p.ProbeHelperStripes, Scheduler: string(p.Scheduler)}
	if limits != nil && limits.MaxBitsPerSecond != nil {
		d.MaxBitsPerSecond = *limits.MaxBitsPerSecond
	}
	if s := p.ShareBitsPerSecond; s > 0 && (d.MaxBitsPerSecond <= 0 || s < d.MaxBitsPerSecond) {
		d.MaxBitsPerSecond = s
	}
	for i, c := range p.SizeClasses {
		param := contract.SizeClassParam{Class: string(c.Class), Pipelining: c.Pipelining, Parallelism: c.Parallelism,
			Concurrency: c.Concurrency, Channels: c.Channels}
		if i < len(p.SizeClasses)-1 {
			// a bound of 0 would mean "no bound" to the agents: keep at least 1 byte
			param.MaxBytes = max(1, c.MaxBytes)
		}
		d.SizeClasses = append(d.SizeClasses, param)
	}
	return d
}

// ProbeTransferDirective is a cold job's first directive: move the dataset at once on
// one stripe, starting with one stream and kernel autotuning, and take the probe's
// samples as stretches of that transfer (each sample sets the streams and buffer it
// measures); limits supplies the rate cap, which binds the probe too. The per-class
// parameters are the coordinator's defaults until the plan's.
func ProbeTransferDirective(probe *contract.ProbeDirective, limits *v1alpha1.TuningLimits) contract.Directive {
	d := contract.Directive{Mode: contract.ModeTransfer, StreamsPerStripe: 1, Stripes: 1, Probe: probe}
	if limits != nil && limits.MaxBitsPerSecond != nil {
		d.MaxBitsPerSecond = *limits.MaxBitsPerSecond
	}
	return d
}
