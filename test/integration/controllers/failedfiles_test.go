package controllers

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
)

// transferringOneStripe starts a manager and a job of one stripe, Fixed, named name
// (change, when not nil, edits its spec first), and returns the clock and the job once
// its agents run.
func transferringOneStripe(t *testing.T, name string, change func(*dtnflowv1alpha1.TransferJobSpec)) (*clocktesting.FakeClock, *dtnflowv1alpha1.TransferJob) {
	t.Helper()
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	spec := jobSpec(src, dst)
	spec.Tuning = dtnflowv1alpha1.TransferTuning{Mode: dtnflowv1alpha1.TuningFixed, Fixed: &dtnflowv1alpha1.FixedTuning{Nodes: 1, StripesPerNode: 1, StreamsPerStripe: 4, Concurrency: 2, Pipelining: 8}}
	if change != nil {
		change(&spec)
	}
	job := createJob(t, ns, name, spec)
	startTransfer(t, job)
	return clk, job
}

// TestFailedFilesReadableAfterwards: a job that fails on some of its files keeps them in
// status — the count in progress.filesFailed, the first 20 with their own errors in
// status.failedFiles, whatever their names (a quoted non-UTF-8 name, a path longer than
// the field, cut) — as the API server stores it, after the agents are gone.
func TestFailedFilesReadableAfterwards(t *testing.T) {
	clk, job := transferringOneStripe(t, "partly-unreadable", nil)

	failed := []contract.FailedFile{
		{Path: `"runs/bad\xfe.dat"`, Error: "open: permission denied"},
		{Path: "runs/" + strings.Repeat("deep/", 400) + "x.dat", Error: "read: input/output error"},
	}
	for i := range 25 {
		failed = append(failed, contract.FailedFile{Path: fmt.Sprintf("runs/%03d.dat", i), Error: "read: input/output error"})
	}
	eventually(t, func(g Gomega) {
		if getJob(g, job).Status.State != dtnflowv1alpha1.StateFailed {
			report(g, job, contract.Report{Generation: directive(g, job).Generation, Phase: contract.PhaseFailed, Time: clk.Now(),
				Error: "open: permission denied (and 26 more errors)", FilesDone: 13, FilesTotal: 40, FilesFailed: 27,
				FailedFiles: failed[:contract.MaxFailedFiles]})
		}
		j := getJob(g, job)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateFailed))
		g.Expect(j.Status.Progress).NotTo(BeNil())
		g.Expect(j.Status.Progress.FilesFailed).To(Equal(int64(27)))
		g.Expect(j.Status.Progress.FilesDone).To(Equal(int64(13)))
		g.Expect(j.Status.FailedFiles).To(HaveLen(contract.MaxFailedFiles))
		g.Expect(j.Status.FailedFiles[0]).To(Equal(dtnflowv1alpha1.FailedFile{Path: `"runs/bad\xfe.dat"`, Error: "open: permission denied"}))
		g.Expect(j.Status.FailedFiles[1].Path).To(HaveLen(1024))
		g.Expect(j.Status.FailedFiles[1].Path).To(HaveSuffix("..."))
		g.Expect(j.Status.FailedFiles[19]).To(Equal(dtnflowv1alpha1.FailedFile{Path: "runs/017.dat", Error: "read: input/output error"}))
	})
}

