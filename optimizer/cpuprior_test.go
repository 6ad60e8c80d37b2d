package optimizer

import "testing"

// TestPriorCPUModel pins each prior to the benchmark figure it comes from: measured CPU
// s/GB per side × 125 millicores per (s/GB · Gbit/s) × 125 %, rounded up to 10.
func TestPriorCPUModel(t *testing.T) {
	tests := []struct {
		dp       DataPlane
		src, dst float64 // millicores per Gbit/s
	}{
		{DataPlane{}, 130, 230},                              // 0.79 → 123.4, 1.45 → 226.6
		{DataPlane{Verify: true}, 190, 290},                  // 1.19 → 185.9, 1.83 → 285.9
		{DataPlane{Encrypted: true}, 150, 250},               // 0.93 → 145.3, 1.60 → 250 exactly
		{DataPlane{Verify: true, Encrypted: true}, 220, 330}, // 1.35 → 210.9, 2.06 → 321.9
	}
	for _, tt := range tests {
		for side, want := range map[CPUSide]float64{Source: tt.src, Destination: tt.dst} {
			got := PriorCPUModel(side, tt.dp)
			if got.MillicoresPerGbps != want || got.InterceptMillicores != 100 || got.Samples != 0 {
				t.Errorf("PriorCPUModel(%v, %+v) = %+v, want 100 + %g per Gbit/s", side, tt.dp, got, want)
			}
		}
	}
	if DefaultCPUModel != PriorCPUModel(Destination, DataPlane{Verify: true}) {
		t.Errorf("DefaultCPUModel %+v is not the verified destination's prior", DefaultCPUModel)
	}
}

// TestPriorCPUModelOrder: whatever the figures, a side's prior never gets cheaper by
// doing more to each byte, and the receiver (which writes and renames) is the dearer side.
func TestPriorCPUModelOrder(t *testing.T) {
	for _, enc := range []bool{false, true} {
		for _, verify := range []bool{false, true} {
			dp := DataPlane{Verify: verify, Encrypted: enc}
			src, dst := PriorCPUModel(Source, dp), PriorCPUModel(Destination, dp)
			if dst.MillicoresPerGbps <= src.MillicoresPerGbps {
				t.Errorf("%+v: destination %g ≤ source %g", dp, dst.MillicoresPerGbps, src.MillicoresPerGbps)
			}
			for _, more := range []DataPlane{{Verify: true, Encrypted: enc}, {Verify: verify, Encrypted: true}} {
				for _, side := range []CPUSide{Source, Destination} {
					if PriorCPUModel(side, more).MillicoresPerGbps < PriorCPUModel(side, dp).MillicoresPerGbps {
						t.Errorf("%v: %+v is cheaper than %+v", side, more, dp)
					}
				}
			}
		}
	}
}
