package controllers

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
)

// kstatusOf is what kstatus (Flux's health checks) makes of a job as stored.
func kstatusOf(g Gomega, job *dtnflowv1alpha1.TransferJob) status.Status {
	raw, err := runtime.DefaultUnstructuredConverter.ToUnstructured(getJob(g, job))
	g.Expect(err).NotTo(HaveOccurred())
	res, err := status.Compute(&unstructured.Unstructured{Object: raw})
	g.Expect(err).NotTo(HaveOccurred())
	return res.Status
}

func conditionStatus(job *dtnflowv1alpha1.TransferJob, typ string) metav1.ConditionStatus {
	if c := condition(job, typ); c != nil {
		return c.Status
	}
	return ""
}

// TestKstatusThroughALife reads jobs the controller drives through kstatus at each
// stage: in progress while it works, Failed (Stalled) when its endpoint is missing or
// it fails, Current when suspended or complete.
func TestKstatusThroughALife(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)

	// An endpoint that does not exist: stalled, with the reason and the field.
	spec := jobSpec(src, site{name: "nowhere"})
	lost := createJob(t, ns, "lost", spec)
	eventually(t, func(g Gomega) {
		j := getJob(g, lost)
		stalled := condition(j, dtnflowv1alpha1.ConditionStalled)
		g.Expect(stalled).NotTo(BeNil())
		g.Expect(stalled.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(stalled.Reason).To(Equal(controllers.ReasonEndpointNotFound))
		g.Expect(stalled.Message).To(ContainSubstring("spec.destination.endpoint"))
		g.Expect(conditionStatus(j, dtnflowv1alpha1.ConditionReady)).To(Equal(metav1.ConditionFalse))
		g.Expect(conditionStatus(j, dtnflowv1alpha1.ConditionReconciling)).To(Equal(metav1.ConditionFalse))
		g.Expect(kstatusOf(g, lost)).To(Equal(status.FailedStatus))
	})

	// A job at work: in progress.
	job := createJob(t, ns, "work", jobSpec(src, dst))
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateProbing))
		g.Expect(conditionStatus(j, dtnflowv1alpha1.ConditionReconciling)).To(Equal(metav1.ConditionTrue))
		g.Expect(reason(j, dtnflowv1alpha1.ConditionReconciling)).To(Equal(controllers.ReasonProbing))
		g.Expect(conditionStatus(j, dtnflowv1alpha1.ConditionStalled)).To(Equal(metav1.ConditionFalse))
		g.Expect(kstatusOf(g, job)).To(Equal(status.InProgressStatus))
	})

	// Suspended on purpose: current, with no Ready to wait for.
	updateJob(t, job, func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Suspend = true })
	clk.Step(controllers.PauseReports * reportInterval)
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateSuspended))
		g.Expect(reason(j, dtnflowv1alpha1.ConditionSuspended)).To(Equal(controllers.ReasonSuspended))
		g.Expect(condition(j, dtnflowv1alpha1.ConditionReady)).To(BeNil())
		g.Expect(kstatusOf(g, job)).To(Equal(status.CurrentStatus))
	})

	// Resumed, then failed by its coordinator: stalled.
	updateJob(t, job, func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Suspend = false })
	eventually(t, func(g Gomega) {
		g.Expect(kstatusOf(g, job)).To(Equal(status.InProgressStatus))
		g.Expect(runAll(g, job).coordinator).NotTo(BeNil())
	})
	eventually(t, func(g Gomega) {
		if getJob(g, job).Status.State != dtnflowv1alpha1.StateFailed {
			report(g, job, contract.Report{Phase: contract.PhaseFailed, Time: clk.Now(), Error: "reading runs/0427/a.dat: input/output error"})
		}
		j := getJob(g, job)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateFailed))
		g.Expect(conditionStatus(j, dtnflowv1alpha1.ConditionStalled)).To(Equal(metav1.ConditionTrue))
		g.Expect(condition(j, dtnflowv1alpha1.ConditionStalled).Message).To(ContainSubstring("input/output error"))
		g.Expect(kstatusOf(g, job)).To(Equal(status.FailedStatus))
	})
}

