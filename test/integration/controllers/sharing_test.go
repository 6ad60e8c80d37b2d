package controllers

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
	"github.com/dtnflow/dtnflow/controllers/planning"
)

// Issue 13: jobs that share a path — admission and queues, priorities, shares that
// follow arrivals and departures, one prober per cold path, nodes divided by planned
// rate and CPU.

// warmProfile creates the path's PathProfile as an earlier job on it would have left it
// (the LONI probe of probeSamples, learned now), then lets change edit its spec.
func warmProfile(t *testing.T, clk interface{ Now() time.Time }, src, dst site, change func(*dtnflowv1alpha1.PathProfile)) *dtnflowv1alpha1.PathProfile {
	t.Helper()
	samples := planning.ProbeSamplesFromContract(probeSamples(clk.Now().Add(-time.Hour)))
	nodes := []planning.Node{{Name: "n", NICBitsPerSecond: 10e9}}
	plan, err := planning.Plan(planning.Input{Tuning: dtnflowv1alpha1.TransferTuning{Mode: dtnflowv1alpha1.TuningAuto}, Samples: samples,
		SourceNodes: nodes, DestinationNodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	pp := &dtnflowv1alpha1.PathProfile{ObjectMeta: metav1.ObjectMeta{Name: controllers.PathProfileName(src.name, dst.name)},
		Spec: dtnflowv1alpha1.PathProfileSpec{SourceEndpoint: src.name, DestinationEndpoint: dst.name}}
	if change != nil {
		change(pp)
	}
	if err := env.Client.Create(context.Background(), pp); err != nil {
		t.Fatalf("creating the PathProfile: %v", err)
	}
	pp.Status = planning.Learn(dtnflowv1alpha1.PathProfileStatus{}, "seed/earlier", &plan, samples, 0, clk.Now())
	if err := env.Client.Status().Update(context.Background(), pp); err != nil {
		t.Fatalf("writing the PathProfile's status: %v", err)
	}
	return pp
}

// createPriorityClass creates a TransferPriorityClass open to every namespace.
func createPriorityClass(t *testing.T, priority int32, preemption dtnflowv1alpha1.PreemptionPolicy) string {
	t.Helper()
	c := &dtnflowv1alpha1.TransferPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: unique("prio")},
		Spec: dtnflowv1alpha1.TransferPriorityClassSpec{Priority: priority, NamespaceSelector: &metav1.LabelSelector{}, Preemption: preemption}}
	if err := env.Client.Create(context.Background(), c); err != nil {
		t.Fatalf("creating the priority class: %v", err)
	}
	return c.Name
}

// completeJob plays the coordinator reporting every file verified.
func completeJob(t *testing.T, clk interface{ Now() time.Time }, job *dtnflowv1alpha1.TransferJob) {
	t.Helper()
	eventually(t, func(g Gomega) {
		if getJob(g, job).Status.State != dtnflowv1alpha1.StateComplete {
			report(g, job, contract.Report{Generation: directive(g, job).Generation, Phase: contract.PhaseComplete, Time: clk.Now(),
				BytesDone: dataset.Bytes, BytesTotal: dataset.Bytes, FilesDone: dataset.Files, FilesTotal: dataset.Files})
		}
		g.Expect(getJob(g, job).Status.State).To(Equal(dtnflowv1alpha1.StateComplete))
	})
}

// queued asserts that a job waits at a position for a reason and holds no pods.
func queued(g Gomega, job *dtnflowv1alpha1.TransferJob, position int32, reason string) {
	j := getJob(g, job)
	g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateQueued), "job %s", job.Name)
	g.Expect(j.Status.Queue).NotTo(BeNil(), "job %s has no status.queue", job.Name)
	g.Expect(j.Status.Queue.Position).To(Equal(position), "job %s", job.Name)
	g.Expect(j.Status.Queue.Reason).To(Equal(reason), "job %s", job.Name)
	g.Expect(j.Status.Queue.Message).NotTo(BeEmpty())
	g.Expect(reason).To(Equal(reasonOf(j, dtnflowv1alpha1.ConditionQueued)))
	g.Expect(listAgents(g, job).all).To(BeEmpty(), "queued job %s holds pods", job.Name)
}

func reasonOf(j *dtnflowv1alpha1.TransferJob, typ string) string { return reason(j, typ) }

