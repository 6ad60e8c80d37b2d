package optimizer

import (
	"fmt"
	"strings"
	"testing"
)

// The papers as written (issue 11, item 3): each model against its seed's own numbers,
// one figure per assertion, at the precision the paper prints. Where our answer
// differs from the paper's, docs/models.md gives the computation.

// mbit writes a rate at the precision of the Condor Week 2011 slides (0.01 Mbit/s).
func mbit(bps float64) string { return fmt.Sprintf("%.2f Mbit/s", bps/1e6) }

// loniStreams is the LONI case study of seed 000 (Yildirim & Kosar, Condor Week 2011,
// "OPT_B-Application Case Study"): Oliver → Eric, disk-to-disk over Lustre, 4-core
// nodes with 10 GigE, two nodes available; one stripe measured 903.41, 954.84, 990.91
// and 953.43 Mbit/s at 1, 2, 4 and 8 streams, and the slides answer N_opt → N_si = 2.
var loniStreams = []StreamPoint{{1, 903.41e6}, {2, 954.84e6}, {4, 990.91e6}, {8, 953.43e6}}

// loniSamples are loniStreams as probe samples (autotuned buffer).
func loniSamples() []Sample {
	out := make([]Sample, len(loniStreams))
	for i, p := range loniStreams {
		out[i] = Sample{Streams: p.Streams, BitsPerSecond: p.BitsPerSecond}
	}
	return out
}

// loniInput is the case study's planning input: two 4-core nodes with 10 GigE at each
// side. The slides give no CPU model (a, b) and no disk rate; the nodes' CPU budget is
// their four cores, and the default CPU model does not bind there (one core moves 3.6
// Gbit/s). Stripes per node are at most the cores: the slides run S_x = 8 as 2 nodes ×
// 4 stripes.
func loniInput() PlanInput {
	node := Node{NICBitsPerSecond: 10e9, CPUBudgetMillicores: 4000}
	return PlanInput{Samples: loniSamples(), Prober: Prober{Streams: ExpSelection{}},
		SourceNodes: nodes("oliver", 2, node), DestinationNodes: nodes("eric", 2, node), Limits: Limits{MaxStripesPerNode: 4}}
}

// TestLONIStreams: BestCmb over the papers' three models picks Newton through 1, 2 and
// 8 streams (mean error 7.59 Mbit/s), which peaks at n* = 3.34, so N_opt, the model's
// optimum (DADC'09's CALOPTSTREAMNO), is 3 streams at 960.84 Mbit/s. OPT_B then gives
// each stripe N_si = 2 streams, the slides' answer: 954.84 Mbit/s is within 2 % of the
// peak (0.62 % below), and a plan uses the fewest streams that reach within 2 % of the
// best rate. 4 streams measured 990.91 (3.8 % more than 2), above every valid curve of
// the three models; no rule of the seeds picks 4 (docs/models.md).
func TestLONIStreams(t *testing.T) {
	fit, why, err := FitStreams(loniStreams)
	if err != nil {
		t.Fatal(err)
	}
	if fit.Model != Newton || fit.Points != [3]int{1, 2, 8} {
		t.Errorf("model %s through %v, want Newton through 1, 2, 8: %s", fit.Model, fit.Points, fit)
	}
	if got := mbit(fit.FitErrorBitsPerSecond); got != "7.59 Mbit/s" {
		t.Errorf("fit error %s, want 7.59 Mbit/s", got)
	}
	if fit.OptimalStreams != 3 {
		t.Errorf("N_opt = %d streams, want 3 (Newton's peak at 3.34): %s", fit.OptimalStreams, fit)
	}
	if got := mbit(fit.PeakBitsPerSecond); got != "960.84 Mbit/s" {
		t.Errorf("predicted peak %s, want 960.84 Mbit/s", got)
	}
	// the optimum lies within the samples: nothing extrapolated, nothing said of it
	if fit.Extrapolated || strings.Contains(why, "beyond") {
		t.Errorf("extrapolated %v: %q", fit.Extrapolated, why)
	}

	plan, err := MakePlan(loniInput())
	if err != nil {
		t.Fatal(err)
	}
	f := plan.Flow
	if f.Nodes != 1 || f.StripesPerNode != 1 || f.StreamsPerStripe != 2 {
		t.Errorf("plan %s, want 1 node × 1 stripe × N_si = 2 streams", f.Reason)
	}
	if got := mbit(f.PredictedBitsPerSecond); got != "954.84 Mbit/s" || f.Binding != BindingPath {
		t.Errorf("predicted %s bound by %s, want 954.84 Mbit/s (the measurement at 2 streams) bound by Path", got, f.Binding)
	}
}

