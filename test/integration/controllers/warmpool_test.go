package controllers

import (
	"context"
	"encoding/json"
	"slices"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/contract/claim"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
)

// warmAgents lists the agents of an endpoint's pool in a namespace: those still
// waiting (owned by the endpoint) and those a job claimed.
func warmAgents(g Gomega, ns, endpoint string) (waiting, claimed []*corev1.Pod) {
	var pods corev1.PodList
	g.Expect(env.Client.List(context.Background(), &pods, client.InNamespace(ns), client.MatchingLabels{contract.LabelWarmPool: endpoint})).To(Succeed())
	for i := range pods.Items {
		p := &pods.Items[i]
		if p.DeletionTimestamp != nil {
			continue
		}
		if metav1.GetControllerOf(p) != nil && metav1.GetControllerOf(p).Kind == "TransferEndpoint" {
			waiting = append(waiting, p)
		} else {
			claimed = append(claimed, p)
		}
	}
	return waiting, claimed
}

func setWarmPool(t *testing.T, endpoint string, pool *dtnflowv1alpha1.WarmPool) {
	updateEndpoint(t, endpoint, func(ep *dtnflowv1alpha1.TransferEndpoint) {
		ep.Spec.AgentPods = &dtnflowv1alpha1.AgentPodSettings{WarmPool: pool}
	})
}

// openClaim opens a claimed agent's claim with the key in its pod's Secret, as the
// agent does.
func openClaim(g Gomega, pod *corev1.Pod) claim.Claim {
	var key corev1.Secret
	g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(pod), &key)).To(Succeed())
	c, err := claim.Open(key.Data[contract.WarmKey], string(pod.UID), pod.Annotations[contract.AnnotationClaim])
	g.Expect(err).NotTo(HaveOccurred())
	return c
}

