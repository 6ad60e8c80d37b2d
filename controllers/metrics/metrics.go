// Package metrics holds every Prometheus metric of the dtnflow manager, registered once
// with controller-runtime's registry (served on the manager's metrics address next to
// the controller-runtime and client-go metrics). They follow Prometheus's conventions,
// which a test checks with promlint: base units (bytes, seconds), counters for what
// accumulates (rates are PromQL's rate()), no label name inside a metric name. Label sets
// are bounded: endpoint names, condition types, states, roles, results, triggers and
// re-plan reasons are few; the per-job series carry namespace and name and are deleted
// when the job goes (the predicted rate already when it finishes).
package metrics

import (
	"context"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrlmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

var (
	// BytesMoved counts bytes written and verified at the destination, by path.
	BytesMoved = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dtnflow_bytes_moved_total",
		Help: "Bytes written and verified at the destination, by source and destination endpoint.",
	}, []string{"source", "destination"})

	// JobBytes counts each job's bytes verified at the destination: rate() of it is the
	// job's rate.
	JobBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dtnflow_transferjob_verified_bytes_total",
		Help: "Bytes a TransferJob has written and verified at the destination (all its runs); rate() is its rate.",
	}, []string{"namespace", "name"})

	// JobPredictedRate is each running job's predicted aggregate rate.
	JobPredictedRate = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "dtnflow_transferjob_predicted_bytes_per_second",
		Help: "Aggregate rate the current plan of a running TransferJob predicts, in bytes per second.",
	}, []string{"namespace", "name"})

	// JobDuration is how long jobs (and runs of recurring jobs) took, by result.
	JobDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "dtnflow_transferjob_duration_seconds",
		Help:    "Time from a TransferJob's start (or a recurring job's run's) to its completion or failure, by result (Complete, PartiallyComplete or Failed).",
		Buckets: prometheus.ExponentialBuckets(10, 2, 14), // 10 s to about 23 h
	}, []string{"result"})

	// Replans counts changes of plan, by reason.
	Replans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dtnflow_replans_total",
		Help: "Changes of plan of running TransferJobs, by reason.",
	}, []string{"reason"})

	// PredictionRatio is the achieved rate over the predicted one, per report.
	PredictionRatio = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "dtnflow_prediction_achieved_ratio",
		Help:    "Achieved aggregate rate divided by the plan's predicted rate, observed at each agent report of a running job (1 is a perfect prediction).",
		Buckets: []float64{0.25, 0.5, 0.7, 0.8, 0.9, 0.95, 1.05, 1.1, 1.2, 1.5, 2},
	})

	// AgentFailures counts agent pods that failed or vanished, by role.
	AgentFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dtnflow_agent_failures_total",
		Help: "Agent pods that failed or vanished, by role.",
	}, []string{"role"})

	// RunsStarted counts the runs of recurring jobs after their first, by trigger.
	RunsStarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "dtnflow_transferjob_runs_total",
		Help: "Runs of recurring TransferJobs (spec.trigger) started after the first, by trigger (Schedule or Manual).",
	}, []string{"trigger"})

	// MissedRuns counts scheduled times of recurring jobs that started no run.
	MissedRuns = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "dtnflow_transferjob_missed_runs_total",
		Help: "Scheduled runs of recurring TransferJobs skipped because the previous run was still going (runs never overlap) or the controller was away.",
	})

	// named as kube-state-metrics names what it reads from status (kube_pod_status_phase)
	jobsByCondition = prometheus.NewDesc("dtnflow_transferjob_status_condition",
		"TransferJobs whose status condition of the given type is True.", []string{"condition"}, nil)
	jobsByState = prometheus.NewDesc("dtnflow_transferjob_status_state",
		"TransferJobs by status.state.", []string{"state"}, nil)
)

// JobLister lists the TransferJobs the gauges of jobs by condition count (the manager's
// cache, so a scrape costs no API call).
type JobLister func(ctx context.Context) ([]dtnflowv1alpha1.TransferJob, error)

var conditionTypes = []string{
	dtnflowv1alpha1.ConditionProbing, dtnflowv1alpha1.ConditionPlanned, dtnflowv1alpha1.ConditionTransferring,
	dtnflowv1alpha1.ConditionComplete, dtnflowv1alpha1.ConditionPartiallyComplete, dtnflowv1alpha1.ConditionFailed, dtnflowv1alpha1.ConditionSuspended,
	dtnflowv1alpha1.ConditionReady, dtnflowv1alpha1.ConditionReconciling, dtnflowv1alpha1.ConditionStalled,
}

var states = []dtnflowv1alpha1.TransferState{
	dtnflowv1alpha1.StatePending, dtnflowv1alpha1.StateProbing, dtnflowv1alpha1.StateTransferring,
	dtnflowv1alpha1.StateSuspended, dtnflowv1alpha1.StateComplete, dtnflowv1alpha1.StatePartiallyComplete, dtnflowv1alpha1.StateFailed,
}

// jobCollector counts jobs by condition and by state at scrape time, with the lister
// given to the latest Register.
type jobCollector struct{ list *atomic.Pointer[JobLister] }

func (c jobCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- jobsByCondition
	ch <- jobsByState
}

func (c jobCollector) Collect(ch chan<- prometheus.Metric) {
	list := c.list.Load()
	if list == nil {
		return
	}
	jobs, err := (*list)(context.Background())
	if err != nil {
		ch <- prometheus.NewInvalidMetric(jobsByCondition, err)
		return
	}
	byCondition := map[string]int{}
	byState := map[dtnflowv1alpha1.TransferState]int{}
	for i := range jobs {
		for _, t := range conditionTypes {
			if meta.IsStatusConditionTrue(jobs[i].Status.Conditions, t) {
				byCondition[t]++
			}
		}
		state := jobs[i].Status.State
		if state == "" {
			state = dtnflowv1alpha1.StatePending
		}
		byState[state]++
	}
	for _, t := range conditionTypes {
		ch <- prometheus.MustNewConstMetric(jobsByCondition, prometheus.GaugeValue, float64(byCondition[t]), t)
	}
	for _, s := range states {
		ch <- prometheus.MustNewConstMetric(jobsByState, prometheus.GaugeValue, float64(byState[s]), string(s))
	}
}

var (
	registerOnce sync.Once
	lister       atomic.Pointer[JobLister]
)

// Register registers every metric with controller-runtime's registry, once however
// often it is called; the jobs gauges then count through list (a test that restarts
// its manager in one process registers again with the new manager's cache).
func Register(list JobLister) {
	lister.Store(&list)
	registerOnce.Do(func() {
		ctrlmetrics.Registry.MustRegister(BytesMoved, JobBytes, JobPredictedRate, JobDuration, Replans, PredictionRatio, AgentFailures, RunsStarted, MissedRuns,
			jobCollector{list: &lister})
	})
}

// FinishJob deletes the series of a job that only mean something while it runs.
func FinishJob(namespace, name string) {
	JobPredictedRate.DeleteLabelValues(namespace, name)
}

// ForgetJob deletes every per-job series of a job that is gone.
func ForgetJob(namespace, name string) {
	FinishJob(namespace, name)
	JobBytes.DeleteLabelValues(namespace, name)
}
