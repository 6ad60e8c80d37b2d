package metrics

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
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
			job(dtnflowv1alpha1.StatePartiallyComplete, dtnflowv1alpha1.ConditionPartiallyComplete, dtnflowv1alpha1.ConditionStalled),
			job(""),
		}, nil
	})
	want := map[string]map[string]float64{
		"dtnflow_transferjob_status_condition": {"condition=Complete": 0, "condition=PartiallyComplete": 1, "condition=Failed": 1, "condition=Planned": 2, "condition=Probing": 0, "condition=Suspended": 0, "condition=Transferring": 2,
			"condition=Ready": 0, "condition=Reconciling": 0, "condition=Stalled": 2},
		"dtnflow_transferjob_status_state": {"state=Complete": 0, "state=PartiallyComplete": 1, "state=Failed": 1, "state=Pending": 1, "state=Probing": 0, "state=Suspended": 0, "state=Transferring": 2},
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

	JobBytes.WithLabelValues("ns", "a").Add(1 << 30)
	JobPredictedRate.WithLabelValues("ns", "a").Set(117_625_000)
	if got := gather(t)["dtnflow_transferjob_verified_bytes_total"]["name=a,namespace=ns"]; got != 1<<30 {
		t.Errorf("bytes counter %v", got)
	}
	FinishJob("ns", "a")
	if got := gather(t); len(got["dtnflow_transferjob_predicted_bytes_per_second"]) != 0 || len(got["dtnflow_transferjob_verified_bytes_total"]) != 1 {
		t.Errorf("after FinishJob: predicted %v, bytes %v; want the prediction gone and the bytes kept", got["dtnflow_transferjob_predicted_bytes_per_second"], got["dtnflow_transferjob_verified_bytes_total"])
	}
	ForgetJob("ns", "a")
	if got := gather(t)["dtnflow_transferjob_verified_bytes_total"]; len(got) != 0 {
		t.Errorf("bytes series left after ForgetJob: %v", got)
	}
}

// TestPrometheusConventions lints every metric of the manager with promlint (base units,
// counters ending in _total, help text, no reserved suffixes) and checks that no metric
// name holds the name of one of its labels after "by" (dtnflow_x_by_state).
func TestPrometheusConventions(t *testing.T) {
	Register(func(context.Context) ([]dtnflowv1alpha1.TransferJob, error) { return nil, nil })
	// every vector needs a series to be gathered and linted
	BytesMoved.WithLabelValues("a", "b").Add(1)
	JobBytes.WithLabelValues("ns", "lint").Add(1)
	JobPredictedRate.WithLabelValues("ns", "lint").Set(1)
	JobDuration.WithLabelValues("Complete").Observe(1)
	Replans.WithLabelValues("PathHasRoom").Inc()
	AgentFailures.WithLabelValues("sender").Inc()
	RunsStarted.WithLabelValues("Schedule").Inc()
	defer ForgetJob("ns", "lint")

	mfs, err := ctrlmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var ours []*dto.MetricFamily
	for _, mf := range mfs {
		if strings.HasPrefix(mf.GetName(), "dtnflow_") {
			ours = append(ours, mf)
		}
	}
	if len(ours) < 11 {
		t.Fatalf("only %d dtnflow metrics gathered", len(ours))
	}
	problems, err := promlint.NewWithMetricFamilies(ours).Lint()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("promlint: %s: %s", p.Metric, p.Text)
	}
	for _, mf := range ours {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if strings.Contains(mf.GetName(), "_by_"+l.GetName()) {
					t.Errorf("%s names its label %s", mf.GetName(), l.GetName())
				}
			}
		}
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
