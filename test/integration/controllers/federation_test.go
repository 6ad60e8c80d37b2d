package controllers

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
)

// One API server plays both sites here: site B's TransferPeer, endpoint and peer
// namespace, and site A's RemoteSite and jobs. What crosses between them goes only
// through the credential B's manager issued (a ServiceAccount token the API server
// authorizes with the peer Role), as between two clusters; the two-cluster run is the
// e2e's (test/e2e/federation).

// pairing is a site pair set up as a user would: B's TransferPeer, its credential as a
// kubeconfig in A's manager namespace, and A's RemoteSite.
type pairing struct {
	site     string // the RemoteSite's name at A
	peer     *dtnflowv1alpha1.TransferPeer
	peerNS   string
	jobNS    string
	served   site
	local    site
	kubeconf []byte
}

// pairSites makes B's TransferPeer granting grants to jobs of a new namespace, waits for
// the credential, and gives A a RemoteSite with it.
func pairSites(t *testing.T, mgrNS string, grants func(served site) []dtnflowv1alpha1.TransferGrant) *pairing {
	t.Helper()
	ctx := context.Background()
	p := &pairing{site: unique("site-b"), peerNS: createNamespace(t, nil), jobNS: createNamespace(t, nil)}
	p.local = newSite(t, "a", siteOptions{})
	p.served = newSite(t, "b", siteOptions{budget: "2"})
	p.peer = &dtnflowv1alpha1.TransferPeer{ObjectMeta: metav1.ObjectMeta{Name: unique("site-a")},
		Spec: dtnflowv1alpha1.TransferPeerSpec{Namespace: p.peerNS, RemoteNamespaces: []string{p.jobNS}, Grants: grants(p.served)}}
	if err := env.Client.Create(ctx, p.peer); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) {
		var got dtnflowv1alpha1.TransferPeer
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(p.peer), &got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, dtnflowv1alpha1.ConditionReady)).To(BeTrue(), "%v", got.Status.Conditions)
		g.Expect(got.Status.CredentialSecret).To(Equal(controllers.PeerTokenSecretName(p.peer.Name)))
	})
	// No token controller runs here (it is kube-controller-manager's): ask for a token
	// of the peer's ServiceAccount instead of reading the token Secret.
	cs := kubernetes.NewForConfigOrDie(env.Config)
	tok, err := cs.CoreV1().ServiceAccounts(p.peerNS).CreateToken(ctx, controllers.PeerAccountName(p.peer.Name),
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("a token for the peer's ServiceAccount: %v", err)
	}
	p.kubeconf = kubeconfig(env.Config.Host, env.Config.CAData, tok.Status.Token)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: mgrNS, Name: p.site + "-kubeconfig"}, Data: map[string][]byte{controllers.KubeconfigKey: p.kubeconf}}
	if err := env.Client.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	rsite := &dtnflowv1alpha1.RemoteSite{ObjectMeta: metav1.ObjectMeta{Name: p.site},
		Spec: dtnflowv1alpha1.RemoteSiteSpec{KubeconfigSecret: secret.Name, Namespace: p.peerNS, NamespaceSelector: &metav1.LabelSelector{}}}
	if err := env.Client.Create(ctx, rsite); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) {
		var got dtnflowv1alpha1.RemoteSite
		g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(rsite), &got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, dtnflowv1alpha1.ConditionConnected)).To(BeTrue(), "%v", got.Status.Conditions)
	})
	return p
}

func kubeconfig(host string, ca []byte, token string) []byte {
	b, _ := json.Marshal(map[string]any{
		"apiVersion": "v1", "kind": "Config", "current-context": "peer",
		"clusters": []any{map[string]any{"name": "peer", "cluster": map[string]any{"server": host, "certificate-authority-data": ca}}},
		"users":    []any{map[string]any{"name": "peer", "user": map[string]any{"token": token}}},
		"contexts": []any{map[string]any{"name": "peer", "context": map[string]any{"cluster": "peer", "user": "peer"}}},
	})
	return b
}

