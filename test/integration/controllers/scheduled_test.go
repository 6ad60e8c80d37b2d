package controllers

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
)

// warnings are the reasons of the Warning Events about job.
func warnings(g Gomega, job *dtnflowv1alpha1.TransferJob) map[string]string {
	var events eventsv1.EventList
	g.Expect(env.Client.List(context.Background(), &events, client.InNamespace(job.Namespace))).To(Succeed())
	out := map[string]string{}
	for _, e := range events.Items {
		if e.Regarding.Name == job.Name && e.Type == corev1.EventTypeWarning {
			out[e.Reason] = e.Note
		}
	}
	return out
}

// TestAgentPodRefusedIsStalledAndSaid: the API server refuses the job's agent pods (here
// a ResourceQuota of no pods in the job's namespace): the job says so in
// AgentsScheduled and Stalled, with the API server's answer and a Warning Event, instead
// of only a log line; once the quota is gone the pods are created and the condition says
// they wait for the scheduler.
func TestAgentPodRefusedIsStalledAndSaid(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	quota := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-pods"},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}}
	if err := env.Client.Create(context.Background(), quota); err != nil {
		t.Fatal(err)
	}
	// what the quota controller (not running here) would write: none used of none allowed
	quota.Status = corev1.ResourceQuotaStatus{Hard: quota.Spec.Hard, Used: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("0")}}
	if err := env.Client.Status().Update(context.Background(), quota); err != nil {
		t.Fatal(err)
	}
	job := createJob(t, ns, "quota-bound", jobSpec(src, dst))
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		c := condition(j, dtnflowv1alpha1.ConditionAgentsScheduled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(controllers.ReasonPodRefused))
		g.Expect(c.Message).To(ContainSubstring("forbidden"))
		g.Expect(c.Message).To(ContainSubstring(job.Name))
		g.Expect(conditionStatus(j, dtnflowv1alpha1.ConditionStalled)).To(Equal(metav1.ConditionTrue))
		g.Expect(reason(j, dtnflowv1alpha1.ConditionReady)).To(Equal(controllers.ReasonPodRefused))
		g.Expect(warnings(g, job)).To(HaveKeyWithValue(controllers.ReasonPodRefused, ContainSubstring("no-pods")))
		g.Expect(listAgents(g, job).all).To(BeEmpty())
	})

	if err := env.Client.Delete(context.Background(), quota); err != nil {
		t.Fatal(err)
	}
	clk.Step(reportInterval) // the manager retries with back-off; move its clock on
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		g.Expect(listAgents(g, job).coordinator).NotTo(BeNil())
		c := condition(j, dtnflowv1alpha1.ConditionAgentsScheduled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionUnknown))
		g.Expect(c.Reason).To(Equal(controllers.ReasonScheduling))
		g.Expect(conditionStatus(j, dtnflowv1alpha1.ConditionStalled)).To(Equal(metav1.ConditionFalse))
	})
}

// TestAgentPodUnschedulableIsSaid: the scheduler finds no node for an agent pod: the job
// names the pod and the scheduler's words in AgentsScheduled and Ready, with a Warning
// Event, and is still in progress (it waits); bound to its node, the pod is scheduled.
func TestAgentPodUnschedulableIsSaid(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	job := createJob(t, ns, "no-room", jobSpec(src, dst))
	const why = "0/2 nodes are available: 2 Insufficient cpu. preemption: 0/2 nodes are available"
	var coord *corev1.Pod
	eventually(t, func(g Gomega) {
		coord = listAgents(g, job).coordinator
		g.Expect(coord).NotTo(BeNil())
	})
	eventually(t, func(g Gomega) {
		p := &corev1.Pod{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(coord), p)).To(Succeed())
		p.Status.Phase = corev1.PodPending
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
			Reason: corev1.PodReasonUnschedulable, Message: why, LastTransitionTime: metav1.Now()}}
		g.Expect(env.Client.Status().Update(context.Background(), p)).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		c := condition(j, dtnflowv1alpha1.ConditionAgentsScheduled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(controllers.ReasonUnschedulable))
		g.Expect(c.Message).To(Equal("pod " + coord.Name + ": " + why))
		g.Expect(conditionStatus(j, dtnflowv1alpha1.ConditionReconciling)).To(Equal(metav1.ConditionTrue))
		g.Expect(conditionStatus(j, dtnflowv1alpha1.ConditionStalled)).To(Equal(metav1.ConditionFalse))
		g.Expect(condition(j, dtnflowv1alpha1.ConditionReady).Message).To(ContainSubstring("Insufficient cpu"))
		g.Expect(warnings(g, job)).To(HaveKeyWithValue(controllers.ReasonUnschedulable, ContainSubstring(coord.Name)))
	})

	// the scheduler finds room: the pod is bound to its node
	node := src.nodes[0]
	for _, term := range coord.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
		for _, f := range term.MatchFields {
			node = f.Values[0]
		}
	}
	bind := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: coord.Name}, Target: corev1.ObjectReference{Kind: "Node", Name: node}}
	if err := env.Client.SubResource("binding").Create(context.Background(), coord, bind); err != nil {
		t.Fatal(err)
	}
	eventually(t, func(g Gomega) {
		p := &corev1.Pod{}
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(coord), p)).To(Succeed())
		p.Status.Phase = corev1.PodRunning
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}}
		g.Expect(env.Client.Status().Update(context.Background(), p)).To(Succeed())
	})
	clk.Step(reportInterval)
	eventually(t, func(g Gomega) {
		j := getJob(g, job)
		c := condition(j, dtnflowv1alpha1.ConditionAgentsScheduled)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).NotTo(Equal(metav1.ConditionFalse), "still %s: %s", c.Reason, c.Message)
		g.Expect(strings.Contains(condition(j, dtnflowv1alpha1.ConditionReady).Message, "Insufficient cpu")).To(BeFalse())
	})
}
