package controllers

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// The warm pool: agents started on an endpoint's DTN nodes before any job, each
// waiting in `dtnflow-agent standby` for a claim (contract, package agent/contract/claim).
//
// Each warm agent has a ServiceAccount, Role and RoleBinding of its own (get, watch and
// patch of its own pod, what a coordinator has), and a Secret holding a key made for it
// alone, with which the controller seals its claim. The manager keeps the keys in
// memory only (it creates Secrets and never reads one): after a restart it no longer
// knows the keys of the agents waiting, so it replaces them. The ServiceAccount must
// exist before its pod; the other three are created after it, owned by it, and the
// ServiceAccount is then given to the pod too, so that the garbage collector removes
// all four with the pod — whether the pool deleted it or it ended as a job's agent.

// warmKeys are the keys of the warm agents this manager started, by pod.
type warmKeys struct {
	mu   sync.Mutex
	keys map[types.NamespacedName][]byte
}

func newWarmKeys() *warmKeys { return &warmKeys{keys: map[types.NamespacedName][]byte{}} }

func (k *warmKeys) put(pod types.NamespacedName, key []byte) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys[pod] = key
}

func (k *warmKeys) get(pod types.NamespacedName) ([]byte, bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	key, ok := k.keys[pod]
	return key, ok
}

func (k *warmKeys) forget(pod types.NamespacedName) {
	k.mu.Lock()
	defer k.mu.Unlock()
	delete(k.keys, pod)
}

// warmSlot is one kind of warm agent an endpoint keeps: where it waits and what it can
// become.
type warmSlot struct {
	Namespace, Node, Side string
}

// warmSides are the sides of a transfer an endpoint's warm agents serve: the source
// always, the destination unless its storage is read-only.
func warmSides(ep *dtnflowv1alpha1.TransferEndpoint) []string {
	if ep.Spec.Storage.ReadOnly {
		return []string{contract.WarmSideSource}
	}
	return []string{contract.WarmSideSource, contract.WarmSideDestination}
}

// warmSideOf is the side an agent of the role serves.
func warmSideOf(role contract.Role) string {
	if role == contract.RoleReceiver {
		return contract.WarmSideDestination
	}
	return contract.WarmSideSource
}

// warmAgentName is a new name for a warm agent of the endpoint: a claimed agent keeps
// its name while its replacement waits, so each gets a random suffix (as a
// ReplicaSet's pods do); the prefix says whose it is.
func warmAgentName(endpoint string) string {
	return "dtnflow-warm-" + truncateWithHash(endpoint, 30) + "-" + utilrand.String(5)
}

// warmLabels are the labels of a waiting agent and its objects.
func warmLabels(ep *dtnflowv1alpha1.TransferEndpoint, side string) map[string]string {
	return map[string]string{
		contract.LabelManagedBy: contract.ManagedByValue,
		contract.LabelWarmPool:  ep.Name,
		contract.LabelWarmSide:  side,
	}
}

// endpointRef makes the endpoint the controlling owner of a waiting agent: the pool's
// until a job claims it.
func endpointRef(ep *dtnflowv1alpha1.TransferEndpoint) metav1.OwnerReference {
	return metav1.OwnerReference{
		APIVersion: dtnflowv1alpha1.GroupVersion.String(), Kind: "TransferEndpoint",
		Name: ep.Name, UID: ep.UID, Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}
}

func podRef(pod *corev1.Pod) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}
}

// buildWarmAgentPod builds a waiting agent: pinned to its node, holding a listening and
// a metrics host port (a pod's ports are fixed at its creation, so it holds them for
// whatever role it becomes), its storage mounted as that side's agents mount it, its
// key's Secret, a memory-backed volume where the job's secret will be written, and a
// token for its own pod. It asks for an idle coordinator's CPU; a claim resizes it.
func buildWarmAgentPod(ep *dtnflowv1alpha1.TransferEndpoint, slot warmSlot, name string, listen, metrics int32, opts AgentPodOptions) *corev1.Pod {
	res := agentResources(nil, agentPod{Role: contract.RoleCoordinator, Endpoint: ep}, opts)
	container := corev1.Container{
		Name:            agentContainerName,
		Image:           opts.Image,
		ImagePullPolicy: opts.ImagePullPolicy,
		Args:            []string{"standby", "--pod", slot.Namespace + "/" + name},
		Resources:       res,
		Ports: []corev1.ContainerPort{
			{Name: "listen", ContainerPort: listen, HostPort: listen, Protocol: corev1.ProtocolTCP},
			{Name: metricsPortName, ContainerPort: metrics, HostPort: metrics, Protocol: corev1.ProtocolTCP},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: dataVolume, MountPath: contract.DataMountPath, ReadOnly: slot.Side == contract.WarmSideSource},
			{Name: secretVolume, MountPath: contract.SecretMountPath},
			{Name: warmKeyVolume, MountPath: contract.WarmKeyMountPath, ReadOnly: true},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          agentContainerSecurity(),
	}
	if opts.APIServerHost != "" {
		container.Env = append(container.Env,
			corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: opts.APIServerHost},
			corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: opts.APIServerPort})
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       slot.Namespace,
			Labels:          warmLabels(ep, slot.Side),
			OwnerReferences: []metav1.OwnerReference{endpointRef(ep)},
		},
		Spec: corev1.PodSpec{
			RestartPolicy:                corev1.RestartPolicyNever,
			HostNetwork:                  true,
			DNSPolicy:                    corev1.DNSDefault,
			ServiceAccountName:           name,
			AutomountServiceAccountToken: ptr.To(true),
			EnableServiceLinks:           ptr.To(false),
			Affinity:                     pinnedTo(slot.Node),
			SecurityContext:              agentPodSecurity(ep),
			Containers:                   []corev1.Container{container},
			Volumes: []corev1.Volume{
				{Name: dataVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: ep.Spec.Storage.HostPath, Type: ptr.To(corev1.HostPathDirectory)}}},
				{Name: secretVolume, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
				{Name: warmKeyVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: name, DefaultMode: ptr.To[int32](0o400)}}},
			},
		},
	}
	for _, s := range opts.ImagePullSecrets {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
	}
	if s := ep.Spec.AgentPods; s != nil {
		pod.Spec.Tolerations = slices.Clone(s.Tolerations)
		pod.Spec.PriorityClassName = s.PriorityClassName
	}
	return pod
}

