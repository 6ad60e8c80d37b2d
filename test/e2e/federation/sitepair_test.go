package federation

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/dataset"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// Named timeouts.
const (
	transferTimeout = 5 * time.Minute
	refusalTimeout  = time.Minute
	// slowWANRate is the WAN's rate while agents are killed, the control plane restarts
	// or the link is cut: the job must still be moving data then.
	slowWANRate = 60_000_000
	// revokeWANRate is the WAN's rate while the pairing is revoked: slower still, since
	// the job at A sees its progress only through B's reports, and must not have
	// finished by the time B's manager acts on the revocation.
	revokeWANRate = 20_000_000
)

// TestSitePair is the site pair in use, in order (the last step revokes the pairing):
//
//  1. a-to-b: a job at A writes to B's endpoint (B runs the receivers);
//  2. b-to-a: a job at A reads from B's endpoint (B runs coordinator and senders);
//  3. not-allowed: a path and a namespace B's TransferPeer does not grant are refused
//     with B's reason, and nothing is written at B;
//  4. agents-killed: B's receiver and A's sender SIGKILLed mid-transfer;
//  5. control-plane-b-restarted: B's API server stopped and started mid-transfer;
//  6. link-cut: the WAN between the sites drops everything for 30 s mid-transfer (the
//     data and A's manager's calls to B's API server alike);
//  7. revoked: B deletes its TransferPeer mid-transfer: the job stops at both sites
//     with a clear reason.
func TestSitePair(t *testing.T) {
	steps := []struct {
		name string
		run  func(*testing.T)
	}{
		{"a-to-b", testAToB},
		{"b-to-a", testBToA},
		{"not-allowed", testNotAllowed},
		{"agents-killed", testAgentsKilled},
		{"control-plane-b-restarted", testControlPlaneRestarted},
		{"link-cut", testLinkCut},
		{"revoked", testRevoked},
	}
	for _, step := range steps {
		t.Run(step.name, func(t *testing.T) {
			t.Cleanup(func() {
				if t.Failed() {
					dump(t.Name())
				}
			})
			step.run(t)
		})
	}
}

// writeDataset writes spec at a site's storage under rel (removed when the test ends).
func writeDataset(t *testing.T, site *framework.Site, rel string, spec framework.DatasetSpec) string {
	t.Helper()
	dir := filepath.Join(site.Storage, rel)
	_ = os.RemoveAll(dir)
	if err := spec.Write(dir); err != nil {
		t.Fatal(err)
	}
	t.Logf("dataset %s at %s: %d files, %.1f MiB", rel, site.Name, len(spec.Files()), float64(spec.Bytes())/(1<<20))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// toB is a job at A that moves rel (at A) to site B under grantedIn/<dir>.
func toB(name, rel, dir string) *dtnflowv1alpha1.TransferJob {
	return &dtnflowv1alpha1.TransferJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: jobNamespace},
		Spec: dtnflowv1alpha1.TransferJobSpec{
			Source:      dtnflowv1alpha1.TransferSource{Endpoint: "site-a", Paths: []dtnflowv1alpha1.RelativePath{dtnflowv1alpha1.RelativePath(rel)}},
			Destination: dtnflowv1alpha1.TransferDestination{Endpoint: "site-b", Site: siteBName, Path: dtnflowv1alpha1.RelativePath(grantedIn + "/" + dir)},
		},
	}
}

// create creates a job at A and deletes it (and the copy at dest) when the test ends.
func create(ctx context.Context, t *testing.T, job *dtnflowv1alpha1.TransferJob, destRoot string) {
	t.Helper()
	_ = os.RemoveAll(destRoot)
	if err := siteA.Client.Create(ctx, job); err != nil {
		t.Fatalf("creating TransferJob %s: %v", job.Name, err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dump(t.Name())
		}
		_ = siteA.Client.Delete(context.Background(), job, client.PropagationPolicy(metav1.DeletePropagationBackground))
		_ = os.RemoveAll(destRoot)
	})
}

