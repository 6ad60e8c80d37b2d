package controllers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dtnflow/dtnflow/agent/contract"
)

func TestFollowUse(t *testing.T) {
	for _, c := range []struct {
		name                              string
		planned, current, measured, limit int64
		want                              int64
	}{
		{"nothing measured: the plan", 200, 250, 0, 0, 200},
		{"measured: the use", 200, 200, 450, 0, 450},
		{"the request within 25 % of the use stands", 200, 400, 450, 0, 400},
		{"25 % exactly stands", 200, 360, 480, 0, 360},
		{"just past 25 %: the use", 200, 359, 480, 0, 480},
		{"above the use by more than 25 %: the use", 200, 700, 450, 0, 450},
		{"a node's share caps it", 200, 200, 1500, 1000, 1000},
		{"a pod not read yet: the use", 200, 0, 450, 0, 450},
	} {
		if got := followUse(c.planned, c.current, c.measured, c.limit); got != c.want {
			t.Errorf("%s: followUse(%d, %d, %d, %d) = %d, want %d", c.name, c.planned, c.current, c.measured, c.limit, got, c.want)
		}
	}
}

func TestMeasuredUse(t *testing.T) {
	now := time.Date(2026, 11, 25, 13, 0, 0, 0, time.UTC)
	rep := &contract.Report{Phase: contract.PhaseTransferring, Time: now.Add(-5 * time.Second), Stripes: []contract.StripeReport{
		{Index: 0, Connected: true, BitsPerSecond: 9e8, SourceMillicores: 80, DestinationMillicores: 450},
		{Index: 1, Connected: false, BitsPerSecond: 9e8, SourceMillicores: 70, DestinationMillicores: 400},
		{Index: 2, Connected: true, BitsPerSecond: 0, SourceMillicores: 5, DestinationMillicores: 5},
	}}
	for _, c := range []struct {
		name string
		rep  *contract.Report
		role contract.Role
		k    int32
		want int64
	}{
		{"receiver of a moving stripe", rep, contract.RoleReceiver, 0, 450},
		{"sender of a moving stripe", rep, contract.RoleSender, 0, 80},
		{"a stripe not connected", rep, contract.RoleReceiver, 1, 0},
		{"a stripe moving nothing", rep, contract.RoleReceiver, 2, 0},
		{"a stripe not in the report", rep, contract.RoleReceiver, 3, 0},
		{"no report", nil, contract.RoleReceiver, 0, 0},
		{"a report older than two intervals", &contract.Report{Phase: rep.Phase, Time: now.Add(-21 * time.Second), Stripes: rep.Stripes}, contract.RoleReceiver, 0, 0},
		{"a job not transferring", &contract.Report{Phase: contract.PhaseStarting, Time: rep.Time, Stripes: rep.Stripes}, contract.RoleReceiver, 0, 0},
		{"the coordinator: its own process's", &contract.Report{Phase: rep.Phase, Time: rep.Time, Stripes: rep.Stripes, CoordinatorMillicores: 97}, contract.RoleCoordinator, 0, 97},
		{"the coordinator before it measured", rep, contract.RoleCoordinator, 0, 0},
		{"the coordinator of a job not transferring", &contract.Report{Phase: contract.PhaseStarting, Time: rep.Time, CoordinatorMillicores: 97}, contract.RoleCoordinator, 0, 0},
	} {
		if got := measuredUse(c.rep, c.role, c.k, now, 10*time.Second); got != c.want {
			t.Errorf("%s: measuredUse = %d, want %d", c.name, got, c.want)
		}
	}
}

func TestStartShare(t *testing.T) {
	now := time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC)
	const gib = int64(1) << 30
	// half of 4 GiB left at 1 Gbit/s: 17.18 s to go, 10 s since the pod started
	rep := &contract.Report{Phase: contract.PhaseTransferring, Time: now, BytesTotal: 4 * gib, BytesDone: 2 * gib, BitsPerSecond: 1e9}
	started := metav1.NewTime(now.Add(-10 * time.Second))
	cold := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-12 * time.Second))}, Status: corev1.PodStatus{StartTime: &started}}
	unstarted := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-12 * time.Second))}}
	later := metav1.NewTime(now.Add(time.Hour))
	future := &corev1.Pod{Status: corev1.PodStatus{StartTime: &later}}
	warm := cold.DeepCopy()
	warm.Labels = map[string]string{contract.LabelWarmPool: "site-a"}
	for _, c := range []struct {
		name string
		pod  *corev1.Pod
		rep  *contract.Report
		want int64
	}{
		{"a cold pod: 0.2 s over 10 + 17.18 s", cold, rep, 7},
		{"no start time yet: its life counts from its creation, 12 + 17.18 s", unstarted, rep, 7},
		{"every byte moved: its life so far, 10 s", cold, &contract.Report{Phase: rep.Phase, Time: now, BytesTotal: 4 * gib, BytesDone: 4 * gib, BitsPerSecond: 1e9}, 20},
		{"a pod that started after now by the controller's clock: its life is the 17.18 s left", future, rep, 12},
		{"a claimed warm agent: its start was the pool's", warm, rep, 0},
		{"no rate: no expected life", cold, &contract.Report{Phase: rep.Phase, Time: now, BytesTotal: 4 * gib}, 0},
		{"no report", cold, nil, 0},
		{"no pod", nil, rep, 0},
	} {
		if got := startShare(c.pod, c.rep, now); got != c.want {
			t.Errorf("%s: startShare = %d, want %d", c.name, got, c.want)
		}
	}
}