// TestWarmPoolKeepsAgentsAndJobsTakeThem: an endpoint's pool keeps agentsPerNode
// waiting agents per node and side in each namespace it serves and its selector
// selects, each with its own account, key and role; a job takes them for its
// coordinator, sender and receiver, with claims only the pod's key opens that carry
// the job's secret and the arguments the job's own pods would have had; the pool
// starts replacements; and without a pool the waiting agents are deleted, the claimed
// ones left to their jobs.
func TestWarmPoolKeepsAgentsAndJobsTakeThem(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	ns := createNamespace(t, map[string]string{"dtn": "yes"})
	unselected := createNamespace(t, nil)
	src := newSite(t, "src", siteOptions{nodes: 1, namespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dtn": "yes"}}})
	dst := newSite(t, "dst", siteOptions{nodes: 1, readOnly: false})
	// the source's pool waits 2 s (of the test's clock) before it replaces a claimed
	// agent, the destination's replaces one at once
	setWarmPool(t, src.name, &dtnflowv1alpha1.WarmPool{AgentsPerNode: 2, Namespaces: []string{ns, unselected, "no-such-namespace"}, RefillDelaySeconds: ptr.To[int32](2)})
	setWarmPool(t, dst.name, &dtnflowv1alpha1.WarmPool{AgentsPerNode: 1, Namespaces: []string{ns}, RefillDelaySeconds: ptr.To[int32](0)})

	eventually(t, func(g Gomega) {
		srcWaiting, _ := warmAgents(g, ns, src.name)
		dstWaiting, _ := warmAgents(g, ns, dst.name)
		g.Expect(srcWaiting).To(HaveLen(4)) // 2 per side
		g.Expect(dstWaiting).To(HaveLen(2))
		none, _ := warmAgents(g, unselected, src.name)
		g.Expect(none).To(BeEmpty(), "a namespace the selector does not select")
		ports := map[int32]bool{}
		for _, p := range append(srcWaiting, dstWaiting...) {
			g.Expect(p.Spec.Containers[0].Args).To(Equal([]string{"standby", "--pod", ns + "/" + p.Name}))
			g.Expect(p.Spec.ServiceAccountName).To(Equal(p.Name))
			for _, cp := range p.Spec.Containers[0].Ports {
				if p.Labels[contract.LabelWarmPool] == src.name {
					g.Expect(ports).NotTo(HaveKey(cp.HostPort), "two agents of one node hold one port")
					ports[cp.HostPort] = true
				}
			}
			data := p.Spec.Containers[0].VolumeMounts[0]
			g.Expect(data.MountPath).To(Equal(contract.DataMountPath))
			g.Expect(data.ReadOnly).To(Equal(p.Labels[contract.LabelWarmSide] == contract.WarmSideSource))
			var account corev1.ServiceAccount
			g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), &account)).To(Succeed())
			g.Expect(metav1.IsControlledBy(&account, p)).To(BeTrue(), "the account goes with its pod")
			var role rbacv1.Role
			g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), &role)).To(Succeed())
			g.Expect(metav1.IsControlledBy(&role, p)).To(BeTrue())
			g.Expect(role.Rules).To(Equal([]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{p.Name}, Verbs: []string{"get", "watch", "patch"}}}))
			var key corev1.Secret
			g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(p), &key)).To(Succeed())
			g.Expect(key.Data[contract.WarmKey]).To(HaveLen(claim.KeySize))
			g.Expect(metav1.IsControlledBy(&key, p)).To(BeTrue())
		}
	})
	// the endpoints count them, starting; the source's condition names the namespaces
	// it cannot serve
	eventually(t, func(g Gomega) {
		st, c := warmStatus(g, src.name)
		g.Expect(st).To(Equal(dtnflowv1alpha1.WarmPoolStatus{Wanted: 4, Starting: 4}))
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(controllers.ReasonNamespacesNotServed))
		g.Expect(c.Message).To(ContainSubstring(`namespace "no-such-namespace" does not exist`))
		g.Expect(c.Message).To(ContainSubstring(`namespace %q is not selected by spec.namespaceSelector`, unselected))
		st, c = warmStatus(g, dst.name)
		g.Expect(st).To(Equal(dtnflowv1alpha1.WarmPoolStatus{Wanted: 2, Starting: 2}))
		g.Expect(c.Reason).To(Equal(controllers.ReasonAgentsStarting))
	})
	// the kubelet starts them
	eventually(t, func(g Gomega) {
		for _, ep := range []string{src.name, dst.name} {
			waiting, _ := warmAgents(g, ns, ep)
			for _, p := range waiting {
				if p.Status.Phase != corev1.PodRunning {
					setPhase(g, p, corev1.PodRunning)
				}
			}
		}
	})

	eventually(t, func(g Gomega) {
		st, c := warmStatus(g, dst.name)
		g.Expect(st).To(Equal(dtnflowv1alpha1.WarmPoolStatus{Wanted: 2, Ready: 2}))
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(controllers.ReasonAgentsWaiting))
		st, c = warmStatus(g, src.name)
		g.Expect(st).To(Equal(dtnflowv1alpha1.WarmPoolStatus{Wanted: 4, Ready: 4}))
		g.Expect(c.Reason).To(Equal(controllers.ReasonNamespacesNotServed), "a namespace the pool cannot serve keeps it from ready")
	})

	job := createJob(t, ns, "warm", jobSpec(src, dst))
	var coordinator, sender, receiver *corev1.Pod
	eventually(t, func(g Gomega) {
		pods := listAgents(g, job)
		g.Expect(pods.coordinator).NotTo(BeNil())
		g.Expect(pods.senders).To(HaveKey(int32(0)))
		g.Expect(pods.receivers).To(HaveKey(int32(0)))
		coordinator, sender, receiver = pods.coordinator, pods.senders[0], pods.receivers[0]
		for _, p := range []*corev1.Pod{coordinator, sender, receiver} {
			g.Expect(p.Labels).To(HaveKey(contract.LabelWarmPool), "%s is not a warm agent", p.Name)
			g.Expect(metav1.GetControllerOf(p).UID).To(Equal(getJob(g, job).UID))
			g.Expect(p.Annotations).To(HaveKeyWithValue(contract.AnnotationClaimedAt, clk.Now().UTC().Format(time.RFC3339Nano)), "when it was claimed")
		}
	})
	var jobSecret corev1.Secret
	NewWithT(t).Expect(env.Client.Get(context.Background(), types.NamespacedName{Namespace: ns, Name: controllers.SecretName(job.Name)}, &jobSecret)).To(Succeed())
	eventually(t, func(g Gomega) {
		c := openClaim(g, coordinator)
		g.Expect(c.Role).To(Equal(contract.RoleCoordinator))
		g.Expect(c.Secret).To(Equal(jobSecret.Data[contract.SecretKey]))
		g.Expect(c.Args[0]).To(Equal("coordinate"))
		g.Expect(c.Args).To(ContainElements("--pod", ns+"/"+coordinator.Name, "--job", ns+".warm"))
		g.Expect(c.Env).To(HaveKey(contract.EnvInitialDirective))
		var clear []string
		g.Expect(json.Unmarshal([]byte(coordinator.Annotations[contract.AnnotationAgentArgs]), &clear)).To(Succeed())
		g.Expect(clear).To(Equal(c.Args))

		s := openClaim(g, sender)
		g.Expect(s.Role).To(Equal(contract.RoleSender))
		g.Expect(s.Secret).To(Equal(jobSecret.Data[contract.SecretKey]))
		var coordPort, recvPort int32
		for _, cp := range coordinator.Spec.Containers[0].Ports {
			if cp.Name != "metrics" {
				coordPort = cp.HostPort
			}
		}
		for _, cp := range receiver.Spec.Containers[0].Ports {
			if cp.Name != "metrics" {
				recvPort = cp.HostPort
			}
		}
		i := slices.Index(s.Args, "--coordinator")
		g.Expect(i).To(BeNumerically(">", 0))
		g.Expect(s.Args[i+1]).To(HaveSuffix(":%d", coordPort))
		i = slices.Index(s.Args, "--receiver")
		g.Expect(s.Args[i+1]).To(HaveSuffix(":%d", recvPort))
		r := openClaim(g, receiver)
		g.Expect(r.Args).To(ContainElements("--listen", ":"+itoa(recvPort)))
		_, err := claim.Open(make([]byte, claim.KeySize), string(receiver.UID), receiver.Annotations[contract.AnnotationClaim])
		g.Expect(err).To(MatchError(claim.ErrNotForThisPod))
	})
	// the destination's pool starts the agent the job took again at once; a claimed
	// agent is no longer the pool's
	eventually(t, func(g Gomega) {
		dstWaiting, dstClaimed := warmAgents(g, ns, dst.name)
		g.Expect(dstClaimed).To(HaveLen(1))
		g.Expect(dstWaiting).To(HaveLen(2))
		st, c := warmStatus(g, dst.name)
		g.Expect(st).To(Equal(dtnflowv1alpha1.WarmPoolStatus{Wanted: 2, Ready: 1, Starting: 1}))
		g.Expect(c.Reason).To(Equal(controllers.ReasonAgentsStarting))
		st, _ = warmStatus(g, src.name)
		g.Expect(st).To(Equal(dtnflowv1alpha1.WarmPoolStatus{Wanted: 4, Ready: 2}), "none starting: held back")
	})
	// the source's holds its two back while the test's clock stands still, and starts
	// them once it has moved past the delay
	consistently(t, func(g Gomega) {
		srcWaiting, srcClaimed := warmAgents(g, ns, src.name)
		g.Expect(srcClaimed).To(HaveLen(2))
		g.Expect(srcWaiting).To(HaveLen(2))
	})
	clk.Step(2 * time.Second)
	eventually(t, func(g Gomega) {
		srcWaiting, _ := warmAgents(g, ns, src.name)
		g.Expect(srcWaiting).To(HaveLen(4))
		st, _ := warmStatus(g, src.name)
		g.Expect(st).To(Equal(dtnflowv1alpha1.WarmPoolStatus{Wanted: 4, Ready: 2, Starting: 2}))
	})

	setWarmPool(t, src.name, nil)
	eventually(t, func(g Gomega) {
		waiting, claimed := warmAgents(g, ns, src.name)
		g.Expect(waiting).To(BeEmpty())
		g.Expect(claimed).To(HaveLen(2), "the job's agents are the job's")
		var ep dtnflowv1alpha1.TransferEndpoint
		g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: src.name}, &ep)).To(Succeed())
		g.Expect(ep.Status.WarmPool).To(BeNil())
		g.Expect(meta.FindStatusCondition(ep.Status.Conditions, controllers.ConditionWarmPoolReady)).To(BeNil())
	})
}

// warmStatus is an endpoint's status.warmPool and WarmPoolReady condition.
func warmStatus(g Gomega, endpoint string) (dtnflowv1alpha1.WarmPoolStatus, metav1.Condition) {
	var ep dtnflowv1alpha1.TransferEndpoint
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Name: endpoint}, &ep)).To(Succeed())
	g.Expect(ep.Status.WarmPool).NotTo(BeNil())
	c := meta.FindStatusCondition(ep.Status.Conditions, controllers.ConditionWarmPoolReady)
	g.Expect(c).NotTo(BeNil())
	return *ep.Status.WarmPool, *c
}

func itoa(v int32) string {
	b, _ := json.Marshal(v)
	return string(b)
}
