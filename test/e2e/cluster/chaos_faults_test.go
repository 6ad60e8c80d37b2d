package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// faultKind is one kind of fault the chaos suite injects.
type faultKind struct {
	name string
	// recoverable faults must leave the job Complete; the others must fail it with a
	// reason that names the cause (expectFailed says whether it does).
	recoverable  bool
	expectFailed func(job *dtnflowv1alpha1.TransferJob, r *chaosRound) string
	// unavailable says what the cluster lacks for this kind ("" when it can run).
	unavailable func() string
	// prepare runs before the job is created; inject does the whole fault (and undoes
	// it) and says what it did; after runs once the job ended and its files were
	// checked.
	prepare      func(ctx context.Context, r *chaosRound) error
	inject       func(ctx context.Context, r *chaosRound) (string, error)
	after        func(ctx context.Context, r *chaosRound, final *dtnflowv1alpha1.TransferJob, res *chaosResult)
	backoffLimit *int32
}

func always() string { return "" }

var faultKinds = map[string]*faultKind{}

func kindNames() []string {
	var out []string
	for k := range faultKinds {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func register(k *faultKind) {
	if k.unavailable == nil {
		k.unavailable = always
	}
	faultKinds[k.name] = k
}

func init() {
	register(&faultKind{name: "none", recoverable: true, after: checkTheCheck})
	for _, role := range []contract.Role{contract.RoleCoordinator, contract.RoleSender, contract.RoleReceiver} {
		register(&faultKind{name: string(role) + "-delete", recoverable: true, inject: podFault(role, false)})
		register(&faultKind{name: string(role) + "-kill", recoverable: true, inject: podFault(role, true)})
	}
	register(&faultKind{name: "manager-kill", recoverable: true, inject: managerKill(false)})
	register(&faultKind{name: "leader-failover", recoverable: true, inject: managerKill(true), unavailable: twoManagers})
	register(&faultKind{name: "kubelet-stop", recoverable: true, inject: kubeletStop})
	register(&faultKind{name: "wan-cut", recoverable: true, inject: wanCut})
	register(&faultKind{name: "wan-rate-halved", recoverable: true, inject: wanRateHalved})
	register(&faultKind{name: "wan-corrupt", recoverable: true, inject: wanCorrupt})
	register(&faultKind{name: "apiserver-etcd-restart", recoverable: true, inject: apiServerRestart})
	one := int32(1)
	register(&faultKind{name: "agent-kills-beyond-backoff", backoffLimit: &one, inject: killsBeyondBackoff, expectFailed: failedWith(controllers.ReasonBackoffLimitExceeded, "spec.backoffLimit")})
	register(&faultKind{name: "destination-full", prepare: smallDestination, inject: fillDestination, expectFailed: failedWith("", "destination is full"), after: resumeAfterFull})
	register(&faultKind{name: "source-changed", inject: changeSource, expectFailed: sourceChangedOutcome})
}

// failedWith expects the job Failed, with the reason (when given) and a message that
// says what.
func failedWith(reason, says string) func(*dtnflowv1alpha1.TransferJob, *chaosRound) string {
	return func(job *dtnflowv1alpha1.TransferJob, _ *chaosRound) string {
		c := meta.FindStatusCondition(job.Status.Conditions, dtnflowv1alpha1.ConditionFailed)
		switch {
		case c == nil || c.Status != "True":
			return fmt.Sprintf("want Failed, got %s", describeConditions(job))
		case reason != "" && c.Reason != reason:
			return fmt.Sprintf("want reason %s, got %s (%s)", reason, c.Reason, c.Message)
		case !strings.Contains(c.Message, says):
			return fmt.Sprintf("want a message saying %q, got %q", says, c.Message)
		}
		return ""
	}
}

// agentWait is how long a fault waits for an agent pod of the job to run.
const agentWait = time.Minute

// runningAgent waits for a running agent pod of the job in that role.
func runningAgent(ctx context.Context, r *chaosRound, role contract.Role) (*corev1.Pod, error) {
	var found *corev1.Pod
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, agentWait, true, func(ctx context.Context) (bool, error) {
		pods, err := agentPods(ctx, r.job, role)
		if err != nil {
			return false, nil // the API server may be restarting: look again
		}
		var running []corev1.Pod
		for _, p := range pods {
			if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
				running = append(running, p)
			}
		}
		if len(running) == 0 {
			return false, nil
		}
		p := running[r.rng.IntN(len(running))]
		found = &p
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("no running %s pod of %s for %s", role, r.job.Name, agentWait)
	}
	return found, nil
}

// podFault deletes an agent pod with no grace period (kill false), or SIGKILLs its
// processes in their cgroup (kill true).
func podFault(role contract.Role, kill bool) func(context.Context, *chaosRound) (string, error) {
	return func(ctx context.Context, r *chaosRound) (string, error) {
		pod, err := runningAgent(ctx, r, role)
		if err != nil {
			return "", err
		}
		if kill {
			n, err := cluster.KillContainer(pod, pod.Spec.Containers[0].Name)
			return fmt.Sprintf("SIGKILLed the %d process(es) of %s on %s", n, pod.Name, pod.Spec.NodeName), err
		}
		err = cluster.Client.Delete(ctx, pod, client.GracePeriodSeconds(0))
		return fmt.Sprintf("deleted %s on %s (grace period 0)", pod.Name, pod.Spec.NodeName), err
	}
}

// killsBeyondBackoff SIGKILLs receivers until the job has more agent failures than its
// backoffLimit (1): a fault the job is allowed to give up on, with that reason.
func killsBeyondBackoff(ctx context.Context, r *chaosRound) (string, error) {
	var did []string
	for i := 0; i < 3; i++ {
		job, err := getJob(ctx, r.job)
		if err == nil && finishedJob(job) {
			break
		}
		pod, err := runningAgent(ctx, r, contract.RoleReceiver)
		if err != nil {
			if len(did) > 0 {
				break // the job gave up and stopped its agents
			}
			return "", err
		}
		n, err := cluster.KillContainer(pod, pod.Spec.Containers[0].Name)
		if err != nil {
			return "", err
		}
		did = append(did, fmt.Sprintf("SIGKILLed %s (%d processes)", pod.Name, n))
		// wait for the replacement to run (or the job to end) before the next kill
		_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, agentWait, true, func(ctx context.Context) (bool, error) {
			if p, err := runningAgent(ctx, r, contract.RoleReceiver); err == nil && p.UID != pod.UID {
				return true, nil
			}
			job, err := getJob(ctx, r.job)
			return err == nil && finishedJob(job), nil
		})
	}
	return strings.Join(did, ", then "), nil
}