// TestAdmissionAndPriority: a path that allows one job at once runs the first job; the
// others wait in the Queued state with no pods, higher priority first whatever came
// first; the running job is not preempted; when it completes the job of higher
// priority starts; a suspended job gives its place up and a resumed one waits again.
func TestAdmissionAndPriority(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	warmProfile(t, clk, src, dst, func(pp *dtnflowv1alpha1.PathProfile) { pp.Spec.MaxActiveJobs = ptr.To[int32](1) })
	express := createPriorityClass(t, 5, dtnflowv1alpha1.PreemptNever)

	first := createJob(t, ns, "a-first", fixedSpec(src, dst))
	transferring(t, clk, first)
	bulk := createJob(t, ns, "b-bulk", fixedSpec(src, dst))
	urgentSpec := fixedSpec(src, dst)
	urgentSpec.PriorityClassName = express
	urgent := createJob(t, ns, "c-urgent", urgentSpec)
	eventually(t, func(g Gomega) {
		queued(g, urgent, 1, controllers.ReasonPathLimit)
		queued(g, bulk, 2, controllers.ReasonPathLimit)
		g.Expect(getJob(g, urgent).Status.Sharing.Priority).To(Equal(int32(5)))
		g.Expect(getJob(g, first).Status.State).To(Equal(dtnflowv1alpha1.StateTransferring), "the running job was preempted")
	})
	consistently(t, func(g Gomega) {
		queued(g, urgent, 1, controllers.ReasonPathLimit)
		g.Expect(getJob(g, first).Status.State).To(Equal(dtnflowv1alpha1.StateTransferring))
	})

	completeJob(t, clk, first)
	transferring(t, clk, urgent)
	eventually(t, func(g Gomega) { queued(g, bulk, 1, controllers.ReasonPathLimit) })

	// suspending the running job gives its place to the next; resuming it, it waits
	updateJob(t, urgent, func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Suspend = true })
	eventually(t, func(g Gomega) {
		g.Expect(getJob(g, urgent).Status.State).To(Equal(dtnflowv1alpha1.StateSuspended))
	})
	transferring(t, clk, bulk)
	updateJob(t, urgent, func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Suspend = false })
	eventually(t, func(g Gomega) { queued(g, urgent, 1, controllers.ReasonPathLimit) })
	consistently(t, func(g Gomega) { g.Expect(getJob(g, bulk).Status.State).To(Equal(dtnflowv1alpha1.StateTransferring)) })
}

// TestPreemptionWhenThePolicySaysSo: a class with preemption LowerPriority takes the
// place of the running job of lower priority, whose agents stop and which waits,
// preempted, until there is room again.
func TestPreemptionWhenThePolicySaysSo(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	// the limit is the source endpoint's this time
	updateEndpoint(t, src.name, func(ep *dtnflowv1alpha1.TransferEndpoint) {
		ep.Spec.Sharing = &dtnflowv1alpha1.EndpointSharing{MaxActiveJobs: ptr.To[int32](1)}
	})
	ns := createNamespace(t, nil)
	warmProfile(t, clk, src, dst, nil)
	urgentClass := createPriorityClass(t, 9, dtnflowv1alpha1.PreemptLowerPriority)

	low := createJob(t, ns, "low", fixedSpec(src, dst))
	transferring(t, clk, low)
	spec := fixedSpec(src, dst)
	spec.PriorityClassName = urgentClass
	urgent := createJob(t, ns, "urgent", spec)
	transferring(t, clk, urgent)
	eventually(t, func(g Gomega) { queued(g, low, 1, controllers.ReasonPreempted) })
	completeJob(t, clk, urgent)
	transferring(t, clk, low)
}

// updateEndpoint changes an endpoint's spec, retrying on conflicts.
func updateEndpoint(t *testing.T, name string, change func(*dtnflowv1alpha1.TransferEndpoint)) {
	t.Helper()
	eventually(t, func(g Gomega) {
		var ep dtnflowv1alpha1.TransferEndpoint
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Name: name}, &ep)).To(Succeed())
		change(&ep)
		g.Expect(env.Client.Update(context.Background(), &ep)).To(Succeed())
	})
}

