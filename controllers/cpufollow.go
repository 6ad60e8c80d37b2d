package controllers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dtnflow/dtnflow/agent/contract"
)

// An agent's CPU request is sized by the plan (seed 002's regression over the probe's
// samples) until its stripe has measured what the agent uses while it moves the data;
// from then on the request follows that use. The regression is fitted over seconds of
// probing, and what one agent is charged for the same rate moves with the host's
// state: on the local cluster the receivers' CPU per byte read 150 millicores at
// 0.9 Gbit/s in one run's probe and 450 later in the same run (the kernel's receive
// work lands on the receiving process or elsewhere depending on timing), so requests
// from the fit alone were 1.5–3× below use in most of a suite's rows.

// useTolerance is how far a request may be from the measured use before the pod is
// resized: within it the request stands (a resize per report would follow noise).
const useTolerance = 0.25

// followUse is the CPU request (millicores) of an agent whose plan asks planned, whose
// pod asks current now, and whose stripe measured measured over the latest report
// interval (0: nothing measured yet). limit (0: none) caps it: a node's CPU budget
// shared among the stripes on it.
func followUse(planned, current, measured, limit int64) int64 {
	want := planned
	if measured > 0 {
		want = measured
		if current > 0 && absDiff(current, measured) <= int64(useTolerance*float64(measured)) {
			want = current
		}
	}
	if limit > 0 {
		want = min(want, limit)
	}
	return want
}

func absDiff(a, b int64) int64 {
	if a > b {
		return a - b
	}
	return b - a
}

// measuredUse is the CPU stripe k's agent of role measured in the coordinator's latest
// report, in millicores: 0 unless the report is fresh (within two report intervals of
// now), the job is transferring and the stripe is connected and moving data.
func measuredUse(rep *contract.Report, role contract.Role, k int32, now time.Time, interval time.Duration) int64 {
	if rep == nil || rep.Phase != contract.PhaseTransferring || now.Sub(rep.Time) > 2*interval {
		return 0
	}
	for _, s := range rep.Stripes {
		if s.Index != k || !s.Connected || s.BitsPerSecond <= 0 {
			continue
		}
		if role == contract.RoleSender {
			return s.SourceMillicores
		}
		return s.DestinationMillicores
	}
	return 0
}

// withUse is res with its CPU request set by followUse for a pod that asks current
// now; the limit is kept at or above the request.
func withUse(res corev1.ResourceRequirements, current, measured int64) corev1.ResourceRequirements {
	planned := res.Requests.Cpu().MilliValue()
	var limit int64
	if l, ok := res.Limits[corev1.ResourceCPU]; ok {
		limit = l.MilliValue()
	}
	want := followUse(planned, current, measured, limit)
	if want <= 0 || want == planned {
		return res
	}
	out := *res.DeepCopy()
	if out.Requests == nil {
		out.Requests = corev1.ResourceList{}
	}
	out.Requests[corev1.ResourceCPU] = *resource.NewMilliQuantity(want, resource.DecimalSI)
	return out
}

// podMillicores is what a pod's agent container asks for now.
func podMillicores(pod *corev1.Pod) int64 {
	if pod == nil || len(pod.Spec.Containers) == 0 {
		return 0
	}
	return pod.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
}
