package controllers

import (
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

func TestTransferSpecHash(t *testing.T) {
	base := func() *dtnflowv1alpha1.TransferJob {
		return &dtnflowv1alpha1.TransferJob{
			ObjectMeta: metav1.ObjectMeta{Namespace: "physics", Name: "nightly"},
			Spec: dtnflowv1alpha1.TransferJobSpec{
				Source:      dtnflowv1alpha1.TransferSource{Endpoint: "site-a", Paths: []dtnflowv1alpha1.RelativePath{"runs"}},
				Destination: dtnflowv1alpha1.TransferDestination{Endpoint: "site-b", Path: "incoming"},
				Overwrite:   dtnflowv1alpha1.OverwriteIfDifferent,
			},
		}
	}
	tests := map[string]struct {
		change func(*dtnflowv1alpha1.TransferJob)
		same   bool
	}{
		"unchanged": {func(*dtnflowv1alpha1.TransferJob) {}, true},
		"tuning": {func(j *dtnflowv1alpha1.TransferJob) {
			j.Spec.Tuning.Limits = &dtnflowv1alpha1.TuningLimits{MaxNodes: ptr.To[int32](1)}
		}, true},
		"TTL, backoff and suspend": {func(j *dtnflowv1alpha1.TransferJob) {
			j.Spec.TTLSecondsAfterFinished, j.Spec.BackoffLimit, j.Spec.Suspend = ptr.To[int32](5), ptr.To[int32](1), true
		}, true},
		"other annotations": {func(j *dtnflowv1alpha1.TransferJob) {
			j.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "x"}
		}, true},
		"another source path":      {func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Source.Paths = append(j.Spec.Source.Paths, "calib") }, false},
		"another destination":      {func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Destination.Path = "elsewhere" }, false},
		"another overwrite policy": {func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Overwrite = dtnflowv1alpha1.OverwriteAlways }, false},
		"another checksum":         {func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Integrity.Checksum = dtnflowv1alpha1.ChecksumSHA512 }, false},
		"a rerun": {func(j *dtnflowv1alpha1.TransferJob) {
			j.Annotations = map[string]string{dtnflowv1alpha1.AnnotationRerun: "1"}
		}, false},
	}
	want := transferSpecHash(base())
	if len(want) != 32 {
		t.Fatalf("hash %q is not 32 hex digits", want)
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			j := base()
			tc.change(j)
			if got := transferSpecHash(j); (got == want) != tc.same {
				t.Errorf("hash %s, base %s: same = %v, want %v", got, want, got == want, tc.same)
			}
		})
	}
}

func TestWithExpired(t *testing.T) {
	rec := func(ns, name, hash string) dtnflowv1alpha1.ExpiredJob {
		return dtnflowv1alpha1.ExpiredJob{Namespace: ns, Name: name, SpecHash: hash}
	}
	list := withExpired(nil, rec("a", "x", "1"))
	list = withExpired(list, rec("b", "x", "1"))
	list = withExpired(list, rec("a", "x", "2")) // the same job completed again with another spec
	if len(list) != 2 || list[0] != rec("b", "x", "1") || list[1] != rec("a", "x", "2") {
		t.Errorf("list = %+v, want b/x then a/x with the newer hash", list)
	}
	for i := range 2 * maxExpiredJobs {
		list = withExpired(list, rec("n", fmt.Sprint(i), "h"))
	}
	if len(list) != maxExpiredJobs || list[len(list)-1].Name != fmt.Sprint(2*maxExpiredJobs-1) || list[0].Name != fmt.Sprint(maxExpiredJobs) {
		t.Errorf("after %d records: %d kept, from %s to %s; want the newest %d", 2*maxExpiredJobs, len(list), list[0].Name, list[len(list)-1].Name, maxExpiredJobs)
	}

	profile := &dtnflowv1alpha1.PathProfile{Status: dtnflowv1alpha1.PathProfileStatus{ExpiredJobs: list}}
	job := &dtnflowv1alpha1.TransferJob{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "100"}}
	if expiredRecord(job, profile) != nil {
		t.Errorf("a record matched a job of another spec hash")
	}
	profile.Status.ExpiredJobs = append(profile.Status.ExpiredJobs, rec("n", "100", transferSpecHash(job)))
	if got := expiredRecord(job, profile); got == nil || got.Name != "100" {
		t.Errorf("expiredRecord = %+v, want the record of n/100", got)
	}
	if expiredRecord(job, nil) != nil {
		t.Errorf("a record without a profile")
	}
}
