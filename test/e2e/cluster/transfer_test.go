package cluster

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
	"github.com/dtnflow/dtnflow/controllers/planning"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// Named timeouts.
const (
	transferTimeout = 8 * time.Minute
)

// The mixed dataset of the first job: large files that are chunked over stripes,
// medium ones, hundreds of small ones in nested folders, and empty files, so that the
// plan has several size classes (about 560 MiB: at 500 Mbit/s it outlasts most probes,
// which run on the job's own data; when it does not, the PathProfile it leaves holds an
// unfinished stream curve, which the warm job continues from).
var mixedDataset = framework.DatasetSpec{Seed: 1, Large: 4, LargeBytes: 128 << 20, Medium: 6, Small: 250, Empty: 3}

// stateLog records the states a job passes through, polled every half second, since a
// short state (Probing) can come and go between two looks.
type stateLog struct {
	mu     sync.Mutex
	states []dtnflowv1alpha1.TransferState
	// probing are the reasons the Probing condition had, in order.
	probing []string
	stop    context.CancelFunc
	done    chan struct{}
}

func watchStates(job *dtnflowv1alpha1.TransferJob) *stateLog {
	ctx, cancel := context.WithCancel(context.Background())
	l := &stateLog{stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			if got, err := getJob(ctx, job); err == nil && got.Status.State != "" {
				l.mu.Lock()
				if n := len(l.states); n == 0 || l.states[n-1] != got.Status.State {
					l.states = append(l.states, got.Status.State)
				}
				if r := conditionReason(got, dtnflowv1alpha1.ConditionProbing); r != "" {
					if n := len(l.probing); n == 0 || l.probing[n-1] != r {
						l.probing = append(l.probing, r)
					}
				}
				l.mu.Unlock()
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return l
}

func (l *stateLog) Stop() []dtnflowv1alpha1.TransferState {
	l.stop()
	<-l.done
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.states)
}

// ProbingReasons are the reasons the job's Probing condition went through.
func (l *stateLog) ProbingReasons() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.probing)
}