// remoteTransfers lists the RemoteTransfers at B in the peer's namespace.
func remoteTransfers(g Gomega, ns string) []dtnflowv1alpha1.RemoteTransfer {
	var list dtnflowv1alpha1.RemoteTransferList
	g.Expect(env.Client.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	return list.Items
}

// peerPods lists the agent pods B runs in the peer's namespace.
func peerPods(g Gomega, ns string) []corev1.Pod {
	var pods corev1.PodList
	g.Expect(env.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{contract.LabelManagedBy: contract.ManagedByValue})).To(Succeed())
	var live []corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live = append(live, p)
		}
	}
	return live
}

// writeGrant grants the pair's jobs write access to B's endpoint under incoming/site-a.
func writeGrant(served site) []dtnflowv1alpha1.TransferGrant {
	return []dtnflowv1alpha1.TransferGrant{{Endpoint: served.name, Access: dtnflowv1alpha1.GrantWrite, Paths: []dtnflowv1alpha1.RelativePath{"incoming/site-a"}}}
}

// jobToPeer creates a job at A writing to path at B's endpoint.
func jobToPeer(t *testing.T, p *pairing, name, path string) *dtnflowv1alpha1.TransferJob {
	t.Helper()
	spec := fixedSpec(p.local, p.served)
	spec.Destination.Site, spec.Destination.Path = p.site, dtnflowv1alpha1.RelativePath(path)
	return createJob(t, p.jobNS, name, spec)
}

// runAtB plays B's kubelet: B's agent pods that wait start.
func runAtB(g Gomega, peerNS string) {
	for _, pod := range peerPods(g, peerNS) {
		if pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending {
			setPhase(g, &pod, corev1.PodRunning)
		}
	}
}

// startAtA plays A's kubelet, and A's coordinator's first report while the job has no
// plan; it returns A's agent pods.
func startAtA(g Gomega, job *dtnflowv1alpha1.TransferJob) agentPods {
	pods := runAll(g, job)
	if pods.coordinator != nil && getJob(g, job).Status.Plan == nil {
		report(g, job, contract.Report{Phase: contract.PhaseStarting, Time: time.Now(), Dataset: dataset, BytesTotal: dataset.Bytes, FilesTotal: dataset.Files})
	}
	return pods
}

// sendersReachThePeer asserts that B's one RemoteTransfer publishes an address for each
// stripe and that each of A's four senders sends to one of them.
func sendersReachThePeer(g Gomega, peerNS string, pods agentPods) {
	rts := remoteTransfers(g, peerNS)
	g.Expect(rts).To(HaveLen(1))
	addrs := map[string]bool{}
	for _, s := range rts[0].Status.Stripes {
		g.Expect(s.Address).NotTo(BeEmpty(), "stripe %d has no receiver address", s.Index)
		addrs[s.Address] = true
	}
	g.Expect(pods.senders).To(HaveLen(4))
	for _, s := range pods.senders {
		args := s.Spec.Containers[0].Args
		g.Expect(addrs).To(HaveKey(args[indexOf(args, "--receiver")+1]), "sender %s", s.Name)
	}
}

