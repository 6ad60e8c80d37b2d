package main

import (
	"testing"
	"time"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// TestReportedRates: the window runs from the read where the last job started together
// first reported a rate to the first completion; a job's rate is the mean of its reads
// inside it, and Jain's index is over rate ÷ weight.
func TestReportedRates(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tr, done := dtnflowv1alpha1.StateTransferring, dtnflowv1alpha1.StateComplete
	samples := [][]sample{
		// weight 2: starts at 1 s, 600 then 200 Mbit/s (alone, then paced), done at 5 s
		{{at: at(0), state: tr}, {at: at(1), state: tr, current: 600e6}, {at: at(2), state: tr, current: 200e6},
			{at: at(3), state: tr, current: 200e6}, {at: at(4), state: tr, current: 200e6}, {at: at(5), state: done}},
		// weight 1: starts at 2 s at 100 Mbit/s, runs on past the window
		{{at: at(0), state: tr}, {at: at(1), state: tr}, {at: at(2), state: tr, current: 100e6}, {at: at(3), state: tr, current: 100e6},
			{at: at(4), state: tr, current: 100e6}, {at: at(5), state: tr, current: 300e6}, {at: at(6), state: tr, current: 300e6}},
	}
	var res Result
	res.reportedRates(samples, []int{2, 1}, time.Time{})
	if want := []int64{200e6, 100e6}; len(res.ReportedBitsPerSecond) != 2 || res.ReportedBitsPerSecond[0] != want[0] || res.ReportedBitsPerSecond[1] != want[1] {
		t.Errorf("rates %v, want %v (the reads from 2 s to before 5 s)", res.ReportedBitsPerSecond, want)
	}
	if res.ReportedAggregateBitsPerSecond != 300e6 {
		t.Errorf("aggregate %d, want 300e6", res.ReportedAggregateBitsPerSecond)
	}
	if res.ReportedJain != 1 {
		t.Errorf("Jain's index %v, want 1 (100 Mbit/s per unit of weight each)", res.ReportedJain)
	}
}

// TestReportedRatesEndWhereTheLateJobArrives: once a late job shares the path, the
// others are paced to less of it, and their sum is not the jobs' aggregate any more:
// the window ends at its creation.
func TestReportedRatesEndWhereTheLateJobArrives(t *testing.T) {
	t0 := time.Unix(1000, 0)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	tr, done := dtnflowv1alpha1.StateTransferring, dtnflowv1alpha1.StateComplete
	// two jobs of weight 1 at 470 Mbit/s each, each 313 from 3 s on (a third arrived)
	job := func() []sample {
		return []sample{{at: at(0), state: tr}, {at: at(1), state: tr, current: 470e6}, {at: at(2), state: tr, current: 470e6},
			{at: at(3), state: tr, current: 313e6}, {at: at(4), state: tr, current: 313e6}, {at: at(5), state: done}}
	}
	samples := [][]sample{job(), job()}
	var whole, cut Result
	whole.reportedRates(samples, []int{1, 1}, time.Time{})
	cut.reportedRates(samples, []int{1, 1}, at(3))
	if cut.ReportedAggregateBitsPerSecond != 940e6 {
		t.Errorf("aggregate until the late job %d, want 940e6 (the reads at 1 and 2 s)", cut.ReportedAggregateBitsPerSecond)
	}
	if want := int64(2 * (470e6 + 470e6 + 313e6 + 313e6) / 4); whole.ReportedAggregateBitsPerSecond != want {
		t.Errorf("aggregate without a late job %d, want %d (every read to the first completion)", whole.ReportedAggregateBitsPerSecond, want)
	}
	if cut.ReportedJain != 1 {
		t.Errorf("Jain's index %v, want 1", cut.ReportedJain)
	}
}
