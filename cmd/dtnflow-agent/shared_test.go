package main

import (
	"math"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/autotune"
	"github.com/dtnflow/dtnflow/optimizer"
)

func TestShareCap(t *testing.T) {
	cases := map[string]struct {
		userRate int64
		share    float64
		paced    bool
		want     int64
	}{
		"alone on the path: not held":            {share: 900e6, paced: false, want: 0},
		"alone, --max-rate stays":                {userRate: 300e6, share: 900e6, paced: false, want: 300e6},
		"sharing: held to the share":             {share: 250e6, paced: true, want: 250e6},
		"sharing, --max-rate lower than a share": {userRate: 100e6, share: 250e6, paced: true, want: 100e6},
		"sharing, --max-rate higher than it":     {userRate: 500e6, share: 250e6, paced: true, want: 250e6},
		"an unbounded share is no cap":           {share: math.Inf(1), paced: true, want: 0},
		"a share of nothing is no cap":           {share: 0, paced: true, want: 0},
	}
	for name, c := range cases {
		s := &sharedSend{userRate: c.userRate}
		if got := s.cap(c.share, c.paced); got != c.want {
			t.Errorf("%s: cap %d, want %d", name, got, c.want)
		}
	}
}

func TestShareChanged(t *testing.T) {
	cases := map[string]struct {
		old, next int64
		want      bool
	}{
		"no cap either way":          {0, 0, false},
		"a cap appears":              {0, 250e6, true},
		"the cap goes":               {250e6, 0, true},
		"within 2 %: no re-plan":     {250e6, 254e6, false},
		"a fifth job: 250 → 200":     {250e6, 200e6, true},
		"a job leaves: 200 → 250":    {200e6, 250e6, true},
		"just over 2 % is a re-plan": {100e6, 102_100_000, true},
		"just under 2 % is not":      {100e6, 98_100_000, false},
	}
	for name, c := range cases {
		if got := changed(c.old, c.next); got != c.want {
			t.Errorf("%s: changed(%d, %d) = %v, want %v", name, c.old, c.next, got, c.want)
		}
	}
}

// TestProfileRoundTrip: what a probe learned goes to the path's profile and back as
// the inputs of a warm plan, and the profile's capacity is the probe's path capacity,
// else its plan's, never below its best sample.
func TestProfileRoundTrip(t *testing.T) {
	samples := []optimizer.Sample{{Streams: 1, BitsPerSecond: 450e6}, {Streams: 2, BitsPerSecond: 830e6}}
	out := autotune.Outcome{Samples: samples, Noise: 0.04, RTT: 50 * time.Millisecond, PathBitsPerSecond: 940e6}
	p := toProfile(out)
	if p.PlateauBitsPerSecond != 940e6 || p.RTTMicros != 50_000 || len(p.Samples) != 2 {
		t.Errorf("profile %+v; want the probe's 940 Mbit/s capacity, 50 ms, its samples", p)
	}
	back := fromProfile(p)
	if back.RTT != out.RTT || back.Noise != out.Noise || len(back.Samples) != len(samples) || back.Samples[1] != samples[1] {
		t.Errorf("back from the profile %+v, want the probe's inputs", back)
	}
	// a probe cut short by the job's end: no plan, its best sample is the capacity
	if got := toProfile(autotune.Outcome{Samples: samples, Finished: true}).PlateauBitsPerSecond; got != 830e6 {
		t.Errorf("a finished probe's capacity %g, want its best sample's 830e6", got)
	}
}

func TestApplyFairness(t *testing.T) {
	cases := map[string]struct {
		mode    string
		wantErr bool
		// want: streams, stripes, max streams, buffer, buffer policy after
		want [4]int64
		pol  string
	}{
		"Default keeps the flags":                         {mode: "Default", want: [4]int64{8, 4, 32, 16 << 20}, pol: "auto"},
		"Strict: one stream, autotuned, no buffer probed": {mode: "Strict", want: [4]int64{1, 1, 1, 0}, pol: "off"},
		"an unknown mode is refused":                      {mode: "strict", wantErr: true, want: [4]int64{8, 4, 32, 16 << 20}, pol: "auto"},
	}
	for name, c := range cases {
		j := &jobFlags{streams: 8, buffer: 16 << 20}
		stripes, maxStreams, pol := int32(4), int32(32), "auto"
		err := applyFairness(c.mode, j, &stripes, &maxStreams, &pol)
		got := [4]int64{int64(j.streams), int64(stripes), int64(maxStreams), int64(j.buffer)}
		if (err != nil) != c.wantErr || got != c.want || pol != c.pol {
			t.Errorf("%s: %v, %v %q; want error %v, %v %q", name, err, got, pol, c.wantErr, c.want, c.pol)
		}
	}
}
