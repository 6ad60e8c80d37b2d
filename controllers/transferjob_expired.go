package controllers

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// ttlSecondsAfterFinished meets GitOps. Argo CD (automated sync with self-heal) and Flux
// (every kustomization interval) create again an object that Git declares and the
// cluster lacks, so a job deleted after its TTL comes back as a new job. A new job that
// matches one this controller completed and deleted — same namespace, name and spec
// hash — is therefore marked Complete from the record the deletion left in the path's
// PathProfile, starts no agent and moves nothing; and it is not deleted again, so the
// controller and the GitOps tool do not take turns forever. docs/gitops.md says how to
// run it again on purpose (the dtnflow.io/rerun annotation, or another spec).

// ReasonCompletedBefore is the Complete reason of a job restored from an expiredJobs
// record.
const ReasonCompletedBefore = "CompletedBefore"

// maxExpiredJobs is how many records PathProfile status.expiredJobs keeps (its bound).
const maxExpiredJobs = 64

// transferSpecHash identifies what a job moves, not how: source, destination, overwrite
// and integrity, and the rerun annotation.
func transferSpecHash(job *dtnflowv1alpha1.TransferJob) string {
	what := struct {
		Source      dtnflowv1alpha1.TransferSource      `json:"source"`
		Destination dtnflowv1alpha1.TransferDestination `json:"destination"`
		Overwrite   dtnflowv1alpha1.OverwritePolicy     `json:"overwrite"`
		Integrity   dtnflowv1alpha1.TransferIntegrity   `json:"integrity"`
		Rerun       string                              `json:"rerun"`
	}{job.Spec.Source, job.Spec.Destination, job.Spec.Overwrite, job.Spec.Integrity, job.Annotations[dtnflowv1alpha1.AnnotationRerun]}
	b, err := json.Marshal(what)
	if err != nil {
		panic(fmt.Sprintf("encoding a job's spec: %v", err))
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:16])
}

// expiredRecord is the profile's record of a completed and deleted job that this job
// repeats, or nil.
func expiredRecord(job *dtnflowv1alpha1.TransferJob, profile *dtnflowv1alpha1.PathProfile) *dtnflowv1alpha1.ExpiredJob {
	if profile == nil || job.Spec.Trigger != nil { // a recurring job has no TTL, and runs again by design
		return nil
	}
	hash := transferSpecHash(job)
	for i := len(profile.Status.ExpiredJobs) - 1; i >= 0; i-- {
		rec := &profile.Status.ExpiredJobs[i]
		if rec.Namespace == job.Namespace && rec.Name == job.Name && rec.SpecHash == hash {
			return rec
		}
	}
	return nil
}

// withExpired is the profile's list with the job's record added, the newest last and
// an older record of the same job replaced.
func withExpired(list []dtnflowv1alpha1.ExpiredJob, rec dtnflowv1alpha1.ExpiredJob) []dtnflowv1alpha1.ExpiredJob {
	out := make([]dtnflowv1alpha1.ExpiredJob, 0, len(list)+1)
	for _, r := range list {
		if r.Namespace != rec.Namespace || r.Name != rec.Name {
			out = append(out, r)
		}
	}
	out = append(out, rec)
	if len(out) > maxExpiredJobs {
		out = out[len(out)-maxExpiredJobs:]
	}
	return out
}

// completedBefore ends a new job that repeats a completed and deleted one: Complete from
// the record, no agents, no TTL.
func (r *TransferJobReconciler) completedBefore(p *pass, rec *dtnflowv1alpha1.ExpiredJob) error {
	msg := fmt.Sprintf("TransferJob %s/%s with this spec completed at %s (%d files, %d bytes) and was deleted after spec.ttlSecondsAfterFinished; "+
		"nothing is moved again and this job is kept. To run it again, set the annotation %s to a new value or change the spec (kubectl dtnflow rerun does the former)",
		rec.Namespace, rec.Name, rec.CompletionTime.UTC().Format("2006-01-02T15:04:05Z"), rec.FilesDone, rec.BytesDone, dtnflowv1alpha1.AnnotationRerun)
	p.st.StartTime = &p.now
	p.st.CompletionTime = &p.now
	p.st.Progress = &dtnflowv1alpha1.TransferProgress{BytesDone: rec.BytesDone, BytesTotal: rec.BytesDone, FilesDone: rec.FilesDone, FilesTotal: rec.FilesDone,
		Percent: 100, Rate: formatRate(0)}
	p.st.Progress.ETASeconds, p.st.Progress.ETA = eta(0, 0)
	p.condition(dtnflowv1alpha1.ConditionComplete, metav1.ConditionTrue, ReasonCompletedBefore, msg)
	p.event(corev1.EventTypeNormal, ReasonCompletedBefore, "Complete", msg)
	return nil
}

// keptAfterFinish says whether a finished job stays whatever its TTL says: a job
// restored from a record, whose deletion would only bring it back.
func keptAfterFinish(st *dtnflowv1alpha1.TransferJobStatus) bool {
	c := meta.FindStatusCondition(st.Conditions, dtnflowv1alpha1.ConditionComplete)
	return c != nil && c.Status == metav1.ConditionTrue && c.Reason == ReasonCompletedBefore
}

// recordExpired writes the record of a completed job about to be deleted after its TTL
// into the path's PathProfile (created when the job left none). A failed job leaves no
// record: created again, it runs again.
func (r *TransferJobReconciler) recordExpired(ctx context.Context, p *pass) error {
	job := p.job
	if !meta.IsStatusConditionTrue(p.st.Conditions, dtnflowv1alpha1.ConditionComplete) || p.st.CompletionTime == nil {
		return nil
	}
	rec := dtnflowv1alpha1.ExpiredJob{Namespace: job.Namespace, Name: job.Name, SpecHash: transferSpecHash(job), CompletionTime: *p.st.CompletionTime}
	if prog := p.st.Progress; prog != nil {
		rec.FilesDone, rec.BytesDone = max(prog.FilesDone, 0), max(prog.BytesDone, 0)
	}
	key := client.ObjectKey{Name: PathProfileNameFor(job)}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var profile dtnflowv1alpha1.PathProfile
		switch err := r.APIReader.Get(ctx, key, &profile); {
		case apierrors.IsNotFound(err):
			profile = dtnflowv1alpha1.PathProfile{
				ObjectMeta: metav1.ObjectMeta{Name: key.Name, Labels: map[string]string{contract.LabelManagedBy: contract.ManagedByValue}},
				Spec:       dtnflowv1alpha1.PathProfileSpec{SourceEndpoint: job.Spec.Source.Endpoint, DestinationEndpoint: job.Spec.Destination.Endpoint},
			}
			if err := r.Client.Create(ctx, &profile); err != nil {
				return fmt.Errorf("creating PathProfile %s: %w", key.Name, err)
			}
		case err != nil:
			return err
		}
		patch := client.MergeFromWithOptions(profile.DeepCopy(), client.MergeFromWithOptimisticLock{})
		profile.Status.ExpiredJobs = withExpired(profile.Status.ExpiredJobs, rec)
		if err := r.Client.Status().Patch(ctx, &profile, patch); err != nil {
			return fmt.Errorf("recording the expired job in PathProfile %s: %w", key.Name, err)
		}
		return nil
	})
}
