package optimizer

import (
	"errors"
	"math"

	"gonum.org/v1/gonum/mat"
)

var errRankDeficient = errors.New("optimizer: regression columns are linearly dependent")

// leastSquares solves min ‖Xβ − y‖ by QR (gonum mat.QR) and returns β and the diagonal
// of the hat matrix H = X(XᵀX)⁻¹Xᵀ, from which leave-one-out residuals follow without
// refitting: eᵢ/(1 − hᵢᵢ). Columns are scaled to unit norm before factorising so that
// rank detection does not depend on units (millicores next to B-spline values in
// [0, 1]).
func leastSquares(x [][]float64, y []float64) (beta, hat []float64, err error) {
	rows := len(y)
	if rows == 0 || len(x) != rows {
		return nil, nil, errors.New("optimizer: empty or mismatched regression")
	}
	cols := len(x[0])
	if rows < cols {
		return nil, nil, errRankDeficient
	}
	scale := make([]float64, cols)
	for j := 0; j < cols; j++ {
		var s float64
		for i := 0; i < rows; i++ {
			s += x[i][j] * x[i][j]
		}
		scale[j] = math.Sqrt(s)
		if !(scale[j] > 0) || math.IsInf(scale[j], 0) {
			return nil, nil, errRankDeficient
		}
	}
	a := mat.NewDense(rows, cols, nil)
	for i := 0; i < rows; i++ {
		for j := 0; j < cols; j++ {
			a.Set(i, j, x[i][j]/scale[j])
		}
	}
	var qr mat.QR
	qr.Factorize(a)
	var r mat.Dense
	qr.RTo(&r)
	maxDiag := 0.0
	for j := 0; j < cols; j++ {
		maxDiag = math.Max(maxDiag, math.Abs(r.At(j, j)))
	}
	for j := 0; j < cols; j++ {
		if math.Abs(r.At(j, j)) <= 1e-10*maxDiag {
			return nil, nil, errRankDeficient
		}
	}
	var sol mat.VecDense
	if err := qr.SolveVecTo(&sol, false, mat.NewVecDense(rows, append([]float64(nil), y...))); err != nil {
		return nil, nil, errRankDeficient
	}
	beta = make([]float64, cols)
	for j := range beta {
		beta[j] = sol.AtVec(j) / scale[j]
	}
	var q mat.Dense
	qr.QTo(&q)
	hat = make([]float64, rows)
	for i := 0; i < rows; i++ {
		var h float64
		for j := 0; j < cols; j++ {
			v := q.At(i, j)
			h += v * v
		}
		hat[i] = h
	}
	return beta, hat, nil
}