// TestSharesFollowArrivalsAndDepartures: a job alone on a measured path is planned for
// all of it and not paced; a second job of twice its priority arrives and both are
// planned for their shares, 1:2 of the path's capacity, the first re-planned with
// reason PathJobArrived — at once, with no report interval passing on the clock; a
// third arriving an instant later is taken in an interval later (one share re-plan
// per interval); when the others complete, the first is re-planned for the whole
// path (PathJobLeft).
func TestSharesFollowArrivalsAndDepartures(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	pp := warmProfile(t, clk, src, dst, nil)
	capacity := pp.Status.Capacity.PlateauBitsPerSecond
	double := createPriorityClass(t, 2, dtnflowv1alpha1.PreemptNever)

	one := createJob(t, ns, "one", jobSpec(src, dst))
	alone := startTransfer(t, one)
	if alone.ShareBitsPerSecond != 0 || directive(NewWithT(t), one).MaxBitsPerSecond != 0 {
		t.Fatalf("a job alone on the path is held to %d (directive %d)", alone.ShareBitsPerSecond, directive(NewWithT(t), one).MaxBitsPerSecond)
	}
	eventually(t, func(g Gomega) {
		s := getJob(g, one).Status.Sharing
		g.Expect(s).NotTo(BeNil())
		g.Expect(s.JobsOnPath).To(Equal(int32(1)))
		g.Expect(s.PathCapacityBitsPerSecond).To(Equal(capacity))
		g.Expect(s.Paced).To(BeFalse())
	})

	spec := jobSpec(src, dst)
	spec.PriorityClassName = double
	two := createJob(t, ns, "two", spec)
	twoPlan := startTransfer(t, two)
	third := capacity / 3
	eventually(t, func(g Gomega) {
		j := getJob(g, one)
		g.Expect(planOf(g, j).ShareBitsPerSecond).To(BeNumerically("~", third, 2))
		g.Expect(planOf(g, j).PredictedBitsPerSecond).To(BeNumerically("<=", third+1))
		g.Expect(j.Status.Replans).NotTo(BeEmpty())
		last := j.Status.Replans[len(j.Status.Replans)-1]
		g.Expect(last.Reason).To(Equal(controllers.ReasonPathJobArrived))
		g.Expect(last.Time.Time).To(BeTemporally("==", clk.Now().Truncate(time.Second)), "the re-plan waited for the clock")
		g.Expect(directive(g, one).MaxBitsPerSecond).To(Equal(planOf(g, j).ShareBitsPerSecond), "the agents are not paced to the share")
		g.Expect(j.Status.Sharing.JobsOnPath).To(Equal(int32(2)))
		g.Expect(j.Status.Sharing.BoundBy).To(Equal(dtnflowv1alpha1.ShareBoundPath))
		g.Expect(j.Status.Sharing.Paced).To(BeTrue())
		t2 := getJob(g, two)
		g.Expect(planOf(g, t2).ShareBitsPerSecond).To(BeNumerically("~", 2*third, 2))
		g.Expect(t2.Status.Sharing.Priority).To(Equal(int32(2)))
		g.Expect(directive(g, two).MaxBitsPerSecond).To(Equal(planOf(g, t2).ShareBitsPerSecond))
	})
	t.Logf("capacity %d; shares %d and %d; the second job's first plan %d stripes × %d streams, %d m per sender",
		capacity, getJob(NewWithT(t), one).Status.Plan.ShareBitsPerSecond, getJob(NewWithT(t), two).Status.Plan.ShareBitsPerSecond,
		planning.Stripes(*twoPlan), twoPlan.StreamsPerStripe, twoPlan.SourceCPUMillicores)
	// the plan for a third carries less CPU than the plan for all of it
	eventually(t, func(g Gomega) {
		g.Expect(planOf(g, getJob(g, one)).SourceCPUMillicores).To(BeNumerically("<", alone.SourceCPUMillicores))
		for _, p := range listAgents(g, one).senders {
			g.Expect(p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()).To(Equal(planOf(g, getJob(g, one)).SourceCPUMillicores))
		}
	})

	// a third job an instant later: the first re-planned for the second just now, so
	// it takes the third in an interval later, not at once
	three := createJob(t, ns, "three", jobSpec(src, dst))
	startTransfer(t, three)
	consistently(t, func(g Gomega) {
		g.Expect(planOf(g, getJob(g, one)).ShareBitsPerSecond).To(BeNumerically("~", third, 2))
	})
	clk.Step(reportInterval)
	reportMoving(t, clk, one)
	eventually(t, func(g Gomega) {
		j := getJob(g, one)
		g.Expect(planOf(g, j).ShareBitsPerSecond).To(BeNumerically("~", capacity/4, 2))
		g.Expect(j.Status.Replans[len(j.Status.Replans)-1].Reason).To(Equal(controllers.ReasonPathJobArrived))
		g.Expect(planOf(g, getJob(g, three)).ShareBitsPerSecond).To(BeNumerically("~", capacity/4, 2))
	})

	// one job leaves, then the other: the half comes before the whole (both at once,
	// job one may not pass between them, and whether it saw the half was luck)
	clk.Step(reportInterval)
	completeJob(t, clk, two)
	eventually(t, func(g Gomega) {
		g.Expect(planOf(g, getJob(g, one)).ShareBitsPerSecond).To(BeNumerically("~", capacity/2, 2))
	})
	completeJob(t, clk, three)
	clk.Step(reportInterval)
	reportMoving(t, clk, one)
	eventually(t, func(g Gomega) {
		j := getJob(g, one)
		g.Expect(planOf(g, j).ShareBitsPerSecond).To(BeZero())
		last := j.Status.Replans[len(j.Status.Replans)-1]
		g.Expect(last.Reason).To(Equal(controllers.ReasonPathJobLeft))
		g.Expect(last.Time.Time).To(BeTemporally("==", clk.Now().Truncate(time.Second)))
		g.Expect(directive(g, one).MaxBitsPerSecond).To(BeZero())
		g.Expect(j.Status.Sharing.JobsOnPath).To(Equal(int32(1)))
	})
}

