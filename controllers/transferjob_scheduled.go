package controllers

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// Reasons of the AgentsScheduled condition.
const (
	ReasonAgentsScheduled = "AgentsScheduled"
	ReasonScheduling      = "Scheduling"
	ReasonPodCreateFailed = "PodCreateFailed"
	ReasonPodRefused      = "PodRefused"
	ReasonUnschedulable   = "Unschedulable"
)

// podCreateError is the API server's refusal of an agent pod.
type podCreateError struct {
	pod string
	err error
}

func (e *podCreateError) Error() string { return fmt.Sprintf("creating pod %s: %v", e.pod, e.err) }
func (e *podCreateError) Unwrap() error { return e.err }

// refusedForGood says the API server will refuse the pod again until someone changes
// something (an admission policy, a quota, an invalid spec): the job is stalled, not
// merely waiting.
func (e *podCreateError) refusedForGood() bool {
	return apierrors.IsForbidden(e.err) || apierrors.IsInvalid(e.err) || apierrors.IsBadRequest(e.err)
}

// agentsScheduled sets AgentsScheduled after a pass placed the job's agents: False
// when the API server refused a pod (err, from syncAgentPods) or the scheduler has no
// node for one, Unknown while some wait for the scheduler's word, True when every live
// agent pod is on a node; a Warning Event marks each change to False. Today's log line alone left users with a job "Probing"
// forever and no word of why.
func (p *pass) agentsScheduled(err error) {
	var refused *podCreateError
	switch {
	case errors.As(err, &refused) && refused.refusedForGood():
		p.blockedAgents(ReasonPodRefused, "CreatePod", refused.Error())
	case errors.As(err, &refused):
		p.blockedAgents(ReasonPodCreateFailed, "CreatePod", refused.Error())
	case err != nil:
		// another failure (the cache, a port): the pass is retried; say nothing new
	default:
		if pod, why := unschedulable(p.obs.agentPods()); pod != nil {
			p.blockedAgents(ReasonUnschedulable, "SchedulePod", fmt.Sprintf("pod %s: %s", pod.Name, why))
			return
		}
		pods := p.obs.agentPods()
		waiting := 0
		for _, pod := range pods {
			if pod.Spec.NodeName == "" {
				waiting++
			}
		}
		switch {
		case len(pods) == 0:
		case waiting > 0:
			p.condition(dtnflowv1alpha1.ConditionAgentsScheduled, metav1.ConditionUnknown, ReasonScheduling,
				fmt.Sprintf("%d of %d agent pods wait for the scheduler", waiting, len(pods)))
		default:
			p.condition(dtnflowv1alpha1.ConditionAgentsScheduled, metav1.ConditionTrue, ReasonAgentsScheduled, "every agent pod of the job is on its node")
		}
	}
}

// blockedAgents sets AgentsScheduled False, with an Event when that is news.
func (p *pass) blockedAgents(reason, action, message string) {
	prev := meta.FindStatusCondition(p.job.Status.Conditions, dtnflowv1alpha1.ConditionAgentsScheduled)
	if prev == nil || prev.Status != metav1.ConditionFalse || prev.Reason != reason || prev.Message != message {
		p.event(corev1.EventTypeWarning, reason, action, message)
	}
	p.condition(dtnflowv1alpha1.ConditionAgentsScheduled, metav1.ConditionFalse, reason, contract.Cut(message, 1024))
}

// unschedulable is the first pending pod the scheduler found no node for, and the
// scheduler's message.
func unschedulable(pods []*corev1.Pod) (*corev1.Pod, string) {
	for _, pod := range pods {
		if pod.Spec.NodeName != "" || pod.Status.Phase != corev1.PodPending {
			continue
		}
		for _, c := range pod.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Reason == corev1.PodReasonUnschedulable {
				return pod, c.Message
			}
		}
	}
	return nil, ""
}
