package controllers

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/optimizer"
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
// now), the job is transferring and the stripe is connected and moving data. The
// coordinator's is its own process's (k is ignored): its work is per file settled, and
// what that costs moved by 2× between sessions on the same dataset (issue 11's 20 000
// small files: 142–173 millicores in the ninth session, 89–99 in the tenth, where the
// senders' samples read 237–298 and 162–175) — no constant of the plan's holds it
// within a quarter, a measurement of the job does.
func measuredUse(rep *contract.Report, role contract.Role, k int32, now time.Time, interval time.Duration) int64 {
	if rep == nil || rep.Phase != contract.PhaseTransferring || now.Sub(rep.Time) > 2*interval {
		return 0
	}
	if role == contract.RoleCoordinator {
		return rep.CoordinatorMillicores
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

// coordinatorUse is what the coordinator in pod is measured to use (measuredUse) plus
// its start's share (startShare), in millicores; 0 while nothing is measured. The
// coordinator measures its own process over windows of a second or more, which leaves
// out what its pod's cgroup counted before the process ran: on a 4 GiB job a third of
// the pod's use, where the coordinator asks single millicores. The agents that move
// data are not given the share: they measure hundreds of millicores, the start's few
// are inside useTolerance, and their requests already stand near their use (their pods
// used 0.85–1.05× what they asked in the runs that measured the coordinator's start).
func coordinatorUse(pod *corev1.Pod, rep *contract.Report, now time.Time, interval time.Duration) int64 {
	measured := measuredUse(rep, contract.RoleCoordinator, 0, now, interval)
	if measured <= 0 {
		return 0
	}
	return measured + startShare(pod, rep, now)
}

// startShare is a cold pod's start (optimizer.PodStartCPUSeconds) spread over its
// expected life: the time since it started plus the job's bytes left at the job's
// latest rate. A claimed warm agent started before its job (its start was the pool's,
// and is not the job's), and a job without a rate has no expected life: both 0.
func startShare(pod *corev1.Pod, rep *contract.Report, now time.Time) int64 {
	if pod == nil || rep == nil || rep.BitsPerSecond <= 0 {
		return 0
	}
	if _, warm := pod.Labels[contract.LabelWarmPool]; warm {
		return 0
	}
	started := pod.CreationTimestamp.Time
	if pod.Status.StartTime != nil {
		started = pod.Status.StartTime.Time
	}
	left := max(rep.BytesTotal-rep.BytesDone, 0)
	life := max(now.Sub(started).Seconds(), 0) + float64(left)*8/float64(rep.BitsPerSecond)
	return optimizer.StartMillicores(life)
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

// resizeDeadBand is how far (relative to the new value) a probing job's agent's CPU
// request or limit may move before its pod is resized. A resize is an API write, a
// kubelet sync, a runtime update and two events on the DTN node, and during a probe the
// requests are refitted at every sample: a small-file job's coordinator was resized
// between 211 and 215 millicores four times in six seconds.
const resizeDeadBand = 0.10

// sameResources says whether a pod that asks for have may keep it where want is asked:
// everything but CPU equal, and each CPU quantity within band (relative to want) of the
// wanted one (a CPU quantity set on one side only is a change).
func sameResources(have, want corev1.ResourceRequirements, band float64) bool {
	near := func(h, w corev1.ResourceList) bool {
		hq, hok := h[corev1.ResourceCPU]
		wq, wok := w[corev1.ResourceCPU]
		if hok != wok {
			return false
		}
		return !wok || absDiff(hq.MilliValue(), wq.MilliValue()) <= int64(band*float64(wq.MilliValue()))
	}
	withoutCPU := func(l corev1.ResourceList) corev1.ResourceList {
		out := l.DeepCopy()
		delete(out, corev1.ResourceCPU)
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return near(have.Requests, want.Requests) && near(have.Limits, want.Limits) &&
		equality.Semantic.DeepEqual(withoutCPU(have.Requests), withoutCPU(want.Requests)) &&
		equality.Semantic.DeepEqual(withoutCPU(have.Limits), withoutCPU(want.Limits)) &&
		equality.Semantic.DeepEqual(have.Claims, want.Claims)
}