// reportMoving plays the coordinator's report of an interval: it wakes the manager as
// the report would, after the test moved the clock.
func reportMoving(t *testing.T, clk interface{ Now() time.Time }, job *dtnflowv1alpha1.TransferJob) {
	t.Helper()
	eventually(t, func(g Gomega) {
		report(g, job, contract.Report{Generation: directive(g, job).Generation, Phase: contract.PhaseTransferring, Time: clk.Now(),
			BytesDone: 1 << 30, BytesTotal: dataset.Bytes, FilesTotal: dataset.Files, BitsPerSecond: 1e8})
	})
}

// TestColdPathProbedByOneJob: two jobs start together on a path nobody has measured;
// one probes it, the other waits with no pods, then plans from the profile the first
// taught as soon as it planned — without a probe of its own.
func TestColdPathProbedByOneJob(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	a := createJob(t, ns, "a-prober", jobSpec(src, dst))
	b := createJob(t, ns, "b-waiter", jobSpec(src, dst))
	eventually(t, func(g Gomega) {
		wb := getJob(g, b)
		c := meta.FindStatusCondition(wb.Status.Conditions, dtnflowv1alpha1.ConditionProbing)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(controllers.ReasonWaitingForPathProbe))
		g.Expect(c.Message).To(ContainSubstring(ns + "/a-prober"))
		g.Expect(listAgents(g, b).all).To(BeEmpty())
	})
	probe(t, clk, a)
	plan := startTransfer(t, a)
	bPlan := startTransfer(t, b)
	eventually(t, func(g Gomega) {
		wb := getJob(g, b)
		g.Expect(wb.Status.Samples).To(BeEmpty(), "the second job probed the path too")
		g.Expect(reason(wb, dtnflowv1alpha1.ConditionProbing)).To(Equal(controllers.ReasonProbeSkipped))
		g.Expect(bPlan.Model).To(Equal(plan.Model))
		var pp dtnflowv1alpha1.PathProfile
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Name: controllers.PathProfileName(src.name, dst.name)}, &pp)).To(Succeed())
		g.Expect(pp.Status.Capacity).NotTo(BeNil())
		g.Expect(pp.Status.Capacity.PlateauBitsPerSecond).To(Equal(plan.PathBitsPerSecond))
		// both on the path now: each is held to half of it
		g.Expect(planOf(g, getJob(g, a)).ShareBitsPerSecond).To(BeNumerically("~", plan.PathBitsPerSecond/2, 1))
		g.Expect(planOf(g, wb).ShareBitsPerSecond).To(BeNumerically("~", plan.PathBitsPerSecond/2, 1))
	})
}

