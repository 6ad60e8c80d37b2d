package controllers

import (
	"github.com/dtnflow/dtnflow/controllers/planning"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
)

// TestColdJobMovesDataFromTheFirstSecond: a cold job's first directive moves its own
// dataset at once on stripe 0 while the probe samples stretches of that transfer; its
// status shows the data moving and the first byte's time before any plan. The plan
// made from those samples grows the running job: stripe 0's pods stay, the plan's
// other stripes are created together, the directive carries the plan and ends the
// probe. status.timings records the first byte, the plan and Complete, each in
// milliseconds from the job's creation, once (the fake clock's first sight of the job
// is months before its creation, so the creation is the reference; TestRunStart has
// the other cases).
func TestColdJobMovesDataFromTheFirstSecond(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{nodes: 2}), newSite(t, "dst", siteOptions{nodes: 2, budget: "8"})
	ns := createNamespace(t, nil)
	spec := jobSpec(src, dst)
	spec.Tuning.Limits = &dtnflowv1alpha1.TuningLimits{MaxBitsPerSecond: ptr.To[int64](5_000_000_000)}
	job := createJob(t, ns, "first", spec)
	var created time.Time
	eventually(t, func(g Gomega) { created = getJob(g, job).CreationTimestamp.Time })
	at := func(d time.Duration) time.Time { return created.Add(d) }

	// The coordinator and stripe 0 at once, with a Transfer directive that probes.
	var stripe0 agentPods
	var first contract.Directive
	eventually(t, func(g Gomega) {
		stripe0 = runAll(g, job)
		g.Expect(stripe0.coordinator).NotTo(BeNil())
		g.Expect(stripe0.senders).To(HaveLen(1))
		g.Expect(stripe0.receivers).To(HaveLen(1))
		first = directive(g, job)
		g.Expect(stripe0.senders[0].Spec.Containers[0].Resources.Requests.Cpu().MilliValue()).To(Equal(int64(250)), "before any sample, the probe's default")
	})
	if first.Mode != contract.ModeTransfer || first.Probe == nil || first.StreamsPerStripe != 1 || first.Stripes != 1 || first.MaxBitsPerSecond != 5_000_000_000 {
		t.Fatalf("first directive %+v: want a transfer on one stripe of one stream, capped as spec.tuning.limits says, with a probe", first)
	}

	// Data moves while the probe runs: progress and the first byte before any plan.
	sample := func(streams int32, bps int64, i int) contract.Sample {
		return contract.Sample{Stripes: 1, Streams: streams, BitsPerSecond: bps, SourceMillicores: 200 + bps/5_000_000,
			DestinationMillicores: 300 + bps/3_000_000, RTTMicros: 40_000, Time: at(time.Duration(i+1) * time.Second)}
	}
	firstByte := at(1500 * time.Millisecond)
	eventually(t, func(g Gomega) {
		report(g, job, contract.Report{Generation: first.Generation, Phase: contract.PhaseTransferring, Probe: contract.PhaseProbing,
			Time: at(2 * time.Second), FirstByteTime: &firstByte, Dataset: dataset, BytesTotal: dataset.Bytes, FilesTotal: dataset.Files,
			BytesDone: 1 << 30, FilesDone: 1, BitsPerSecond: 450_000_000, Samples: []contract.Sample{sample(1, 450_000_000, 0)},
			Stripes: []contract.StripeReport{{Index: 0, Connected: true, Streams: 1, BitsPerSecond: 450_000_000, RTTMicros: 40_000}}})
		j := getJob(g, job)
		g.Expect(j.Status.Plan).To(BeNil())
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateTransferring))
		g.Expect(reason(j, dtnflowv1alpha1.ConditionProbing)).To(Equal(controllers.ReasonProbing))
		g.Expect(condition(j, dtnflowv1alpha1.ConditionProbing).Status).To(BeEquivalentTo("True"))
		g.Expect(condition(j, dtnflowv1alpha1.ConditionPlanned).Status).To(BeEquivalentTo("False"))
		g.Expect(j.Status.Progress).NotTo(BeNil())
		g.Expect(j.Status.Progress.BytesDone).To(Equal(int64(1 << 30)))
		g.Expect(j.Status.Samples).To(HaveLen(1))
		g.Expect(j.Status.Timings).NotTo(BeNil())
		g.Expect(j.Status.Timings.FirstByteMilliseconds).To(Equal(ptr.To[int64](1500)))
		g.Expect(j.Status.Timings.PlanMilliseconds).To(BeNil())
		// the probe stripe and the coordinator ask what the sample measured, not the
		// manager's defaults (250m, 100m) until the plan
		pods := listAgents(g, job)
		_, _, coord := planning.ProbeRequests(j.Status.Samples, dataset)
		g.Expect(pods.senders[0].Spec.Containers[0].Resources.Requests.Cpu().MilliValue()).To(Equal(int64(290)))
		g.Expect(pods.receivers[0].Spec.Containers[0].Resources.Requests.Cpu().MilliValue()).To(Equal(int64(450)))
		g.Expect(coord).To(BeNumerically(">", 0))
		g.Expect(pods.coordinator.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()).To(Equal(coord))
	})

	// The probe ends: the plan, made at 4 s, grows the running job.
	clk.SetTime(at(4 * time.Second))
	eventually(t, func(g Gomega) {
		report(g, job, contract.Report{Generation: first.Generation, Phase: contract.PhaseTransferring, Probe: contract.PhaseProbed,
			Time: at(4 * time.Second), FirstByteTime: &firstByte, Dataset: dataset, BytesTotal: dataset.Bytes, FilesTotal: dataset.Files,
			BytesDone: 2 << 30, FilesDone: 2, BitsPerSecond: 900_000_000,
			Samples: []contract.Sample{sample(1, 450_000_000, 0), sample(2, 900_000_000, 1), sample(4, 1_700_000_000, 2), sample(8, 1_750_000_000, 3)}})
		g.Expect(getJob(g, job).Status.Plan).NotTo(BeNil())
	})
	plan := startTransfer(t, job)
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(j.Status.Timings.PlanMilliseconds).To(Equal(ptr.To[int64](4000)))
		g.Expect(j.Status.Timings.FirstByteMilliseconds).To(Equal(ptr.To[int64](1500)), "set once")
		g.Expect(reason(j, dtnflowv1alpha1.ConditionProbing)).To(Equal(controllers.ReasonProbeComplete))
		g.Expect(j.Status.Samples).To(HaveLen(4))
		pods := listAgents(g, job)
		g.Expect(pods.coordinator.UID).To(Equal(stripe0.coordinator.UID))
		g.Expect(pods.senders[0].UID).To(Equal(stripe0.senders[0].UID), "the probe stripe's sender is kept")
		g.Expect(pods.receivers[0].UID).To(Equal(stripe0.receivers[0].UID), "the probe stripe's receiver is kept")
		// the plan's new stripes were created in one pass, for the plan
		var hashes []string
		for k, p := range pods.senders {
			if k > 0 {
				hashes = append(hashes, p.Labels[contract.LabelPlanHash])
			}
		}
		for _, h := range hashes {
			g.Expect(h).To(Equal(plan.Hash))
		}
	})
	if n := len(plan.SourceNodes) * int(plan.StripesPerNode); n < 1 {
		t.Fatalf("plan %+v has no stripe", plan)
	}

	// Complete: the coordinator's time of it.
	clk.SetTime(at(10 * time.Second))
	eventually(t, func(g Gomega) {
		d := directive(g, job)
		report(g, job, contract.Report{Generation: d.Generation, Phase: contract.PhaseComplete, Time: at(9250 * time.Millisecond),
			FirstByteTime: &firstByte, Dataset: dataset, BytesTotal: dataset.Bytes, FilesTotal: dataset.Files,
			BytesDone: dataset.Bytes, FilesDone: dataset.Files})
	})
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateComplete))
		g.Expect(j.Status.Timings.CompleteMilliseconds).To(Equal(ptr.To[int64](9250)))
		g.Expect(j.Status.Timings.PlanMilliseconds).To(Equal(ptr.To[int64](4000)))
		// the run's average over its 9.25 s, not over the whole seconds of startTime
		// and the pass (10 s)
		g.Expect(j.Status.Progress.AverageBitsPerSecond).To(Equal(int64(float64(dataset.Bytes) * 8 / 9.25)))
	})
}

