package contract

import (
	"testing"
	"time"
)

func TestLeastRTT(t *testing.T) {
	for _, tc := range []struct {
		rtts []int64
		want time.Duration
	}{
		{nil, 0},
		{[]int64{0, 0}, 0},
		{[]int64{66_000, 0, 50_229, 50_000, 51_000}, 50 * time.Millisecond},
		{[]int64{-5, 120}, 120 * time.Microsecond},
	} {
		var samples []Sample
		for _, r := range tc.rtts {
			samples = append(samples, Sample{RTTMicros: r})
		}
		if got := LeastRTT(samples); got != tc.want {
			t.Errorf("LeastRTT(%v) = %s, want %s", tc.rtts, got, tc.want)
		}
	}
}
