package controllers

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

func TestRecordRate(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) *metav1.Time { v := metav1.NewTime(t0.Add(time.Duration(s) * time.Second)); return &v }
	prog := func(s int, bps int64) *dtnflowv1alpha1.TransferProgress {
		return &dtnflowv1alpha1.TransferProgress{LastUpdateTime: at(s), CurrentBitsPerSecond: bps, BytesDone: int64(s) << 20}
	}
	tests := map[string]struct {
		prev  *dtnflowv1alpha1.TransferProgress
		cur   *dtnflowv1alpha1.TransferProgress
		state dtnflowv1alpha1.TransferState
		added bool
	}{
		"first report":         {nil, prog(10, 900e6), dtnflowv1alpha1.StateTransferring, true},
		"a newer report":       {prog(10, 900e6), prog(20, 800e6), dtnflowv1alpha1.StateTransferring, true},
		"the same report":      {prog(10, 900e6), prog(10, 900e6), dtnflowv1alpha1.StateTransferring, false},
		"no report yet":        {nil, &dtnflowv1alpha1.TransferProgress{}, dtnflowv1alpha1.StateTransferring, false},
		"probing":              {nil, prog(10, 900e6), dtnflowv1alpha1.StateProbing, false},
		"the completing pass":  {prog(10, 900e6), prog(20, 0), dtnflowv1alpha1.StateComplete, false},
		"suspended, no report": {prog(10, 900e6), prog(10, 0), dtnflowv1alpha1.StateSuspended, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			st := &dtnflowv1alpha1.TransferJobStatus{State: tc.state, Progress: tc.cur}
			recordRate(tc.prev, st)
			if got := len(st.RateHistory) == 1; got != tc.added {
				t.Fatalf("added = %v (%+v), want %v", got, st.RateHistory, tc.added)
			}
			if tc.added && (st.RateHistory[0].Time != *tc.cur.LastUpdateTime || st.RateHistory[0].BitsPerSecond != tc.cur.CurrentBitsPerSecond || st.RateHistory[0].BytesDone != tc.cur.BytesDone) {
				t.Errorf("point %+v does not hold the report's time, rate and bytes", st.RateHistory[0])
			}
		})
	}
}

// TestRateHistoryThins appends many reports and checks the bound, the order, that the
// newest is always kept and that the whole run stays covered.
func TestRateHistoryThins(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	var list []dtnflowv1alpha1.RatePoint
	for i := range 1000 {
		list = appendRatePoint(list, dtnflowv1alpha1.RatePoint{Time: metav1.NewTime(t0.Add(time.Duration(i) * 10 * time.Second)), BitsPerSecond: int64(i)})
		if len(list) > maxRatePoints {
			t.Fatalf("after %d points the history holds %d", i+1, len(list))
		}
		if list[len(list)-1].BitsPerSecond != int64(i) {
			t.Fatalf("the newest point is not last")
		}
		for j := 1; j < len(list); j++ {
			if !list[j-1].Time.Before(&list[j].Time) {
				t.Fatalf("points out of order at %d", j)
			}
		}
	}
	if first := list[0].BitsPerSecond; first != 0 {
		t.Errorf("the history starts at report %d: the start of the run was lost", first)
	}
	if len(list) < maxRatePoints/2 {
		t.Errorf("only %d points kept", len(list))
	}
}