// TestSkippedSourceFilesEndPartiallyComplete: a job run with spec.sourceErrors Skip
// gives its coordinator the option, and when the coordinator reports files skipped at
// the source the job ends PartiallyComplete — never Complete — with the skipped files
// listed and counted, the kstatus conditions reading it as ended and not Ready, and its
// agents stopped.
func TestSkippedSourceFilesEndPartiallyComplete(t *testing.T) {
	clk, job := transferringOneStripe(t, "skips-unreadable", func(spec *dtnflowv1alpha1.TransferJobSpec) {
		spec.SourceErrors = dtnflowv1alpha1.SourceErrorsSkip
	})
	eventually(t, func(g Gomega) {
		g.Expect(strings.Join(listAgents(g, job).coordinator.Spec.Containers[0].Args, " ")).To(ContainSubstring("--source-errors Skip"))
	})

	skipped := []contract.FailedFile{{Path: "runs/007.dat", Error: "source file changed while it was read: runs/007.dat"},
		{Path: "runs/012.dat", Error: "opening source runs/012.dat: no such file or directory"}}
	eventually(t, func(g Gomega) {
		if getJob(g, job).Status.State != dtnflowv1alpha1.StatePartiallyComplete {
			report(g, job, contract.Report{Generation: directive(g, job).Generation, Phase: contract.PhasePartiallyComplete, Time: clk.Now(),
				BytesDone: 38 << 20, BytesTotal: 40 << 20, FilesDone: 38, FilesTotal: 40, FilesSkipped: 2, SkippedFiles: skipped})
		}
		j := getJob(g, job)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StatePartiallyComplete))
		g.Expect(condition(j, dtnflowv1alpha1.ConditionComplete)).To(BeNil(), "a job that skipped files is never Complete")
		c := condition(j, dtnflowv1alpha1.ConditionPartiallyComplete)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(controllers.ReasonSourceFilesSkipped))
		g.Expect(c.Message).To(ContainSubstring("2 files skipped at the source"))
		g.Expect(c.Message).To(ContainSubstring("runs/007.dat"))
		g.Expect(reason(j, dtnflowv1alpha1.ConditionReady)).To(Equal(controllers.ReasonSourceFilesSkipped))
		g.Expect(condition(j, dtnflowv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(condition(j, dtnflowv1alpha1.ConditionStalled).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(condition(j, dtnflowv1alpha1.ConditionReconciling).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(j.Status.SkippedFiles).To(Equal([]dtnflowv1alpha1.FailedFile{{Path: skipped[0].Path, Error: skipped[0].Error}, {Path: skipped[1].Path, Error: skipped[1].Error}}))
		g.Expect(j.Status.Progress.FilesSkipped).To(Equal(int64(2)))
		g.Expect(j.Status.Progress.FilesDone).To(Equal(int64(38)))
		g.Expect(j.Status.CompletionTime).NotTo(BeNil())
		g.Expect(listAgents(g, job).all).To(BeEmpty())
	})
}

// TestEntriesNotMovedAreInTheCompleteJob: the source entries the coordinator did not
// move because they are not files (a symlinked directory, a FIFO) stay in a Complete
// job's status — counted in progress.entriesNotMoved, listed in status.notMoved, and
// named in the Complete condition's message — so that its user sees what the paths
// held beyond the files moved.
func TestEntriesNotMovedAreInTheCompleteJob(t *testing.T) {
	clk, job := transferringOneStripe(t, "holds-links", nil)

	// a first path long enough that the Complete message passes the 1024 bytes an
	// Event's note may hold: the Event is still written, its note cut
	latest := "runs/" + strings.Repeat("latest-", 140)
	notMoved := []contract.FailedFile{{Path: latest, Error: "symlinked directory not followed"}, {Path: "runs/ctl.fifo", Error: "not a regular file"}}
	eventually(t, func(g Gomega) {
		if getJob(g, job).Status.State != dtnflowv1alpha1.StateComplete {
			report(g, job, contract.Report{Generation: directive(g, job).Generation, Phase: contract.PhaseComplete, Time: clk.Now(),
				BytesDone: 40 << 20, BytesTotal: 40 << 20, FilesDone: 40, FilesTotal: 40, EntriesNotMoved: 2, NotMoved: notMoved})
		}
		j := getJob(g, job)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateComplete))
		c := condition(j, dtnflowv1alpha1.ConditionComplete)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(controllers.ReasonVerified))
		g.Expect(c.Message).To(HavePrefix("40 files, 41943040 bytes at the destination and verified; "))
		g.Expect(c.Message).To(HaveSuffix("; 2 entries at the source are not files and were not moved, the first " + latest + ": symlinked directory not followed; status.notMoved lists them"))
		g.Expect(len(c.Message)).To(BeNumerically(">", 1024))
		g.Expect(j.Status.NotMoved).To(Equal([]dtnflowv1alpha1.FailedFile{{Path: notMoved[0].Path, Error: notMoved[0].Error}, {Path: notMoved[1].Path, Error: notMoved[1].Error}}))
		g.Expect(j.Status.Progress.EntriesNotMoved).To(Equal(int64(2)))
		g.Expect(j.Status.Progress.FilesSkipped).To(BeZero())
		var events eventsv1.EventList
		g.Expect(env.Client.List(context.Background(), &events, client.InNamespace(job.Namespace))).To(Succeed())
		notes := map[string]string{}
		for _, e := range events.Items {
			if e.Regarding.Name == job.Name {
				notes[e.Reason] = e.Note
			}
		}
		g.Expect(notes).To(HaveKey(controllers.ReasonComplete))
		g.Expect(notes[controllers.ReasonComplete]).To(HaveLen(1024))
		g.Expect(notes[controllers.ReasonComplete]).To(HavePrefix(c.Message[:1000]))
	})
}
