package controllers

import (
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// maxRatePoints is how many points status.rateHistory keeps (the API's bound).
const maxRatePoints = 128

// recordRate adds a point to status.rateHistory when the pass took in a new agent
// report of a transferring job: the progress's report time moved on from the one
// stored. Reconcile calls it after every pass, before the status write.
func recordRate(prev *dtnflowv1alpha1.TransferProgress, st *dtnflowv1alpha1.TransferJobStatus) {
	cur := st.Progress
	if cur == nil || cur.LastUpdateTime == nil || st.State != dtnflowv1alpha1.StateTransferring {
		return
	}
	if prev != nil && prev.LastUpdateTime != nil && !cur.LastUpdateTime.After(prev.LastUpdateTime.Time) {
		return
	}
	st.RateHistory = appendRatePoint(st.RateHistory, dtnflowv1alpha1.RatePoint{
		Time: *cur.LastUpdateTime, BitsPerSecond: max(cur.CurrentBitsPerSecond, 0), BytesDone: max(cur.BytesDone, 0)})
}

// appendRatePoint appends p; a full list first keeps only its even-numbered points
// (the first included), so the history spans the whole run, from its start, at an even
// and coarser resolution.
func appendRatePoint(list []dtnflowv1alpha1.RatePoint, p dtnflowv1alpha1.RatePoint) []dtnflowv1alpha1.RatePoint {
	if len(list) >= maxRatePoints {
		thin := make([]dtnflowv1alpha1.RatePoint, 0, maxRatePoints)
		for i := 0; i < len(list); i += 2 {
			thin = append(thin, list[i])
		}
		list = thin
	}
	return append(list, p)
}
