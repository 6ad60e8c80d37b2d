package wire

import (
	"slices"
	"testing"
)

func TestUsefulBuffers(t *testing.T) {
	const MiB = 1 << 20
	// this machine's (the cluster's nodes'): wmem_max, rmem_max and tcp_wmem's maximum
	// 4 MiB, tcp_rmem's 32 MiB
	cluster := SocketLimits{SndAutotuneMax: 4 * MiB, SndMax: 4 * MiB, RcvAutotuneMax: 32 * MiB, RcvMax: 4 * MiB}
	bigReceiver := SocketLimits{SndAutotuneMax: 4 * MiB, SndMax: 64 * MiB, RcvAutotuneMax: 32 * MiB, RcvMax: 64 * MiB}
	noRcvAutotune := SocketLimits{SndMax: 64 * MiB, RcvMax: 2 * MiB}
	cases := []struct {
		name       string
		candidates []int64
		local      SocketLimits
		peer       *SocketLimits
		want       []int64
	}{
		{"the coordinator's cold probe on bench-cluster's path: 8 MiB takes 4 MiB's effect, and 4 MiB's 8 MiB outgrows autotuning's 4",
			[]int64{0, 4 * MiB, 8 * MiB}, cluster, &cluster, []int64{4 * MiB}},
		{"sizes autotuning outgrows are dropped, the rest up to the receiver's rmem_max, and autotuning",
			[]int64{0, 1 * MiB, 2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB}, bigReceiver, &bigReceiver, []int64{4 * MiB, 8 * MiB, 16 * MiB}},
		{"the receiver's rmem_max bounds what a large wmem_max gets",
			[]int64{0, 4 * MiB, 8 * MiB, 16 * MiB}, bigReceiver, &cluster, []int64{4 * MiB}},
		{"a fixed size beyond autotuning's ceiling in any position drops autotuning",
			[]int64{4 * MiB, 0}, cluster, &cluster, []int64{4 * MiB}},
		{"receive autotuning off at the receiver: every distinct size is sampled",
			[]int64{0, 512 << 10, 1 * MiB, 2 * MiB, 4 * MiB}, bigReceiver, &noRcvAutotune, []int64{0, 512 << 10, 1 * MiB, 2 * MiB}},
		{"the receiver unknown: the sender's own limits stand in",
			[]int64{0, 4 * MiB, 8 * MiB}, cluster, nil, []int64{4 * MiB}},
		{"autotuning's ceiling unknown at the sender: autotuning stays beside the fixed sizes",
			[]int64{0, 4 * MiB, 8 * MiB}, SocketLimits{SndMax: 4 * MiB}, &cluster, []int64{0, 4 * MiB}},
		{"the sender's limits unknown: nothing is dropped",
			[]int64{0, 4 * MiB, 8 * MiB}, SocketLimits{}, &cluster, []int64{0, 4 * MiB, 8 * MiB}},
		{"a warm probe's one fixed size stays",
			[]int64{2 * MiB}, cluster, &cluster, []int64{2 * MiB}},
		{"nothing but autotuning can pay: autotuning alone",
			[]int64{0, 1 * MiB, 2 * MiB}, cluster, &cluster, []int64{0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := UsefulBuffers(c.candidates, c.local, c.peer); !slices.Equal(got, c.want) {
				t.Errorf("UsefulBuffers(%v) = %v, want %v", c.candidates, got, c.want)
			}
		})
	}
}