// TestSitePair follows a job at A whose destination B serves: the credential B issued
// is all A uses; B runs the receivers on its nodes, confined to the granted path,
// encrypted, as its endpoint's owner; A's senders connect to B's receivers; A's status
// shows B's side. A job outside the grant is refused with B's reason and nothing runs
// at either site; a job from a namespace B does not name likewise. Deleting the
// TransferPeer at B stops the running job at both sites with a clear reason.
func TestSitePair(t *testing.T) {
	clk := newClock()
	mgrNS := createNamespace(t, nil)
	startManager(t, clk, managerOptions{namespace: mgrNS})
	p := pairSites(t, mgrNS, writeGrant)
	job := jobToPeer(t, p, "outbound", "incoming/site-a/run1")

	var rt dtnflowv1alpha1.RemoteTransfer
	eventually(t, func(g Gomega) {
		rts := remoteTransfers(g, p.peerNS)
		g.Expect(rts).To(HaveLen(1))
		rt = rts[0]
		g.Expect(rt.Spec.Side).To(Equal(dtnflowv1alpha1.RemoteSideDestination))
		g.Expect(rt.Spec.Origin.Namespace).To(Equal(p.jobNS))
		g.Expect(rt.Spec.Integrity.InFlight).To(Equal(dtnflowv1alpha1.InFlightEncrypted), "between sites the default is Encrypted")
		g.Expect(meta.IsStatusConditionTrue(rt.Status.Conditions, dtnflowv1alpha1.ConditionAccepted)).To(BeTrue(), "%v", rt.Status.Conditions)
		g.Expect(rt.Spec.SecretName).NotTo(BeEmpty())
		g.Expect(rt.Spec.Stripes).To(BeNumerically(">", 0))
		// B plays its kubelet: its receivers start
		runAtB(g, p.peerNS)
		// A plays its kubelet and coordinator
		pods := startAtA(g, job)
		j := getJob(g, job)
		g.Expect(j.Status.Plan).NotTo(BeNil())
		g.Expect(pods.receivers).To(BeEmpty(), "receivers run at B")
		g.Expect(pods.senders).To(HaveLen(4))
		g.Expect(peerPods(g, p.peerNS)).To(HaveLen(4))
	})
	// B's receivers: confined, encrypted only, as B's owner, mounting the job's secret
	// that A wrote there; A's senders connect to their addresses.
	eventually(t, func(g Gomega) {
		// both sites still play their kubelets: a sender made again after the first
		// wait (its receiver's address came later) must start too
		runAtB(g, p.peerNS)
		runAll(g, job)
		addrs := map[string]bool{}
		for _, pod := range peerPods(g, p.peerNS) {
			c := pod.Spec.Containers[0]
			g.Expect(c.Args).To(ContainElements("receive", "--confine", "incoming/site-a/run1", "--require-encryption"))
			g.Expect(pod.Spec.SecurityContext.RunAsUser).To(Equal(ptr.To[int64](65532)))
			g.Expect(pod.Spec.Volumes[1].Secret.SecretName).To(Equal(rt.Spec.SecretName))
			g.Expect(metav1.GetControllerOf(&pod).Kind).To(Equal("RemoteTransfer"))
			g.Expect(pod.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms[0].MatchFields[0].Values[0]).To(HavePrefix(p.served.name))
		}
		var got dtnflowv1alpha1.RemoteTransfer
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(&rt), &got)).To(Succeed())
		for _, s := range got.Status.Stripes {
			g.Expect(s.Address).NotTo(BeEmpty(), "stripe %d has no receiver address", s.Index)
			addrs[s.Address] = true
		}
		pods := listAgents(g, job)
		for _, s := range pods.senders {
			args := s.Spec.Containers[0].Args
			i := indexOf(args, "--receiver")
			g.Expect(addrs).To(HaveKey(args[i+1]))
			g.Expect(s.Spec.Volumes[1].Secret.SecretName).To(HaveSuffix(rt.Spec.SecretName[len(rt.Spec.SecretName)-6:]), "A's secret and B's carry the same suffix")
		}
		g.Expect(pods.coordinator.Spec.Containers[0].Args).To(ContainElements("--in-flight", "Encrypted"))
		j := getJob(g, job)
		g.Expect(j.Status.Remote).NotTo(BeNil())
		g.Expect(j.Status.Remote.Accepted).To(Equal(metav1.ConditionTrue))
		g.Expect(j.Status.Remote.Transfer).To(Equal(p.peerNS + "/" + rt.Name))
		g.Expect(j.Status.Remote.Nodes).NotTo(BeEmpty())
		for _, s := range j.Status.Stripes {
			g.Expect(s.DestinationNode).To(HavePrefix(p.served.name))
			g.Expect(s.State).To(Equal(dtnflowv1alpha1.StripeRunning))
		}
	})

	// Outside the grant: B refuses with its reason; nothing runs anywhere.
	outside := fixedSpec(p.local, p.served)
	outside.Destination.Site, outside.Destination.Path = p.site, "etc"
	refused := createJob(t, p.jobNS, "outside", outside)
	eventually(t, func(g Gomega) {
		j := getJob(g, refused)
		g.Expect(reason(j, dtnflowv1alpha1.ConditionPlanned)).To(Equal(controllers.ReasonRemoteRefused))
		g.Expect(condition(j, dtnflowv1alpha1.ConditionPlanned).Message).To(ContainSubstring("PathNotGranted"))
		g.Expect(j.Status.Remote.Reason).To(Equal(controllers.ReasonPathNotGranted))
		g.Expect(listAgents(g, refused).all).To(BeEmpty())
	})
	// A namespace B does not name: refused too.
	otherNS := createNamespace(t, nil)
	inside := fixedSpec(p.local, p.served)
	inside.Destination.Site, inside.Destination.Path = p.site, "incoming/site-a/run2"
	stranger := createJob(t, otherNS, "stranger", inside)
	eventually(t, func(g Gomega) {
		j := getJob(g, stranger)
		g.Expect(reason(j, dtnflowv1alpha1.ConditionPlanned)).To(Equal(controllers.ReasonRemoteRefused))
		g.Expect(j.Status.Remote.Reason).To(Equal(controllers.ReasonRemoteNamespace))
		g.Expect(listAgents(g, stranger).all).To(BeEmpty())
	})
	consistently(t, func(g Gomega) {
		g.Expect(peerPods(g, p.peerNS)).To(HaveLen(4), "only the granted job's receivers run at B")
	})

	// Revoked at B: the running job stops at both sites, with B's reason.
	if err := env.Client.Delete(context.Background(), p.peer); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		c := condition(j, dtnflowv1alpha1.ConditionPlanned)
		g.Expect(c.Reason).To(BeElementOf(controllers.ReasonRemoteRefused, controllers.ReasonRemoteUnauthorized))
		g.Expect(c.Message).To(Or(ContainSubstring("revoked"), ContainSubstring("PeerNotFound")))
		g.Expect(listAgents(g, job).all).To(BeEmpty())
		g.Expect(peerPods(g, p.peerNS)).To(BeEmpty())
		g.Expect(j.Status.State).NotTo(Equal(dtnflowv1alpha1.StateTransferring))
	})
}