func getJob(ctx context.Context, job *dtnflowv1alpha1.TransferJob) (*dtnflowv1alpha1.TransferJob, error) {
	var got dtnflowv1alpha1.TransferJob
	err := siteA.Client.Get(ctx, client.ObjectKeyFromObject(job), &got)
	return &got, err
}

func describe(job *dtnflowv1alpha1.TransferJob) string {
	var parts []string
	for _, c := range job.Status.Conditions {
		parts = append(parts, fmt.Sprintf("%s=%s (%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	if r := job.Status.Remote; r != nil {
		parts = append(parts, fmt.Sprintf("remote %s accepted=%s (%s: %s)", r.Site, r.Accepted, r.Reason, r.Message))
	}
	return fmt.Sprintf("state %q; %s", job.Status.State, strings.Join(parts, "; "))
}

// waitComplete waits for the job to complete, failing at once if it fails.
func waitComplete(ctx context.Context, g Gomega, job *dtnflowv1alpha1.TransferJob) *dtnflowv1alpha1.TransferJob {
	var got *dtnflowv1alpha1.TransferJob
	g.Eventually(func(g Gomega) {
		var err error
		got, err = getJob(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		if got.Status.State == dtnflowv1alpha1.StateFailed {
			StopTrying("TransferJob " + job.Name + " failed: " + describe(got)).Now()
		}
		g.Expect(got.Status.State).To(Equal(dtnflowv1alpha1.StateComplete), describe(got))
	}).WithTimeout(transferTimeout).WithPolling(time.Second).Should(Succeed())
	return got
}

// waitProgress waits until the job has verified at least fraction of its bytes.
func waitProgress(ctx context.Context, g Gomega, job *dtnflowv1alpha1.TransferJob, fraction float64) {
	g.Eventually(func(g Gomega) {
		got, err := getJob(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		if got.Status.State == dtnflowv1alpha1.StateComplete || got.Status.State == dtnflowv1alpha1.StateFailed {
			StopTrying(fmt.Sprintf("TransferJob %s ended before %.0f%%: %s", job.Name, 100*fraction, describe(got))).Now()
		}
		g.Expect(got.Status.Progress).NotTo(BeNil(), describe(got))
		g.Expect(float64(got.Status.Progress.BytesDone)).To(BeNumerically(">=", fraction*float64(got.Status.Progress.BytesTotal)), describe(got))
		g.Expect(got.Status.Progress.BytesTotal).To(BeNumerically(">", 0))
	}).WithTimeout(transferTimeout).WithPolling(500 * time.Millisecond).Should(Succeed())
}

// expectCopy checks every file's SHA-256 at the destination and that every file and
// folder there belongs to the destination site's owner.
func expectCopy(t *testing.T, source, dest string, owner *framework.Site) {
	t.Helper()
	diff, files, err := dataset.CompareFolders(source, dest)
	if err != nil {
		t.Fatal(err)
	}
	if diff != "" {
		t.Fatalf("the copy at %s differs from %s:\n%s", dest, source, diff)
	}
	wrong, err := framework.WrongOwners(dest, owner.Owner.User, owner.Owner.Group)
	if err != nil {
		t.Fatal(err)
	}
	if len(wrong) > 0 {
		t.Fatalf("files at %s not owned by %s's agents' user %d:%d:\n%s", dest, owner.Name, owner.Owner.User, owner.Owner.Group, strings.Join(wrong, "\n"))
	}
	t.Logf("all %d files identical (SHA-256) and owned by %d:%d at %s", files, owner.Owner.User, owner.Owner.Group, owner.Name)
}

// remoteTransfers lists the RemoteTransfers at B.
func remoteTransfers(ctx context.Context, g Gomega) []dtnflowv1alpha1.RemoteTransfer {
	var list dtnflowv1alpha1.RemoteTransferList
	g.Expect(siteB.Client.List(ctx, &list, client.InNamespace(peerNamespace))).To(Succeed())
	return list.Items
}

// podsAt lists dtnflow's live agent pods in a namespace of a site.
func podsAt(ctx context.Context, g Gomega, c *framework.Cluster, ns string) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(c.Client.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{contract.LabelManagedBy: contract.ManagedByValue})).To(Succeed())
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
			live = append(live, p)
		}
	}
	return live
}

