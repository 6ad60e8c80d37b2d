package controllers

import (
	"context"
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
	"github.com/dtnflow/dtnflow/controllers/agentlogs"
)

// archiveOf reads a job's archive of agent logs as the API server stores it.
func archiveOf(g Gomega, job *dtnflowv1alpha1.TransferJob) (*corev1.ConfigMap, *agentlogs.Archive) {
	var cm corev1.ConfigMap
	g.Expect(env.Client.Get(context.Background(), client.ObjectKey{Namespace: job.Namespace, Name: controllers.AgentLogsName(job.Name)}, &cm)).To(Succeed())
	a, err := agentlogs.Decode(cm.Data)
	g.Expect(err).NotTo(HaveOccurred())
	return &cm, a
}

// recordOf is the archive's record of the pod with this UID.
func recordOf(a *agentlogs.Archive, uid types.UID) *agentlogs.Record {
	for i := range a.Index.Records {
		if a.Index.Records[i].UID == string(uid) {
			return &a.Index.Records[i]
		}
	}
	return nil
}

// TestAgentLogsOutliveTheirPods: the manager keeps the end of a failed agent's log
// before it replaces the pod under the same name, and of every agent when the job ends,
// in a ConfigMap the job owns; a log the kubelet cannot serve is named with why and
// holds nothing up.
func TestAgentLogsOutliveTheirPods(t *testing.T) {
	clk := newClock()
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{})
	ns := createNamespace(t, nil)
	spec := jobSpec(src, dst)
	spec.Tuning = dtnflowv1alpha1.TransferTuning{Mode: dtnflowv1alpha1.TuningFixed, Fixed: &dtnflowv1alpha1.FixedTuning{Nodes: 1, StripesPerNode: 1, StreamsPerStripe: 4, Concurrency: 2, Pipelining: 8}}
	const name = "logs-kept"
	recv := controllers.AgentPodName(name, contract.RoleReceiver, 0)
	startManager(t, clk, managerOptions{agentLogs: fakeLogs{errs: map[string]error{recv: errors.New("the kubelet did not answer")}}})
	job := createJob(t, ns, name, spec)
	startTransfer(t, job)

	var crashed *corev1.Pod
	eventually(t, func(g Gomega) {
		crashed = listAgents(g, job).senders[0]
		g.Expect(crashed).NotTo(BeNil())
		setPhase(g, crashed, corev1.PodFailed)
	})
	eventually(t, func(g Gomega) {
		pods := runAll(g, job)
		g.Expect(pods.senders[0]).NotTo(BeNil())
		g.Expect(pods.senders[0].UID).NotTo(Equal(crashed.UID), "the failed sender is replaced")
		_, a := archiveOf(g, job)
		r := recordOf(a, crashed.UID)
		g.Expect(r).NotTo(BeNil(), "the failed sender's log was not kept")
		g.Expect(r.Reason).To(Equal(agentlogs.ReasonFailed))
		g.Expect(r.Pod).To(Equal(crashed.Name))
		g.Expect(r.Role).To(Equal(string(contract.RoleSender)))
		g.Expect(r.Ended).To(ContainSubstring("exit code 1"))
		g.Expect(a.Texts[r.Key]).To(ContainSubstring(`msg="Last words" pod=` + crashed.Name))
	})

	completeJob(t, clk, job)
	eventually(t, func(g Gomega) {
		g.Expect(listAgents(g, job).all).To(BeEmpty())
		cm, a := archiveOf(g, job)
		g.Expect(metav1.GetControllerOf(cm)).NotTo(BeNil())
		g.Expect(metav1.GetControllerOf(cm).UID).To(Equal(getJob(g, job).UID), "the job owns its archive: its TTL takes it")
		byPod := map[string][]agentlogs.Record{}
		for _, r := range a.Index.Records {
			byPod[r.Pod] = append(byPod[r.Pod], r)
		}
		coord := byPod[controllers.CoordinatorPodName(name)]
		g.Expect(coord).To(HaveLen(1))
		g.Expect(coord[0].Reason).To(Equal(agentlogs.ReasonFinished))
		g.Expect(a.Texts[coord[0].Key]).To(ContainSubstring("pod=" + controllers.CoordinatorPodName(name)))
		g.Expect(byPod[crashed.Name]).To(HaveLen(2), "the crashed sender and its replacement")
		g.Expect(byPod[recv]).To(HaveLen(1))
		g.Expect(byPod[recv][0].Error).To(ContainSubstring("the kubelet did not answer"))
		g.Expect(byPod[recv][0].Key).To(BeEmpty())
	})
}
