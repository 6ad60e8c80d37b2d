package coord

import (
	"testing"
	"time"
)

func TestProbeOutlasts(t *testing.T) {
	tests := map[string]struct {
		remaining    int64
		best         float64
		rtt, ceiling time.Duration
		want         bool
	}{
		// the demo: 230 MB left at 490 Mbit/s (3.8 s) against 3 ceilings of 2 s (40 RTT
		// of 40 ms, at least 2 s)
		"the demo after its first sample": {230e6, 490e6, 40 * time.Millisecond, 5 * time.Second, true},
		// 4 GiB at 450 Mbit/s: 76 s, far beyond 3 × 2 s
		"a 4 GiB file": {4 << 30, 450e6, 50 * time.Millisecond, 5 * time.Second, false},
		// 10 s left against 3 × 4 s (40 RTT of 100 ms): the probe stops
		"a long path": {625e6, 500e6, 100 * time.Millisecond, 0, true},
		// the directive's ceiling shortens the samples: 10 s against 3 × 3 s goes on
		"a short ceiling": {625e6, 500e6, 100 * time.Millisecond, 3 * time.Second, false},
		"no rate yet":     {1e6, 0, 0, 0, false},
		"nothing left":    {0, 1e9, 0, 0, true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := ProbeOutlasts(tc.remaining, tc.best, tc.rtt, tc.ceiling); got != tc.want {
				t.Errorf("ProbeOutlasts(%d bytes, %g bit/s, rtt %s, ceiling %s) = %v, want %v", tc.remaining, tc.best, tc.rtt, tc.ceiling, got, tc.want)
			}
		})
	}
}
