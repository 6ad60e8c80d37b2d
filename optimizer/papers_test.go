package optimizer

import (
	"fmt"
	"testing"
)

// The papers as written (issue 11, item 3): each model against its seed's own numbers,
// one figure per assertion, at the precision the paper prints. Where our answer
// differs from the paper's, docs/models.md gives the computation.

// paperConcomitant is NDM'13 §5.1's model of SLAC → NERSC (Dec 2012), in our units
// (1 % of a core is 10 millicores):
//
//   - β′₁ = 62.708 Mbit/s per % of a NERSC core, β′₂ = 153.194 per % of residual SLAC
//     CPU, mean f(p) = −683.3 Mbit/s (the paper's figures);
//   - eq. 1's β₀ and β₁, which the paper does not print, from its Table 4: the line
//     passes through the means (78.28 %, 21.45 %; the residuals' mean is 0) and
//     through the row of maxima (96.42 %, 31.14 % with the largest residual, 5.296),
//     which the paper's own example reads as one transfer: β₁ = (31.14 − 5.296 −
//     21.45)/(96.42 − 78.28) = 0.24223, β₀ = 21.45 − 78.28·β₁ = 2.4885 % (24.885
//     millicores). The spreads of Table 4 agree: with σ from the interquartile
//     ranges, β₁ = √(σ²_SLAC − σ²_ε)/σ_NERSC = 0.245;
//   - the fastest transfer of Table 4, 6.29 Gbit/s, as MaxBitsPerSecond.
func paperConcomitant() ConcomitantModel {
	beta1 := (31.14 - 5.296 - 21.45) / (96.42 - 78.28)
	return ConcomitantModel{
		Independent:  Destination, // NERSC received and was the bottleneck
		Beta0:        10 * (21.45 - 78.28*beta1),
		Beta1:        beta1,
		BetaCPU:      62.708e6 / 10,
		BetaResidual: 153.194e6 / 10,
		// f(p) ≡ −683.3 Mbit/s: a spline whose coefficients are all equal is constant,
		// since quadratic B-splines sum to one
		Loss:             LossTerm{Basis: NewBSplineBasis(3, 0, 1.1e-3, []float64{2.4e-5, 6.2e-5}), Alpha: []float64{-683.3e6, -683.3e6, -683.3e6, -683.3e6, -683.3e6}},
		MeanLoss:         7.3e-5,
		MaxBitsPerSecond: 6.29e9,
	}
}

// gbit writes a rate at the precision of NDM'13's example (0.1 Gbit/s), and two
// decimals more.
func gbit(bps float64) (paper, fine string) {
	return fmt.Sprintf("%.1f Gbit/s", bps/1e9), fmt.Sprintf("%.3f Gbit/s", bps/1e9)
}

func TestConcomitantPaperNumbers(t *testing.T) {
	m := paperConcomitant()
	p := m.MeanLoss
	// 62.708 × 78.28 − 683.3 = 4225.5 Mbit/s; the paper's 4.226 Gbit/s is Table 4's
	// measured mean, which the rounded coefficients reproduce to 0.5 Mbit/s
	if got := fmt.Sprintf("%.1f Mbit/s", m.Predict(782.8, 0, p)/1e6); got != "4225.5 Mbit/s" {
		t.Errorf("mean throughput %s, want 4225.5 Mbit/s", got)
	}
	// the inverse: 4.2255 Gbit/s needs the mean NERSC CPU, 78.28 % of a core
	if _, nersc, err := m.CPUFor(4.2255e9, p, 0); err != nil || fmt.Sprintf("%.2f %%", nersc/10) != "78.28 %" {
		t.Errorf("CPUFor(4.2255 Gbit/s) at NERSC = %.2f %% (%v), want 78.28 %%", nersc/10, err)
	}
	// a residual of +1 % of SLAC CPU is worth β′₂ = 153.194 Mbit/s
	if d := m.Predict(782.8, 10, p) - m.Predict(782.8, 0, p); fmt.Sprintf("%.3f", d/1e6) != "153.194" {
		t.Errorf("one %% of residual adds %g bit/s, want 153.194 Mbit/s", d)
	}
}

// TestConcomitantPaperAllocation: "If 97% or effectively a whole NERSC CPU can be
// assigned … then only 32% of a CPU core is required at the SLAC DTN … With these CPU
// allocations, data can be moved at 6.3 Gbps" (NDM'13 §5.1).
func TestConcomitantPaperAllocation(t *testing.T) {
	m := paperConcomitant()
	p := m.MeanLoss
	// without eq. 2's residual term, 97 % of NERSC gives 62.708 × 97 − 683.3 = 5399.4
	// Mbit/s: the 5.4 Gbit/s the planner said before (issue 11)
	if paper, fine := gbit(m.Predict(970, 0, p)); paper != "5.4 Gbit/s" || fine != "5.399 Gbit/s" {
		t.Errorf("97 %% of NERSC with ε = 0: %s (%s), want 5.4", paper, fine)
	}
	// with it: SLAC's 32 % is ε = 32 − (2.4885 + 0.24223 × 97) = 6.016 % above eq. 1's
	// line, worth 153.194 × 6.016 = 921.5 Mbit/s
	eps := 320 - m.Dependent(970)
	if got := fmt.Sprintf("%.3f %%", eps/10); got != "6.016 %" {
		t.Errorf("SLAC's residual at 97 %% / 32 %%: %s, want 6.016 %%", got)
	}
	if paper, fine := gbit(m.Predict(970, eps, p)); paper != "6.3 Gbit/s" || fine != "6.321 Gbit/s" {
		t.Errorf("eq. 2 at 97 %% / 32 %%: %s (%s), want 6.3 (6.321)", paper, fine)
	}
	// RateFor credits the residual and stops at the fastest transfer fitted, 6.29
	if paper, fine := gbit(m.RateFor(320, 970, p)); paper != "6.3 Gbit/s" || fine != "6.290 Gbit/s" {
		t.Errorf("RateFor(SLAC 32 %%, NERSC 97 %%): %s (%s), want 6.3 (6.290, Table 4's fastest)", paper, fine)
	}
	// CPUFor the other way: 6.3 Gbit/s with NERSC held to 97 % asks SLAC for 31.9 %
	slac, nersc, err := m.CPUFor(6.3e9, p, 970)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("NERSC %.0f %%, SLAC %.1f %%", nersc/10, slac/10); got != "NERSC 97 %, SLAC 31.9 %" {
		t.Errorf("CPUFor(6.3 Gbit/s, NERSC ≤ 97 %%): %s, want NERSC 97 %%, SLAC 31.9 %% (the paper's 32 %%)", got)
	}
	// unbounded, the same rate would ask NERSC for more than a core
	if _, nersc, _ := m.CPUFor(6.3e9, p, 0); !(nersc > 1000) {
		t.Errorf("CPUFor(6.3 Gbit/s) without a bound gives NERSC %.0f millicores, want more than a core", nersc)
	}
}
