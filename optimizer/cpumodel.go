package optimizer

import (
	"errors"
	"math"

	"gonum.org/v1/gonum/stat"
)

// CPUModel is the CPU an agent uses as a linear function of the rate it moves,
// U_cpu = a + b·Th (Yildirim & Kosar, Condor Week 2011, "Flow Model": "a and b are
// solved by using the sampling throughput and CPU utilization measurements in
// regression of method of least squares"; Liu et al., NDM'13 §4.1 and §5.1 found the
// same linearity at both ends, with a different slope at each).
//
// Units: millicores and bits per second; the slope is kept per Gbit/s, as the API
// carries it (v1alpha1.CPUModel), so that it reads as a plain number.
type CPUModel struct {
	// InterceptMillicores is a, the CPU used at zero throughput.
	InterceptMillicores float64
	// MillicoresPerGbps is b, the CPU per Gbit/s moved.
	MillicoresPerGbps float64
	// Samples is the number of measurements fitted; 0 for a default model.
	Samples int
}

// DefaultCPUModel is the prior of a side when nothing says what its agents do to each
// byte: PriorCPUModel's dearest source/destination slope of the clear data plane with
// verification, the default of a TransferJob (spec.integrity.verify). The papers give no
// default; NDM'13's operational DTNs needed 51 (SLAC) to 154 (NERSC) millicores per
// Gbit/s without checksums, from 32 % and 97 % of a core at 6.3 Gbit/s.
var DefaultCPUModel = PriorCPUModel(Destination, DataPlane{Verify: true})

// sanitized replaces parts that are not finite and non-negative by 0, so that a
// corrupt stored model cannot turn a plan's numbers into NaN.
func (m CPUModel) sanitized() CPUModel {
	if !finite(m.InterceptMillicores) || m.InterceptMillicores < 0 {
		m.InterceptMillicores = 0
	}
	if !finite(m.MillicoresPerGbps) || m.MillicoresPerGbps < 0 {
		m.MillicoresPerGbps = 0
	}
	return m
}

// Millicores is the CPU needed to move bps.
func (m CPUModel) Millicores(bps float64) float64 {
	if !(bps > 0) {
		return math.Max(0, m.InterceptMillicores)
	}
	return math.Max(0, m.InterceptMillicores+m.MillicoresPerGbps*bps/1e9)
}

// BitsPerSecond is the rate that millicores can sustain: (U − a)/b, 0 when U does not
// cover the intercept, and +Inf when it does and the slope is 0 (CPU does not bind).
func (m CPUModel) BitsPerSecond(millicores float64) float64 {
	if millicores < m.InterceptMillicores {
		return 0
	}
	if !(m.MillicoresPerGbps > 0) {
		return math.Inf(1)
	}
	r := (millicores - m.InterceptMillicores) / m.MillicoresPerGbps * 1e9
	if !(r > 0) {
		return 0
	}
	return r
}

// ErrTooFewCPUSamples is returned when a side has fewer than two samples with its CPU
// measured at different rates.
var ErrTooFewCPUSamples = errors.New("optimizer: at least two samples with CPU measured at different rates are needed to fit a CPU model")

// CPUSide selects which end's CPU a fit reads.
type CPUSide int

const (
	Source CPUSide = iota
	Destination
)

func (s CPUSide) String() string {
	if s == Destination {
		return "destination"
	}
	return "source"
}

// FitCPUModel fits U_cpu = a + b·Th by ordinary least squares (gonum stat.
// LinearRegression) over the samples whose CPU was measured at that side.
//
// Where the papers are silent we choose:
//   - a negative slope (noise over a narrow range of rates) is not physical: the model
//     becomes the ratio through the origin, b = ΣU/ΣTh, a = 0;
//   - a negative intercept would promise CPU for nothing at low rates: the fit is
//     redone through the origin.
func FitCPUModel(samples []Sample, side CPUSide) (CPUModel, error) {
	var x, y []float64
	for _, s := range samples {
		u := s.SourceMillicores
		if side == Destination {
			u = s.DestinationMillicores
		}
		if !usable(s.BitsPerSecond) || !(u > 0) || math.IsInf(u, 0) {
			continue
		}
		x = append(x, s.BitsPerSecond/1e9)
		y = append(y, u)
	}
	distinct := false
	for i := 1; i < len(x); i++ {
		if x[i] != x[0] {
			distinct = true
			break
		}
	}
	if len(x) < 2 || !distinct {
		return CPUModel{}, ErrTooFewCPUSamples
	}
	a, b := stat.LinearRegression(x, y, nil, false)
	if !(b > 0) || !finite(a) || !finite(b) {
		return CPUModel{InterceptMillicores: 0, MillicoresPerGbps: sum(y) / sum(x), Samples: len(x)}, nil
	}
	if a < 0 {
		_, b = stat.LinearRegression(x, y, nil, true)
		a = 0
	}
	return CPUModel{InterceptMillicores: a, MillicoresPerGbps: b, Samples: len(x)}, nil
}

// CalibrateCPUModel scales a model whose shape is known — a prior, or a path's stored
// fit — through what one side measured, for the samples FitCPUModel cannot fit: one
// sample, or several at one rate (the common case of an on-data probe on a path that
// one stream fills). Both parts scale by measured ÷ predicted at the samples' mean
// rate, so the model passes through the measurement and keeps its base's share of
// fixed and per-byte cost; a base that predicts nothing there gives the ratio through
// the origin. ok is false when no sample measured that side's CPU.
//
// Where the papers are silent: a regression needs two rates, and a prior alone missed
// the agents' use by 2–30× on the local cluster (docs/benchmarks.md, issue 11's side
// by side), so one measurement of the job itself outweighs the prior's slope.
func CalibrateCPUModel(base CPUModel, samples []Sample, side CPUSide) (CPUModel, bool) {
	var n int
	var gbps, used float64
	for _, s := range samples {
		u := s.SourceMillicores
		if side == Destination {
			u = s.DestinationMillicores
		}
		if !usable(s.BitsPerSecond) || !(u > 0) || math.IsInf(u, 0) {
			continue
		}
		n++
		gbps += s.BitsPerSecond / 1e9
		used += u
	}
	if n == 0 {
		return CPUModel{}, false
	}
	gbps, used = gbps/float64(n), used/float64(n)
	base = base.sanitized()
	predicted := base.Millicores(gbps * 1e9)
	if !(predicted > 0) {
		return CPUModel{MillicoresPerGbps: used / gbps, Samples: n}, true
	}
	k := used / predicted
	return CPUModel{InterceptMillicores: k * base.InterceptMillicores, MillicoresPerGbps: k * base.MillicoresPerGbps, Samples: n}, true
}

func sum(v []float64) float64 {
	var s float64
	for _, x := range v {
		s += x
	}
	return s
}
