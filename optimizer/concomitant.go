package optimizer

import (
	"errors"
	"fmt"
	"math"

	"gonum.org/v1/gonum/floats"
	"gonum.org/v1/gonum/stat"
)

// CPUObservation is one transfer as NDM'13 §5.1 records it: its throughput, the CPU
// its agent used at each end, and its packet loss rate.
type CPUObservation struct {
	BitsPerSecond         float64
	SourceMillicores      float64
	DestinationMillicores float64
	// LossRate is retransmitted segments over segments sent (contract.StripeReport's
	// LossPPM / 1e6).
	LossRate float64
}

// LossTerm is f(p) of NDM'13 eq. 2: Σⱼ αⱼ Bⱼ(p) over a quadratic B-spline basis
// (eq. 3). With a single coefficient and no basis it is a constant.
type LossTerm struct {
	Basis BSplineBasis
	Alpha []float64
}

// At evaluates f(p) in bits per second.
func (l LossTerm) At(p float64) float64 {
	if len(l.Alpha) == 0 {
		return 0
	}
	if l.Basis.Len() != len(l.Alpha) || !(l.Basis.Hi > l.Basis.Lo) {
		return l.Alpha[0]
	}
	var buf [16]float64
	var vals []float64
	if len(l.Alpha) <= len(buf) {
		vals = l.Basis.Eval(p, buf[:])
	} else {
		vals = l.Basis.Eval(p, make([]float64, len(l.Alpha)))
	}
	var f float64
	for j, a := range l.Alpha {
		f += a * vals[j]
	}
	return f
}

// ConcomitantModel is the regression of Liu, Veeraraghavan et al., "On Causes of
// GridFTP Transfer Throughput Variance", NDM'13 §5.1: throughput is linear in the CPU
// time the transfer gets at each end, and the two ends need different CPU.
//
//	eq. 1: dep = β₀ + β₁·ind + ε         (CPU of one end against the other)
//	eq. 2: y = β′₁·ind + β′₂·ε + f(p) + e (throughput)
//	eq. 3: f(p) ≈ Σ αⱼ Bⱼ(p)              (quadratic B-splines, quantile knots)
//
// ind is the CPU of the bottleneck end, dep the other end's, ε the residuals of eq. 1
// and p the loss rate. Units: CPU in millicores (the paper's percent of a core × 10),
// rates in bits per second, so β′₁ is bits/s per millicore.
type ConcomitantModel struct {
	// Independent is the bottleneck end, eq. 1's regressor ("Since the NERSC CPU was
	// the bottleneck ... NERSC CPU usage was the independent variable").
	Independent CPUSide
	// Beta0, Beta1 are β₀ and β₁ of eq. 1.
	Beta0, Beta1 float64
	// BetaCPU and BetaResidual are β′₁ and β′₂ of eq. 2.
	BetaCPU, BetaResidual float64
	// Loss is f(p).
	Loss LossTerm
	// Knots is the number of interior knots leave-one-out cross-validation chose.
	Knots int
	// LOOCVError is the root mean squared leave-one-out error of the chosen fit.
	LOOCVError float64
	// MeanLoss is the mean loss rate of the observations: the p to plan with when none
	// is given.
	MeanLoss float64
	// MaxBitsPerSecond is the fastest observation fitted; RateFor predicts no more
	// (the regression has seen nothing faster). 0 means unknown, and nothing caps.
	MaxBitsPerSecond float64
	// Observations is the number of observations fitted.
	Observations int
}

// FitOptions tune FitConcomitant.
type FitOptions struct {
	// MaxKnots is the most interior knots cross-validation tries; 0 means 6, and it is
	// lowered so that every fit keeps at least 5 observations per coefficient.
	MaxKnots int
	// Independent forces eq. 1's regressor; nil chooses the end with the higher mean
	// CPU (the bottleneck, as the paper argues).
	Independent *CPUSide
}

// ErrTooFewObservations is returned when there are too few usable observations for
// eq. 2 (at least 8: two CPU terms, three spline coefficients and room to spare).
var ErrTooFewObservations = errors.New("optimizer: too few observations with throughput and CPU at both ends to fit the concomitant model")

// ErrUnstableFit is returned when the observations overflow the regression (rates or
// CPU figures so far apart that a coefficient is not a finite number).
var ErrUnstableFit = errors.New("optimizer: the concomitant regression does not give finite coefficients for these observations")