// TestSitePairPeerRunsTheSource follows a job at A whose source B serves: B runs the
// coordinator and senders (its directive from A's plan, through the RemoteTransfer),
// A the receivers, and the coordinator's report at B becomes A's job's progress.
func TestSitePairPeerRunsTheSource(t *testing.T) {
	clk := newClock()
	mgrNS := createNamespace(t, nil)
	startManager(t, clk, managerOptions{namespace: mgrNS})
	p := pairSites(t, mgrNS, func(served site) []dtnflowv1alpha1.TransferGrant {
		return []dtnflowv1alpha1.TransferGrant{{Endpoint: served.name, Access: dtnflowv1alpha1.GrantRead, Paths: []dtnflowv1alpha1.RelativePath{"runs"}}}
	})
	spec := fixedSpec(p.served, p.local)
	spec.Source.Site = p.site
	job := createJob(t, p.jobNS, "inbound", spec)
	ctx := context.Background()
	eventually(t, func(g Gomega) {
		rts := remoteTransfers(g, p.peerNS)
		g.Expect(rts).To(HaveLen(1))
		rt := rts[0]
		g.Expect(rt.Spec.Side).To(Equal(dtnflowv1alpha1.RemoteSideSource))
		g.Expect(meta.IsStatusConditionTrue(rt.Status.Conditions, dtnflowv1alpha1.ConditionAccepted)).To(BeTrue(), "%v", rt.Status.Conditions)
		var coord *corev1.Pod
		for _, pod := range peerPods(g, p.peerNS) {
			if pod.Status.Phase == "" || pod.Status.Phase == corev1.PodPending {
				setPhase(g, &pod, corev1.PodRunning)
			}
			if pod.Labels[contract.LabelRole] == string(contract.RoleCoordinator) {
				coord = &pod
			}
		}
		g.Expect(coord).NotTo(BeNil(), "B runs the coordinator")
		g.Expect(coord.Annotations[contract.AnnotationDirective]).To(Equal(rt.Spec.Directive))
		if getJob(g, job).Status.Plan == nil && !strings.Contains(coord.Annotations[contract.AnnotationReport], "Starting") {
			b, _ := json.Marshal(contract.Report{Phase: contract.PhaseStarting, Time: time.Now(), Dataset: dataset, BytesTotal: dataset.Bytes, FilesTotal: dataset.Files})
			patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.AnnotationReport: string(b)}}})
			g.Expect(env.Client.Patch(ctx, coord, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
		}
		pods := runAll(g, job)
		g.Expect(pods.coordinator).To(BeNil(), "the coordinator runs at B")
		g.Expect(pods.senders).To(BeEmpty(), "senders run at B")
		g.Expect(pods.receivers).To(HaveLen(4))
		j := getJob(g, job)
		g.Expect(j.Status.Plan).NotTo(BeNil())
		var d contract.Directive
		g.Expect(json.Unmarshal([]byte(rt.Spec.Directive), &d)).To(Succeed())
		g.Expect(d.Mode).To(Equal(contract.ModeTransfer))
		g.Expect(rt.Spec.Receivers).To(HaveLen(4))
		senders := 0
		for _, pod := range peerPods(g, p.peerNS) {
			if pod.Labels[contract.LabelRole] == string(contract.RoleSender) {
				senders++
				g.Expect(pod.Spec.Containers[0].Args).To(ContainElement(BeElementOf(rt.Spec.Receivers)))
			}
		}
		g.Expect(senders).To(Equal(4))
	})
	// The report at B is the job's progress at A.
	eventually(t, func(g Gomega) {
		for _, pod := range peerPods(g, p.peerNS) {
			if pod.Labels[contract.LabelRole] == string(contract.RoleCoordinator) {
				b, _ := json.Marshal(contract.Report{Generation: 9, Phase: contract.PhaseTransferring, Time: time.Now(), Dataset: dataset,
					BytesTotal: dataset.Bytes, FilesTotal: dataset.Files, BytesDone: dataset.Bytes / 2, BitsPerSecond: 4_000_000_000})
				patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.AnnotationReport: string(b)}}})
				g.Expect(env.Client.Patch(ctx, &pod, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
			}
		}
		j := getJob(g, job)
		g.Expect(j.Status.Progress).NotTo(BeNil(), "conditions %v", j.Status.Conditions)
		g.Expect(progressOf(g, j).BytesDone).To(Equal(dataset.Bytes / 2))
	})

	// B's API server out of reach (its address in A's credential points nowhere): the
	// job says so and goes on; B's agents finish meanwhile, and once B answers again the
	// job is Complete, planned as it was — not unplanned for a link that is back.
	setKubeconfig := func(kc []byte) {
		t.Helper()
		var secret corev1.Secret
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: mgrNS, Name: p.site + "-kubeconfig"}, &secret); err != nil {
			t.Fatal(err)
		}
		secret.Data[controllers.KubeconfigKey] = kc
		if err := env.Client.Update(ctx, &secret); err != nil {
			t.Fatal(err)
		}
	}
	setKubeconfig(bytes.ReplaceAll(p.kubeconf, []byte(env.Config.Host), []byte("https://127.0.0.1:1")))
	eventually(t, func(g Gomega) {
		g.Expect(reason(getJob(g, job), dtnflowv1alpha1.ConditionPlanned)).To(Equal(controllers.ReasonRemoteUnreachable))
	})
	eventually(t, func(g Gomega) {
		for _, pod := range peerPods(g, p.peerNS) {
			if pod.Labels[contract.LabelRole] == string(contract.RoleCoordinator) {
				b, _ := json.Marshal(contract.Report{Generation: 9, Phase: contract.PhaseComplete, Time: time.Now(), Dataset: dataset,
					BytesTotal: dataset.Bytes, FilesTotal: dataset.Files, BytesDone: dataset.Bytes, FilesDone: dataset.Files})
				patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{contract.AnnotationReport: string(b)}}})
				g.Expect(env.Client.Patch(ctx, &pod, client.RawPatch("application/merge-patch+json", patch))).To(Succeed())
			}
		}
	})
	setKubeconfig(p.kubeconf)
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateComplete), "conditions %v", j.Status.Conditions)
		c := condition(j, dtnflowv1alpha1.ConditionPlanned)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), "Planned %s %s: %s", c.Status, c.Reason, c.Message)
		g.Expect(c.Reason).To(Equal(controllers.ReasonFixedTuning))
	})
}