// managerPods are the manager's running pods and the Lease holder's identity.
func managerPods(ctx context.Context) ([]corev1.Pod, string, error) {
	var pods corev1.PodList
	if err := cluster.Client.List(ctx, &pods, client.InNamespace(framework.ReleaseNamespace),
		client.MatchingLabels{"app.kubernetes.io/component": "manager"}); err != nil {
		return nil, "", err
	}
	var running []corev1.Pod
	for _, p := range pods.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
			running = append(running, p)
		}
	}
	var leases coordinationv1.LeaseList
	if err := cluster.Client.List(ctx, &leases, client.InNamespace(framework.ReleaseNamespace)); err != nil {
		return running, "", err
	}
	for _, l := range leases.Items {
		if l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
			return running, *l.Spec.HolderIdentity, nil
		}
	}
	return running, "", nil
}

// holds says whether pod is the one holding the Lease: the holder identity starts
// with the pod's host name, which on the host network is its node's name.
func holds(pod corev1.Pod, holder string) bool {
	return holder != "" && strings.HasPrefix(holder, pod.Spec.NodeName+"_")
}

func twoManagers() string {
	pods, _, err := managerPods(context.Background())
	if err != nil || len(pods) < 2 {
		return "two manager replicas (make test-chaos installs them on two nodes per site)"
	}
	return ""
}