// TestColdCoordinatorAsksWhatItsPodUses replays a cold coordinator's life as the local
// cluster measured it (docs/benchmarks.md, "A cold pod's start in its CPU request": its
// pod's cgroup counted startCPU for the start, then steady millicores, on a 4 GiB job
// of life seconds; and the 20 000 small files' coordinator), reported every 2 s: the
// request the controller keeps (coordinatorUse through followUse), averaged over the pod's life
// as bench-cluster averages it, is within issue 11's ±25 % of what the pod used. The
// same life with the measured use alone, without the start's share, asks 1.5–1.7× too
// little.
func TestColdCoordinatorAsksWhatItsPodUses(t *testing.T) {
	const gib = int64(1) << 30
	interval := 2 * time.Second
	for _, c := range []struct {
		name     string
		startCPU float64 // CPU seconds
		steady   int64   // millicores
		life     float64 // seconds
		bytes    int64
	}{
		{"4 GiB, 47.2 s", 0.228, 8, 47.2, 4 * gib},
		{"4 GiB, 43.9 s", 0.163, 7, 43.9, 4 * gib},
		{"4 GiB, 48.3 s", 0.233, 7, 48.3, 4 * gib},
		{"20 000 × 64 KiB, 14.3 s (its start not measured: the constant)", 0.2, 115, 14.3, 20000 << 16},
	} {
		created := time.Date(2026, 12, 5, 20, 0, 0, 0, time.UTC)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
		rate := int64(float64(c.bytes) * 8 / c.life)
		used := c.startCPU*1000 + float64(c.steady)*c.life // millicore seconds
		for _, withStart := range []bool{true, false} {
			current := int64(5) // the manager's default until a figure is heard
			asked := 0.0
			const step = 0.25
			next := 1.0 // the coordinator's first figure goes out a second after its start
			for at := 0.0; at < c.life; at += step {
				if at >= next {
					now := created.Add(time.Duration(at * float64(time.Second)))
					rep := &contract.Report{Phase: contract.PhaseTransferring, Time: now, BytesTotal: c.bytes,
						BytesDone: min(int64(at*float64(rate)/8), c.bytes), BitsPerSecond: rate, CoordinatorMillicores: c.steady}
					measured := measuredUse(rep, contract.RoleCoordinator, 0, now, interval)
					if withStart {
						measured = coordinatorUse(pod, rep, now, interval)
					}
					current = followUse(5, current, measured, 0)
					next += interval.Seconds()
				}
				asked += float64(current) * step
			}
			ratio := used / asked
			within := ratio >= 1-useTolerance && ratio <= 1+useTolerance
			if withStart && !within {
				t.Errorf("%s: the pod used %.1f millicores and asked %.1f on average (%.2f×), want within ±25 %%", c.name, used/c.life, asked/c.life, ratio)
			}
			if !withStart && c.steady < 50 && within {
				t.Errorf("%s: without the start's share the pod used %.1f millicores and asked %.1f (%.2f×): the start is not what the share corrects", c.name, used/c.life, asked/c.life, ratio)
			}
		}
	}
}

func TestSameResources(t *testing.T) {
	cpu := func(m int64) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(m, resource.DecimalSI)}
	}
	withMemory := func(l corev1.ResourceList, mem string) corev1.ResourceList {
		l = l.DeepCopy()
		l[corev1.ResourceMemory] = resource.MustParse(mem)
		return l
	}
	requests := func(l corev1.ResourceList) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: l}
	}
	for _, c := range []struct {
		name       string
		have, want corev1.ResourceRequirements
		band       float64
		same       bool
	}{
		{"a plan's request: exactly", requests(cpu(211)), requests(cpu(215)), 0, false},
		{"equal", requests(cpu(211)), requests(cpu(211)), resizeDeadBand, true},
		// the coordinator's request refitted sample by sample during a probe
		{"211m asked, 215m wanted: stands", requests(cpu(211)), requests(cpu(215)), resizeDeadBand, true},
		{"10 % of the wanted exactly: stands", requests(cpu(220)), requests(cpu(200)), resizeDeadBand, true},
		{"just past 10 %: resized", requests(cpu(221)), requests(cpu(200)), resizeDeadBand, false},
		{"from the start-up 5m to a plan's 211m", requests(cpu(5)), requests(cpu(211)), resizeDeadBand, false},
		{"a limit within the band", corev1.ResourceRequirements{Requests: cpu(400), Limits: cpu(1000)}, corev1.ResourceRequirements{Requests: cpu(400), Limits: cpu(950)}, resizeDeadBand, true},
		{"a limit added", requests(cpu(400)), corev1.ResourceRequirements{Requests: cpu(400), Limits: cpu(1000)}, resizeDeadBand, false},
		{"a request removed", requests(cpu(400)), corev1.ResourceRequirements{}, resizeDeadBand, false},
		{"memory changed, CPU near", requests(withMemory(cpu(400), "1Gi")), requests(withMemory(cpu(410), "2Gi")), resizeDeadBand, false},
		{"memory equal, CPU near", requests(withMemory(cpu(400), "1Gi")), requests(withMemory(cpu(410), "1Gi")), resizeDeadBand, true},
		{"nothing asked either side", corev1.ResourceRequirements{}, corev1.ResourceRequirements{}, resizeDeadBand, true},
	} {
		if got := sameResources(c.have, c.want, c.band); got != c.same {
			t.Errorf("%s: sameResources = %v, want %v", c.name, got, c.same)
		}
	}
}
