package wan

import (
	"math"
	"reflect"
	"testing"
)

// line is a steady timeline: rate bits/s from start to end, polled every 0.5 s.
func line(start, end, rate float64) [][2]float64 {
	tl := [][2]float64{{0, 0}}
	for t := 0.5; t <= end+1e-9; t += 0.5 {
		b := 0.0
		if t > start {
			b = (math.Min(t, end) - start) * rate / 8
		}
		tl = append(tl, [2]float64{t, b})
	}
	return tl
}

func TestSharingWindowJainAndWeights(t *testing.T) {
	cases := map[string]struct {
		jobs      []JobRun
		wantStart float64
		wantEnd   float64
		wantAgg   float64
		wantJain  float64
		wantRatio float64
	}{
		"four equal jobs, one starting late": {
			jobs: []JobRun{
				{Weight: 1, FirstByteSeconds: 1, EndSeconds: 40, Timeline: line(1, 40, 240e6)},
				{Weight: 1, FirstByteSeconds: 1, EndSeconds: 40, Timeline: line(1, 40, 240e6)},
				{Weight: 1, FirstByteSeconds: 2, EndSeconds: 41, Timeline: line(2, 41, 240e6)},
				{Weight: 1, FirstByteSeconds: 1, EndSeconds: 30, Timeline: line(1, 30, 240e6)},
			},
			wantStart: 2, wantEnd: 30, wantAgg: 960e6, wantJain: 1,
		},
		"weighted 2:1:2:1 at 2:1": {
			jobs: []JobRun{
				{Weight: 2, FirstByteSeconds: 1, EndSeconds: 20, Timeline: line(1, 20, 320e6)},
				{Weight: 1, FirstByteSeconds: 1, EndSeconds: 20, Timeline: line(1, 20, 160e6)},
				{Weight: 2, FirstByteSeconds: 1, EndSeconds: 20, Timeline: line(1, 20, 320e6)},
				{Weight: 1, FirstByteSeconds: 1, EndSeconds: 20, Timeline: line(1, 20, 160e6)},
			},
			wantStart: 1, wantEnd: 20, wantAgg: 960e6, wantJain: 1, wantRatio: 2,
		},
		"equal weights, unequal rates": {
			jobs: []JobRun{
				{Weight: 1, FirstByteSeconds: 0.5, EndSeconds: 10, Timeline: line(0.5, 10, 300e6)},
				{Weight: 1, FirstByteSeconds: 0.5, EndSeconds: 10, Timeline: line(0.5, 10, 100e6)},
			},
			// (300+100)² / (2 · (300² + 100²)) = 0.8
			wantStart: 0.5, wantEnd: 10, wantAgg: 400e6, wantJain: 0.8,
		},
	}
	for name, c := range cases {
		r := SharingResult{Jobs: c.jobs}
		r.window()
		if r.WindowStart != c.wantStart || r.WindowEnd != c.wantEnd {
			t.Errorf("%s: window %g–%g, want %g–%g", name, r.WindowStart, r.WindowEnd, c.wantStart, c.wantEnd)
		}
		if math.Abs(r.AggregateBitsPerSecond-c.wantAgg) > 1e3 || math.Abs(r.Jain-c.wantJain) > 1e-6 || math.Abs(r.WeightRatio-c.wantRatio) > 1e-6 {
			t.Errorf("%s: aggregate %g, Jain %g, ratio %g; want %g, %g, %g", name, r.AggregateBitsPerSecond, r.Jain, r.WeightRatio, c.wantAgg, c.wantJain, c.wantRatio)
		}
		for _, j := range r.Jobs {
			want := j.BitsPerSecond / (r.AggregateBitsPerSecond * float64(j.Weight) / func() float64 {
				s := 0.0
				for _, k := range r.Jobs {
					s += float64(k.Weight)
				}
				return s
			}())
			if math.Abs(j.OfShare-want) > 1e-9 {
				t.Errorf("%s: of share %g, want %g", name, j.OfShare, want)
			}
		}
	}
}

