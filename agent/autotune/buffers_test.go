package autotune

import (
	"strings"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/wire"
)

func TestBufferCandidates(t *testing.T) {
	bigAutotune := wire.SocketLimits{SndAutotuneMax: 32 << 20, SndMax: 4 << 20, RcvAutotuneMax: 32 << 20, RcvMax: 4 << 20}
	bigFixed := wire.SocketLimits{SndAutotuneMax: 4 << 20, SndMax: 64 << 20, RcvAutotuneMax: 6 << 20, RcvMax: 64 << 20}
	noRcvAutotune := wire.SocketLimits{SndAutotuneMax: 4 << 20, SndMax: 16 << 20, RcvMax: 16 << 20}
	cases := map[string]struct {
		policy BufferPolicy
		local  wire.SocketLimits
		peer   *wire.SocketLimits
		rtt    time.Duration
		nic    float64
		want   []int64
		why    string
	}{
		"this bench host: a fixed 4 MiB gets 8 MiB, beyond send autotuning's 4 MiB": {
			BuffersAuto, thisMachine, &thisMachine, 50 * time.Millisecond, 0, []int64{4 << 20}, "beyond autotuning's ceiling of 4 MiB: sampling 4 MiB, not autotuning"},
		"autotuning reaches further than any fixed buffer": {
			BuffersAuto, bigAutotune, &bigAutotune, 50 * time.Millisecond, 0, nil, "no more than autotuning's ceiling"},
		"the receiver's small autotuning ceiling binds; fixed buffers up to 2·BDP": {
			BuffersAuto, bigFixed, &bigFixed, 50 * time.Millisecond, 1e9, []int64{4 << 20, 8 << 20, 16 << 20}, "sampling 4 MiB, 8 MiB, 16 MiB, not autotuning"},
		"autotuning holds twice the BDP: no sampling": {
			BuffersAuto, bigFixed, &bigFixed, 5 * time.Millisecond, 1e9, nil, "holds twice the BDP"},
		"no receive autotuning at the receiver: fixed buffers": {
			BuffersAuto, noRcvAutotune, &noRcvAutotune, 50 * time.Millisecond, 0, []int64{0, 64 << 10, 128 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20, 4 << 20, 8 << 20, 16 << 20}, "receive autotuning is off"},
		"an older receiver: its limits taken to be ours": {
			BuffersAuto, thisMachine, nil, 50 * time.Millisecond, 0, []int64{4 << 20}, "beyond"},
		"off": {BuffersOff, thisMachine, &thisMachine, 50 * time.Millisecond, 0, nil, "off"},
		"on: autotuning and the sweep around the BDP": {
			BuffersOn, thisMachine, &thisMachine, 50 * time.Millisecond, 1e9, []int64{0, 512 << 10, 1 << 20, 2 << 20, 4 << 20}, "on"},
		"unknown local limits": {BuffersAuto, wire.SocketLimits{}, nil, 0, 0, nil, "unknown"},
	}
	for name, c := range cases {
		got, why := BufferCandidates(c.policy, c.local, c.peer, c.rtt, c.nic)
		if !equal(got, c.want) || !strings.Contains(why, c.why) {
			t.Errorf("%s: %v (%q), want %v (%q)", name, got, why, c.want, c.why)
		}
	}
}

func TestParseBufferPolicy(t *testing.T) {
	for in, want := range map[string]BufferPolicy{"": BuffersAuto, "auto": BuffersAuto, "on": BuffersOn, "true": BuffersOn, "OFF": BuffersOff, "false": BuffersOff} {
		if got, err := ParseBufferPolicy(in); err != nil || got != want {
			t.Errorf("ParseBufferPolicy(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseBufferPolicy("sometimes"); err == nil {
		t.Error("ParseBufferPolicy accepted sometimes")
	}
}
