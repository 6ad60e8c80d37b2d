package controllers

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// TestRateHistory reports three rates and finds them in status.rateHistory, in order,
// each once however many passes the manager makes.
func TestRateHistory(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	spec := jobSpec(src, dst)
	spec.Tuning = dtnflowv1alpha1.TransferTuning{Mode: dtnflowv1alpha1.TuningFixed, Fixed: &dtnflowv1alpha1.FixedTuning{Nodes: 1, StripesPerNode: 1, StreamsPerStripe: 4, Concurrency: 2, Pipelining: 8}}
	job := createJob(t, ns, "history", spec)
	startTransfer(t, job)
	// startTransfer's starting report carries the real time, and a point is added only
	// for a report newer than the stored one: the reports below come later.
	clk.SetTime(time.Now().Add(time.Hour))
	base := len(getJob(NewWithT(t), job).Status.RateHistory)
	rates := []int64{400_000_000, 900_000_000, 700_000_000}
	for i, bps := range rates {
		clk.Step(reportInterval)
		eventually(t, func(g Gomega) {
			report(g, job, contract.Report{Generation: directive(g, job).Generation, Phase: contract.PhaseTransferring, Time: clk.Now(),
				BytesDone: int64(i+1) << 30, BytesTotal: 40 << 30, FilesDone: int64(i + 1), FilesTotal: 40, BitsPerSecond: bps})
			g.Expect(getJob(g, job).Status.RateHistory).To(HaveLen(base + i + 1))
		})
	}
	consistently(t, func(g Gomega) {
		h := getJob(g, job).Status.RateHistory
		g.Expect(h).To(HaveLen(base + len(rates)))
		h = h[base:]
		for i, p := range h {
			g.Expect(p.BitsPerSecond).To(Equal(rates[i]))
			g.Expect(p.BytesDone).To(Equal(int64(i+1) << 30))
			if i > 0 {
				g.Expect(p.Time.After(h[i-1].Time.Time)).To(BeTrue())
			}
		}
	})
}