// managerKill SIGKILLs a manager replica (leaderOnly: the one that holds the Lease,
// and then waits for another replica to take it over). The kubelet restarts the killed
// container.
func managerKill(leaderOnly bool) func(context.Context, *chaosRound) (string, error) {
	return func(ctx context.Context, r *chaosRound) (string, error) {
		pods, holder, err := managerPods(ctx)
		if err != nil || len(pods) == 0 {
			return "", fmt.Errorf("no running manager pod (%v)", err)
		}
		victim := pods[r.rng.IntN(len(pods))]
		if leaderOnly {
			found := false
			for _, p := range pods {
				if holds(p, holder) {
					victim, found = p, true
				}
			}
			if !found {
				return "", fmt.Errorf("no running manager pod holds the Lease (holder %q)", holder)
			}
		}
		n, err := cluster.KillContainer(&victim, "manager")
		if err != nil {
			return "", err
		}
		what := fmt.Sprintf("SIGKILLed manager %s on %s (%d processes; leader: %v)", victim.Name, victim.Spec.NodeName, n, holds(victim, holder))
		if !leaderOnly {
			return what, nil
		}
		// The Lease is not released by a killed process: another replica takes it once
		// it expires — the standby, or the killed one restarted by its kubelet, which
		// races it (the identity is host name and a new UUID per process).
		start := time.Now()
		var now string
		err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, failoverWait, true, func(ctx context.Context) (bool, error) {
			_, h, err := managerPods(ctx)
			now = h
			return err == nil && h != "" && h != holder, nil
		})
		if err != nil {
			return what, fmt.Errorf("no manager took the Lease over within %s of killing the leader", failoverWait)
		}
		who := "the standby replica"
		if strings.HasPrefix(now, victim.Spec.NodeName+"_") {
			who = "the killed replica, restarted"
		}
		return fmt.Sprintf("%s; %s (%s) took the Lease after %.1f s", what, who, now, time.Since(start).Seconds()), nil
	}
}

// failoverWait bounds how long another manager replica takes to hold the Lease after
// the leader is killed (the Lease's duration, then the retry period).
const failoverWait = 2 * time.Minute

// nodeWait bounds how long a node takes to turn NotReady after its kubelet stops, or
// Ready after it starts again.
const nodeWait = 3 * time.Minute

// kubeletStop stops the kubelet of a node that runs one of the job's agents, waits
// until the node is NotReady, and starts it again (waiting until it is Ready).
func kubeletStop(ctx context.Context, r *chaosRound) (string, error) {
	role := []contract.Role{contract.RoleSender, contract.RoleReceiver}[r.rng.IntN(2)]
	pod, err := runningAgent(ctx, r, role)
	if err != nil {
		return "", err
	}
	node := pod.Spec.NodeName
	stopped, err := cluster.StopProcess("kubelet-" + node)
	if err != nil {
		return "", err
	}
	start := time.Now()
	notReady := waitNodeReady(ctx, node, false)
	after := time.Since(start)
	if err := stopped.Start(); err != nil {
		return "", err
	}
	ready := waitNodeReady(ctx, node, true)
	what := fmt.Sprintf("stopped the kubelet of %s (running %s): NotReady after %.0f s, Ready %.0f s after the restart", node, pod.Name, after.Seconds(), time.Since(start).Seconds()-after.Seconds())
	switch {
	case !notReady:
		return what, fmt.Errorf("node %s did not become NotReady within %s of stopping its kubelet", node, nodeWait)
	case !ready:
		return what, fmt.Errorf("node %s was not Ready within %s of starting its kubelet again", node, nodeWait)
	}
	return what, nil
}

// waitNodeReady waits, for at most nodeWait, until the node's Ready condition is (or
// is not) True.
func waitNodeReady(ctx context.Context, name string, want bool) bool {
	err := wait.PollUntilContextTimeout(ctx, time.Second, nodeWait, true, func(ctx context.Context) (bool, error) {
		var node corev1.Node
		if err := cluster.Client.Get(ctx, client.ObjectKey{Name: name}, &node); err != nil {
			return false, nil
		}
		ready := false
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				ready = true
			}
		}
		return ready == want, nil
	})
	return err == nil
}

// holdFor is how long a fault lasts: between lo and hi, drawn from the round's seed.
func holdFor(r *chaosRound, lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(r.rng.Int64N(int64(hi-lo)))
}

