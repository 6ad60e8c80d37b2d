package app

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/internal/progress"
)

// barWidth is the width of the progress bar in get and watch.
const barWidth = 20

func getCommand() *command {
	return &command{
		name: "get", short: "a progress bar per job: bytes, files, rate, ETA, stripes", args: "[JOB...] [-A]",
		summary: "Show jobs with a progress bar: bytes, files, rate, ETA and stripes running.",
		flags: func(fs *pflag.FlagSet, o *Options) {
			fs.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "list the jobs of every namespace")
		},
		run: func(ctx context.Context, o *Options, args []string) error {
			if err := o.complete(); err != nil {
				return err
			}
			jobs, err := o.listJobs(ctx, args)
			if err != nil {
				return err
			}
			if len(jobs) == 0 {
				fmt.Fprintf(o.Err, "No TransferJobs found in namespace %s.\n", o.namespace)
				return nil
			}
			printTable(o.Out, jobs, o.Clock.Now(), o.AllNamespaces)
			return nil
		},
	}
}

// printTable writes one row per job: name, state, age and the progress line.
func printTable(w io.Writer, jobs []dtnflowv1alpha1.TransferJob, now time.Time, withNamespace bool) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	if withNamespace {
		fmt.Fprint(tw, "NAMESPACE\t")
	}
	fmt.Fprintln(tw, "NAME\tSTATE\tAGE\tPROGRESS")
	for i := range jobs {
		j := &jobs[i]
		if withNamespace {
			fmt.Fprintf(tw, "%s\t", j.Namespace)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", j.Name, stateOf(j), age(now, j.CreationTimestamp.Time), progress.Line(snapshotOf(j), barWidth))
	}
	tw.Flush()
}

// stateOf is the job's state as the controller wrote it, Pending before it did.
func stateOf(j *dtnflowv1alpha1.TransferJob) dtnflowv1alpha1.TransferState {
	if j.Status.State == "" {
		return dtnflowv1alpha1.StatePending
	}
	return j.Status.State
}

// snapshotOf is what the progress line shows of a job's status.
func snapshotOf(j *dtnflowv1alpha1.TransferJob) progress.Snapshot {
	s := progress.Snapshot{ETA: -1}
	if p := j.Status.Progress; p != nil {
		s.BytesDone, s.BytesTotal, s.FilesDone, s.FilesTotal = p.BytesDone, p.BytesTotal, p.FilesDone, p.FilesTotal
		s.BitsPerSecond = p.CurrentBitsPerSecond
		if p.ETASeconds != nil {
			s.ETA = time.Duration(*p.ETASeconds) * time.Second
		}
	}
	if finished(j) {
		s.BitsPerSecond = 0
	}
	if plan := j.Status.Plan; plan != nil && !finished(j) {
		s.Stripes = int32(len(plan.SourceNodes)) * plan.StripesPerNode
		for _, st := range j.Status.Stripes {
			if st.State == dtnflowv1alpha1.StripeRunning {
				s.StripesRunning++
			}
		}
	}
	return s
}

// finished says whether a job has completed, partially completed or failed.
func finished(j *dtnflowv1alpha1.TransferJob) bool {
	return meta.IsStatusConditionTrue(j.Status.Conditions, dtnflowv1alpha1.ConditionComplete) ||
		partial(j) || meta.IsStatusConditionTrue(j.Status.Conditions, dtnflowv1alpha1.ConditionFailed)
}

// partial says whether a job ended with files skipped at the source.
func partial(j *dtnflowv1alpha1.TransferJob) bool {
	return meta.IsStatusConditionTrue(j.Status.Conditions, dtnflowv1alpha1.ConditionPartiallyComplete)
}

// failed says whether a job has failed.
func failed(j *dtnflowv1alpha1.TransferJob) bool {
	return meta.IsStatusConditionTrue(j.Status.Conditions, dtnflowv1alpha1.ConditionFailed)
}

// condition is the job's condition of the type, or nil.
func condition(j *dtnflowv1alpha1.TransferJob, typ string) *metav1.Condition {
	return meta.FindStatusCondition(j.Status.Conditions, typ)
}