// TestProberWhoseDataRanOutReleasesTheOthers: three jobs start together on a cold path;
// the first probes it and its data runs out under the probe (two samples of the four
// stream counts it would take, then Complete). Its samples teach the path's profile,
// and the two that waited plan from that profile at once, both of them — neither
// probes the rest of the path while the other waits (bench-sharing's 1 GiB jobs created together once started 3,
// 15, 25 and 36 s after their creation, each probing the path alone in turn).
func TestProberWhoseDataRanOutReleasesTheOthers(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	a := createJob(t, ns, "a-prober", jobSpec(src, dst))
	b := createJob(t, ns, "b-waiter", jobSpec(src, dst))
	c := createJob(t, ns, "c-waiter", jobSpec(src, dst))
	for _, w := range []*dtnflowv1alpha1.TransferJob{b, c} {
		eventually(t, func(g Gomega) {
			g.Expect(reason(getJob(g, w), dtnflowv1alpha1.ConditionProbing)).To(Equal(controllers.ReasonWaitingForPathProbe))
			g.Expect(listAgents(g, w).all).To(BeEmpty())
		})
	}
	// a: two samples on its data, then its data is gone
	small := &contract.Dataset{Files: 1, Bytes: 1 << 30, Buckets: []contract.SizeBucket{{Log2: 30, Files: 1, Bytes: 1 << 30}}}
	samples := probeSamples(clk.Now().Add(-time.Minute))[:2]
	eventually(t, func(g Gomega) {
		runAll(g, a)
		report(g, a, contract.Report{Generation: directive(g, a).Generation, Phase: contract.PhaseTransferring, Probe: contract.PhaseProbing, Time: clk.Now(),
			Dataset: small, Samples: samples, BytesTotal: small.Bytes, FilesTotal: 1, BytesDone: 1 << 29})
		g.Expect(getJob(g, a).Status.Samples).To(HaveLen(2))
	})
	eventually(t, func(g Gomega) {
		if getJob(g, a).Status.State != dtnflowv1alpha1.StateComplete {
			report(g, a, contract.Report{Generation: directive(g, a).Generation, Phase: contract.PhaseComplete, Probe: contract.PhaseProbed, Time: clk.Now(),
				Dataset: small, Samples: samples, BytesTotal: small.Bytes, FilesTotal: 1, BytesDone: small.Bytes, FilesDone: 1})
		}
		g.Expect(getJob(g, a).Status.State).To(Equal(dtnflowv1alpha1.StateComplete))
	})
	var pp dtnflowv1alpha1.PathProfile
	eventually(t, func(g Gomega) {
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Name: controllers.PathProfileName(src.name, dst.name)}, &pp)).To(Succeed())
		g.Expect(pp.Status.Samples).To(HaveLen(2), "the prober's samples teach the profile")
	})
	bPlan := startTransfer(t, b)
	cPlan := startTransfer(t, c)
	for _, w := range []*dtnflowv1alpha1.TransferJob{b, c} {
		eventually(t, func(g Gomega) {
			j := getJob(g, w)
			g.Expect(j.Status.Samples).To(BeEmpty(), "job %s probed the path again", w.Name)
			g.Expect(reason(j, dtnflowv1alpha1.ConditionProbing)).To(Equal(controllers.ReasonProbeSkipped), "job %s", w.Name)
			g.Expect(j.Status.Sharing).NotTo(BeNil())
			g.Expect(j.Status.Sharing.JobsOnPath).To(Equal(int32(2)), "job %s", w.Name)
		})
	}
	if bPlan.StreamsPerStripe != cPlan.StreamsPerStripe || bPlan.BufferBytes != cPlan.BufferBytes {
		t.Errorf("plans from one profile differ: %+v and %+v", bPlan, cPlan)
	}
}