// testColdTransfer moves a generated mixed dataset from site A to site B across the
// WAN emulator with no PathProfile of the path: the job probes the path, fits the
// model and plans. It must end Complete with every file's SHA-256 equal at the
// destination, its status must show the plan, samples, model, progress and final
// rate, and the path's PathProfile must hold what it learned.
func testColdTransfer(t *testing.T) {
	ctx := context.Background()
	{
		g := NewWithT(t)
		// A cold start needs no PathProfile of the path.
		g.Expect(deleteProfile(ctx)).To(Succeed())

		source := dataset(t, "e2e/mixed", mixedDataset)
		job := newJob("mixed", "e2e/mixed", "incoming/mixed")
		wanBefore, wanErr := cluster.WANStats(ctx)
		start := time.Now()
		states := watchStates(job)
		dest := createJob(ctx, t, job)
		done := waitForState(ctx, g, job, dtnflowv1alpha1.StateComplete, transferTimeout)
		seen := states.Stop()
		elapsed := time.Since(start)
		expectIdentical(t, source, dest)
		t.Logf("states %v; %d MiB in %s (job: average %s, %d bit/s)", seen, mixedDataset.Bytes()>>20,
			elapsed.Round(time.Second), done.Status.Progress.Rate, done.Status.Progress.AverageBitsPerSecond)

		g.Expect(states.ProbingReasons()).To(ContainElement(controllers.ReasonProbing), "a cold job probes the path")
		events, err := jobEvents(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(events).To(ContainElement(HaveField("Reason", controllers.ReasonProbing)), "the probe is announced in an Event")
		expectCompleteStatus(g, done, mixedDataset)
		s := done.Status
		g.Expect(len(s.Samples)).To(BeNumerically(">=", 2), "ExpSelection samples 1, 2, 4, ... streams")
		// Data from the first second: the probe's samples are stretches of the job's
		// own transfer on one stripe, so its first byte left before the plan was made
		// (the two clocks are this machine's), and the timings say so.
		g.Expect(s.Timings).NotTo(BeNil())
		g.Expect(s.Timings.FirstByteMilliseconds).NotTo(BeNil(), "status.timings.firstByteMilliseconds")
		g.Expect(s.Timings.PlanMilliseconds).NotTo(BeNil(), "status.timings.planMilliseconds")
		g.Expect(s.Timings.CompleteMilliseconds).NotTo(BeNil(), "status.timings.completeMilliseconds")
		g.Expect(*s.Timings.FirstByteMilliseconds).To(BeNumerically("<", *s.Timings.PlanMilliseconds), "the first byte before the plan")
		// the plan comes before Complete, or with it: a job whose data all arrived during
		// its probe is planned from its samples (for the PathProfile) as it completes
		g.Expect(*s.Timings.PlanMilliseconds).To(BeNumerically("<=", *s.Timings.CompleteMilliseconds+2000))
		// a bound that holds however loaded the machine (pods start in 1–10 s here);
		// make demo measures how soon
		g.Expect(*s.Timings.FirstByteMilliseconds).To(BeNumerically("<", 30_000), "the first byte within 30 s of creation")
		// The probe starts on stripe 0 and samples streams there; whether it goes on to
		// the stripes stage (helper stripes inside stripe 0's sender, doubled while they
		// pay) depends on what is left of the dataset when the streams are settled, so
		// what holds on every run is the order and the bound, not the stage's presence.
		var bestSample int64
		stripes := func(p dtnflowv1alpha1.ProbeSample) int32 { return max(p.Stripes, 1) } // absent means one
		g.Expect(stripes(s.Samples[0])).To(Equal(int32(1)), "the cold probe starts on one stripe")
		for i, sample := range s.Samples {
			g.Expect(stripes(sample)).To(BeNumerically("<=", planning.ProbeMaxStripes), "the probe's helper stripes stay within its bound")
			if i > 0 {
				g.Expect(stripes(sample)).To(BeNumerically(">=", stripes(s.Samples[i-1])), "streams first, then stripes")
			}
			g.Expect(sample.Streams).To(BeNumerically(">=", 1))
			g.Expect(sample.BitsPerSecond).To(BeNumerically(">", 0))
			bestSample = max(bestSample, sample.BitsPerSecond)
		}
		logPlan(t, "cold", done)
		// A model whatever the curve's shape: one of the papers' when the rate rises
		// with the streams, Plateau when one stream already fills the path (the usual
		// answer on this clean 500 Mbit/s path).
		g.Expect(s.Plan.Model).NotTo(BeNil(), "the fitted stream model")
		g.Expect(s.Plan.Model.Name).To(BeElementOf(dtnflowv1alpha1.StreamModelDinda, dtnflowv1alpha1.StreamModelNewton,
			dtnflowv1alpha1.StreamModelFullSecondOrder, dtnflowv1alpha1.StreamModelPlateau))
		g.Expect(s.Plan.Model.OptimalStreams).To(BeNumerically(">=", 1))
		g.Expect(s.Plan.Model.Reason).NotTo(BeEmpty(), "the plan says why this model")
		// The plan stays within what the samples showed the path to carry: the probe
		// measured one stripe, so the path's capacity is that stripe's plateau (the
		// best sample, or the model's peak at most one doubling of the streams beyond
		// it: 10 % is more than the fits on this path extrapolate), the plan started
		// with one stripe, and no plan since predicted more than that capacity or the
		// WAN's rate.
		g.Expect(s.Plan.PathBitsPerSecond).To(BeNumerically(">", 0))
		g.Expect(s.Plan.PathBitsPerSecond).To(BeNumerically("<=", bestSample*11/10), "the path's capacity against the best sample %d", bestSample)
		g.Expect(s.Plan.PredictedBitsPerSecond).To(BeNumerically("<=", s.Plan.PathBitsPerSecond))
		// Nor more than the WAN's own rate, within the samples' accuracy (5 %): a sample
		// counts what reached the receiver, selectively acknowledged bytes included, so
		// a sample that begins while a loss is repaired does not count at its end what
		// arrived before it began (with bytes_acked alone a make test of 2026-11-27
		// sampled 529 Mbit/s on this 500 Mbit/s WAN, and planned it).
		g.Expect(s.Plan.PredictedBitsPerSecond).To(BeNumerically("<=", cluster.WAN.RateBitsPerSecond*21/20))
		g.Expect(firstShape(done).Stripes).To(Equal(int32(1)), "no stripe beyond the one the samples measured")
		g.Expect(len(s.Plan.SizeClasses)).To(BeNumerically(">=", 2), "a mixed dataset spans several size classes")
		var classFiles int64
		for _, c := range s.Plan.SizeClasses {
			classFiles += c.Files
		}
		g.Expect(classFiles).To(Equal(int64(len(mixedDataset.Files()))), "every file is in one size class")

		// The data crossed the emulated WAN: the bottleneck carried at least the
		// dataset from A to B, and no job can beat the bottleneck.
		if wanErr == nil {
			wanAfter, err := cluster.WANStats(ctx)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(wanAfter.AtoB.DeliveredBytes - wanBefore.AtoB.DeliveredBytes).To(BeNumerically(">=", mixedDataset.Bytes()))
		}
		g.Expect(s.Progress.AverageBitsPerSecond).To(BeNumerically("<=", cluster.WAN.RateBitsPerSecond*21/20))

		// The path's profile now holds what the job learned.
		var profile dtnflowv1alpha1.PathProfile
		g.Expect(cluster.Client.Get(ctx, client.ObjectKey{Name: profileName()}, &profile)).To(Succeed())
		g.Expect(profile.Status.Model).NotTo(BeNil(), "the PathProfile holds the model, flat or rising")
		g.Expect(*profile.Status.Model).To(Equal(*s.Plan.Model))
		g.Expect(profile.Status.ContributingJobs).To(ContainElement(jobNamespace + "/mixed"))
		g.Expect(profile.Status.BestBitsPerSecond).To(BeNumerically(">", 0))
	}
}

// testWarmStart runs a second job on the path: it must start warm from the PathProfile
// the cold job left (no probe), and complete with identical files.
func testWarmStart(t *testing.T) {
	ctx := context.Background()
	{
		g := NewWithT(t)
		var profile dtnflowv1alpha1.PathProfile
		if err := cluster.Client.Get(ctx, client.ObjectKey{Name: profileName()}, &profile); err != nil || profile.Status.Model == nil {
			t.Fatalf("no learned PathProfile %s to start from (the cold job above must pass first): %v", profileName(), err)
		}
		spec := framework.DatasetSpec{Seed: 2, Large: 2, LargeBytes: 32 << 20, Medium: 4, Small: 120, Empty: 1}
		source := dataset(t, "e2e/warm", spec)
		job := newJob("warm", "e2e/warm", "incoming/warm")
		// The cold job's probe finished its stream curve on some runs and not on others
		// (its data ran out first when 2 streams gained on 1): a finished profile gives
		// no probe at all, an unfinished one a probe that continues from its samples,
		// which this job's data (about 90 MB, under 2 s at the rate the profile holds)
		// cannot repay — so on every run the job takes no sample and plans from the profile.
		continued := planning.ProbeDirective(planning.ProbeInput{Tuning: job.Spec.Tuning, Profile: &profile, Now: time.Now()}) != nil
		t.Logf("the cold job's profile: %d sample(s), stream curve finished: %v", len(profile.Status.Samples), !continued)
		states := watchStates(job)
		dest := createJob(ctx, t, job)
		done := waitForState(ctx, g, job, dtnflowv1alpha1.StateComplete, transferTimeout)
		seen := states.Stop()
		expectIdentical(t, source, dest)
		t.Logf("states %v, Probing reasons %v", seen, states.ProbingReasons())
		logPlan(t, "warm", done)

		// Warm: the controller planned from the profile without running a probe stripe
		// (its one-word state may still read Probing while the coordinator lists the
		// dataset, but no probe directive was given and no Probing event recorded).
		g.Expect(states.ProbingReasons()).To(ContainElement(controllers.ReasonProbeSkipped), "the Probing condition says the probe was skipped")
		g.Expect(states.ProbingReasons()).NotTo(ContainElement(controllers.ReasonProbing))
		g.Expect(done.Status.Samples).To(BeEmpty(), "the warm job measured nothing of its own")
		events, err := jobEvents(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		for _, e := range events {
			g.Expect(e.Reason).NotTo(Equal(controllers.ReasonProbing), "a warm job does not probe: %s", e.Message)
		}
		expectCompleteStatus(g, done, spec)
		g.Expect(done.Status.Plan.Model).NotTo(BeNil())
		g.Expect(*done.Status.Plan.Model).To(Equal(*profile.Status.Model), "the plan starts from the profile's model")
		// and within the path as the profile knows it: one stripe's plateau, raised only
		// as far as the profile's samples of several stripes showed (the cold probe
		// reaches its stripes stage on some runs, not on others), and no more stripes
		// than a sample measured
		measured, stripesMeasured := profile.Status.Model.PeakBitsPerSecond, int32(1)
		for _, sample := range profile.Status.Samples {
			measured = max(measured, sample.BitsPerSecond)
			stripesMeasured = max(stripesMeasured, sample.Stripes)
		}
		g.Expect(done.Status.Plan.PathBitsPerSecond).To(BeNumerically(">=", profile.Status.Model.PeakBitsPerSecond))
		g.Expect(done.Status.Plan.PathBitsPerSecond).To(BeNumerically("<=", measured))
		g.Expect(done.Status.Plan.PredictedBitsPerSecond).To(BeNumerically("<=", done.Status.Plan.PathBitsPerSecond))
		g.Expect(firstShape(done).Stripes).To(BeNumerically("<=", stripesMeasured))
	}
}

// firstShape is the shape of the job's first plan: the shape its first re-plan
// started from, or its plan's when it never re-planned.
func firstShape(job *dtnflowv1alpha1.TransferJob) dtnflowv1alpha1.PlanShape {
	if len(job.Status.Replans) > 0 {
		return job.Status.Replans[0].From
	}
	p := job.Status.Plan
	return dtnflowv1alpha1.PlanShape{Nodes: int32(len(p.SourceNodes)), Stripes: int32(len(p.SourceNodes)) * p.StripesPerNode, StreamsPerStripe: p.StreamsPerStripe}
}

// logPlan records what a job sampled and planned, and its re-plans, for the test log
// (and docs/benchmarks.md).
func logPlan(t *testing.T, what string, job *dtnflowv1alpha1.TransferJob) {
	t.Helper()
	s := job.Status
	var samples []string
	for _, x := range s.Samples {
		samples = append(samples, fmt.Sprintf("%d stream(s) buffer %d: %d Mbit/s", x.Streams, x.BufferBytes, x.BitsPerSecond/1_000_000))
	}
	t.Logf("%s job: %d sample(s) [%s]", what, len(samples), strings.Join(samples, "; "))
	if p := s.Plan; p != nil {
		first := firstShape(job)
		t.Logf("%s job: first plan %d node(s) × %d stripe(s) × %d stream(s); final plan %d stripe(s)/node × %d stream(s), buffer %d, predicted %d bit/s within the path's %d bit/s, bound by %s",
			what, first.Nodes, first.Stripes, first.StreamsPerStripe, p.StripesPerNode, p.StreamsPerStripe, p.BufferBytes, p.PredictedBitsPerSecond, p.PathBitsPerSecond, p.BindingResource)
		if m := p.Model; m != nil {
			t.Logf("%s job: model %s a=%s b=%s c=%s, optimum %d stream(s) at %d bit/s, fit error %d bit/s: %s", what, m.Name, m.A, m.B, m.C,
				m.OptimalStreams, m.PeakBitsPerSecond, m.FitErrorBitsPerSecond, m.Reason)
		}
	}
	for _, r := range s.Replans {
		t.Logf("%s job: re-plan %s %+v → %+v: %s", what, r.Reason, r.From, r.To, r.Message)
	}
	if s.Progress != nil {
		t.Logf("%s job: average %d bit/s", what, s.Progress.AverageBitsPerSecond)
	}
	if tm := s.Timings; tm != nil {
		ms := func(v *int64) string {
			if v == nil {
				return "–"
			}
			return fmt.Sprintf("%d ms", *v)
		}
		t.Logf("%s job: from creation, first byte %s, plan %s, Complete %s", what, ms(tm.FirstByteMilliseconds), ms(tm.PlanMilliseconds), ms(tm.CompleteMilliseconds))
	}
}

// profileName is the PathProfile of the path the tests use.
func profileName() string {
	return controllers.PathProfileNameFor(newJob("any", "any", ""))
}

// expectCompleteStatus checks the status of a job that completed: the plan on the
// sites' nodes within their CPU budgets, progress at 100 % of the dataset with a final
// rate, and the Complete condition.
func expectCompleteStatus(g Gomega, job *dtnflowv1alpha1.TransferJob, spec framework.DatasetSpec) {
	s := job.Status
	g.Expect(meta.IsStatusConditionTrue(s.Conditions, dtnflowv1alpha1.ConditionComplete)).To(BeTrue(), describeConditions(job))
	g.Expect(s.CompletionTime).NotTo(BeNil())
	g.Expect(s.StartTime).NotTo(BeNil())

	g.Expect(s.Plan).NotTo(BeNil(), "the plan")
	g.Expect(s.Plan.SourceNodes).To(ConsistOf(nodeNames(cluster.Source())))
	g.Expect(s.Plan.DestinationNodes).To(ConsistOf(nodeNames(cluster.Destination())))
	g.Expect(s.Plan.StripesPerNode).To(BeNumerically(">=", 1))
	g.Expect(s.Plan.StreamsPerStripe).To(BeNumerically(">=", 1))
	g.Expect(s.Plan.PredictedBitsPerSecond).To(BeNumerically(">", 0))
	g.Expect(s.Plan.BindingResource).NotTo(BeEmpty())
	g.Expect(s.Plan.SourceCPUMillicores).To(BeNumerically("<=", cluster.Source().CPUMillicores))
	g.Expect(s.Plan.DestinationCPUMillicores).To(BeNumerically("<=", cluster.Destination().CPUMillicores))

	g.Expect(s.Progress).NotTo(BeNil(), "the progress")
	p := s.Progress
	g.Expect(p.BytesTotal).To(Equal(spec.Bytes()))
	g.Expect(p.BytesDone).To(Equal(p.BytesTotal))
	g.Expect(p.FilesTotal).To(Equal(int64(len(spec.Files()))))
	g.Expect(p.FilesDone).To(Equal(p.FilesTotal))
	g.Expect(p.Percent).To(BeNumerically("==", 100))
	g.Expect(p.AverageBitsPerSecond).To(BeNumerically(">", 0), "the final rate")
}

func nodeNames(s *framework.Site) []string {
	var out []string
	for _, n := range s.Nodes {
		out = append(out, n.Name)
	}
	return out
}
