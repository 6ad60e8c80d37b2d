package metrics

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

func job(state dtnflowv1alpha1.TransferState, trueConditions ...string) dtnflowv1alpha1.TransferJob {
	j := dtnflowv1alpha1.TransferJob{Status: dtnflowv1alpha1.TransferJobStatus{State: state}}
	for _, c := range trueConditions {
		j.Status.Conditions = append(j.Status.Conditions, metav1.Condition{Type: c, Status: metav1.ConditionTrue})
	}
	return j
}

// TestRegisterOnceAndCountJobs checks that registering again (a second manager in one
// process) neither panics nor duplicates, that the latest lister is used, and that the
// jobs gauges count by condition and state, every known label present.
func TestRegisterOnceAndCountJobs(t *testing.T) {
	Register(func(context.Context) ([]dtnflowv1alpha1.TransferJob, error) { return nil, nil })
	Register(func(context.Context) ([]dtnflowv1alpha1.TransferJob, error) {
		return []dtnflowv1alpha1.TransferJob{
			job(dtnflowv1alpha1.StateTransferring, dtnflowv1alpha1.ConditionPlanned, dtnflowv1alpha1.ConditionTransferring),
			job(dtnflowv1alpha1.StateTransferring, dtnflowv1alpha1.ConditionPlanned, dtnflowv1alpha1.ConditionTransferring),
			job(dtnflowv1alpha1.StateFailed, dtnflowv1alpha1.ConditionFailed, dtnflowv1alpha1.ConditionStalled),
			job(""),
		}, nil
	})
	want := map[string]map[string]float64{
		"dtnflow_transferjobs": {"condition=Complete": 0, "condition=Failed": 1, "condition=Planned": 2, "condition=Probing": 0, "condition=Suspended": 0, "condition=Transferring": 2,
			"condition=Ready": 0, "condition=Reconciling": 0, "condition=Stalled": 1},
		"dtnflow_transferjobs_by_state": {"state=Complete": 0, "state=Failed": 1, "state=Pending": 1, "state=Probing": 0, "state=Suspended": 0, "state=Transferring": 2},
	}
	got := gather(t)
	for name, values := range want {
		if len(got[name]) != len(values) {
			t.Errorf("%s: %v, want %v", name, got[name], values)
		}
		for label, v := range values {
			if got[name][label] != v {
				t.Errorf("%s{%s} = %v, want %v", name, label, got[name][label], v)
			}
		}
	}

	JobRate.WithLabelValues("ns", "a").Set(941e6)
	if got := gather(t)["dtnflow_transferjob_bits_per_second"]["name=a,namespace=ns"]; got != 941e6 {
		t.Errorf("rate gauge %v", got)
	}
	ForgetJob("ns", "a")
	if got := gather(t)["dtnflow_transferjob_bits_per_second"]; len(got) != 0 {
		t.Errorf("rate series left after ForgetJob: %v", got)
	}
}

// gather reads every gauge and counter of the registry as name → "label=value,…" → value.
func gather(t *testing.T) map[string]map[string]float64 {
	t.Helper()
	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]float64{}
	for _, mf := range mfs {
		m := map[string]float64{}
		for _, metric := range mf.GetMetric() {
			var labels []string
			for _, l := range metric.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			v := metric.GetGauge().GetValue() + metric.GetCounter().GetValue()
			m[strings.Join(labels, ",")] = v
		}
		out[mf.GetName()] = m
	}
	return out
}