// TestLateFigures: the fifth job's time to 90 % of its share, and the others' lowest
// rate meanwhile.
func TestLateFigures(t *testing.T) {
	// four jobs at 240 Mbit/s until 20 s, then 192 each when the fifth arrives; the
	// fifth starts at 20 s and ramps: nothing for 1 s, then 192
	four := func() [][2]float64 {
		tl := [][2]float64{{0, 0}}
		var b float64
		for t := 0.25; t <= 60; t += 0.25 {
			r := 240e6
			if t > 20 {
				r = 192e6
			}
			b += r / 8 * 0.25
			tl = append(tl, [2]float64{t, b})
		}
		return tl
	}
	jobs := []JobRun{}
	for range 4 {
		jobs = append(jobs, JobRun{Weight: 1, FirstByteSeconds: 0.25, EndSeconds: 60, Timeline: four()})
	}
	late := JobRun{Weight: 1, StartSeconds: 20, FirstByteSeconds: 21, EndSeconds: 60, Timeline: line(21, 60, 192e6)}
	r := SharingResult{Jobs: append(jobs, late)}
	r.window()
	r.lateFigures()
	if math.Abs(r.LateShare-192e6) > 1e5 {
		t.Errorf("late share %g, want 192e6", r.LateShare)
	}
	// 2 s windows from 20 s, every 0.25 s: a window holds 90 % of the share once at most
	// 0.2 s of it is before the first byte at 21 s, first [21, 23]: 23 − 20 = 3 s
	if r.LateSecondsTo90 != 3 {
		t.Errorf("late job at 90 %% of its share after %g s, want 3", r.LateSecondsTo90)
	}
	if math.Abs(r.OthersMinOfShare-1) > 0.01 {
		t.Errorf("others' lowest %g of their share, want 1 (they never stalled)", r.OthersMinOfShare)
	}
}

func TestIperfTimeline(t *testing.T) {
	out := `Connecting to host 10.0.1.2, port 5310
[  5] local 10.0.0.2 port 40000 connected to 10.0.1.2 port 5310
[ ID] Interval           Transfer     Bitrate         Retr  Cwnd
[  5]   0.00-0.50   sec  10.0 MBytes   168 Mbits/sec    0   1.50 MBytes
[  5]   0.50-1.00   sec  15.0 MBytes   252 Mbits/sec    0   2.00 MBytes
[  5]   1.00-1.50   sec   512 KBytes  8.39 Mbits/sec    3   1.00 MBytes
- - - - - - - - - - - - - - - - - - - - - - - - -
[  5]   0.00-1.50   sec  25.5 MBytes   143 Mbits/sec    3             sender
`
	want := [][2]float64{{0, 0}, {0.5, 10 << 20}, {1, 25 << 20}, {1.5, 25<<20 + 512<<10}}
	if got := IperfTimeline(out); !reflect.DeepEqual(got, want) {
		t.Errorf("timeline %v, want %v", got, want)
	}
}

func TestAgentPlanReadsPlansAndShareReplans(t *testing.T) {
	log := `time=2026-11-24T23:46:09.000Z level=INFO msg="Waiting for the path's probe" prober=a jobsOnPath=4
time=2026-11-24T23:46:10.000Z level=INFO msg="Planned from the path's profile" probedBy=a jobsOnPath=4 share="240 Mbit/s" paced=true
time=2026-11-24T23:46:10.001Z level=INFO msg=Planned stripes=1 streams=2 bufferBytes=4194304
time=2026-11-24T23:46:25.500Z level=INFO msg=Re-planned action=Share reason=PathJobArrived jobsOnPath=5 share="192 Mbit/s" paced=true stripes=1 streams=1`
	plan, replans := agentPlan(log, 1)
	if plan != "1 × 2" || !reflect.DeepEqual(replans, []string{"Warm(share 240 Mbit/s)@2.0s", "PathJobArrived(192 Mbit/s)@17.5s"}) {
		t.Errorf("plan %q, re-plans %q", plan, replans)
	}
}