// wanCut drops every packet on the WAN, both ways, for 5 s to the profile's cutMax.
func wanCut(ctx context.Context, r *chaosRound) (string, error) {
	hold := holdFor(r, 5*time.Second, r.profile.cutMax)
	if _, err := cluster.UpdateWAN(ctx, map[string]any{"loss": 1.0}); err != nil {
		return "", err
	}
	time.Sleep(hold) // the fault's duration
	if _, err := cluster.UpdateWAN(ctx, map[string]any{"loss": cluster.WAN.Loss}); err != nil {
		return "", err
	}
	return fmt.Sprintf("cut the WAN (100 %% loss) for %.1f s", hold.Seconds()), nil
}

// wanRateHalved halves the WAN's rate for 10–30 s.
func wanRateHalved(ctx context.Context, r *chaosRound) (string, error) {
	hold := holdFor(r, 10*time.Second, 30*time.Second)
	rate := cluster.WAN.RateBitsPerSecond
	if err := cluster.SetWANRate(ctx, rate/2); err != nil {
		return "", err
	}
	time.Sleep(hold)
	if err := cluster.SetWANRate(ctx, rate); err != nil {
		return "", err
	}
	return fmt.Sprintf("halved the WAN to %d Mbit/s for %.1f s", rate/2_000_000, hold.Seconds()), nil
}

// wanCorrupt flips bits in the TCP payload of 1–4 in 1 000 packets for 10–30 s, with
// their checksums made to agree: only dtnflow's own checks can catch them.
func wanCorrupt(ctx context.Context, r *chaosRound) (string, error) {
	hold := holdFor(r, 10*time.Second, 30*time.Second)
	p := 1e-3 * float64(1+r.rng.IntN(4))
	before, err := cluster.WANStats(ctx)
	if err != nil {
		return "", err
	}
	if _, err := cluster.UpdateWAN(ctx, map[string]any{"corrupt": p, "corruptUndetected": true}); err != nil {
		return "", err
	}
	time.Sleep(hold)
	if _, err := cluster.UpdateWAN(ctx, map[string]any{"corrupt": 0.0, "corruptUndetected": false}); err != nil {
		return "", err
	}
	after, err := cluster.WANStats(ctx)
	if err != nil {
		return "", err
	}
	n := after.AtoB.CorruptedSegments - before.AtoB.CorruptedSegments
	// (0 A→B is possible when the job was finishing and little crossed: the row's
	// detail says so.)
	return fmt.Sprintf("corrupted TCP payload past the checksum, p=%.0e, for %.1f s: %d segment(s) A→B, %d B→A", p, hold.Seconds(), n, after.BtoA.CorruptedSegments-before.BtoA.CorruptedSegments), nil
}

