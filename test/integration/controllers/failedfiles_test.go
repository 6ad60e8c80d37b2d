package controllers

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// TestFailedFilesReadableAfterwards: a job that fails on some of its files keeps them in
// status — the count in progress.filesFailed, the first 20 with their own errors in
// status.failedFiles, whatever their names (a quoted non-UTF-8 name, a path longer than
// the field, cut) — as the API server stores it, after the agents are gone.
func TestFailedFilesReadableAfterwards(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	spec := jobSpec(src, dst)
	spec.Tuning = dtnflowv1alpha1.TransferTuning{Mode: dtnflowv1alpha1.TuningFixed, Fixed: &dtnflowv1alpha1.FixedTuning{Nodes: 1, StripesPerNode: 1, StreamsPerStripe: 4, Concurrency: 2, Pipelining: 8}}
	job := createJob(t, ns, "partly-unreadable", spec)
	startTransfer(t, job)

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
