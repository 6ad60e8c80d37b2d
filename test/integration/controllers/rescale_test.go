package controllers

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// measure plays the coordinator for one report interval: the clock moves on, the
// coordinator reports the aggregate rate (spread evenly over the stripes), and the
// test waits until the manager has taken the report in.
func measure(t *testing.T, clk interface {
	Now() time.Time
	Step(time.Duration)
}, job *dtnflowv1alpha1.TransferJob, bitsPerSecond int64, done *int64) {
	t.Helper()
	clk.Step(reportInterval)
	at := clk.Now()
	*done += bitsPerSecond / 8 * int64(reportInterval/time.Second)
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		n := int32(len(planOf(g, j).SourceNodes)) * planOf(g, j).StripesPerNode
		rep := contract.Report{Generation: directive(g, job).Generation, Phase: contract.PhaseTransferring, Time: at,
			BytesDone: *done, BytesTotal: 1 << 50, FilesTotal: 1000, BitsPerSecond: bitsPerSecond}
		for k := range n {
			rep.Stripes = append(rep.Stripes, contract.StripeReport{Index: k, Connected: true, Streams: planOf(g, j).StreamsPerStripe,
				BitsPerSecond: bitsPerSecond / int64(n)})
		}
		if p := j.Status.Progress; p == nil || p.LastUpdateTime == nil || !p.LastUpdateTime.Time.Equal(at) {
			report(g, job, rep)
		}
		j = getJob(g, job)
		g.Expect(progressOf(g, j).LastUpdateTime).NotTo(BeNil())
		g.Expect(progressOf(g, j).LastUpdateTime.Time).To(BeTemporally("==", at), "the manager has not taken the report in")
	})
}

// TestRescaleOnFallingRate runs the rescale policy end to end: measured rates within
// ±10 % of the plan's prediction for many report intervals change nothing. The probe
// measured one stripe, so the plan is one stripe at the path's capacity the samples
// showed; a fall to a third of it (a competing flow arrives) makes the manager try one
// stripe more, since the path was measured to carry more, and undo it when it does not
// pay — each with its reason in status.replans and an Event, and the pods follow.
func TestRescaleOnFallingRate(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	job := createJob(t, ns, "elastic", jobSpec(src, dst))
	probe(t, clk, job)
	plan := startTransfer(t, job)
	stripes := int32(len(plan.SourceNodes)) * plan.StripesPerNode
	if stripes != 1 || plan.PathBitsPerSecond == 0 || plan.PredictedBitsPerSecond > plan.PathBitsPerSecond {
		t.Fatalf("the plan has %d stripes, predicts %d bit/s within the path's %d: want one stripe within the capacity the probe measured",
			stripes, plan.PredictedBitsPerSecond, plan.PathBitsPerSecond)
	}
	predicted := plan.PredictedBitsPerSecond
	t.Logf("plan: %d nodes × %d stripes × %d streams, predicted %d bit/s", len(plan.SourceNodes), plan.StripesPerNode, plan.StreamsPerStripe, predicted)

	var done int64
	noise := []float64{1.10, 0.90, 1.05, 0.92, 1.08, 0.91, 1.00, 1.10, 0.90, 0.95, 1.09, 0.93}
	for _, f := range noise {
		measure(t, clk, job, int64(float64(predicted)*f), &done)
	}
	consistently(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(j.Status.Replans).To(BeEmpty(), "±10 %% noise changed the plan")
		g.Expect(planOf(g, j).Hash).To(Equal(plan.Hash))
	})

	// The path falls to a third of what the plan predicted (a competing flow arrives):
	// a stripe more is tried, then undone.
	var replans []dtnflowv1alpha1.Replan
	for i := 0; len(replans) < 2; i++ {
		if i == 24 {
			t.Fatalf("24 report intervals at a third of the predicted rate made the re-plans %+v, want a stripe tried and undone", replans)
		}
		measure(t, clk, job, predicted/3, &done)
		replans = getJob(NewWithT(t), job).Status.Replans
	}
	tried, undone := replans[0], replans[1]
	t.Logf("re-plans: %s: %s; %s: %s", tried.Reason, tried.Message, undone.Reason, undone.Message)
	if tried.Reason != "BelowPlannedRate" || tried.Message == "" || tried.From.Stripes != 1 || tried.To.Stripes != 2 {
		t.Fatalf("re-plan %+v: want one stripe more, below the planned rate", tried)
	}
	if undone.Reason != "AddedStripesDidNotHelp" || undone.To.Stripes != 1 {
		t.Fatalf("re-plan %+v: want the stripe undone", undone)
	}
	replan := undone
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		pods := listAgents(g, job)
		g.Expect(pods.senders).To(HaveLen(int(replan.To.Stripes)))
		g.Expect(pods.receivers).To(HaveLen(int(replan.To.Stripes)))
		for _, p := range pods.senders { // the stripes that stay get the new plan's CPU in place
			g.Expect(p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()).To(Equal(planOf(g, j).SourceCPUMillicores), "sender %s", p.Name)
		}
		for _, p := range pods.receivers {
			g.Expect(p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()).To(Equal(planOf(g, j).DestinationCPUMillicores), "receiver %s", p.Name)
		}
		g.Expect(directive(g, job).Stripes).To(Equal(replan.To.Stripes))
		g.Expect(j.Status.AgentFailures).To(BeZero())
		var events eventsv1.EventList
		g.Expect(env.Client.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
		reasons := map[string]bool{}
		for _, e := range events.Items {
			if e.Regarding.Name == job.Name && e.Action == "Replan" {
				reasons[e.Reason] = true
			}
		}
		g.Expect(reasons).To(HaveKey(tried.Reason))
		g.Expect(reasons).To(HaveKey(undone.Reason))
	})

	// The metrics saw it all: the job's verified bytes (whose rate() is its rate), its
	// predicted rate, the bytes of the path, the re-plan, and how the achieved rate
	// compared with the prediction.
	eventually(t, func(g Gomega) {
		m := gatherMetrics(g)
		g.Expect(m["dtnflow_transferjob_verified_bytes_total"]["name=elastic,namespace="+ns]).To(BeNumerically("==", float64(done)))
		g.Expect(m["dtnflow_transferjob_predicted_bytes_per_second"]["name=elastic,namespace="+ns]).To(BeNumerically("==", float64(planOf(g, getJob(g, job)).PredictedBitsPerSecond)/8))
		g.Expect(m["dtnflow_bytes_moved_total"]["destination="+dst.name+",source="+src.name]).To(BeNumerically("==", float64(done)))
		g.Expect(m["dtnflow_replans_total"]["reason="+replan.Reason]).To(BeNumerically(">=", 1))
		g.Expect(m["dtnflow_prediction_achieved_ratio"][""]).To(BeNumerically(">=", len(noise)), "observations of achieved/predicted")
	})
}

// gatherMetrics reads the manager's metrics (the process-wide controller-runtime
// registry) as name → "label=value,…" → value; a histogram's value is its count.
func gatherMetrics(g Gomega) map[string]map[string]float64 {
	mfs, err := ctrlmetrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]map[string]float64{}
	for _, mf := range mfs {
		m := map[string]float64{}
		for _, metric := range mf.GetMetric() {
			var labels []string
			for _, l := range metric.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			m[strings.Join(labels, ",")] = metric.GetGauge().GetValue() + metric.GetCounter().GetValue() + float64(metric.GetHistogram().GetSampleCount())
		}
		out[mf.GetName()] = m
	}
	return out
}