func testAToB(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a, b := siteA.Site("site-a"), siteA.Site("site-b")
	spec := framework.DatasetSpec{Seed: 21, Large: 2, LargeBytes: 48 << 20, Medium: 6, Small: 120, Empty: 2}
	source := writeDataset(t, a, "fed/ab", spec)
	job := toB("a-to-b", "fed/ab", "ab")
	destRoot := filepath.Join(b.Storage, grantedIn, "ab")
	create(ctx, t, job, destRoot)
	// B's side, seen at B: receivers in the peer's namespace, on B's node, encrypted only
	g.Eventually(func(g Gomega) {
		pods := podsAt(ctx, g, siteB, peerNamespace)
		g.Expect(pods).NotTo(BeEmpty())
		for _, p := range pods {
			g.Expect(p.Labels[contract.LabelRole]).To(Equal(string(contract.RoleReceiver)))
			g.Expect(p.Spec.NodeName).To(HavePrefix("site-b"))
			g.Expect(p.Spec.Containers[0].Args).To(ContainElements("--require-encryption", "--confine", grantedIn+"/ab"))
		}
	}).WithTimeout(transferTimeout).WithPolling(time.Second).Should(Succeed())
	done := waitComplete(ctx, g, job)
	r := done.Status.Remote
	g.Expect(r).NotTo(BeNil())
	g.Expect(r.Accepted).To(Equal(metav1.ConditionTrue))
	g.Expect(done.Status.Plan.DestinationNodes).To(ContainElement(HavePrefix("site-b")), "A's plan is over B's nodes")
	t.Logf("complete: %s; plan %s; B's side %s (%s)", done.Status.Progress.Rate, describeShape(done), r.Transfer, r.Message)
	expectCopy(t, source, filepath.Join(destRoot, "fed/ab"), b)
	expectReleasedAtB(ctx, g)
}

// expectReleasedAtB waits until B holds nothing for a finished job: no remote transfer
// and no live agent pod in the peer's namespace. Besides being what a done job owes the
// peer, it keeps a later subtest's "no agent at B" from seeing this job's pods on their
// way out.
func expectReleasedAtB(ctx context.Context, g Gomega) {
	g.Eventually(func(g Gomega) {
		g.Expect(remoteTransfers(ctx, g)).To(BeEmpty())
		g.Expect(podsAt(ctx, g, siteB, peerNamespace)).To(BeEmpty())
	}).WithTimeout(refusalTimeout).WithPolling(time.Second).Should(Succeed())
}

