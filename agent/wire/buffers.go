package wire

import "slices"

// UsefulBuffers keeps, of the socket buffer sizes a probe would sample (0: kernel
// autotuning), those that can change what a stream gets between a sender with local's
// limits and a receiver with peer's (nil: unknown, local's stand in), in their order:
//
//   - An explicit SO_SNDBUF/SO_RCVBUF of b gets 2·min(b, max) bytes, so every size at
//     or above min(wmem_max, the receiver's rmem_max) takes the same effect: only the
//     first of them is kept (on bench-cluster's path the coordinator sampled 4 and
//     8 MiB with wmem_max at 4 MiB: the same buffer twice, 2 s for nothing).
//   - Autotuning grows a stream's buffers up to its ceiling (the smaller of tcp_wmem's
//     and, with receive autotuning on, tcp_rmem's maximum), so a fixed size that gets
//     no more than that cannot beat autotuning: dropped, as send --auto's
//     BufferCandidates drops it.
//   - Conversely, once a fixed size is kept it gets more than autotuning's ceiling, a
//     window autotuning can never grow to, on any path: autotuning is dropped, and the
//     buffer phase is the paper's sweep over the fixed sizes alone (DADC'09 §4.2.2
//     knows no autotuning). Sampled first on a probe of the job's own data, the one
//     autotuned stream was its dearest second: 468 Mbit/s on bench-cluster's 1 Gbit/s,
//     50 ms path, where one stream with the 4 MiB buffer moved 846.
//
// Only a list that samples autotuning is filtered (a warm probe's one fixed size is
// the profile's choice and stays); with the sender's limits unknown nothing is
// dropped, and with autotuning's ceiling unknown (or receive autotuning off, where
// "autotuning" is the receiver's default buffer) autotuning stays.
func UsefulBuffers(candidates []int64, local SocketLimits, peer *SocketLimits) []int64 {
	if local.SndMax <= 0 || !slices.Contains(candidates, 0) {
		return candidates
	}
	remote := local
	if peer != nil {
		remote = *peer
	}
	fixedMax := local.SndMax
	if remote.RcvMax > 0 {
		fixedMax = min(fixedMax, remote.RcvMax)
	}
	autoMax := int64(0) // 0: autotuning's ceiling unknown, or receive autotuning off
	if local.SndAutotuneMax > 0 && remote.RcvAutotuneMax > 0 {
		autoMax = min(local.SndAutotuneMax, remote.RcvAutotuneMax)
	}
	out := make([]int64, 0, len(candidates))
	seen := map[int64]bool{}
	fixedBeyondAutotuning := false
	for _, b := range candidates {
		if b <= 0 {
			out = append(out, b)
			continue
		}
		got := 2 * min(b, fixedMax)
		if seen[got] || (autoMax > 0 && got <= autoMax) {
			continue
		}
		seen[got] = true
		fixedBeyondAutotuning = fixedBeyondAutotuning || autoMax > 0
		out = append(out, b)
	}
	if fixedBeyondAutotuning {
		out = slices.DeleteFunc(out, func(b int64) bool { return b <= 0 })
	}
	return out
}
