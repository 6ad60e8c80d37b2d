package cluster

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	copies "github.com/dtnflow/dtnflow/test/dataset"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

func bytesSplit(b []byte, sep string) [][]byte { return bytes.Split(b, []byte(sep)) }

// trimComments drops comment lines, blank lines and document markers.
func trimComments(b []byte) []byte {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		t := strings.TrimSpace(l)
		if t == "" || strings.HasPrefix(t, "#") || t == "---" {
			continue
		}
		out = append(out, l)
	}
	return []byte(strings.Join(out, "\n"))
}

// onFailure writes the cluster's diagnostics for a failed test into
// test/e2e/_artifacts/<test>: from the first cleanup that finds the test failed, which
// runs before the test's objects are deleted (createJob calls it too).
func onFailure(t *testing.T) {
	t.Cleanup(func() { dumpIfFailed(t) })
}

var dumped sync.Map // test name → true once its diagnostics are written

func dumpIfFailed(t *testing.T) {
	if !t.Failed() {
		return
	}
	if _, done := dumped.LoadOrStore(t.Name(), true); done {
		return
	}
	cluster.DumpDiagnostics(context.Background(), framework.ArtifactsDir(t.Name()))
}

// dataset writes spec under the source site's storage at rel (a fresh folder named
// after the test) and returns the folder.
func dataset(t *testing.T, rel string, spec framework.DatasetSpec) string {
	t.Helper()
	dir := filepath.Join(cluster.Source().Storage, rel)
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := spec.Write(dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("dataset %s: %d files, %.1f MiB, written in %s", rel, len(spec.Files()), float64(spec.Bytes())/(1<<20), time.Since(start).Round(time.Millisecond))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// newJob is a TransferJob that moves rel from the source site to dest at the other.
func newJob(name, rel, dest string) *dtnflowv1alpha1.TransferJob {
	return &dtnflowv1alpha1.TransferJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: jobNamespace},
		Spec: dtnflowv1alpha1.TransferJobSpec{
			Source:      dtnflowv1alpha1.TransferSource{Endpoint: cluster.Source().Name, Paths: []dtnflowv1alpha1.RelativePath{dtnflowv1alpha1.RelativePath(rel)}},
			Destination: dtnflowv1alpha1.TransferDestination{Endpoint: cluster.Destination().Name, Path: dtnflowv1alpha1.RelativePath(dest)},
		},
	}
}

// createJob creates job, removes the destination copy first and both when the test
// ends, and returns the folder the copy lands in.
func createJob(ctx context.Context, t *testing.T, job *dtnflowv1alpha1.TransferJob) string {
	t.Helper()
	destRoot := filepath.Join(cluster.Destination().Storage, string(job.Spec.Destination.Path))
	_ = os.RemoveAll(destRoot)
	if err := cluster.Client.Create(ctx, job); err != nil {
		t.Fatalf("creating TransferJob %s: %v", job.Name, err)
	}
	t.Cleanup(func() {
		dumpIfFailed(t)
		_ = cluster.Client.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground))
		_ = os.RemoveAll(destRoot)
	})
	return filepath.Join(destRoot, string(job.Spec.Source.Paths[0]))
}

// getJob reads the job's current state.
func getJob(ctx context.Context, job *dtnflowv1alpha1.TransferJob) (*dtnflowv1alpha1.TransferJob, error) {
	var got dtnflowv1alpha1.TransferJob
	err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(job), &got)
	return &got, err
}

// stallTimeout: a transferring job that neither verifies a byte nor measures any rate
// for this long is stuck, and waiting out the whole transfer timeout would only hide
// where. (Verified bytes alone can stand still for a while when many large files are
// in flight at once.)
const stallTimeout = 2 * time.Minute

