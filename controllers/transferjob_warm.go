package controllers

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/contract/claim"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// A job takes a warm agent (warmpool.go) for an agent it would otherwise start as a pod
// of its own, when one waits on the node in the job's namespace, for the right side.
// The claimed pod becomes the job's in every respect the controller looks at: the
// job's labels, the job as its controlling owner, and its place (slot) among the job's
// agents, which for a pod of the job's own is its name and for a claimed one the name
// that pod would have had (slotName).

// slotName is the name of the agent a job's pod is: its own name, or for a claimed warm
// agent the name the job's own pod of that role and stripe would have.
func slotName(jobName string, pod *corev1.Pod) string {
	if _, warm := pod.Labels[contract.LabelWarmPool]; !warm {
		return pod.Name
	}
	role := contract.Role(pod.Labels[contract.LabelRole])
	stripe, err := strconv.ParseInt(pod.Labels[contract.LabelStripe], 10, 32)
	if role == contract.RoleCoordinator {
		return CoordinatorPodName(jobName)
	}
	if err != nil || (role != contract.RoleSender && role != contract.RoleReceiver) {
		return pod.Name // not one of the job's agents: a stray
	}
	return AgentPodName(jobName, role, int32(stripe))
}

// agentArgs are the arguments an agent pod runs with: its container's, or for a claimed
// warm agent those of its claim (the copy in the clear).
func agentArgs(pod *corev1.Pod) []string {
	if raw, ok := pod.Annotations[contract.AnnotationAgentArgs]; ok {
		var args []string
		if json.Unmarshal([]byte(raw), &args) == nil {
			return args
		}
		return nil
	}
	if len(pod.Spec.Containers) == 0 {
		return nil
	}
	return pod.Spec.Containers[0].Args
}

// coordinatorJobID is the job id a coordinator of the job names its receivers' journal
// with; a claimed coordinator is told it, so that it and a replacement of the job's
// own share the journal.
func coordinatorJobID(job *dtnflowv1alpha1.TransferJob) string {
	return job.Namespace + "." + namePrefix(job.Name)
}

// claimableWarmAgent is the waiting agent a job's agent ap can take on its node, nil
// when none waits: the pool's own (not claimed), running, not being deleted, of the
// side of ap's role, with a key this manager holds. The oldest is taken.
func (r *TransferJobReconciler) claimableWarmAgent(ctx context.Context, job *dtnflowv1alpha1.TransferJob, ap agentPod) (*corev1.Pod, []byte, error) {
	ep := ap.Endpoint
	if warmPoolOf(ep) == nil {
		return nil, nil, nil
	}
	var list corev1.PodList
	if err := r.Client.List(ctx, &list, client.InNamespace(job.Namespace), client.MatchingLabels{
		contract.LabelWarmPool: ep.Name, contract.LabelWarmSide: warmSideOf(ap.Role)}); err != nil {
		return nil, nil, fmt.Errorf("listing the warm agents of TransferEndpoint %s: %w", ep.Name, err)
	}
	var candidates []*corev1.Pod
	for i := range list.Items {
		pod := &list.Items[i]
		if controllerUID(pod) == ep.UID && warmAgentRunning(pod) && pinnedNode(pod) == ap.Node {
			candidates = append(candidates, pod)
		}
	}
	sort.Slice(candidates, func(i, j int) bool {
		a, b := candidates[i].CreationTimestamp, candidates[j].CreationTimestamp
		if !a.Equal(&b) {
			return a.Before(&b)
		}
		return candidates[i].Name < candidates[j].Name
	})
	for _, pod := range candidates {
		if key, ok := r.warm.get(client.ObjectKeyFromObject(pod)); ok {
			return pod, key, nil
		}
	}
	return nil, nil, nil
}

// warmPorts are the listening and metrics host ports a warm agent holds.
func warmPorts(pod *corev1.Pod) (listen, metrics int32) {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			switch p.Name {
			case metricsPortName:
				metrics = p.HostPort
			default:
				listen = p.HostPort
			}
		}
	}
	return listen, metrics
}

// claimWarmAgent makes a waiting agent ap: it seals the claim for it and, in one patch
// that fails if anybody changed the pod since it was read (another job's claim), gives
// the pod the claim, the job's labels and the job as its controlling owner. It returns
// nil, with no error, when no agent waits or the job's secret is not known to this
// manager (created before a restart): the caller starts the job's own pod then.
func (r *TransferJobReconciler) claimWarmAgent(ctx context.Context, p *pass, plan *dtnflowv1alpha1.TransferPlan, ap agentPod) (*corev1.Pod, error) {
	job := p.job
	if p.obs.remote != nil {
		return nil, nil // a job with a peer site authenticates with the pair's secret
	}
	secret, ok := r.jobSecrets.Load(job.UID)
	if !ok {
		return nil, nil
	}
	warm, key, err := r.claimableWarmAgent(ctx, job, ap)
	if warm == nil || err != nil {
		return nil, err
	}
	ap.Port, ap.MetricsPort = warmPorts(warm)
	args := agentContainerArgs(job, ap, warm.Name)
	if ap.Role == contract.RoleCoordinator {
		args = append(args, "--job", coordinatorJobID(job))
	}
	c := claim.Claim{Job: job.Namespace + "/" + job.Name, Role: ap.Role, Args: args, Secret: secret.([]byte)}
	if ap.Role == contract.RoleCoordinator && ap.Directive != "" {
		c.Env = map[string]string{contract.EnvInitialDirective: ap.Directive}
	}
	sealed, err := claim.Seal(key, string(warm.UID), c)
	if err != nil {
		return nil, err
	}
	clearArgs, err := json.Marshal(args)
	if err != nil {
		return nil, err
	}
	claimed := warm.DeepCopy()
	labels := agentLabels(job, plan, ap)
	for k, v := range labels {
		claimed.Labels[k] = v
	}
	if claimed.Annotations == nil {
		claimed.Annotations = map[string]string{}
	}
	claimed.Annotations[contract.AnnotationClaim] = sealed
	claimed.Annotations[contract.AnnotationAgentArgs] = string(clearArgs)
	claimed.Annotations[contract.AnnotationClaimedAt] = r.Clock.Now().UTC().Format(time.RFC3339Nano)
	if ap.Role == contract.RoleCoordinator && ap.Directive != "" {
		claimed.Annotations[contract.AnnotationDirective] = ap.Directive
	}
	claimed.OwnerReferences = []metav1.OwnerReference{controllerRefOf(job)}
	if err := r.Client.Patch(ctx, claimed, client.MergeFromWithOptions(warm, client.MergeFromWithOptimisticLock{})); err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			return nil, nil // taken, or gone: the job's own pod then
		}
		return nil, fmt.Errorf("claiming warm agent %s: %w", podKey(warm), err)
	}
	r.exp.ExpectCreate(job.UID, slotName(job.Name, claimed))
	logf.FromContext(ctx).V(1).Info("Claimed a warm agent", "pod", podKey(claimed), "role", ap.Role, "stripe", ap.Stripe, "node", ap.Node, "port", ap.Port)
	return claimed, nil
}
