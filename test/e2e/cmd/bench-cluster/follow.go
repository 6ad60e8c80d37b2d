package main

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// followJob hands observe every version of the job the API server announces, with
// the time it arrived, until one is Complete or Failed (nil) or ctx ends (its error).
// It reads once, then watches from that version, and starts again from a fresh read
// when the watch breaks. A poll would put up to its interval after the job's end into
// the operator's time, which `send --auto`'s is not (its process exits when it is
// done): with 250 ms polls the sixth session's suite read each operator run 130–340 ms
// longer than the job's own status.timings from the manager's first sight to Complete.
func followJob(ctx context.Context, wc client.WithWatch, key client.ObjectKey, observe func(*dtnflowv1alpha1.TransferJob, time.Time)) error {
	for {
		var job dtnflowv1alpha1.TransferJob
		if err := wc.Get(ctx, key, &job); err != nil {
			return err
		}
		observe(&job, time.Now())
		if jobEnded(&job) {
			return nil
		}
		ended, err := watchJob(ctx, wc, key, job.ResourceVersion, observe)
		if ended || err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// watchJob is one watch of followJob from resourceVersion rv: ended when the job
// ended, false when the watch broke first.
func watchJob(ctx context.Context, wc client.WithWatch, key client.ObjectKey, rv string, observe func(*dtnflowv1alpha1.TransferJob, time.Time)) (ended bool, err error) {
	w, err := wc.Watch(ctx, &dtnflowv1alpha1.TransferJobList{}, &client.ListOptions{Namespace: key.Namespace,
		FieldSelector: fields.OneTermEqualSelector("metadata.name", key.Name), Raw: &metav1.ListOptions{ResourceVersion: rv}})
	if err != nil {
		return false, ctx.Err() // a watch that cannot start is tried again from a fresh read
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if ev.Type != watch.Added && ev.Type != watch.Modified {
			return false, nil // an error event (the version is gone): start again
		}
		job, ok := ev.Object.(*dtnflowv1alpha1.TransferJob)
		if !ok {
			continue
		}
		observe(job, time.Now())
		if jobEnded(job) {
			return true, nil
		}
	}
	return false, ctx.Err()
}

func jobEnded(j *dtnflowv1alpha1.TransferJob) bool {
	return j.Status.State == dtnflowv1alpha1.StateComplete || j.Status.State == dtnflowv1alpha1.StateFailed
}