// TestOperatorPlansPastTheWindow: the probe's samples carry each stream count's window
// share through the coordinator's report and the API server into status.samples and
// the PathProfile, and the operator's plan reads it — issue 11's flat loss-free samples
// (882, 878, 884 Mbit/s at 1, 2, 4 streams with 4 MiB buffers), one stream 53 %
// window-limited, two 21 %: the plan takes two streams and its model's reason says why.
// A CRD without the field would prune it, and the plan would take one.
func TestOperatorPlansPastTheWindow(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{nodes: 1}), newSite(t, "dst", siteOptions{nodes: 1, budget: "8"})
	job := createJob(t, createNamespace(t, nil), "window", jobSpec(src, dst))
	samples := []contract.Sample{}
	for i, s := range []struct {
		streams int32
		mbps    int64
		pct     int32
	}{{1, 882, 53}, {2, 878, 21}, {4, 884, 10}} {
		samples = append(samples, contract.Sample{Stripes: 1, Streams: s.streams, BufferBytes: 4 << 20, BitsPerSecond: s.mbps * 1_000_000,
			SourceMillicores: 150, DestinationMillicores: 250, RTTMicros: 50_000, WindowLimitedPercent: s.pct,
			Time: clk.Now().Add(time.Duration(i-10) * time.Second)})
	}
	eventually(t, func(g Gomega) {
		pods := runAll(g, job)
		g.Expect(pods.coordinator).NotTo(BeNil())
		d := directive(g, job)
		g.Expect(d.Probe).NotTo(BeNil())
		report(g, job, contract.Report{Generation: d.Generation, Phase: contract.PhaseTransferring, Probe: contract.PhaseProbed, Time: clk.Now(),
			Dataset: dataset, Samples: samples, BytesTotal: dataset.Bytes, FilesTotal: dataset.Files, BytesDone: 1 << 30, FilesDone: 1})
	})
	plan := startTransfer(t, job)
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(j.Status.Samples).To(HaveLen(3))
		for i, s := range j.Status.Samples {
			g.Expect(s.WindowLimitedPercent).To(Equal(samples[i].WindowLimitedPercent), "sample %d as the API server stored it", i)
		}
	})
	if plan.StreamsPerStripe != 2 || plan.StripesPerNode != 1 {
		t.Errorf("plan %d stripe(s) × %d streams, want 1 × 2 (one stream's sample measured its window)", plan.StripesPerNode, plan.StreamsPerStripe)
	}
	if plan.Model == nil || !strings.Contains(plan.Model.Reason, "1 stream (53 %) were mostly window-limited") {
		t.Errorf("model %+v: its reason does not say why two streams", plan.Model)
	}
}
