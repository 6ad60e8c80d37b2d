package autotune

import (
	"fmt"
	"math/bits"
	"strings"
	"time"

	"github.com/dtnflow/dtnflow/agent/wire"
	"github.com/dtnflow/dtnflow/optimizer"
)

// BufferPolicy says whether send --auto samples socket buffer sizes.
type BufferPolicy string

const (
	// BuffersAuto samples buffers only where a fixed buffer can reach beyond what
	// kernel autotuning reaches (see BufferCandidates).
	BuffersAuto BufferPolicy = "auto"
	// BuffersOn always samples: autotuning, then DADC'09's sweep around the BDP.
	BuffersOn BufferPolicy = "on"
	// BuffersOff never samples: kernel autotuning.
	BuffersOff BufferPolicy = "off"
)

// ParseBufferPolicy reads auto, on/true or off/false.
func ParseBufferPolicy(s string) (BufferPolicy, error) {
	switch strings.ToLower(s) {
	case "", "auto":
		return BuffersAuto, nil
	case "on", "true":
		return BuffersOn, nil
	case "off", "false":
		return BuffersOff, nil
	}
	return "", fmt.Errorf("%q: want auto, on or off", s)
}

// BufferCandidates returns the buffer sizes the probe samples (for
// optimizer.Prober.BufferSizes; nil: autotuning only, no buffer phase) and why.
//
// DADC'09 samples fixed buffers because its hosts had none of today's autotuning,
// which grows each stream's buffers to what the path needs, up to a ceiling
// (net.ipv4.tcp_wmem and tcp_rmem's maxima). A fixed buffer (SO_SNDBUF/SO_RCVBUF of
// x) gets 2·min(x, net.core.wmem_max or rmem_max) and switches autotuning off. So, in
// BuffersAuto:
//
//   - when a fixed buffer cannot get more than autotuning's ceiling at both ends
//     (2·min(wmem_max, peer's rmem_max) ≤ min(tcp_wmem max, peer's tcp_rmem max)),
//     sampling buffers can only find something autotuning also reaches: none;
//   - when the BDP is known (the NIC rate and the RTT) and autotuning's ceiling is at
//     least twice it (a buffer also holds the kernel's overhead), autotuning reaches
//     it: none;
//   - otherwise the fixed sizes that reach beyond autotuning's ceiling, up to the
//     largest that takes effect, min(wmem_max, peer's rmem_max), and, with a BDP, no
//     further than optimizer.BufferCandidates goes (2·BDP). Autotuning itself is not
//     a candidate then: each of these sizes gets a window autotuning can never grow
//     to, on any path, so sampling it could only show it short (wire.UsefulBuffers
//     drops it from the coordinator's list for the same reason). On bench-cluster's
//     1 Gbit/s, 50 ms path its one stream moved 468 Mbit/s where the fixed 4 MiB
//     moved 846: the probe's dearest sample, about a second of the link.
//
// peer may be nil (an older receiver that does not say): the local limits stand in.
// rtt ≤ 0 or nicBitsPerSecond ≤ 0 means the BDP is unknown.
func BufferCandidates(policy BufferPolicy, local wire.SocketLimits, peer *wire.SocketLimits, rtt time.Duration, nicBitsPerSecond float64) ([]int64, string) {
	if policy == BuffersOff {
		return nil, "buffer sampling off: kernel autotuning"
	}
	remote := local
	if peer != nil {
		remote = *peer
	}
	bdp := int64(0)
	if rtt > 0 && nicBitsPerSecond > 0 {
		bdp = optimizer.BDPPrior(optimizer.PathEstimate{CapacityBitsPerSecond: nicBitsPerSecond, RTTMin: rtt, RTTMax: rtt})
	}
	fixedMax := minKnown(local.SndMax, remote.RcvMax) // the largest SO_*BUF that takes effect at both ends
	if policy == BuffersOn {
		return append([]int64{0}, optimizer.BufferCandidates(bdp, fixedMax)...), "buffer sampling on: autotuning, then the sizes around the BDP"
	}
	autoMax := minKnown(local.SndAutotuneMax, remote.RcvAutotuneMax)
	switch {
	case local.SndMax <= 0 || local.SndAutotuneMax <= 0:
		return nil, "this host's socket buffer limits are unknown: kernel autotuning"
	case remote.RcvAutotuneMax <= 0 && remote.RcvMax > 0:
		// receive autotuning is off at the receiver: fixed buffers are all there is
		return append([]int64{0}, optimizer.BufferCandidates(bdp, fixedMax)...),
			"receive autotuning is off at the receiver: sampling fixed buffers"
	case 2*fixedMax <= autoMax:
		return nil, fmt.Sprintf("a fixed buffer gets at most %s (2 × min(wmem_max, the receiver's rmem_max)), no more than autotuning's ceiling of %s: kernel autotuning",
			human(2*fixedMax), human(autoMax))
	case bdp > 0 && autoMax >= 2*bdp:
		return nil, fmt.Sprintf("autotuning's ceiling of %s holds twice the BDP of %s: kernel autotuning", human(autoMax), human(bdp))
	}
	var out []int64
	for _, b := range optimizer.BufferCandidates(bdp, fixedMax) {
		if 2*b > autoMax {
			out = append(out, b)
		}
	}
	if top := pow2Floor(fixedMax); len(out) == 0 || out[len(out)-1] < top && (bdp == 0 || top <= 2*bdp) {
		out = append(out, top)
	}
	return out, fmt.Sprintf("a fixed buffer gets up to %s, beyond autotuning's ceiling of %s: sampling %s, not autotuning",
		human(2*fixedMax), human(autoMax), humanList(out))
}

// minKnown is the smaller of two limits, a 0 (unknown) one ignored.
func minKnown(a, b int64) int64 {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	}
	return min(a, b)
}

func pow2Floor(x int64) int64 {
	if x < 1 {
		return 1
	}
	return 1 << (bits.Len64(uint64(x)) - 1)
}

func human(b int64) string {
	switch {
	case b >= 1<<20 && b%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", b>>20)
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%d KiB", b>>10)
	}
	return fmt.Sprintf("%d B", b)
}

func humanList(bs []int64) string {
	parts := make([]string, len(bs))
	for i, b := range bs {
		parts[i] = human(b)
	}
	return strings.Join(parts, ", ")
}
