package controllers

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// TestRequestsFollowMeasuredUse: once the coordinator reports what each stripe's agents
// use while they move data, their pods' CPU requests follow it — a request within 25 %
// of the use stands, one further off is resized, and a node's CPU budget shared among
// its stripes caps it — and a stripe that reports nothing keeps the plan's.
func TestRequestsFollowMeasuredUse(t *testing.T) {
	clk := newClock()
	startManager(t, clk, managerOptions{})
	src, dst := newSite(t, "src", siteOptions{}), newSite(t, "dst", siteOptions{budget: "2"})
	ns := createNamespace(t, nil)
	job := createJob(t, ns, "follow", fixedSpec(src, dst))
	plan := transferring(t, clk, job)
	stripes := int32(len(plan.SourceNodes)) * plan.StripesPerNode
	g := NewWithT(t)
	g.Expect(stripes).To(BeNumerically(">=", 3))
	// stripes per node on the destination: the budget's share is 2000m / that
	share := int64(2000) / int64(plan.StripesPerNode)

	reportUse := func(g Gomega, use map[int32][2]int64) {
		var ss []contract.StripeReport
		for k, u := range use {
			ss = append(ss, contract.StripeReport{Index: k, Connected: true, Streams: 4, BitsPerSecond: 4e8, BytesDone: 1 << 30,
				SourceMillicores: u[0], DestinationMillicores: u[1]})
		}
		report(g, job, contract.Report{Generation: directive(g, job).Generation, Phase: contract.PhaseTransferring, Time: clk.Now(),
			BytesDone: 2 << 30, BytesTotal: 40 << 30, FilesTotal: 40, BitsPerSecond: 2e9, Stripes: ss})
	}
	requests := func(g Gomega, pods map[int32]*corev1.Pod) map[int32]int64 {
		out := map[int32]int64{}
		for k, p := range pods {
			out[k] = p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue()
		}
		return out
	}

	// stripe 0 and 1 measured; stripe 2 reports nothing and keeps the plan's
	eventually(t, func(g Gomega) {
		reportUse(g, map[int32][2]int64{0: {300, 700}, 1: {40, share * 3}})
		pods := listAgents(g, job)
		send, recv := requests(g, pods.senders), requests(g, pods.receivers)
		g.Expect(send[0]).To(Equal(int64(300)))
		g.Expect(recv[0]).To(Equal(int64(700)))
		g.Expect(send[1]).To(Equal(int64(40)))
		g.Expect(recv[1]).To(Equal(share), "the node's share of the budget caps the request")
		g.Expect(send[2]).To(Equal(plan.SourceCPUMillicores))
		g.Expect(recv[2]).To(Equal(plan.DestinationCPUMillicores))
	})
	// within 25 %: no resize; further: resized
	consistently(t, func(g Gomega) {
		reportUse(g, map[int32][2]int64{0: {330, 600}})
		pods := listAgents(g, job)
		g.Expect(requests(g, pods.senders)[0]).To(Equal(int64(300)))
		g.Expect(requests(g, pods.receivers)[0]).To(Equal(int64(700)))
	})
	eventually(t, func(g Gomega) {
		reportUse(g, map[int32][2]int64{0: {300, 400}})
		g.Expect(requests(g, listAgents(g, job).receivers)[0]).To(Equal(int64(400)))
	})
	g.Expect(getJob(g, job).Status.State).To(Equal(dtnflowv1alpha1.StateTransferring))
}
