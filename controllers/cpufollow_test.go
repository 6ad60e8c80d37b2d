package controllers

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

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