// waitForState waits until the job reaches want, failing early (with the job's
// conditions) when it fails instead, or when it stalls.
func waitForState(ctx context.Context, g Gomega, job *dtnflowv1alpha1.TransferJob, want dtnflowv1alpha1.TransferState, timeout time.Duration) *dtnflowv1alpha1.TransferJob {
	var got *dtnflowv1alpha1.TransferJob
	lastBytes, lastMove := int64(-1), time.Now()
	g.Eventually(func(g Gomega) {
		var err error
		got, err = getJob(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		if got.Status.State == dtnflowv1alpha1.StateFailed && want != dtnflowv1alpha1.StateFailed {
			StopTrying(fmt.Sprintf("TransferJob %s failed: %s", job.Name, describeConditions(got))).Now()
		}
		if p := got.Status.Progress; p != nil && got.Status.State == dtnflowv1alpha1.StateTransferring {
			if p.BytesDone != lastBytes || p.CurrentBitsPerSecond > 0 {
				lastBytes, lastMove = p.BytesDone, time.Now()
			} else if time.Since(lastMove) > stallTimeout {
				StopTrying(fmt.Sprintf("TransferJob %s stalled: %d of %d bytes verified, and neither more nor any rate for %s (%s)",
					job.Name, p.BytesDone, p.BytesTotal, stallTimeout, describeConditions(got))).Now()
			}
		}
		g.Expect(got.Status.State).To(Equal(want), "TransferJob %s: %s", job.Name, describeConditions(got))
	}).WithTimeout(timeout).WithPolling(time.Second).Should(Succeed())
	return got
}

// waitForProgress waits until the job is transferring and has moved at least
// fraction of its bytes.
func waitForProgress(ctx context.Context, g Gomega, job *dtnflowv1alpha1.TransferJob, fraction float64, timeout time.Duration) *dtnflowv1alpha1.TransferJob {
	var got *dtnflowv1alpha1.TransferJob
	g.Eventually(func(g Gomega) {
		var err error
		got, err = getJob(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		if got.Status.State == dtnflowv1alpha1.StateComplete || got.Status.State == dtnflowv1alpha1.StateFailed {
			StopTrying(fmt.Sprintf("TransferJob %s ended (%s) before its status showed %.0f%% progress; progress seen: %+v",
				job.Name, describeConditions(got), 100*fraction, got.Status.Progress)).Now()
		}
		g.Expect(got.Status.State).To(Equal(dtnflowv1alpha1.StateTransferring), "TransferJob %s: %s", job.Name, describeConditions(got))
		g.Expect(got.Status.Progress).NotTo(BeNil())
		g.Expect(got.Status.Progress.BytesTotal).To(BeNumerically(">", 0))
		g.Expect(float64(got.Status.Progress.BytesDone)).To(BeNumerically(">=", fraction*float64(got.Status.Progress.BytesTotal)))
	}).WithTimeout(timeout).WithPolling(500 * time.Millisecond).Should(Succeed())
	return got
}

func describeConditions(job *dtnflowv1alpha1.TransferJob) string {
	var parts []string
	for _, c := range job.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return fmt.Sprintf("state %q; %s", job.Status.State, strings.Join(parts, "; "))
}

// expectIdentical checks that every file of source has the same SHA-256 at dest and
// that dest holds nothing else.
func expectIdentical(t *testing.T, source, dest string) {
	t.Helper()
	diff, files, err := copies.CompareFolders(source, dest)
	if err != nil {
		t.Fatal(err)
	}
	if diff != "" {
		t.Fatalf("the copy at %s differs from %s:\n%s", dest, source, diff)
	}
	t.Logf("all %d files identical at the destination (SHA-256)", files)
	// The destination is site B: everything its agents wrote belongs to its owner.
	owner := cluster.Sites[1].Owner
	wrong, err := framework.WrongOwners(dest, owner.User, owner.Group)
	if err != nil {
		t.Fatal(err)
	}
	if len(wrong) > 0 {
		t.Fatalf("files at the destination not owned by site B's agents' user %d:%d:\n%s", owner.User, owner.Group, strings.Join(wrong, "\n"))
	}
	t.Logf("every file and folder at the destination belongs to %d:%d", owner.User, owner.Group)
}

// agentPods lists the job's agent pods of one role.
func agentPods(ctx context.Context, job *dtnflowv1alpha1.TransferJob, role contract.Role) ([]corev1.Pod, error) {
	var pods corev1.PodList
	err := cluster.Client.List(ctx, &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{contract.LabelJob: job.Name, contract.LabelRole: string(role)})
	return pods.Items, err
}

// jobEvents lists the Events about the job (events.k8s.io and core Events alike).
func jobEvents(ctx context.Context, job *dtnflowv1alpha1.TransferJob) ([]corev1.Event, error) {
	var events corev1.EventList
	err := cluster.Client.List(ctx, &events, client.InNamespace(job.Namespace))
	var out []corev1.Event
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "TransferJob" && e.InvolvedObject.Name == job.Name {
			out = append(out, e)
		}
	}
	return out, err
}

// conditionReason is the reason of the job's condition of that type, "" when absent.
func conditionReason(job *dtnflowv1alpha1.TransferJob, conditionType string) string {
	if c := meta.FindStatusCondition(job.Status.Conditions, conditionType); c != nil {
		return c.Reason
	}
	return ""
}

// isInvalid tells an API server refusal from any other error.
func isInvalid(err error) bool { return apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) }