// warmKeyVolume is the volume of a warm agent's own key.
const warmKeyVolume = "warm-key"

// warmAgentObjects are what a waiting agent's pod needs besides the ServiceAccount:
// its key's Secret, and the Role and RoleBinding that let its token read, watch and
// patch that one pod. All are owned by the pod.
func warmAgentObjects(pod *corev1.Pod, key []byte) []client.Object {
	meta := func() metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, Labels: pod.Labels, OwnerReferences: []metav1.OwnerReference{podRef(pod)}}
	}
	return []client.Object{
		&corev1.Secret{ObjectMeta: meta(), Type: corev1.SecretTypeOpaque, Immutable: ptr.To(true), Data: map[string][]byte{contract.WarmKey: key}},
		&rbacv1.Role{ObjectMeta: meta(), Rules: []rbacv1.PolicyRule{{
			APIGroups: []string{""}, Resources: []string{"pods"}, ResourceNames: []string{pod.Name},
			Verbs: []string{"get", "watch", "patch"},
		}}},
		&rbacv1.RoleBinding{ObjectMeta: meta(),
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: pod.Name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: pod.Name, Namespace: pod.Namespace}},
		},
	}
}

// warmNamespaceView is what was observed of the namespaces a warm pool lists.
type warmNamespaceView struct {
	Served     []string // exist and namespaceSelector selects them: agents wait there
	Missing    []string // do not exist, or are being deleted
	Unselected []string // namespaceSelector does not select them
}

// observeWarmNamespaces sorts the namespaces of the endpoint's pool into those it
// serves and those it cannot, and why.
func observeWarmNamespaces(ctx context.Context, c client.Reader, ep *dtnflowv1alpha1.TransferEndpoint) (warmNamespaceView, error) {
	var view warmNamespaceView
	sel, err := metav1.LabelSelectorAsSelector(ep.Spec.NamespaceSelector)
	if err != nil {
		return view, nil // the API server's validation refuses such a selector
	}
	for _, name := range ep.Spec.AgentPods.WarmPool.Namespaces {
		var ns corev1.Namespace
		switch err := c.Get(ctx, types.NamespacedName{Name: name}, &ns); {
		case apierrors.IsNotFound(err):
			view.Missing = append(view.Missing, name)
		case err != nil:
			return view, err
		case ns.DeletionTimestamp != nil:
			view.Missing = append(view.Missing, name)
		case !sel.Matches(labels.Set(ns.Labels)):
			view.Unselected = append(view.Unselected, name)
		default:
			view.Served = append(view.Served, name)
		}
	}
	sort.Strings(view.Served)
	return view, nil
}

// listWarmAgents lists the endpoint's warm agents: those still waiting (the endpoint
// their controller) and those jobs claimed.
func listWarmAgents(ctx context.Context, c client.Reader, ep *dtnflowv1alpha1.TransferEndpoint) (waiting, claimed []*corev1.Pod, err error) {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.MatchingLabels{contract.LabelWarmPool: ep.Name}); err != nil {
		return nil, nil, fmt.Errorf("listing the warm agents of TransferEndpoint %s: %w", ep.Name, err)
	}
	for i := range list.Items {
		if pod := &list.Items[i]; controllerUID(pod) == ep.UID {
			waiting = append(waiting, pod)
		} else {
			claimed = append(claimed, pod)
		}
	}
	return waiting, claimed, nil
}

// warmAgentRunning says whether a waiting agent can be claimed now: it runs, and is
// not being deleted.
func warmAgentRunning(pod *corev1.Pod) bool {
	return pod.DeletionTimestamp == nil && pod.Status.Phase == corev1.PodRunning
}