func testBToA(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a, b := siteA.Site("site-a"), siteA.Site("site-b")
	spec := framework.DatasetSpec{Seed: 22, Large: 2, LargeBytes: 40 << 20, Medium: 4, Small: 80, Empty: 1}
	source := writeDataset(t, b, grantedOut+"/ba", spec)
	job := &dtnflowv1alpha1.TransferJob{
		ObjectMeta: metav1.ObjectMeta{Name: "b-to-a", Namespace: jobNamespace},
		Spec: dtnflowv1alpha1.TransferJobSpec{
			Source:      dtnflowv1alpha1.TransferSource{Endpoint: "site-b", Site: siteBName, Paths: []dtnflowv1alpha1.RelativePath{grantedOut + "/ba"}},
			Destination: dtnflowv1alpha1.TransferDestination{Endpoint: "site-a", Path: "incoming/from-b"},
		},
	}
	destRoot := filepath.Join(a.Storage, "incoming/from-b")
	create(ctx, t, job, destRoot)
	g.Eventually(func(g Gomega) {
		roles := map[string]bool{}
		for _, p := range podsAt(ctx, g, siteB, peerNamespace) {
			roles[p.Labels[contract.LabelRole]] = true
			g.Expect(p.Spec.NodeName).To(HavePrefix("site-b"))
		}
		g.Expect(roles).To(HaveKey(string(contract.RoleCoordinator)), "B runs the coordinator")
	}).WithTimeout(transferTimeout).WithPolling(time.Second).Should(Succeed())
	done := waitComplete(ctx, g, job)
	g.Expect(done.Status.Plan.SourceNodes).To(ContainElement(HavePrefix("site-b")))
	t.Logf("complete: %s; plan %s", done.Status.Progress.Rate, describeShape(done))
	expectCopy(t, source, filepath.Join(destRoot, grantedOut, "ba"), a)
	expectReleasedAtB(ctx, g)
}

func testNotAllowed(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a, b := siteA.Site("site-a"), siteA.Site("site-b")
	writeDataset(t, a, "fed/refused", framework.DatasetSpec{Seed: 23, Small: 10})
	outside := toB("outside-grant", "fed/refused", "x")
	outside.Spec.Destination.Path = "private/from-a"
	create(ctx, t, outside, filepath.Join(b.Storage, "private"))
	stranger := toB("stranger", "fed/refused", "stranger")
	stranger.Namespace = "e2e-other"
	create(ctx, t, stranger, filepath.Join(b.Storage, grantedIn, "stranger"))
	for _, c := range []struct {
		job    *dtnflowv1alpha1.TransferJob
		reason string
	}{{outside, "PathNotGranted"}, {stranger, "NamespaceNotAllowed"}} {
		g.Eventually(func(g Gomega) {
			got, err := getJob(ctx, c.job)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got.Status.Remote).NotTo(BeNil(), describe(got))
			g.Expect(got.Status.Remote.Reason).To(Equal(c.reason), describe(got))
			cond := condition(got, dtnflowv1alpha1.ConditionPlanned)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(Equal("RemoteRefused"))
			g.Expect(cond.Message).To(ContainSubstring(c.reason))
			t.Logf("%s refused: %s", c.job.Name, cond.Message)
		}).WithTimeout(refusalTimeout).WithPolling(time.Second).Should(Succeed())
	}
	g.Consistently(func(g Gomega) {
		g.Expect(podsAt(ctx, g, siteB, peerNamespace)).To(BeEmpty(), "no agent at B")
		g.Expect(podsAt(ctx, g, siteA, jobNamespace)).To(BeEmpty(), "no agent at A")
		g.Expect(podsAt(ctx, g, siteA, "e2e-other")).To(BeEmpty(), "no agent at A")
		_, err := os.Stat(filepath.Join(b.Storage, "private"))
		g.Expect(os.IsNotExist(err)).To(BeTrue(), "nothing written at B")
	}).WithTimeout(5 * time.Second).WithPolling(time.Second).Should(Succeed())
}

func condition(job *dtnflowv1alpha1.TransferJob, typ string) *metav1.Condition {
	for i := range job.Status.Conditions {
		if job.Status.Conditions[i].Type == typ {
			return &job.Status.Conditions[i]
		}
	}
	return nil
}

func describeShape(job *dtnflowv1alpha1.TransferJob) string {
	p := job.Status.Plan
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("%v → %v, %d stripe(s)/node × %d streams", p.SourceNodes, p.DestinationNodes, p.StripesPerNode, p.StreamsPerStripe)
}

// slowWAN slows the WAN to rate for the test, so that a job is still moving data when
// things break under it.
func slowWAN(t *testing.T, g Gomega, rate int64) {
	full := siteA.WAN.RateBitsPerSecond
	g.Expect(siteA.SetWANRate(context.Background(), rate)).To(Succeed())
	t.Cleanup(func() { _ = siteA.SetWANRate(context.Background(), full) })
}

