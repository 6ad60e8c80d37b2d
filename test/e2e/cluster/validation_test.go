package cluster

import (
	"context"
	"os/exec"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// testInvalidJobRejected sends invalid TransferJobs to the cluster's API server, as a
// user would, and checks each is refused with a message naming the field, and that
// nothing was created (so no agent ever runs for it).
func testInvalidJobRejected(t *testing.T) {
	ctx := context.Background()
	cases := map[string]struct {
		change func(*dtnflowv1alpha1.TransferJob)
		want   []string
	}{
		"absolute source path": {
			change: func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Source.Paths[0] = "/etc/passwd" },
			want:   []string{"spec.source.paths[0]", "relative to the endpoint's storage root"},
		},
		"parent segment in the destination": {
			change: func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Destination.Path = "incoming/../../escape" },
			want:   []string{"spec.destination.path", "'..'"},
		},
		"Fixed mode without its parameters": {
			change: func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Tuning.Mode = dtnflowv1alpha1.TuningFixed },
			want:   []string{"spec.tuning.fixed", "required when spec.tuning.mode is Fixed"},
		},
		"more streams than the limit": {
			change: func(j *dtnflowv1alpha1.TransferJob) {
				j.Spec.Tuning = dtnflowv1alpha1.TransferTuning{
					Mode:   dtnflowv1alpha1.TuningFixed,
					Fixed:  &dtnflowv1alpha1.FixedTuning{Nodes: 1, StripesPerNode: 1, StreamsPerStripe: 8, Concurrency: 1, Pipelining: 1},
					Limits: &dtnflowv1alpha1.TuningLimits{MaxStreamsPerStripe: ptr.To[int32](4)},
				}
			},
			want: []string{"spec.tuning.fixed.streamsPerStripe", "must not exceed spec.tuning.limits.maxStreamsPerStripe"},
		},
		"unknown checksum": {
			change: func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Integrity.Checksum = "CRC32" },
			want:   []string{"spec.integrity.checksum", "SHA256"},
		},
		"no source paths": {
			change: func(j *dtnflowv1alpha1.TransferJob) { j.Spec.Source.Paths = nil },
			want:   []string{"spec.source.paths"},
		},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			job := newJob("invalid", "e2e/nothing", "incoming/nothing")
			tc.change(job)
			err := cluster.Client.Create(ctx, job)
			g.Expect(err).To(HaveOccurred(), "the API server accepted an invalid job")
			g.Expect(isInvalid(err)).To(BeTrue(), "refused, but not as invalid: %v", err)
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
			g.Expect(apierrors.IsNotFound(cluster.Client.Get(ctx, client.ObjectKeyFromObject(job), &dtnflowv1alpha1.TransferJob{}))).To(BeTrue())
		})
	}

	t.Run("kubectl shows the message", func(t *testing.T) {
		g := NewWithT(t)
		manifest := `apiVersion: dtnflow.io/v1alpha1
kind: TransferJob
metadata: {name: invalid-kubectl, namespace: ` + jobNamespace + `}
spec:
  source: {endpoint: site-a, paths: [/etc/shadow]}
  destination: {endpoint: site-b}
`
		cmd := exec.Command(cluster.KubectlBin, "--kubeconfig", cluster.Kubeconfig, "apply", "-f", "-")
		cmd.Stdin = strings.NewReader(manifest)
		out, err := cmd.CombinedOutput()
		g.Expect(err).To(HaveOccurred(), "kubectl apply accepted it: %s", out)
		g.Expect(string(out)).To(And(ContainSubstring("spec.source.paths[0]"), ContainSubstring("must be relative to the endpoint's storage root")))
		t.Logf("kubectl apply said: %s", strings.TrimSpace(string(out)))
	})

	t.Run("source and destination are immutable", func(t *testing.T) {
		g := NewWithT(t)
		job := newJob("immutable", "e2e/nothing", "incoming/immutable")
		job.Spec.Suspend = true // never starts agents
		g.Expect(cluster.Client.Create(ctx, job)).To(Succeed())
		t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), job) })
		// a merge patch carries no resourceVersion, so the controller's status writes
		// cannot make it conflict: only validation can refuse it
		patch := client.MergeFrom(job.DeepCopy())
		job.Spec.Destination.Path = "incoming/elsewhere"
		err := cluster.Client.Patch(ctx, job, patch)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("spec.destination is immutable"))
	})
}
