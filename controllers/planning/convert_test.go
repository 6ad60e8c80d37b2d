package planning

import (
	"math"
	"testing"
)

// TestCeilMillicores: a request is rounded up, except for the arithmetic's own error on
// a whole number, which is that number.
func TestCeilMillicores(t *testing.T) {
	tests := []struct {
		x    float64
		want int64
	}{
		{80, 80},
		{80 * (1 + 1e-15), 80},               // a calibrated model scaled back to its sample
		{100 * 80 / 149.7 * (1 + 0.497), 80}, // the scaling TestPlanOneSampleCalibratesCPU does
		{80.000001, 81},                      // a millionth too much is a real excess
		{80.5, 81},
		{0.2, 1},
		{0, 0}, {-3, 0}, {math.NaN(), 0}, {math.Inf(1), 0},
		{1e30, math.MaxInt64},
	}
	for _, tc := range tests {
		if got := ceilMillicores(tc.x); got != tc.want {
			t.Errorf("ceilMillicores(%.17g) = %d, want %d", tc.x, got, tc.want)
		}
	}
}