// stopIfEnded stops an Eventually when the job has ended, saying what it ended before.
func stopIfEnded(job *dtnflowv1alpha1.TransferJob, before string) {
	if job.Status.State == dtnflowv1alpha1.StateComplete || job.Status.State == dtnflowv1alpha1.StateFailed {
		StopTrying(fmt.Sprintf("TransferJob %s ended (%s) %s", job.Name, describeConditions(job), before)).Now()
	}
}

// deleteProfile removes the path's PathProfile, so that the next job starts cold, and
// waits until the API server has let it go.
func deleteProfile(ctx context.Context) error {
	profile := &dtnflowv1alpha1.PathProfile{ObjectMeta: metav1.ObjectMeta{Name: profileName()}}
	if err := cluster.Client.Delete(ctx, profile); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		lastErr = cluster.Client.Get(ctx, client.ObjectKeyFromObject(profile), profile)
		return apierrors.IsNotFound(lastErr), nil
	})
	if err != nil {
		return fmt.Errorf("PathProfile %s is still there 30 s after its deletion (err %v)", profile.Name, lastErr)
	}
	return nil
}

// watchProgress records, from now until the test ends, every change
// of the job's state, verified bytes, current rate or running stripes as the API
// server shows them (polled every 250 ms), and logs them as lines timed from the
// start when the test ends, passed or failed: the log of a step whose timing matters.
func watchProgress(ctx context.Context, t *testing.T, job *dtnflowv1alpha1.TransferJob) {
	ctx, cancel := context.WithCancel(ctx)
	var (
		mu    sync.Mutex
		lines []string
		done  = make(chan struct{})
	)
	start := time.Now()
	go func() {
		defer close(done)
		last := ""
		_ = wait.PollUntilContextCancel(ctx, 250*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			got, err := getJob(ctx, job)
			if err != nil {
				return false, nil
			}
			line := string(got.Status.State)
			if p := got.Status.Progress; p != nil {
				line += fmt.Sprintf(" %d%% %d bytes %d files, %s", p.Percent, p.BytesDone, p.FilesDone, p.Rate)
			}
			line += fmt.Sprintf(", %d stripe(s), %d agent failure(s)", len(got.Status.Stripes), got.Status.AgentFailures)
			if line != last {
				mu.Lock()
				lines = append(lines, fmt.Sprintf("%6.1fs %s", time.Since(start).Seconds(), line))
				mu.Unlock()
				last = line
			}
			return false, nil
		})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		t.Logf("TransferJob %s as the API server showed it:\n%s", job.Name, strings.Join(lines, "\n"))
	})
}
