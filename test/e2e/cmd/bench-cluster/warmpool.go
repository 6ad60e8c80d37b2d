package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// benchWarmAgents is the bench's warm pool: two agents per node and side, in the bench
// namespace (a job on one node takes a coordinator and a sender at its source).
const benchWarmAgents = 2

// setWarmPools gives both sites' endpoints the bench's warm pool (on) or none, and waits
// until it is so: every agent of the pool Running and waiting, or none left waiting.
func setWarmPools(ctx context.Context, c *framework.Cluster, on bool) error {
	names := []string{c.Source().Name}
	if d := c.Destination().Name; d != names[0] {
		names = append(names, d)
	}
	want := map[string]int{}
	for _, name := range names {
		var ep dtnflowv1alpha1.TransferEndpoint
		if err := c.Client.Get(ctx, client.ObjectKey{Name: name}, &ep); err != nil {
			return err
		}
		var pool *dtnflowv1alpha1.WarmPool
		if on {
			pool = &dtnflowv1alpha1.WarmPool{AgentsPerNode: benchWarmAgents, Namespaces: []string{"bench"}}
			var nodes corev1.NodeList
			if err := c.Client.List(ctx, &nodes, client.MatchingLabels(ep.Spec.NodeSelector)); err != nil {
				return err
			}
			sides := 2
			if ep.Spec.Storage.ReadOnly {
				sides = 1
			}
			want[name] = benchWarmAgents * sides * len(nodes.Items)
		}
		if ep.Spec.AgentPods == nil {
			ep.Spec.AgentPods = &dtnflowv1alpha1.AgentPodSettings{}
		}
		ep.Spec.AgentPods.WarmPool = pool
		if err := c.Client.Update(ctx, &ep); err != nil {
			return fmt.Errorf("setting the warm pool of %s: %w", name, err)
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for {
		ready := true
		for _, name := range names {
			var pods corev1.PodList
			if err := c.Client.List(ctx, &pods, client.InNamespace("bench"), client.MatchingLabels{contract.LabelWarmPool: name}); err != nil {
				return err
			}
			running, waiting := 0, 0
			for i := range pods.Items {
				p := &pods.Items[i]
				if ref := metav1.GetControllerOf(p); ref == nil || ref.Kind != "TransferEndpoint" {
					continue // a job's
				}
				waiting++
				if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil {
					running++
				}
			}
			if running != want[name] || waiting != want[name] {
				ready = false
			}
		}
		if ready {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the warm pools of %v are not as asked after 2 minutes", names)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}