// runningPod waits for a running agent pod of role in ns at site c.
func runningPod(ctx context.Context, g Gomega, c *framework.Cluster, ns string, role contract.Role) corev1.Pod {
	var victim corev1.Pod
	g.Eventually(func(g Gomega) {
		found := false
		for _, p := range podsAt(ctx, g, c, ns) {
			if p.Labels[contract.LabelRole] == string(role) && p.Status.Phase == corev1.PodRunning &&
				len(p.Status.ContainerStatuses) > 0 && p.Status.ContainerStatuses[0].State.Running != nil {
				victim, found = p, true
			}
		}
		g.Expect(found).To(BeTrue(), "no running %s", role)
	}).WithTimeout(time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	return victim
}

func testAgentsKilled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a, b := siteA.Site("site-a"), siteA.Site("site-b")
	// 400 MiB: over a minute at the slow WAN's rate, so that both kills come
	// mid-transfer though A sees B's progress only as often as B reports it (a gap of
	// 17 s, 125 MB, was seen after B's receiver was killed)
	spec := framework.DatasetSpec{Seed: 24, Large: 24, LargeBytes: 16 << 20, Medium: 2, Small: 40}
	source := writeDataset(t, a, "fed/killed", spec)
	slowWAN(t, g, slowWANRate)
	job := toB("killed", "fed/killed", "killed")
	destRoot := filepath.Join(b.Storage, grantedIn, "killed")
	create(ctx, t, job, destRoot)
	waitProgress(ctx, g, job, 0.1)
	recv := runningPod(ctx, g, siteB, peerNamespace, contract.RoleReceiver)
	n, err := siteB.KillContainer(&recv, "agent")
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("SIGKILLed %d process(es) of B's receiver %s", n, recv.Name)
	waitProgress(ctx, g, job, 0.3)
	send := runningPod(ctx, g, siteA, jobNamespace, contract.RoleSender)
	n, err = siteA.KillContainer(&send, "agent")
	g.Expect(err).NotTo(HaveOccurred())
	t.Logf("SIGKILLed %d process(es) of A's sender %s", n, send.Name)
	done := waitComplete(ctx, g, job)
	g.Expect(done.Status.AgentFailures).To(BeNumerically(">=", 2), "both kills counted: %s", describe(done))
	g.Expect(done.Status.Remote.AgentFailures).To(BeNumerically(">=", 1), "B's failure shows at A")
	expectCopy(t, source, filepath.Join(destRoot, "fed/killed"), b)
}

func testControlPlaneRestarted(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a, b := siteA.Site("site-a"), siteA.Site("site-b")
	spec := framework.DatasetSpec{Seed: 25, Large: 10, LargeBytes: 16 << 20, Small: 20}
	source := writeDataset(t, a, "fed/cp", spec)
	slowWAN(t, g, slowWANRate)
	job := toB("cp-restarted", "fed/cp", "cp")
	destRoot := filepath.Join(b.Storage, grantedIn, "cp")
	create(ctx, t, job, destRoot)
	waitProgress(ctx, g, job, 0.15)
	t.Logf("stopping site B's API server for 20 s")
	g.Expect(siteA.RestartControlPlane(ctx, "kube-apiserver-b", 20*time.Second)).To(Succeed())
	done := waitComplete(ctx, g, job)
	t.Logf("complete after B's API server came back: %s", describe(done))
	expectCopy(t, source, filepath.Join(destRoot, "fed/cp"), b)
}

// linkCut is how long the WAN drops everything in testLinkCut.
const linkCut = 30 * time.Second

