package settle

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// feed runs a detector over a rate profile (bits/s as a function of the time since
// the start), polled every step, and returns its result and whether it ended.
func feed(l Limits, step time.Duration, rate func(t time.Duration) float64) (Result, bool) {
	t0 := time.Unix(1000, 0)
	var bytes float64 = 1 << 30 // a running transfer: the count does not start at 0
	d := New(l, t0, int64(bytes))
	for t := step; t <= time.Minute; t += step {
		for u := t - step; u < t; u += time.Millisecond {
			bytes += rate(u) / 8 * time.Millisecond.Seconds()
		}
		if r, done := d.Add(t0.Add(t), int64(bytes)); done {
			return r, true
		}
	}
	return Result{}, false
}

func TestForRTT(t *testing.T) {
	cases := map[string]struct {
		rtt  time.Duration
		want Limits
	}{
		"50 ms":    {50 * time.Millisecond, Limits{Window: 400 * time.Millisecond, Skip: 200 * time.Millisecond, MinWindows: 3, Tolerance: 0.05, Ceiling: 2 * time.Second, Stretch: 4 * time.Second}},
		"loopback": {50 * time.Microsecond, Limits{Window: MinWindow, Skip: MinSkip, MinWindows: 3, Tolerance: 0.05, Ceiling: MinCeiling, Stretch: 2 * MinCeiling}},
		"200 ms":   {200 * time.Millisecond, Limits{Window: 1600 * time.Millisecond, Skip: 800 * time.Millisecond, MinWindows: 3, Tolerance: 0.05, Ceiling: 8 * time.Second, Stretch: 16 * time.Second}},
		"1 s":      {time.Second, Limits{Window: MaxWindow, Skip: MaxSkip, MinWindows: 3, Tolerance: 0.05, Ceiling: MaxCeiling, Stretch: 0}},
		"unknown":  {0, Limits{Window: MinWindow, Skip: MinSkip, MinWindows: 3, Tolerance: 0.05, Ceiling: 5 * time.Second}},
	}
	for name, c := range cases {
		if got := ForRTT(c.rtt); got != c.want {
			t.Errorf("%s: ForRTT(%v) = %+v, want %+v", name, c.rtt, got, c.want)
		}
	}
}