func indexOf(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	panic(fmt.Sprintf("%q not in %v", s, list))
}

// TestSitePairServingSiteQueuesPeerJobsWithItsOwn: B's endpoint allows one job at once
// (spec.sharing.maxActiveJobs), and B counts the jobs of A it serves with its own. A's
// first job takes the place; B's own job on that endpoint waits behind it; A's second
// job waits too — B queues its side, nothing of it runs at either site, and its status
// at A says so with B's reason and place. When A's first job completes, B's own job,
// first in B's queue, runs; when that completes, A's second job does.
func TestSitePairServingSiteQueuesPeerJobsWithItsOwn(t *testing.T) {
	clk := newClock()
	mgrNS := createNamespace(t, nil)
	startManager(t, clk, managerOptions{namespace: mgrNS})
	p := pairSites(t, mgrNS, writeGrant)
	updateEndpoint(t, p.served.name, func(ep *dtnflowv1alpha1.TransferEndpoint) {
		ep.Spec.Sharing = &dtnflowv1alpha1.EndpointSharing{MaxActiveJobs: ptr.To[int32](1)}
	})
	sideOf := func(g Gomega, job *dtnflowv1alpha1.TransferJob) *dtnflowv1alpha1.RemoteTransfer {
		for _, rt := range remoteTransfers(g, p.peerNS) {
			if rt.Spec.Origin.Name == job.Name {
				return &rt
			}
		}
		return nil
	}
	podsOf := func(g Gomega, rt *dtnflowv1alpha1.RemoteTransfer) int {
		n := 0
		for _, pod := range peerPods(g, p.peerNS) {
			if ref := metav1.GetControllerOf(&pod); ref != nil && ref.UID == rt.UID {
				n++
			}
		}
		return n
	}
	// running plays both sites' kubelets and A's coordinator until the job transfers
	running := func(job *dtnflowv1alpha1.TransferJob) {
		t.Helper()
		eventually(t, func(g Gomega) {
			runAtB(g, p.peerNS)
			switch pods := runAll(g, job); {
			case pods.coordinator == nil:
			case pods.coordinator.Annotations[contract.AnnotationDirective] == "":
				report(g, job, contract.Report{Phase: contract.PhaseStarting, Time: clk.Now(), Dataset: dataset, BytesTotal: dataset.Bytes, FilesTotal: dataset.Files})
			default:
				report(g, job, contract.Report{Generation: directive(g, job).Generation, Phase: contract.PhaseTransferring, Time: clk.Now(),
					BytesDone: 1 << 30, BytesTotal: 40 << 30, FilesTotal: 40, BitsPerSecond: 2e9})
			}
			g.Expect(getJob(g, job).Status.State).To(Equal(dtnflowv1alpha1.StateTransferring))
			rt := sideOf(g, job)
			g.Expect(rt).NotTo(BeNil())
			g.Expect(meta.IsStatusConditionFalse(rt.Status.Conditions, dtnflowv1alpha1.ConditionQueued)).To(BeTrue(), "%v", rt.Status.Conditions)
			g.Expect(podsOf(g, rt)).To(Equal(4))
		})
	}

	first := jobToPeer(t, p, "first", "incoming/site-a/one")
	running(first)

	// B's own job on the endpoint waits behind A's
	bSource := newSite(t, "bsrc", siteOptions{})
	bNS := createNamespace(t, nil)
	own := createJob(t, bNS, "own", fixedSpec(bSource, p.served))
	eventually(t, func(g Gomega) {
		queued(g, own, 1, controllers.ReasonEndpointLimit)
		g.Expect(getJob(g, own).Status.Queue.Message).To(ContainSubstring(p.served.name))
	})

	// A's second job: B queues its side behind its own job (creation stamps are whole
	// seconds and order the queue: the side is asked for in a later second)
	eventually(t, func(g Gomega) {
		g.Expect(time.Now().Truncate(time.Second).After(getJob(g, own).CreationTimestamp.Time)).To(BeTrue())
	})
	second := jobToPeer(t, p, "second", "incoming/site-a/two")
	waitsAtB := func(g Gomega, position int32) {
		j := getJob(g, second)
		g.Expect(j.Status.State).To(Equal(dtnflowv1alpha1.StateQueued))
		g.Expect(j.Status.Queue).NotTo(BeNil())
		g.Expect(j.Status.Queue.Reason).To(Equal(controllers.ReasonRemoteQueued))
		g.Expect(j.Status.Queue.Position).To(Equal(position))
		g.Expect(j.Status.Queue.Message).To(And(ContainSubstring(p.site), ContainSubstring(controllers.ReasonEndpointLimit), ContainSubstring(p.served.name)))
		g.Expect(j.Status.Remote.Reason).To(Equal(controllers.ReasonEndpointLimit))
		g.Expect(listAgents(g, second).all).To(BeEmpty(), "A runs agents for a job B queues")
		rt := sideOf(g, second)
		g.Expect(rt).NotTo(BeNil())
		g.Expect(meta.IsStatusConditionTrue(rt.Status.Conditions, dtnflowv1alpha1.ConditionQueued)).To(BeTrue(), "%v", rt.Status.Conditions)
		g.Expect(rt.Status.Queue).NotTo(BeNil())
		g.Expect(rt.Status.Queue.Position).To(Equal(position))
		g.Expect(rt.Status.Stripes).To(BeEmpty())
		g.Expect(podsOf(g, rt)).To(BeZero(), "B runs agents for a side it queues")
	}
	eventually(t, func(g Gomega) { waitsAtB(g, 2) })
	consistently(t, func(g Gomega) {
		waitsAtB(g, 2)
		queued(g, own, 1, controllers.ReasonEndpointLimit)
		g.Expect(getJob(g, first).Status.State).To(Equal(dtnflowv1alpha1.StateTransferring))
	})

	// A's first job ends and releases its side: B's own job is next
	completeJob(t, clk, first)
	transferring(t, clk, own)
	eventually(t, func(g Gomega) { waitsAtB(g, 1) })

	// B's own job ends: A's second job runs
	completeJob(t, clk, own)
	running(second)
}

