package mover

import (
	"context"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/settle"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// TestProbeOptionsFromRequest: a coordinator's request that asks to settle gets a
// settling sample with its Seconds as the ceiling; an older request (no settle) keeps
// the fixed-length sample.
func TestProbeOptionsFromRequest(t *testing.T) {
	cases := map[string]struct {
		req  wire.ProbeRequest
		want ProbeOptions
	}{
		"settle":        {wire.ProbeRequest{Streams: 4, BufferBytes: 4 << 20, Seconds: 5, Settle: true}, ProbeOptions{Streams: 4, BufferBytes: 4 << 20, Duration: 5 * time.Second, BlockSize: 1 << 20, Settle: true}},
		"older request": {wire.ProbeRequest{Streams: 1, Seconds: 5}, ProbeOptions{Streams: 1, Duration: 5 * time.Second, BlockSize: 1 << 20}},
	}
	for name, c := range cases {
		if got := probeOptions(c.req, 1<<20); got != c.want {
			t.Errorf("%s: %+v, want %+v", name, got, c.want)
		}
	}
}

// TestProbeSettlesBeforeItsCeiling runs memory-to-memory samples against a loopback
// receiver: a settling sample ends on a settled rate long before its ceiling (the
// tolerance is wide so that a loaded machine settles too; what is tested is that the
// sample ends when the detector says so), reports that rate and the streams' RTT; a
// sample without Settle runs its whole duration.
func TestProbeSettlesBeforeItsCeiling(t *testing.T) {
	addr, _ := startReceiver(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const ceiling = 60 * time.Second
	limits := settle.Limits{Window: 50 * time.Millisecond, Skip: 20 * time.Millisecond, MinWindows: 3, Tolerance: 0.5, Ceiling: ceiling}
	res, err := Probe(ctx, addr, []byte(testSecret), ProbeOptions{Streams: 2, Duration: ceiling, BlockSize: 256 << 10, Settle: true, SettleLimits: limits})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Settled || res.Seconds >= ceiling.Seconds() || res.Sample.BitsPerSecond <= 0 || res.Sample.RTTMicros <= 0 || res.Bytes <= 0 {
		t.Errorf("settling sample: settled %v after %.2f s (ceiling %v), %d bit/s, RTT %d µs, %d bytes",
			res.Settled, res.Seconds, ceiling, res.Sample.BitsPerSecond, res.Sample.RTTMicros, res.Bytes)
	}
	const fixed = 300 * time.Millisecond
	res, err = Probe(ctx, addr, []byte(testSecret), ProbeOptions{Streams: 1, Duration: fixed, BlockSize: 256 << 10})
	if err != nil {
		t.Fatal(err)
	}
	if res.Settled || res.Seconds < fixed.Seconds() || res.Sample.BitsPerSecond <= 0 {
		t.Errorf("fixed sample: settled %v after %.2f s, want its whole %v; %d bit/s", res.Settled, res.Seconds, fixed, res.Sample.BitsPerSecond)
	}
}
