package controllers

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/controllers/agentlogs"
)

type textLogs string

func (t textLogs) TailLog(_ context.Context, pod *corev1.Pod, limit int) ([]byte, bool, error) {
	return []byte(string(t) + " pod=" + pod.Name), false, nil
}

// TestArchiveAsksPastTheCacheForAPodThatStarted: a replacement sender that ran as the
// job ended may still be Pending in the manager's cache; its log is kept when the API
// server says it started (the integration test of the archive once lost it under load),
// and a pod that truly never started is still left out.
func TestArchiveAsksPastTheCacheForAPodThatStarted(t *testing.T) {
	ran := existingAgent(agentPod{Role: contract.RoleSender, Stripe: 0, Node: "a1", CoordinatorAddress: "10.0.1.1:7000", ReceiverAddress: "10.0.2.1:7100"}, "send-2")
	never := existingAgent(agentPod{Role: contract.RoleReceiver, Stripe: 0, Node: "b1", Port: 7100}, "recv-2")
	live := ran.DeepCopy()
	live.Status.Phase = corev1.PodRunning
	f := newPodsFixture(t)
	f.r.AgentLogs = textLogs("level=INFO msg=Started")
	f.r.APIReader = fake.NewClientBuilder().WithScheme(f.r.Client.Scheme()).WithObjects(live, never.DeepCopy()).Build()
	cached := []*corev1.Pod{ran.DeepCopy(), never.DeepCopy()} // both Pending as the cache shows them
	f.r.archiveLogs(context.Background(), f.p, cached, agentlogs.ReasonFinished)

	var cm corev1.ConfigMap
	if err := f.r.Client.Get(context.Background(), client.ObjectKey{Namespace: f.p.job.Namespace, Name: AgentLogsName(f.p.job.Name)}, &cm); err != nil {
		t.Fatalf("no archive: %v", err)
	}
	a, err := agentlogs.Decode(cm.Data)
	if err != nil {
		t.Fatal(err)
	}
	if len(a.Index.Records) != 1 || a.Index.Records[0].UID != string(ran.UID) {
		t.Fatalf("records %+v: want the started sender's alone", a.Index.Records)
	}
}
