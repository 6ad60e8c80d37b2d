package optimizer

import (
	"math"
	"testing"
)

// TestPriorCPUModel pins each prior to the benchmark figure it comes from: measured CPU
// s/GB per side × 125 millicores per (s/GB · Gbit/s) × 125 %, rounded up to 10.
func TestPriorCPUModel(t *testing.T) {
	tests := []struct {
		dp       DataPlane
		src, dst float64 // millicores per Gbit/s
	}{
		{DataPlane{}, 110, 200},                              // 0.66 → 103.1, 1.24 → 193.8
		{DataPlane{Verify: true}, 170, 250},                  // 1.05 → 164.1, 1.58 → 246.9
		{DataPlane{Encrypted: true}, 120, 200},               // 0.73 → 114.1, 1.27 → 198.4
		{DataPlane{Verify: true, Encrypted: true}, 170, 260}, // 1.06 → 165.6, 1.64 → 256.3
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

// TestCoordinatorMillicores pins the coordinator's model to the figures it comes from:
// 4 + files/s × 0.100 × 125 %.
func TestCoordinatorMillicores(t *testing.T) {
	tests := map[string]struct {
		bps          float64
		files, bytes int64
		want         float64
	}{
		// 20 000 × 64 KiB at 658 Mbit/s: 1255 files/s → 4 + 1255 × 0.125 = 160.9
		"small files": {658e6, 20_000, 20_000 << 16, 160.879},
		// 36 files, 4 GiB at 685 Mbit/s: 0.72 files/s → 4.09
		"a few large files": {685e6, 36, 4 << 30, 4.090},
		// the demo: 315 files, 321 MB at 497 Mbit/s: 61 files/s → 11.62
		"the demo":         {497e6, 315, 320_935_237, 11.622},
		"empty files":      {1e9, 3, 0, 4},
		"no rate":          {0, 10, 1 << 20, 4},
		"an infinite rate": {math.Inf(1), 10, 1 << 20, 4},
	}
	for name, tc := range tests {
		if got := CoordinatorMillicores(tc.bps, tc.files, tc.bytes); math.Abs(got-tc.want) > 0.001 {
			t.Errorf("%s: %g millicores, want %g", name, got, tc.want)
		}
	}
}

// TestStartMillicores: the start's 0.2 CPU s over a pod's expected life, in whole
// millicores; a life that is not a positive finite number gets no share.
func TestStartMillicores(t *testing.T) {
	for _, tc := range []struct {
		life float64
		want int64
	}{
		{40, 5},   // a 4 GiB job at 860 Mbit/s
		{47.2, 4}, // 4.24
		{13, 15},  // 20 000 small files: 15.4
		{1, 200},
		{0.5, 400},
		{0, 0},
		{-3, 0},
		{math.Inf(1), 0},
		{math.NaN(), 0},
	} {
		if got := StartMillicores(tc.life); got != tc.want {
			t.Errorf("StartMillicores(%v) = %d, want %d", tc.life, got, tc.want)
		}
	}
}