func TestDetector(t *testing.T) {
	base := ForRTT(50 * time.Millisecond) // windows 400 ms after a 200 ms skip, ceiling 2 s
	withThreshold := func(th float64) Limits { l := base; l.Threshold = th; return l }
	long := base
	long.Ceiling = 20 * time.Second
	unstretched := base
	unstretched.Stretch = 0
	unstretchedWithThreshold := func(th float64) Limits { l := unstretched; l.Threshold = th; return l }
	slowStart := func(t time.Duration) float64 {
		// doubling every 50 ms from 10 Mbit/s up to 900 Mbit/s (reached at 0.33 s)
		return math.Min(900e6, 10e6*math.Pow(2, t.Seconds()/0.05))
	}
	cases := map[string]struct {
		l                      Limits
		rate                   func(time.Duration) float64
		reason                 Reason
		minElapsed, maxElapsed time.Duration
		want, slack            float64
	}{
		"steady: precise after the skip and three windows": {
			l: base, rate: func(time.Duration) float64 { return 500e6 }, reason: Precise,
			minElapsed: 1400 * time.Millisecond, maxElapsed: 1450 * time.Millisecond, want: 500e6, slack: 0.001,
		},
		"slow start past the skip: the ramp window is dropped": {
			l: long, rate: slowStart, reason: Precise,
			minElapsed: 1400 * time.Millisecond, maxElapsed: 1850 * time.Millisecond, want: 900e6, slack: 0.01,
		},
		"a step up after two windows: settles on the new rate": {
			l: long, rate: func(t time.Duration) float64 {
				if t < time.Second {
					return 400e6
				}
				return 800e6
			}, reason: Precise,
			minElapsed: 2200 * time.Millisecond, maxElapsed: 3500 * time.Millisecond, want: 800e6, slack: 0.04,
		},
		"bbr-like ±25 % for one RTT in eight: a whole cycle per window": {
			l: base, rate: func(t time.Duration) float64 {
				switch int(t/(50*time.Millisecond)) % 8 {
				case 0:
					return 1.25 * 600e6
				case 1:
					return 0.75 * 600e6
				}
				return 600e6
			}, reason: Precise,
			minElapsed: 1400 * time.Millisecond, maxElapsed: 1450 * time.Millisecond, want: 600e6, slack: 0.01,
		},
		"±20 % around 900 against a threshold of 500: decided at once": {
			l: withThreshold(500e6), rate: perWindow(900e6, 0.2, 1), reason: Decided,
			minElapsed: 1400 * time.Millisecond, maxElapsed: 1450 * time.Millisecond, want: 900e6, slack: 0.15,
		},
		"±10 % around 900 against a threshold of 1000: decided below within a few windows": {
			l: withThreshold(1000e6), rate: perWindow(900e6, 0.1, 2), reason: Decided,
			minElapsed: 1400 * time.Millisecond, maxElapsed: 4 * time.Second, want: 900e6, slack: 0.07,
		},
		"±20 % around 900 at a threshold of 900, no stretch: the ceiling, with about the mean": {
			l: unstretchedWithThreshold(900e6), rate: perWindow(900e6, 0.2, 3), reason: TimedOut,
			minElapsed: 2 * time.Second, maxElapsed: 2 * time.Second, want: 900e6, slack: 0.15,
		},
		"±20 % around 900 at a threshold of 900: never decided, the stretched ceiling": {
			l: withThreshold(900e6), rate: perWindow(900e6, 0.2, 3), reason: TimedOut,
			minElapsed: 6 * time.Second, maxElapsed: 6 * time.Second, want: 900e6, slack: 0.05,
		},
		"windows of 1000 and 600 against a threshold of 960, no stretch: undecided at the ceiling": {
			l: unstretchedWithThreshold(960e6), rate: alternating(800e6, 0.25), reason: TimedOut,
			minElapsed: 2 * time.Second, maxElapsed: 2 * time.Second, want: 800e6, slack: 0.15,
		},
		"windows of 1000 and 600 against a threshold of 960: stretched until decided below": {
			// the interval of n windows is ±t(n−1)·231/√n: it leaves 960 out at ten
			l: withThreshold(960e6), rate: alternating(800e6, 0.25), reason: Decided,
			minElapsed: 4200 * time.Millisecond, maxElapsed: 4600 * time.Millisecond, want: 800e6, slack: 0.05,
		},
		"newcomers taking their share, 450 to 750 over 2 s, against 756: not decided below while it rises": {
			// the windows of the first 1.4 s (510, 570, 630) left 756 out of their
			// interval: decided at 570 before the rate stopped rising; it ends once the
			// level is known
			l: withThreshold(756e6), rate: func(t time.Duration) float64 { return min(750e6, 450e6+150e6*t.Seconds()) }, reason: Precise,
			minElapsed: 2600 * time.Millisecond, maxElapsed: 4 * time.Second, want: 750e6, slack: 0.02,
		},
		"a steady ramp never settles, with nothing to decide: the ceiling, no stretch": {
			l: base, rate: func(t time.Duration) float64 { return 100e6 + 400e6*t.Seconds() }, reason: TimedOut,
			minElapsed: 2 * time.Second, maxElapsed: 2 * time.Second, want: 100e6 + 400e6*1.3, slack: 0.15,
		},
		"nothing delivered: the ceiling, rate 0": {
			l: base, rate: func(time.Duration) float64 { return 0 }, reason: TimedOut,
			minElapsed: 2 * time.Second, maxElapsed: 2 * time.Second, want: 0, slack: 0,
		},
	}
	for name, c := range cases {
		for _, step := range []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond} {
			r, done := feed(c.l, step, c.rate)
			if !done {
				t.Errorf("%s (poll %v): never ended", name, step)
				continue
			}
			if r.Reason != c.reason || r.Settled != (c.reason != TimedOut) {
				t.Errorf("%s (poll %v): ended %s (settled %v), want %s (%+v)", name, step, r.Reason, r.Settled, c.reason, r)
			}
			if r.Elapsed < c.minElapsed || r.Elapsed > c.maxElapsed+step {
				t.Errorf("%s (poll %v): ended after %v, want %v … %v", name, step, r.Elapsed, c.minElapsed, c.maxElapsed)
			}
			if math.Abs(r.BitsPerSecond-c.want) > c.slack*c.want+1 {
				t.Errorf("%s (poll %v): rate %.4g, want %.4g ± %.0f %%", name, step, r.BitsPerSecond, c.want, 100*c.slack)
			}
		}
	}
}