// apiServerRestart stops the API server and etcd, keeps them down for 2–8 s, then
// starts etcd and the API server again and waits until the API answers.
func apiServerRestart(ctx context.Context, r *chaosRound) (string, error) {
	hold := holdFor(r, 2*time.Second, 8*time.Second)
	start := time.Now()
	api, err := cluster.StopProcess("kube-apiserver")
	if err != nil {
		return "", err
	}
	etcd, err := cluster.StopProcess("etcd")
	if err != nil {
		_ = api.Start()
		return "", err
	}
	time.Sleep(hold)
	if err := etcd.Start(); err != nil {
		return "", err
	}
	if err := api.Start(); err != nil {
		return "", err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		if _, err := cluster.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("the API server was not ready within 2 minutes of its restart")
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Sprintf("stopped the API server and etcd for %.1f s (down %.1f s in all)", hold.Seconds(), time.Since(start).Seconds()), nil
}

// smallDestination mounts a tmpfs barely larger than the dataset as the job's
// destination folder, so that filling it is quick and harms nothing else.
func smallDestination(ctx context.Context, r *chaosRound) error {
	if err := os.MkdirAll(r.destRoot, 0o755); err != nil {
		return err
	}
	size := r.profile.dataset.Bytes() + 16<<20
	if out, err := exec.CommandContext(ctx, "mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "dtnflow-chaos", r.destRoot).CombinedOutput(); err != nil {
		return fmt.Errorf("mount tmpfs on %s: %v: %s", r.destRoot, err, out)
	}
	r.preparedUndo = func() {
		if exec.Command("umount", r.destRoot).Run() != nil {
			_ = exec.Command("umount", "-l", r.destRoot).Run() // a receiver still holds a file there
		}
		_ = os.RemoveAll(r.destRoot)
	}
	return nil
}

// fillDestination fills the destination's file system, holds it full until the job
// fails (at most 30 s), and frees it.
func fillDestination(ctx context.Context, r *chaosRound) (string, error) {
	filler := filepath.Join(r.destRoot, "chaos-filler")
	f, err := os.Create(filler)
	if err != nil {
		return "", err
	}
	buf := make([]byte, 1<<20)
	var filled int64
	for {
		n, err := f.Write(buf)
		filled += int64(n)
		if err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				f.Close()
				return "", err
			}
			break
		}
	}
	f.Close()
	start := time.Now()
	for time.Since(start) < 30*time.Second {
		if job, err := getJob(ctx, r.job); err == nil && finishedJob(job) {
			break
		}
		time.Sleep(250 * time.Millisecond)
	}
	held := time.Since(start)
	if err := os.Remove(filler); err != nil {
		return "", err
	}
	return fmt.Sprintf("filled the destination file system (%d MiB written) and freed it %.1f s later", filled>>20, held.Seconds()), nil
}

// resumeAfterFull runs the job again once the space is free, as the failure's message
// tells the user to: the failed TransferJob deleted and created again under the same
// name (the receivers' journal is the job's, <namespace>.<name>) resumes from what was
// kept and completes with every file identical, sending little more than what the
// failed job had not verified.
func resumeAfterFull(ctx context.Context, r *chaosRound, failed *dtnflowv1alpha1.TransferJob, res *chaosResult) {
	t := r.t
	left := r.profile.dataset.Bytes()
	if p := failed.Status.Progress; p != nil {
		left -= p.BytesDone
	}
	if err := cluster.Client.Delete(ctx, failed); err != nil {
		t.Errorf("deleting the failed job: %v", err)
		return
	}
	for deadline := time.Now().Add(time.Minute); ; {
		if _, err := getJob(ctx, failed); apierrors.IsNotFound(err) {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("the failed job %s is still there a minute after its deletion", failed.Name)
			return
		}
		time.Sleep(250 * time.Millisecond)
	}
	job := newJob(r.job.Name, string(r.job.Spec.Source.Paths[0]), string(r.job.Spec.Destination.Path))
	if err := cluster.Client.Create(ctx, job); err != nil {
		t.Errorf("creating %s: %v", job.Name, err)
		return
	}
	t.Cleanup(func() { _ = cluster.Client.Delete(context.Background(), job) })
	before, _ := cluster.WANStats(ctx)
	done, err := waitFinished(ctx, job, transferTimeout)
	after, _ := cluster.WANStats(ctx)
	if err != nil {
		t.Error(err)
		return
	}
	res.Jobs++
	sent := int64(after.AtoB.DeliveredBytes - before.AtoB.DeliveredBytes)
	res.WANBytes += sent // the dataset crossed once over both jobs: what more is re-sent
	note := fmt.Sprintf("run again after freeing space: %s; %d bytes over the WAN for the %d the failed job had not verified", outcomeOf(done), sent, left)
	res.Notes = append(res.Notes, note)
	r.logf("%s", note)
	if done.Status.State != dtnflowv1alpha1.StateComplete {
		res.Expected, res.Why = false, "the job run again after the space was freed did not complete: "+describeConditions(done)
		return
	}
	dst, err := framework.ReadTree(r.copyDir)
	if err != nil {
		t.Error(err)
		return
	}
	diffs, compared := framework.CompareTrees(arriving(r.srcTree, cluster.Destination()), dst, false)
	res.FilesChecked += compared
	res.Mismatches = append(res.Mismatches, diffs...)
	for _, d := range diffs {
		t.Errorf("after running %s again: %s", r.job.Name, d)
	}
}

