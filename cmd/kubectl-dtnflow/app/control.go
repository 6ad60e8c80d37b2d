package app

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

func suspendCommand() *command {
	return &command{
		name: "suspend", short: "stop a job's agents, keeping what was verified", args: "JOB",
		summary: "Suspend a job (spec.suspend: true): its agents finish the blocks in flight and stop; what was\n" +
			"verified is kept.",
		run: func(ctx context.Context, o *Options, args []string) error { return o.setSuspend(ctx, args, true) },
	}
}

func resumeCommand() *command {
	return &command{
		name: "resume", short: "carry on a suspended job from what was verified", args: "JOB",
		summary: "Resume a suspended job (spec.suspend: false) from what was verified.",
		run:     func(ctx context.Context, o *Options, args []string) error { return o.setSuspend(ctx, args, false) },
	}
}

func (o *Options) setSuspend(ctx context.Context, args []string, suspend bool) error {
	name, err := exactlyOneJob(args)
	if err != nil {
		return err
	}
	if err := o.complete(); err != nil {
		return err
	}
	job, err := o.getJob(ctx, name)
	if err != nil {
		return err
	}
	verb := map[bool]string{true: "suspended", false: "resumed"}[suspend]
	if finished(job) {
		return fmt.Errorf("TransferJob %s/%s has already finished (%s): nothing to %s", job.Namespace, job.Name, stateOf(job), map[bool]string{true: "suspend", false: "resume"}[suspend])
	}
	if job.Spec.Suspend == suspend {
		fmt.Fprintf(o.Out, "transferjob %s/%s already %s\n", job.Namespace, job.Name, verb)
		return nil
	}
	patch := []byte(fmt.Sprintf(`{"spec":{"suspend":%t}}`, suspend))
	if err := o.client.Patch(ctx, job, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "transferjob %s/%s %s\n", job.Namespace, job.Name, verb)
	return nil
}

func rerunCommand() *command {
	var force bool
	var timeout time.Duration
	return &command{
		name: "rerun", short: "run a finished job again (only what is missing or changed moves)", args: "JOB [--force]",
		summary: "Run a finished job again. A recurring job (spec.trigger) gets a new spec.trigger.manual\n" +
			"value: its next run starts at once, or when the current one ends. Any other job is deleted\n" +
			"and created again with the same spec, labels and\n" +
			"annotations, and the dtnflow.io/rerun annotation set to now (so a record of the old run does\n" +
			"not mark it Complete at once). The receivers' journals make the new run send only what is\n" +
			"missing or changed at the destination. --force reruns a job that has not finished.",
		flags: func(fs *pflag.FlagSet, o *Options) {
			fs.BoolVar(&force, "force", false, "rerun even a job that is still running (its agents are stopped)")
			fs.DurationVar(&timeout, "timeout", time.Minute, "how long to wait for the old job to be gone")
		},
		run: func(ctx context.Context, o *Options, args []string) error {
			name, err := exactlyOneJob(args)
			if err != nil {
				return err
			}
			if err := o.complete(); err != nil {
				return err
			}
			job, err := o.getJob(ctx, name)
			if err != nil {
				return err
			}
			if job.Spec.Trigger != nil {
				return o.triggerRun(ctx, job)
			}
			if !finished(job) && !force {
				return fmt.Errorf("TransferJob %s/%s is %s, not finished: wait for it, suspend it, or pass --force", job.Namespace, job.Name, stateOf(job))
			}
			next := &dtnflowv1alpha1.TransferJob{
				ObjectMeta: metav1.ObjectMeta{Namespace: job.Namespace, Name: job.Name,
					Labels: maps.Clone(job.Labels), Annotations: maps.Clone(job.Annotations)},
				Spec: *job.Spec.DeepCopy(),
			}
			if next.Annotations == nil {
				next.Annotations = map[string]string{}
			}
			delete(next.Annotations, "kubectl.kubernetes.io/last-applied-configuration")
			next.Annotations[dtnflowv1alpha1.AnnotationRerun] = o.Clock.Now().UTC().Format(time.RFC3339)
			next.Spec.Suspend = false

			uid := job.UID
			if err := o.client.Delete(ctx, job, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting the finished job: %w", err)
			}
			err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
				var cur dtnflowv1alpha1.TransferJob
				err := o.client.Get(ctx, client.ObjectKeyFromObject(job), &cur)
				if apierrors.IsNotFound(err) {
					return true, nil
				}
				return err == nil && cur.UID != uid, err
			})
			if err != nil {
				return fmt.Errorf("waiting for the old TransferJob %s/%s to be gone: %w", job.Namespace, job.Name, err)
			}
			if err := o.client.Create(ctx, next); err != nil {
				// the old job is gone: give its manifest back so that nothing is lost
				next.TypeMeta = metav1.TypeMeta{APIVersion: dtnflowv1alpha1.GroupVersion.String(), Kind: "TransferJob"}
				if manifest, merr := yaml.Marshal(next); merr == nil {
					fmt.Fprintf(o.Err, "The job was deleted but not created again; its manifest, to apply by hand:\n%s", manifest)
				}
				return fmt.Errorf("creating TransferJob %s/%s again: %w", next.Namespace, next.Name, err)
			}
			fmt.Fprintf(o.Out, "transferjob %s/%s created again (%s=%s)\n", next.Namespace, next.Name, dtnflowv1alpha1.AnnotationRerun, next.Annotations[dtnflowv1alpha1.AnnotationRerun])
			return nil
		},
	}
}

// triggerRun asks a recurring job for a run by giving spec.trigger.manual a new value.
func (o *Options) triggerRun(ctx context.Context, job *dtnflowv1alpha1.TransferJob) error {
	value := o.Clock.Now().UTC().Format("2006-01-02T15-04-05Z")
	if job.Spec.Trigger.Manual == value {
		value += "-again"
	}
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"trigger": map[string]any{"manual": value}}})
	if err != nil {
		return err
	}
	if err := o.client.Patch(ctx, job, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	when := "now"
	if !finished(job) {
		when = fmt.Sprintf("when run %d ends", job.Status.Run)
	}
	fmt.Fprintf(o.Out, "transferjob %s/%s: spec.trigger.manual=%s; the next run starts %s\n", job.Namespace, job.Name, value, when)
	return nil
}