// TestDetectorFallingIsNotDecidedAbove: a rate falling through the threshold (streams
// cut from more, their windows shrinking to their share) is not decided above it on
// the windows before the crossing, where the interval of the first three (940, 880,
// 820 Mbit/s) leaves out the 700 it is compared with; the sample ends on the far side.
func TestDetectorFallingIsNotDecidedAbove(t *testing.T) {
	l := ForRTT(50 * time.Millisecond)
	l.Threshold = 700e6
	for _, step := range []time.Duration{10 * time.Millisecond, 50 * time.Millisecond, 100 * time.Millisecond} {
		r, done := feed(l, step, func(t time.Duration) float64 { return max(600e6, 1000e6-150e6*t.Seconds()) })
		if !done {
			t.Fatalf("poll %v: never ended", step)
		}
		if r.BitsPerSecond >= l.Threshold {
			t.Errorf("poll %v: ended %s at %.4g after %v, above the threshold the rate fell through", step, r.Reason, r.BitsPerSecond, r.Elapsed)
		}
	}
}

// alternating is a rate whose 400-ms windows after the 200-ms skip alternate between
// mean·(1+spread) and mean·(1−spread), the high one first.
func alternating(mean, spread float64) func(time.Duration) float64 {
	return func(t time.Duration) float64 {
		if t < 200*time.Millisecond || int((t-200*time.Millisecond)/(400*time.Millisecond))%2 == 0 {
			return mean * (1 + spread)
		}
		return mean * (1 - spread)
	}
}

// perWindow is a rate that holds a random level, uniform within ±spread of mean,
// for each 400-ms window after the 200-ms skip (the same levels for every poll step).
func perWindow(mean, spread float64, seed uint64) func(time.Duration) float64 {
	rng := rand.New(rand.NewPCG(seed, 7))
	levels := make([]float64, 200)
	for i := range levels {
		levels[i] = mean * (1 - spread + 2*spread*rng.Float64())
	}
	return func(t time.Duration) float64 {
		if t < 200*time.Millisecond {
			return mean
		}
		return levels[int((t-200*time.Millisecond)/(400*time.Millisecond))%len(levels)]
	}
}

// TestDetectorNoise: random noise of ±20 % per 10 ms averages out within windows and
// ends precise on the right rate; noise of ±60 % per window keeps the interval wide
// until the ceiling, whose rate is still the mean.
func TestDetectorNoise(t *testing.T) {
	l := ForRTT(50 * time.Millisecond)
	rng := rand.New(rand.NewPCG(1, 2))
	r, done := feed(l, 10*time.Millisecond, func(time.Duration) float64 { return 700e6 * (0.8 + 0.4*rng.Float64()) })
	if !done || r.Reason != Precise || math.Abs(r.BitsPerSecond-700e6) > 0.03*700e6 {
		t.Errorf("small noise: %+v, want precise near 700 Mbit/s", r)
	}
	var level float64
	r, done = feed(l, 10*time.Millisecond, func(t time.Duration) float64 {
		if t%(400*time.Millisecond) < 10*time.Millisecond {
			level = 600e6 * (0.4 + 1.2*rng.Float64())
		}
		return level
	})
	if !done || r.Reason != TimedOut || r.HalfWidth <= l.Tolerance || math.Abs(r.BitsPerSecond-600e6) > 0.3*600e6 {
		t.Errorf("window-to-window noise: %+v, want the ceiling, a wide interval, about 600 Mbit/s", r)
	}
}

// TestDetectorLatePoll: one poll long after the last closes several windows, whose
// counts are interpolated, so a steady rate still reads as steady.
func TestDetectorLatePoll(t *testing.T) {
	l := ForRTT(50 * time.Millisecond)
	t0 := time.Unix(0, 0)
	d := New(l, t0, 0)
	if _, done := d.Add(t0.Add(100*time.Millisecond), 10e6); done {
		t.Fatal("ended before the skip")
	}
	r, done := d.Add(t0.Add(2*time.Second), 200e6) // 800 Mbit/s throughout
	if !done || r.Reason != Precise || math.Abs(r.BitsPerSecond-800e6) > 1e3 {
		t.Fatalf("late poll: %+v, %v; want precise at 800 Mbit/s", r, done)
	}
	// time going back is read as no time passing
	d = New(l, t0, 0)
	if _, done := d.Add(t0.Add(-time.Second), 5); done {
		t.Fatal("a point in the past ended the sample")
	}
}

func TestStudentT(t *testing.T) {
	prev := math.Inf(1)
	for df := 0; df < 100; df++ {
		v := studentT975(df)
		if v > prev || v < 1.96 {
			t.Fatalf("t(%d) = %g after %g: not decreasing towards 1.96", df, v, prev)
		}
		prev = v
	}
}