// changeSource rewrites 4 KiB in the middle of a large source file that is not yet at
// its final name at the destination (so it is being sent or still to be sent), keeping
// its size: its mtime moves on.
func changeSource(ctx context.Context, r *chaosRound) (string, error) {
	var candidates []string
	for path, st := range r.srcTree {
		if st.Size < 1<<20 {
			continue
		}
		if _, err := os.Stat(filepath.Join(r.copyDir, filepath.FromSlash(path))); err == nil {
			continue
		}
		candidates = append(candidates, path)
	}
	if len(candidates) == 0 {
		return "", errors.New("every large file is already at the destination")
	}
	sort.Strings(candidates)
	r.changed = candidates[r.rng.IntN(len(candidates))]
	f, err := os.OpenFile(filepath.Join(r.source, filepath.FromSlash(r.changed)), os.O_WRONLY, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	patch := make([]byte, 4096)
	for i := range patch {
		patch[i] = byte(r.rng.IntN(256))
	}
	if _, err := f.WriteAt(patch, r.srcTree[r.changed].Size/2); err != nil {
		return "", err
	}
	return fmt.Sprintf("rewrote 4 KiB in the middle of %s", r.changed), nil
}

// sourceChangedOutcome: the job must fail naming the changed file — unless the file
// had reached its final name before the change, in which case the job completes with
// the version it listed (checkFiles compares with that version).
func sourceChangedOutcome(job *dtnflowv1alpha1.TransferJob, r *chaosRound) string {
	if job.Status.State == dtnflowv1alpha1.StateComplete {
		r.logf("completed: %s had been copied before it changed", r.changed)
		return ""
	}
	return failedWith("", r.changed)(job, r)
}

// checkTheCheck is the suite's own control: once the clean job's copy has passed, one
// destination file gets a flipped byte (size and mtime kept), another a different
// mode, a third another owner, and a file the source lacks appears; the comparison
// must name exactly those four, so that a zero in the figures means something.
func checkTheCheck(_ context.Context, r *chaosRound, final *dtnflowv1alpha1.TransferJob, res *chaosResult) {
	t := r.t
	if final.Status.State != dtnflowv1alpha1.StateComplete || len(res.Mismatches) > 0 {
		return
	}
	var paths []string
	for p, st := range r.srcTree {
		if st.Size > 0 {
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	if len(paths) < 3 {
		t.Fatalf("the control needs three non-empty files, the dataset has %d", len(paths))
	}
	at := func(p string) string { return filepath.Join(r.copyDir, filepath.FromSlash(p)) }
	flipped, chmodded, chowned := paths[0], paths[1], paths[2]
	f, err := os.OpenFile(at(flipped), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 1)
	_, _ = f.ReadAt(b, 0)
	b[0] ^= 0x20
	_, _ = f.WriteAt(b, 0)
	f.Close()
	mtime := time.Unix(0, r.srcTree[flipped].MtimeNs)
	if err := os.Chtimes(at(flipped), mtime, mtime); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(at(chmodded), r.srcTree[chmodded].Mode^0o004); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(at(chowned), 4242, 4242); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.copyDir, "planted-by-the-control"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	dst, err := framework.ReadTree(r.copyDir)
	if err != nil {
		t.Fatal(err)
	}
	diffs, _ := framework.CompareTrees(arriving(r.srcTree, cluster.Destination()), dst, false)
	want := []string{flipped + " (sha256", chmodded + " (mode", chowned + " (owner 4242:4242", "not in the source: planted-by-the-control"}
	caught := len(diffs) == len(want)
	for _, w := range want {
		found := false
		for _, d := range diffs {
			found = found || strings.Contains(d, w)
		}
		caught = caught && found
	}
	note := fmt.Sprintf("control: a flipped byte, a changed mode, a changed owner and a planted file in the copy were caught (%d differences found)", len(diffs))
	if !caught {
		t.Errorf("the check missed what the control did: found %q, want one each of %q", diffs, want)
		note = "control FAILED: " + strings.Join(diffs, "; ")
	}
	res.Notes = append(res.Notes, note)
	r.logf("%s", note)
}