// TestLONIOptBShapes: the slides' stripe runs, S_x = 2, 4 and 8 as nodes × stripes per
// node × streams (1, 2, 2), (1, 4, 2) and (2, 4, 2), measured 1638.48, 3527.23 and
// 4229.33 Mbit/s.
//
// From the slides' inputs alone (the stream samples, 10 GigE, two 4-core nodes) OPT_B
// predicts k · U_f with U_f = Th(N_si = 2) = 954.84: 1909.68, 3819.36 and 7638.72
// Mbit/s; the measurements are 86 %, 92 % and 55 % of them. No per-node capacity
// explains the measurements: two stripes carried 819 Mbit/s each and
// four 882 each, so nothing on the node bound at two; the second node added 702 Mbit/s
// to the first's 3527, so what bound at eight is shared by both nodes (the Lustre file
// system, or the path). The slides list U_disk and U_network among the "parameters not
// given and found by the model": the stripe runs are how OPT_B finds them. Given them
// as the stripe doubling's rates (PlanInput.StripeRates) with the 2 streams per stripe
// they ran with (PlanInput.StripeStreams), the plan is the slides' S_x = 8 on 2 nodes ×
// 4 stripes × 2 streams at 4229.33 Mbit/s. Without the streams the runs had, the
// plan kept 1 stream per stripe: at 529 Mbit/s a stripe carries less than one
// stream's 903, so by the flow model alone the second stream adds nothing (the fewest
// streams within 2 %) — but 8 stripes of 1 stream were never measured to carry 4229.
func TestLONIOptBShapes(t *testing.T) {
	fit, err := BestCmb(loniStreams)
	if err != nil {
		t.Fatal(err)
	}
	in := loniInput()
	flow := FlowInput{Curve: fit, SourceCPU: DefaultCPUModel, DestinationCPU: DefaultCPUModel,
		SourceNodes: in.SourceNodes, DestinationNodes: in.DestinationNodes}
	shapes := []struct {
		nodes, stripes, streams int
		predicted, measured     string
	}{
		{1, 2, 2, "1909.68 Mbit/s", "1638.48 Mbit/s"},
		{1, 4, 2, "3819.36 Mbit/s", "3527.23 Mbit/s"},
		{2, 4, 2, "7638.72 Mbit/s", "4229.33 Mbit/s"},
	}
	for _, s := range shapes {
		p, err := EvaluateShape(flow, s.nodes, s.stripes, s.streams)
		if err != nil {
			t.Fatal(err)
		}
		if got := mbit(p.PredictedBitsPerSecond); got != s.predicted {
			t.Errorf("%d × %d × %d from the stream samples: %s, want k·U_f = %s", s.nodes, s.stripes, s.streams, got, s.predicted)
		}
	}

	in.StripeRates = []StreamPoint{{2, 1638.48e6}, {4, 3527.23e6}, {8, 4229.33e6}}
	in.StripeStreams = 2
	plan, err := MakePlan(in)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range shapes {
		if got := mbit(plan.Path.BitsPerSecond(s.nodes * s.stripes)); got != s.measured {
			t.Errorf("the path with %d stripes: %s, want the measured %s", s.nodes*s.stripes, got, s.measured)
		}
		flow.Path = &plan.Path
		p, err := EvaluateShape(flow, s.nodes, s.stripes, s.streams)
		if err != nil {
			t.Fatal(err)
		}
		if got := mbit(p.PredictedBitsPerSecond); got != s.measured {
			t.Errorf("%d × %d × %d within the measured path: %s, want %s", s.nodes, s.stripes, s.streams, got, s.measured)
		}
	}
	f := plan.Flow
	if f.Nodes != 2 || f.StripesPerNode != 4 || f.StreamsPerStripe != 2 || f.Binding != BindingPath {
		t.Errorf("plan %s [%s], want the slides' 2 nodes × 4 stripes × 2 streams bound by Path", f.Reason, f.Binding)
	}
	if got := mbit(f.PredictedBitsPerSecond); got != "4229.33 Mbit/s" {
		t.Errorf("predicted %s, want 4229.33 Mbit/s", got)
	}
	// the stripe runs' streams unknown: the flow model alone, 1 stream per stripe
	in.StripeStreams = 0
	if plan, err = MakePlan(in); err != nil {
		t.Fatal(err)
	}
	if f := plan.Flow; f.Nodes != 2 || f.StripesPerNode != 4 || f.StreamsPerStripe != 1 || mbit(f.PredictedBitsPerSecond) != "4229.33 Mbit/s" {
		t.Errorf("without the stripe runs' streams: plan %s, want 2 nodes × 4 stripes × 1 stream at 4229.33 Mbit/s", f.Reason)
	}
}

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