// observeWarmPool observes the endpoint's warm agents, waiting and claimed, and, while
// it has a pool, the namespaces the pool lists.
func observeWarmPool(ctx context.Context, c client.Reader, ep *dtnflowv1alpha1.TransferEndpoint) (*warmPoolView, error) {
	view := &warmPoolView{}
	if warmPoolOf(ep) != nil {
		var err error
		if view.Namespaces, err = observeWarmNamespaces(ctx, c, ep); err != nil {
			return nil, err
		}
	}
	var err error
	if view.Waiting, view.Claimed, err = listWarmAgents(ctx, c, ep); err != nil {
		return nil, err
	}
	return view, nil
}

// warmSlotOf is the slot a warm agent waits in.
func warmSlotOf(pod *corev1.Pod) warmSlot {
	return warmSlot{Namespace: pod.Namespace, Node: pinnedNode(pod), Side: pod.Labels[contract.LabelWarmSide]}
}

// wantedWarmSlots is how many agents should wait in each slot of the endpoint.
func wantedWarmSlots(ep *dtnflowv1alpha1.TransferEndpoint, namespaces []string, nodes []nodeView) map[warmSlot]int {
	want := map[warmSlot]int{}
	if warmPoolOf(ep) == nil {
		return want
	}
	n := int(ep.Spec.AgentPods.WarmPool.AgentsPerNode)
	for _, ns := range namespaces {
		for _, node := range nodes {
			if !node.Usable() {
				continue
			}
			for _, side := range warmSides(ep) {
				want[warmSlot{Namespace: ns, Node: node.Name, Side: side}] = n
			}
		}
	}
	return want
}

// warmRefillDelay is the endpoint's delay before a claimed agent is replaced.
func warmRefillDelay(pool *dtnflowv1alpha1.WarmPool) time.Duration {
	if pool.RefillDelaySeconds == nil {
		return defaultWarmRefillDelay
	}
	return time.Duration(*pool.RefillDelaySeconds) * time.Second
}

// defaultWarmRefillDelay is the API's default of refillDelaySeconds, for an endpoint
// written before the field existed.
const defaultWarmRefillDelay = 10 * time.Second

// warmRefills is how many agents to start now in each slot the pool is short of, and
// how long until a slot held back may be refilled (0: none is held back). An agent a job
// claimed less than delay ago, still running as the job's, holds back one replacement in
// its slot: the node is starting that job's transfer. One claimed earlier, or whose job
// has let it go, holds back none.
func warmRefills(want, have map[warmSlot]int, claimed []*corev1.Pod, now time.Time, delay time.Duration) (start map[warmSlot]int, wait time.Duration) {
	recent := map[warmSlot]int{}
	soonest := map[warmSlot]time.Duration{}
	for _, pod := range claimed {
		if podTerminal(pod) || pod.DeletionTimestamp != nil {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, pod.Annotations[contract.AnnotationClaimedAt])
		if err != nil {
			continue // claimed by an older manager: nothing to wait for
		}
		left := at.Add(delay).Sub(now)
		if left <= 0 {
			continue
		}
		slot := warmSlotOf(pod)
		recent[slot]++
		if s, ok := soonest[slot]; !ok || left < s {
			soonest[slot] = left
		}
	}
	start = map[warmSlot]int{}
	for slot, n := range want {
		short := n - have[slot]
		if short <= 0 {
			continue
		}
		if unheld := short - recent[slot]; unheld > 0 {
			start[slot] = unheld
		}
		if recent[slot] > 0 && (wait == 0 || soonest[slot] < wait) {
			wait = soonest[slot]
		}
	}
	return start, wait
}

// warmPodsToDelete picks, of the waiting agents the pool has, those it no longer wants:
// ended ones, ones whose key this manager does not hold, ones in a slot it no longer
// keeps, and the newest beyond a slot's count. have maps each slot to its live agents.
func warmPodsToDelete(want map[warmSlot]int, pods []*corev1.Pod, known func(*corev1.Pod) bool) (remove []*corev1.Pod, have map[warmSlot]int) {
	have = map[warmSlot]int{}
	bySlot := map[warmSlot][]*corev1.Pod{}
	for _, pod := range pods {
		if pod.DeletionTimestamp != nil {
			continue
		}
		slot := warmSlotOf(pod)
		if podTerminal(pod) || !known(pod) || want[slot] == 0 {
			remove = append(remove, pod)
			continue
		}
		bySlot[slot] = append(bySlot[slot], pod)
	}
	for slot, pods := range bySlot {
		sort.Slice(pods, func(i, j int) bool { // the oldest first; they are kept
			a, b := pods[i].CreationTimestamp, pods[j].CreationTimestamp
			if !a.Equal(&b) {
				return a.Before(&b)
			}
			return pods[i].Name < pods[j].Name
		})
		keep := min(len(pods), want[slot])
		have[slot] = keep
		remove = append(remove, pods[keep:]...)
	}
	return remove, have
}

// warmPoolOf is the endpoint's warm pool, nil without one.
func warmPoolOf(ep *dtnflowv1alpha1.TransferEndpoint) *dtnflowv1alpha1.WarmPool {
	if ep.Spec.AgentPods == nil {
		return nil
	}
	return ep.Spec.AgentPods.WarmPool
}