// TestNodesDividedByPlannedRate: two paths leave through one source node with a
// 1.2 Gbit/s NIC and a 1.5-core budget. The first job plans the path's 990 Mbit/s
// alone; the second, on the other path, gets what the first leaves of the node — its
// NIC and CPU — not a share by stripe count, and the node's planned load stays within
// its budgets.
func TestNodesDividedByPlannedRate(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src := newSite(t, "src", siteOptions{nodes: 1, budget: "1500m"})
	dst1, dst2 := newSite(t, "dsta", siteOptions{nodes: 1}), newSite(t, "dstb", siteOptions{nodes: 1})
	updateEndpoint(t, src.name, func(ep *dtnflowv1alpha1.TransferEndpoint) { ep.Spec.NICBitsPerSecond = 1_200_000_000 })
	ns := createNamespace(t, nil)
	warmProfile(t, clk, src, dst1, nil)
	warmProfile(t, clk, src, dst2, nil)

	first := createJob(t, ns, "first", jobSpec(src, dst1))
	p1 := startTransfer(t, first)
	second := createJob(t, ns, "second", jobSpec(src, dst2))
	p2 := startTransfer(t, second)
	t.Logf("first: %d stripes, %d bit/s, %d m per sender, bound by %s; second: %d stripes, %d bit/s, %d m, bound by %s",
		planning.Stripes(*p1), p1.PredictedBitsPerSecond, p1.SourceCPUMillicores, p1.BindingResource,
		planning.Stripes(*p2), p2.PredictedBitsPerSecond, p2.SourceCPUMillicores, p2.BindingResource)
	if p1.BindingResource != dtnflowv1alpha1.BindingPath {
		t.Errorf("the first job is bound by %s, want the path", p1.BindingResource)
	}
	if p2.BindingResource != dtnflowv1alpha1.BindingNIC && p2.BindingResource != dtnflowv1alpha1.BindingCPU {
		t.Errorf("the second job is bound by %s, want what the first left of the node (NIC or CPU)", p2.BindingResource)
	}
	if sum := p1.PredictedBitsPerSecond + p2.PredictedBitsPerSecond; sum > 1_200_000_000 {
		t.Errorf("the node's planned rate %d exceeds its NIC's 1.2 Gbit/s", sum)
	}
	eventually(t, func(g Gomega) {
		var pods corev1.PodList
		g.Expect(env.Client.List(context.Background(), &pods)).To(Succeed())
		cpu := int64(0)
		for _, p := range pods.Items {
			if pinnedTo(p) == src.nodes[0] {
				if r := p.Labels[contract.LabelRole]; r == string(contract.RoleSender) && p.DeletionTimestamp == nil {
					cpu += p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
				}
			}
		}
		g.Expect(cpu).To(BeNumerically(">", 0))
		g.Expect(cpu).To(BeNumerically("<=", 1500), "the senders on the node request more than its budget")
	})
}

// pinnedTo is the node a pod's required node affinity names (metadata.name In [node]).
func pinnedTo(p corev1.Pod) string {
	if p.Spec.Affinity == nil || p.Spec.Affinity.NodeAffinity == nil || p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
		return ""
	}
	for _, term := range p.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			if f.Key == "metadata.name" && len(f.Values) == 1 {
				return f.Values[0]
			}
		}
	}
	return ""
}

