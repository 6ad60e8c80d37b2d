package planning

import (
	"slices"
	"time"

	"github.com/dtnflow/dtnflow/api/v1alpha1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Bounds of a PathProfile's lists (the API's MaxItems).
const (
	maxProfileSamples = 64
	maxProfileJobs    = 16
)

// Learn returns a PathProfile status after a job on the path planned from its probe or
// finished: the job's stream model, CPU models and buffer replace the stored ones when
// the job fitted them (Auto mode), and the plan's pathBitsPerSecond becomes the
// capacity's plateau, as of now; its samples join the stored ones unless they are there
// already (a job learns twice: when it plans, so that the path's other jobs plan from
// it instead of probing, and when it finishes), oldest dropped beyond 64; the best rate
// is kept, and the job (namespace/name) joins the contributors (oldest dropped beyond
// 16). achievedBitsPerSecond is the job's average rate (0 before it has one).
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
		if plan.PathBitsPerSecond > 0 {
			if out.Capacity == nil {
				out.Capacity = &v1alpha1.PathCapacityStatus{}
			}
			t := metav1.NewTime(now)
			out.Capacity.PlateauBitsPerSecond, out.Capacity.PlateauTime = plan.PathBitsPerSecond, &t
		}
	}
	out.BestBitsPerSecond = max(out.BestBitsPerSecond, achievedBitsPerSecond)
	for _, s := range samples {
		if !slices.ContainsFunc(out.Samples, func(have v1alpha1.ProbeSample) bool { return equality.Semantic.DeepEqual(have, s) }) {
			out.Samples = append(out.Samples, *s.DeepCopy())
		}
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