// TestTTLWithGitOps plays a GitOps tool that creates again a completed job its TTL
// deleted: the copy is Complete at once from the PathProfile's record, starts no agent
// and is not deleted again; with a new dtnflow.io/rerun annotation it runs.
func TestTTLWithGitOps(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	spec := jobSpec(src, dst)
	spec.Tuning = dtnflowv1alpha1.TransferTuning{Mode: dtnflowv1alpha1.TuningFixed, Fixed: &dtnflowv1alpha1.FixedTuning{Nodes: 1, StripesPerNode: 1, StreamsPerStripe: 4, Concurrency: 2, Pipelining: 8}}
	spec.TTLSecondsAfterFinished = ptr.To[int32](60)
	job := createJob(t, ns, "nightly", spec)
	startTransfer(t, job)
	eventually(t, func(g Gomega) {
		if getJob(g, job).Status.State != dtnflowv1alpha1.StateComplete {
			report(g, job, contract.Report{Generation: directive(g, job).Generation, Phase: contract.PhaseComplete, Time: clk.Now(),
				BytesDone: 40 << 30, BytesTotal: 40 << 30, FilesDone: 40, FilesTotal: 40})
		}
		j := getJob(g, job)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateComplete))
		g.Expect(conditionStatus(j, dtnflowv1alpha1.ConditionReady)).To(Equal(metav1.ConditionTrue))
		g.Expect(kstatusOf(g, job)).To(Equal(status.CurrentStatus))
	})
	first := getJob(NewWithT(t), job)

	// The TTL passes: the job goes, and its path's profile keeps its record.
	clk.Step(61 * time.Second)
	profileKey := types.NamespacedName{Name: src.name + "." + dst.name}
	eventually(t, func(g Gomega) {
		poke(g, job) // the manager waits on the real clock for the TTL; wake it on the fake one
		g.Expect(gone(g, getJobOrNil(job))).To(BeTrue())
		var profile dtnflowv1alpha1.PathProfile
		g.Expect(env.Client.Get(context.Background(), profileKey, &profile)).To(Succeed())
		g.Expect(profile.Status.ExpiredJobs).To(HaveLen(1))
		rec := profile.Status.ExpiredJobs[0]
		g.Expect(rec.Namespace).To(Equal(ns))
		g.Expect(rec.Name).To(Equal("nightly"))
		g.Expect(rec.FilesDone).To(Equal(int64(40)))
		g.Expect(rec.BytesDone).To(Equal(int64(40 << 30)))
		g.Expect(rec.CompletionTime.Time).To(BeTemporally("==", first.Status.CompletionTime.Time))
	})

	// The GitOps tool creates it again, unchanged: Complete from the record, no agent.
	again := createJob(t, ns, "nightly", spec)
	eventually(t, func(g Gomega) {
		j := getJob(g, again)
		g.Expect(j.UID).NotTo(Equal(first.UID))
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateComplete))
		g.Expect(reason(j, dtnflowv1alpha1.ConditionComplete)).To(Equal(controllers.ReasonCompletedBefore))
		g.Expect(condition(j, dtnflowv1alpha1.ConditionComplete).Message).To(ContainSubstring(dtnflowv1alpha1.AnnotationRerun))
		g.Expect(progressOf(g, j).FilesDone).To(Equal(int64(40)))
		g.Expect(kstatusOf(g, again)).To(Equal(status.CurrentStatus))
	})
	// Its TTL passes too, and it stays: deleting it would only bring it back.
	clk.Step(10 * time.Minute)
	eventually(t, func(g Gomega) { poke(g, again) })
	consistently(t, func(g Gomega) {
		g.Expect(gone(g, getJobOrNil(job))).To(BeFalse())
		g.Expect(listAgents(g, job).all).To(BeEmpty())
	})

	// Run again on purpose: the rerun annotation makes it another transfer.
	g := NewWithT(t)
	g.Expect(env.Client.Delete(context.Background(), getJob(g, again))).To(Succeed())
	eventually(t, func(g Gomega) { g.Expect(gone(g, getJobOrNil(job))).To(BeTrue()) })
	rerun := &dtnflowv1alpha1.TransferJob{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "nightly",
		Annotations: map[string]string{dtnflowv1alpha1.AnnotationRerun: "2026-03-02"}}, Spec: spec}
	g.Expect(env.Client.Create(context.Background(), rerun)).To(Succeed())
	eventually(t, func(g Gomega) {
		j := getJob(g, rerun)
		g.Expect(reason(j, dtnflowv1alpha1.ConditionComplete)).To(BeEmpty())
		g.Expect(listAgents(g, rerun).coordinator).NotTo(BeNil())
		g.Expect(kstatusOf(g, rerun)).To(Equal(status.InProgressStatus))
	})
}

// poke changes the job's spec.backoffLimit (a spec change: the manager's watch ignores
// metadata and status), which wakes its reconciler for a pass that waits on the real
// clock for something the fake clock already passed. A job already gone needs no waking.
func poke(g Gomega, obj client.Object) {
	patch := []byte(fmt.Sprintf(`{"spec":{"backoffLimit":%d}}`, 6+uniq.Add(1)%100))
	err := env.Client.Patch(context.Background(), obj, client.RawPatch(types.MergePatchType, patch))
	if !apierrors.IsNotFound(err) {
		g.Expect(err).NotTo(HaveOccurred())
	}
}