// TestPathLearnsItsAggregate: two jobs on a path measured at 960 Mbit/s report 500 and
// 600 Mbit/s in one interval; the PathProfile records 1.1 Gbit/s reached by two jobs as
// the highest aggregate, and the shares divide that from the next interval on.
func TestPathLearnsItsAggregate(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	pp := warmProfile(t, clk, src, dst, nil)
	one := createJob(t, ns, "one", jobSpec(src, dst))
	startTransfer(t, one)
	two := createJob(t, ns, "two", jobSpec(src, dst))
	startTransfer(t, two)
	eventually(t, func(g Gomega) {
		g.Expect(planOf(g, getJob(g, one)).ShareBitsPerSecond).To(BeNumerically("~", pp.Status.Capacity.PlateauBitsPerSecond/2, 1))
	})
	clk.Step(reportInterval)
	// reports later than startTransfer's first one, which carries the wall clock's time
	at := time.Now().Add(time.Hour).Truncate(time.Second)
	for _, r := range []struct {
		job *dtnflowv1alpha1.TransferJob
		bps int64
	}{{two, 500_000_000}, {one, 600_000_000}} {
		eventually(t, func(g Gomega) {
			if p := getJob(g, r.job).Status.Progress; p == nil || p.LastUpdateTime == nil || !p.LastUpdateTime.Time.Equal(at) {
				report(g, r.job, contract.Report{Generation: directive(g, r.job).Generation, Phase: contract.PhaseTransferring, Time: at,
					BytesDone: 1 << 30, BytesTotal: dataset.Bytes, FilesTotal: dataset.Files, BitsPerSecond: r.bps})
			}
			g.Expect(progressOf(g, getJob(g, r.job)).CurrentBitsPerSecond).To(Equal(r.bps))
		})
	}
	eventually(t, func(g Gomega) {
		var got dtnflowv1alpha1.PathProfile
		g.Expect(env.Client.Get(context.Background(), types.NamespacedName{Name: pp.Name}, &got)).To(Succeed())
		g.Expect(got.Status.Capacity.HighestAggregateBitsPerSecond).To(Equal(int64(1_100_000_000)))
		g.Expect(got.Status.Capacity.HighestAggregateJobs).To(Equal(int32(2)))
		g.Expect(got.Status.Capacity.PlateauBitsPerSecond).To(Equal(pp.Status.Capacity.PlateauBitsPerSecond))
		for _, j := range []*dtnflowv1alpha1.TransferJob{one, two} {
			s := getJob(g, j).Status
			g.Expect(s.Sharing.PathCapacityBitsPerSecond).To(Equal(int64(1_100_000_000)))
			g.Expect(planOf(g, getJob(g, j)).ShareBitsPerSecond).To(BeNumerically("~", 550_000_000, 1))
			g.Expect(s.Replans[len(s.Replans)-1].Reason).To(Equal(controllers.ReasonShareChanged))
		}
	})
}

// TestStrictFairness: a job in Strict fairness runs as one TCP stream and says so.
func TestStrictFairness(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	warmProfile(t, clk, src, dst, nil)
	spec := jobSpec(src, dst)
	spec.Tuning.Fairness = dtnflowv1alpha1.FairnessStrict
	job := createJob(t, ns, "polite", spec)
	plan := startTransfer(t, job)
	if planning.Stripes(*plan) != 1 || plan.StreamsPerStripe != 1 {
		t.Fatalf("Strict job planned %d stripes × %d streams, want one stream", planning.Stripes(*plan), plan.StreamsPerStripe)
	}
	eventually(t, func(g Gomega) {
		g.Expect(getJob(g, job).Status.Sharing.Fairness).To(Equal(dtnflowv1alpha1.FairnessStrict))
		g.Expect(directive(g, job).StreamsPerStripe).To(Equal(int32(1)))
	})
}

// TestJobsWritingTheSameFilesTakeTurns: a job that would write where a running job
// writes — its tree inside the other's — waits with reason FilesInUse, naming that job
// and the tree, and holds no pods, while a job writing beside them runs at once; when
// the first completes, the waiting one runs. No limit is set anywhere.
func TestJobsWritingTheSameFilesTakeTurns(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	into := func(paths ...dtnflowv1alpha1.RelativePath) dtnflowv1alpha1.TransferJobSpec {
		spec := fixedSpec(src, dst)
		spec.Source.Paths, spec.Destination.Path = paths, "archive"
		spec.Tuning.Fixed.Nodes, spec.Tuning.Fixed.StripesPerNode = 1, 1 // room for two jobs' stripes
		return spec
	}
	first := createJob(t, ns, "a-first", into("runs/0427"))
	transferring(t, clk, first)
	inside := createJob(t, ns, "b-inside", into("runs/0427/raw"))
	beside := createJob(t, ns, "c-beside", into("runs/0428"))
	transferring(t, clk, beside)
	eventually(t, func(g Gomega) {
		queued(g, inside, 1, controllers.ReasonFilesInUse)
		g.Expect(getJob(g, inside).Status.Queue.Message).To(Equal(
			"waits for the files of TransferJob " + ns + "/a-first: it writes archive/runs/0427 at endpoint " + dst.name +
				", where this job writes archive/runs/0427/raw; position 1, higher priority first, then first come first served"))
	})
	consistently(t, func(g Gomega) { queued(g, inside, 1, controllers.ReasonFilesInUse) })

	completeJob(t, clk, first)
	transferring(t, clk, inside)
	g := NewWithT(t)
	g.Expect(getJob(g, beside).Status.State).To(Equal(dtnflowv1alpha1.StateTransferring))
}
