package planning

import (
	"slices"
	"time"

	"github.com/dtnflow/dtnflow/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds of a PathProfile's lists (the API's MaxItems).
const (
	maxProfileSamples = 64
	maxProfileJobs    = 16
)

// Learn returns a PathProfile status after a job on the path: the job's stream model,
// CPU models and buffer replace the stored ones when the job fitted them (Auto mode),
// its samples join the stored ones (oldest dropped beyond 64), the best rate is kept,
// and the job (namespace/name) joins the contributors (oldest dropped beyond 16).
// achievedBitsPerSecond is the job's average rate.
func Learn(prev v1alpha1.PathProfileStatus, job string, plan *v1alpha1.TransferPlan, samples []v1alpha1.ProbeSample,
	achievedBitsPerSecond int64, now time.Time) v1alpha1.PathProfileStatus {
	out := *prev.DeepCopy()
	if plan != nil && plan.Model != nil {
		out.Model = plan.Model.DeepCopy()
		out.BufferBytes = plan.BufferBytes
		if plan.SourceCPU != nil && plan.SourceCPU.Samples > 0 {
			out.SourceCPU = plan.SourceCPU.DeepCopy()
		}
		if plan.DestinationCPU != nil && plan.DestinationCPU.Samples > 0 {
			out.DestinationCPU = plan.DestinationCPU.DeepCopy()
		}
	}
	out.BestBitsPerSecond = max(out.BestBitsPerSecond, achievedBitsPerSecond)
	for _, s := range samples {
		out.Samples = append(out.Samples, *s.DeepCopy())
	}
	if len(out.Samples) > maxProfileSamples {
		out.Samples = out.Samples[len(out.Samples)-maxProfileSamples:]
	}
	if job != "" {
		out.ContributingJobs = slices.DeleteFunc(out.ContributingJobs, func(j string) bool { return j == job })
		out.ContributingJobs = append(out.ContributingJobs, job)
		if len(out.ContributingJobs) > maxProfileJobs {
			out.ContributingJobs = out.ContributingJobs[len(out.ContributingJobs)-maxProfileJobs:]
		}
	}
	t := metav1.NewTime(now)
	out.LastUpdateTime = &t
	return out
}