func testLinkCut(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a, b := siteA.Site("site-a"), siteA.Site("site-b")
	// 384 MiB: over a minute at the slow WAN's rate, so that the cut comes mid-transfer
	// whatever the interval between the coordinator's reports
	spec := framework.DatasetSpec{Seed: 27, Large: 24, LargeBytes: 16 << 20, Small: 20}
	source := writeDataset(t, a, "fed/cut", spec)
	slowWAN(t, g, slowWANRate)
	job := toB("link-cut", "fed/cut", "cut")
	destRoot := filepath.Join(b.Storage, grantedIn, "cut")
	create(ctx, t, job, destRoot)
	waitProgress(ctx, g, job, 0.05)
	w := siteA.WAN
	delay := time.Duration(w.DelayMillis) * time.Millisecond
	g.Expect(siteA.SetWAN(ctx, w.RateBitsPerSecond, delay, 1, 0)).To(Succeed())
	restored := false
	restore := func() {
		if !restored {
			restored = true
			g.Expect(siteA.SetWAN(context.Background(), w.RateBitsPerSecond, delay, w.Loss, 0)).To(Succeed())
		}
	}
	t.Cleanup(restore)
	t.Logf("the WAN drops everything for %s", linkCut)
	// the job waits through the cut: it neither fails nor completes
	g.Consistently(func(g Gomega) {
		got, err := getJob(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.Status.State).NotTo(BeElementOf(dtnflowv1alpha1.StateFailed, dtnflowv1alpha1.StateComplete), describe(got))
	}).WithTimeout(linkCut).WithPolling(time.Second).Should(Succeed())
	restore()
	done := waitComplete(ctx, g, job)
	t.Logf("complete after the link came back: %s", describe(done))
	expectCopy(t, source, filepath.Join(destRoot, "fed/cut"), b)
}

func testRevoked(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	a, b := siteA.Site("site-a"), siteA.Site("site-b")
	writeDataset(t, a, "fed/revoked", framework.DatasetSpec{Seed: 26, Large: 12, LargeBytes: 16 << 20})
	slowWAN(t, g, revokeWANRate)
	job := toB("revoked", "fed/revoked", "revoked")
	create(ctx, t, job, filepath.Join(b.Storage, grantedIn, "revoked"))
	waitProgress(ctx, g, job, 0.1)
	peer := &dtnflowv1alpha1.TransferPeer{ObjectMeta: metav1.ObjectMeta{Name: peerName}}
	g.Expect(siteB.Client.Delete(ctx, peer)).To(Succeed())
	t.Logf("site B deleted TransferPeer %s", peerName)
	g.Eventually(func(g Gomega) {
		got, err := getJob(ctx, job)
		g.Expect(err).NotTo(HaveOccurred())
		cond := condition(got, dtnflowv1alpha1.ConditionPlanned)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(BeElementOf("RemoteUnauthorized", "RemoteRefused"), describe(got))
		g.Expect(cond.Message).To(Or(ContainSubstring("revoked"), ContainSubstring("PeerNotFound")), describe(got))
		g.Expect(got.Status.State).NotTo(Equal(dtnflowv1alpha1.StateTransferring))
		g.Expect(podsAt(ctx, g, siteA, jobNamespace)).To(BeEmpty(), "A's agents stopped")
		g.Expect(podsAt(ctx, g, siteB, peerNamespace)).To(BeEmpty(), "B's agents stopped")
		t.Logf("stopped: %s", cond.Message)
	}).WithTimeout(2 * time.Minute).WithPolling(time.Second).Should(Succeed())
	// and the credential itself no longer works at B
	g.Eventually(func(g Gomega) {
		var site dtnflowv1alpha1.RemoteSite
		g.Expect(siteA.Client.Get(ctx, client.ObjectKey{Name: siteBName}, &site)).To(Succeed())
		c := site.Status.Conditions
		g.Expect(c).NotTo(BeEmpty())
		g.Expect(string(c[0].Status)).To(Equal("False"))
		g.Expect(c[0].Reason).To(Equal("RemoteUnauthorized"))
	}).WithTimeout(3 * time.Minute).WithPolling(2 * time.Second).Should(Succeed())
}
