package optimizer

import (
	"sort"

	"gonum.org/v1/gonum/stat"
)

// BSplineBasis is a B-spline basis of a given order (order m is degree m−1) on
// [Lo, Hi] with interior knots, in the form R's fda::bsplineS builds it (Liu et al.,
// NDM'13 §5.1, eq. 3): k interior knots and order m give k+m basis functions, and the
// boundary knots are repeated m times, so the functions sum to 1 everywhere on
// [Lo, Hi] — the basis spans the constant function, which is why eq. 2 needs no
// separate intercept.
type BSplineBasis struct {
	Order    int
	Lo, Hi   float64
	Interior []float64
	knots    []float64 // augmented knot vector
}

// NewBSplineBasis builds a basis. Interior knots outside (lo, hi) or repeated are
// dropped (ties in the data put several quantiles on one value). hi must exceed lo.
func NewBSplineBasis(order int, lo, hi float64, interior []float64) BSplineBasis {
	if order < 1 {
		order = 1
	}
	in := append([]float64(nil), interior...)
	sort.Float64s(in)
	kept := in[:0]
	for _, k := range in {
		if k > lo && k < hi && (len(kept) == 0 || k > kept[len(kept)-1]) {
			kept = append(kept, k)
		}
	}
	knots := make([]float64, 0, len(kept)+2*order)
	for i := 0; i < order; i++ {
		knots = append(knots, lo)
	}
	knots = append(knots, kept...)
	for i := 0; i < order; i++ {
		knots = append(knots, hi)
	}
	return BSplineBasis{Order: order, Lo: lo, Hi: hi, Interior: kept, knots: knots}
}

// QuantileKnots returns k interior knots at the j/(k+1) quantiles of x, j = 1…k
// (NDM'13: "k=2 (33% and 66% quantile knots)").
func QuantileKnots(x []float64, k int) []float64 {
	if k <= 0 || len(x) == 0 {
		return nil
	}
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	out := make([]float64, 0, k)
	for j := 1; j <= k; j++ {
		out = append(out, stat.Quantile(float64(j)/float64(k+1), stat.LinInterp, s, nil))
	}
	return out
}

// Len is the number of basis functions: interior knots + order.
func (b BSplineBasis) Len() int { return len(b.Interior) + b.Order }

// Eval writes the value of every basis function at x into out (len ≥ Len) and returns
// out[:Len]. x outside [Lo, Hi] is clamped to it, which extends the spline flat beyond
// the data (fda::bsplineS refuses such x; a planner must answer for any loss rate).
func (b BSplineBasis) Eval(x float64, out []float64) []float64 {
	n := b.Len()
	out = out[:n]
	for i := range out {
		out[i] = 0
	}
	if len(b.knots) == 0 || !(b.Hi > b.Lo) {
		return out
	}
	if !(x >= b.Lo) { // also NaN
		x = b.Lo
	}
	if x > b.Hi {
		x = b.Hi
	}
	p := b.Order - 1
	t := b.knots
	// span: t[i] ≤ x < t[i+1], with the last span closed on the right
	i := len(t) - b.Order - 1
	for j := p; j < len(t)-b.Order; j++ {
		if x < t[j+1] {
			i = j
			break
		}
	}
	// Cox–de Boor, in the triangular form of Piegl & Tiller (The NURBS Book, A2.2)
	var left, right [8]float64
	var nb [8]float64
	if p >= len(left) {
		return out // orders above 8 are not used here
	}
	nb[0] = 1
	for j := 1; j <= p; j++ {
		left[j] = x - t[i+1-j]
		right[j] = t[i+j] - x
		saved := 0.0
		for r := 0; r < j; r++ {
			den := right[r+1] + left[j-r]
			tmp := 0.0
			if den != 0 {
				tmp = nb[r] / den
			}
			nb[r] = saved + right[r+1]*tmp
			saved = left[j-r] * tmp
		}
		nb[j] = saved
	}
	for r := 0; r <= p; r++ {
		if idx := i - p + r; idx >= 0 && idx < n {
			out[idx] = nb[r]
		}
	}
	return out
}