// FitConcomitant fits NDM'13 §5.1. The paper fitted quadratic splines (m = 3) with R's
// bsplineS and lm and chose the number of inner quantile knots by leave-one-out
// cross-validation; so do we, with the LOO residuals from the hat matrix. Where the
// paper is silent we choose:
//   - knots that coincide (ties in p, such as the 14 % of transfers with no loss) are
//     merged, so a requested k may give fewer distinct knots;
//   - if every p is equal, f(p) is a constant (the intercept);
//   - if eq. 1 fits exactly (ε ≡ 0), β′₂ is 0 and the column is dropped;
//   - among knot counts with equal LOO error the smaller wins.
func FitConcomitant(obs []CPUObservation, opt FitOptions) (ConcomitantModel, error) {
	var y, src, dst, p []float64
	for _, o := range obs {
		if !usable(o.BitsPerSecond) || !(o.SourceMillicores > 0) || !(o.DestinationMillicores > 0) ||
			!finite(o.SourceMillicores) || !finite(o.DestinationMillicores) || !(o.LossRate >= 0) || !finite(o.LossRate) {
			continue
		}
		y = append(y, o.BitsPerSecond)
		src = append(src, o.SourceMillicores)
		dst = append(dst, o.DestinationMillicores)
		p = append(p, o.LossRate)
	}
	n := len(y)
	if n < 8 {
		return ConcomitantModel{}, ErrTooFewObservations
	}
	m := ConcomitantModel{Observations: n, MeanLoss: stat.Mean(p, nil), MaxBitsPerSecond: floats.Max(y)}
	if opt.Independent != nil {
		m.Independent = *opt.Independent
	} else if stat.Mean(dst, nil) > stat.Mean(src, nil) {
		m.Independent = Destination
	}
	ind, dep := src, dst
	if m.Independent == Destination {
		ind, dep = dst, src
	}
	m.Beta0, m.Beta1 = stat.LinearRegression(ind, dep, nil, false)
	resid := make([]float64, n)
	residSS := 0.0
	for i := range resid {
		resid[i] = dep[i] - (m.Beta0 + m.Beta1*ind[i])
		residSS += resid[i] * resid[i]
	}
	useResid := residSS > 1e-18*float64(n)

	lo, hi := p[0], p[0]
	for _, v := range p {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	maxKnots := opt.MaxKnots
	if maxKnots <= 0 {
		maxKnots = 6
	}
	fixedCols := 1
	if useResid {
		fixedCols = 2
	}
	// at least 5 observations per coefficient
	maxKnots = max(0, min(maxKnots, n/5-fixedCols-3))
	if !(hi > lo) {
		maxKnots = -1 // constant f
	}

	type fit struct {
		k     int
		basis BSplineBasis
		beta  []float64
		cv    float64
	}
	var best *fit
	for k := -1; k <= maxKnots; k++ {
		if k == -1 && hi > lo {
			continue // the constant is only for a degenerate p
		}
		var basis BSplineBasis
		cols := fixedCols + 1
		if k >= 0 {
			basis = NewBSplineBasis(3, lo, hi, QuantileKnots(p, k))
			if len(basis.Interior) != k {
				continue // merged knots: the same fit as a smaller k
			}
			cols = fixedCols + basis.Len()
		}
		x := make([][]float64, n)
		row := make([]float64, n*cols)
		for i := range x {
			x[i] = row[i*cols : (i+1)*cols]
			x[i][0] = ind[i]
			if useResid {
				x[i][1] = resid[i]
			}
			if k >= 0 {
				basis.Eval(p[i], x[i][fixedCols:])
			} else {
				x[i][fixedCols] = 1
			}
		}
		beta, hat, err := leastSquares(x, y)
		if err != nil {
			continue
		}
		var sse float64
		ok := true
		for i := range y {
			pred := 0.0
			for j, b := range beta {
				pred += b * x[i][j]
			}
			if hat[i] >= 1-1e-9 {
				ok = false
				break
			}
			e := (y[i] - pred) / (1 - hat[i])
			sse += e * e
		}
		if !ok {
			continue
		}
		cv := math.Sqrt(sse / float64(n))
		if best == nil || cv < best.cv {
			best = &fit{k: max(k, 0), basis: basis, beta: beta, cv: cv}
		}
	}
	if best == nil {
		return ConcomitantModel{}, errors.New("optimizer: every concomitant regression was rank deficient")
	}
	m.BetaCPU = best.beta[0]
	if useResid {
		m.BetaResidual = best.beta[1]
	}
	m.Loss = LossTerm{Basis: best.basis, Alpha: append([]float64(nil), best.beta[fixedCols:]...)}
	m.Knots = best.k
	m.LOOCVError = best.cv
	for _, v := range append([]float64{m.Beta0, m.Beta1, m.BetaCPU, m.BetaResidual, m.LOOCVError, m.MeanLoss}, m.Loss.Alpha...) {
		if !finite(v) {
			return ConcomitantModel{}, ErrUnstableFit
		}
	}
	return m, nil
}

// Predict is eq. 2 without the error term: the rate for the bottleneck end's CPU ind,
// eq. 1's residual resid (0 on average) and loss rate p.
func (m ConcomitantModel) Predict(ind, resid, p float64) float64 {
	return m.BetaCPU*ind + m.BetaResidual*resid + m.Loss.At(p)
}

// Dependent is eq. 1 without its residual: the other end's CPU when the bottleneck end
// uses ind.
func (m ConcomitantModel) Dependent(ind float64) float64 { return m.Beta0 + m.Beta1*ind }

// CPUFor returns the CPU each end needs to sustain target bits/s at loss rate p (use
// MeanLoss when unknown), with the bottleneck end given at most maxIndependent
// millicores (≤ 0: no bound). This is the paper's concomitant allocation ("If 97% or
// effectively a whole NERSC CPU can be assigned …, then only 32% of a CPU core is
// required at the SLAC DTN … data can be moved at 6.3 Gbps"):
//
//   - the bottleneck end from eq. 2 with the residual at its mean, ε = 0:
//     ind = (target − f(p))/β′₁, and the other end from eq. 1, β₀ + β₁·ind;
//   - where that ind exceeds maxIndependent, the bottleneck end gets maxIndependent
//     and eq. 2's residual term makes up the rest: ε = (target − β′₁·ind − f(p))/β′₂
//     more millicores at the other end than eq. 1 gives it (β′₂ > 0: in the paper's
//     transfers, CPU at the faster end beyond eq. 1's line came with more
//     throughput). With β′₂ ≤ 0 the residual cannot help and the bound is ignored.
//
// A target at or below f(p) needs no CPU beyond eq. 1's intercept; negative answers
// are raised to 0. RateFor is its inverse up to MaxBitsPerSecond.
func (m ConcomitantModel) CPUFor(target, p, maxIndependent float64) (srcMillicores, dstMillicores float64, err error) {
	if !(m.BetaCPU > 0) {
		return 0, 0, fmt.Errorf("optimizer: concomitant model has β′₁ = %g; it cannot size CPU", m.BetaCPU)
	}
	if !finite(target) || target < 0 {
		return 0, 0, fmt.Errorf("optimizer: target rate %g is not a finite rate", target)
	}
	ind := math.Max(0, (target-m.Loss.At(p))/m.BetaCPU)
	extra := 0.0
	if maxIndependent > 0 && ind > maxIndependent && m.BetaResidual > 0 {
		ind = maxIndependent
		extra = (target - m.BetaCPU*ind - m.Loss.At(p)) / m.BetaResidual
	}
	dep := math.Max(0, m.Dependent(ind)+extra)
	if !finite(dep) {
		return 0, 0, fmt.Errorf("optimizer: the concomitant model gives no finite CPU for %g bit/s", target)
	}
	if m.Independent == Destination {
		return dep, ind, nil
	}
	return ind, dep, nil
}

// RateFor returns the rate the CPU available at each end sustains at loss rate p,
// eq. 2 with its residual term (NDM'13 §5.1):
//
//   - ε = dep − (β₀ + β₁·ind) is what the other end has beyond eq. 1's line. When it
//     is negative the other end cannot keep up, and the bottleneck end is held to
//     what it can match, ind ≤ (dep − β₀)/β₁, with ε = 0; when positive it adds
//     β′₂·ε (only for β′₂ > 0).
//   - The rate is never negative, and never above MaxBitsPerSecond, the fastest
//     transfer the regression was fitted on.
//
// With the paper's coefficients, 97 % of a NERSC core and 32 % of a SLAC core give
// 6.32 Gbit/s (5.40 with ε = 0), above the fastest transfer of its Table 4, 6.29
// Gbit/s, which caps it: the paper's "6.3 Gbps" (docs/models.md).
func (m ConcomitantModel) RateFor(srcMillicores, dstMillicores, p float64) float64 {
	ind, dep := srcMillicores, dstMillicores
	if m.Independent == Destination {
		ind, dep = dstMillicores, srcMillicores
	}
	ind = math.Max(0, ind)
	if m.Beta1 > 0 {
		ind = math.Max(0, math.Min(ind, (dep-m.Beta0)/m.Beta1))
	}
	resid := 0.0
	if m.BetaResidual > 0 {
		resid = math.Max(0, dep-m.Dependent(ind))
	}
	r := m.Predict(ind, resid, p)
	if m.MaxBitsPerSecond > 0 {
		r = math.Min(r, m.MaxBitsPerSecond)
	}
	if !(r > 0) || !finite(r) {
		return 0
	}
	return r
}