// TestSitePairPeerChangesWakeTheJob: a job at A follows its side at B as B changes it —
// B accepting, B's receivers getting their addresses — with A's periodic look at B set
// to an hour: only A's watch of B's RemoteTransfers can wake the job, and the job runs
// with its senders connected to B's receivers.
func TestSitePairPeerChangesWakeTheJob(t *testing.T) {
	clk := newClock()
	mgrNS := createNamespace(t, nil)
	startManager(t, clk, managerOptions{namespace: mgrNS, remotePoll: time.Hour})
	p := pairSites(t, mgrNS, writeGrant)
	job := jobToPeer(t, p, "watched", "incoming/site-a/watched")
	eventually(t, func(g Gomega) {
		runAtB(g, p.peerNS) // B's kubelet: a change at B only
		pods := startAtA(g, job)
		j := getJob(g, job)
		g.Expect(j.Status.Remote).NotTo(BeNil())
		g.Expect(j.Status.Remote.Accepted).To(Equal(metav1.ConditionTrue))
		g.Expect(j.Status.Plan).NotTo(BeNil())
		sendersReachThePeer(g, p.peerNS, pods)
	})
}

// TestSitePairSendersStartWithThePeersReceivers: B publishes each receiver's address as
// soon as the pod is placed, as a receiver of a job within one cluster is, so A's
// senders are made while B's receivers start rather than after (B's pods stay Pending
// here: no kubelet runs them), and retry until the receiver listens.
func TestSitePairSendersStartWithThePeersReceivers(t *testing.T) {
	clk := newClock()
	mgrNS := createNamespace(t, nil)
	startManager(t, clk, managerOptions{namespace: mgrNS})
	p := pairSites(t, mgrNS, writeGrant)
	job := jobToPeer(t, p, "early", "incoming/site-a/early")
	eventually(t, func(g Gomega) {
		pods := startAtA(g, job) // A's kubelet only
		peer := peerPods(g, p.peerNS)
		g.Expect(peer).To(HaveLen(4))
		for _, pod := range peer {
			g.Expect(pod.Status.Phase).To(Or(BeEmpty(), Equal(corev1.PodPending)), "pod %s", pod.Name)
		}
		sendersReachThePeer(g, p.peerNS, pods)
	})
}
