package planning

import (
	"math"
	"testing"

	"github.com/dtnflow/dtnflow/agent/contract"
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

// TestMeasurementFromReportCarriesWhatIsLeft: what the rescale policy reads of the work
// left — bytes left and units no stripe holds — passes from the coordinator's report,
// and a report that does not say stays unsaid.
func TestMeasurementFromReportCarriesWhatIsLeft(t *testing.T) {
	m := MeasurementFromReport(contract.Report{BytesTotal: 1000, BytesDone: 400, UnitsUnleased: new(int64(0))})
	if m.RemainingBytes != 600 || m.UnitsUnleased == nil || *m.UnitsUnleased != 0 {
		t.Errorf("measurement %+v, want 600 bytes left and no unit unleased", m)
	}
	m = MeasurementFromReport(contract.Report{BytesTotal: 1000, BytesDone: 1000})
	if m.RemainingBytes != 0 || m.UnitsUnleased != nil {
		t.Errorf("measurement %+v, want nothing said of units and no bytes left", m)
	}
	if m = MeasurementFromReport(contract.Report{UnitsUnleased: new(int64(-2))}); m.UnitsUnleased == nil || *m.UnitsUnleased != 0 {
		t.Errorf("a negative count reads as %v, want 0", m.UnitsUnleased)
	}
}
