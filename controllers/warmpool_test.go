package controllers

import (
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// TestBuildWarmAgentPod checks what a waiting agent is, side by side: pinned, on the
// host network, owned by its endpoint, waiting in standby with a token for its own
// account, holding a listening and a metrics port, its storage read-only on the source
// side, the job's secret's place a memory-backed volume it can write, its own key a
// Secret of its own name read-only, an idle coordinator's CPU, and the least privilege
// of every agent.
func TestBuildWarmAgentPod(t *testing.T) {
	opts := AgentPodOptions{Image: "dtnflow-agent:test", ImagePullPolicy: corev1.PullNever, CoordinatorMillicores: 5,
		APIServerHost: "10.99.0.1", APIServerPort: "6443"}
	ep := testEndpoint("site-a", "/srv/a", "")
	ep.UID = "ep-uid"
	for _, side := range []string{contract.WarmSideSource, contract.WarmSideDestination} {
		t.Run(side, func(t *testing.T) {
			pod := buildWarmAgentPod(ep, warmSlot{Namespace: "physics", Node: "a1", Side: side}, "dtnflow-warm-site-a-x1", 47010, 47011, opts)
			if pod.Name != "dtnflow-warm-site-a-x1" || pod.Namespace != "physics" {
				t.Errorf("name %s/%s", pod.Namespace, pod.Name)
			}
			if d := cmp.Diff(map[string]string{contract.LabelManagedBy: "dtnflow", contract.LabelWarmPool: "site-a", contract.LabelWarmSide: side}, pod.Labels); d != "" {
				t.Errorf("labels (-want +got):\n%s", d)
			}
			if owner := metav1.GetControllerOf(pod); owner == nil || owner.Kind != "TransferEndpoint" || owner.UID != "ep-uid" {
				t.Errorf("controller owner %+v", owner)
			}
			if pinnedNode(pod) != "a1" || !pod.Spec.HostNetwork || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("node %q hostNetwork %v restart %s", pinnedNode(pod), pod.Spec.HostNetwork, pod.Spec.RestartPolicy)
			}
			if !ptr.Deref(pod.Spec.AutomountServiceAccountToken, false) || pod.Spec.ServiceAccountName != pod.Name {
				t.Errorf("token %v account %q", pod.Spec.AutomountServiceAccountToken, pod.Spec.ServiceAccountName)
			}
			c := pod.Spec.Containers[0]
			if d := cmp.Diff([]string{"standby", "--pod", "physics/dtnflow-warm-site-a-x1"}, c.Args); d != "" {
				t.Errorf("args (-want +got):\n%s", d)
			}
			wantPorts := []corev1.ContainerPort{
				{Name: "listen", ContainerPort: 47010, HostPort: 47010, Protocol: corev1.ProtocolTCP},
				{Name: "metrics", ContainerPort: 47011, HostPort: 47011, Protocol: corev1.ProtocolTCP},
			}
			if d := cmp.Diff(wantPorts, c.Ports); d != "" {
				t.Errorf("ports (-want +got):\n%s", d)
			}
			if l, m := warmPorts(pod); l != 47010 || m != 47011 || listenPortOf(pod) != 47010 {
				t.Errorf("warmPorts %d %d, listenPortOf %d", l, m, listenPortOf(pod))
			}
			if d := cmp.Diff([]corev1.EnvVar{{Name: "KUBERNETES_SERVICE_HOST", Value: "10.99.0.1"}, {Name: "KUBERNETES_SERVICE_PORT", Value: "6443"}}, c.Env); d != "" {
				t.Errorf("env (-want +got):\n%s", d)
			}
			if got := c.Resources.Requests[corev1.ResourceCPU]; got.Cmp(*resource.NewMilliQuantity(5, resource.DecimalSI)) != 0 || c.Resources.Limits != nil {
				t.Errorf("resources %+v", c.Resources)
			}
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range c.VolumeMounts {
				mounts[m.MountPath] = m
			}
			vols := map[string]corev1.Volume{}
			for _, v := range pod.Spec.Volumes {
				vols[v.Name] = v
			}
			if m := mounts[contract.DataMountPath]; m.ReadOnly != (side == contract.WarmSideSource) || vols[m.Name].HostPath == nil || vols[m.Name].HostPath.Path != "/srv/a" {
				t.Errorf("data mount %+v volume %+v", m, vols[m.Name])
			}
			if m := mounts[contract.SecretMountPath]; m.ReadOnly || vols[m.Name].EmptyDir == nil || vols[m.Name].EmptyDir.Medium != corev1.StorageMediumMemory {
				t.Errorf("the job secret's mount %+v volume %+v: want a writable memory-backed emptyDir", m, vols[m.Name])
			}
			if m := mounts[contract.WarmKeyMountPath]; !m.ReadOnly || vols[m.Name].Secret == nil || vols[m.Name].Secret.SecretName != pod.Name || ptr.Deref(vols[m.Name].Secret.DefaultMode, 0) != 0o400 {
				t.Errorf("key mount %+v volume %+v", m, vols[m.Name])
			}
			if len(pod.Spec.Volumes) != 3 {
				t.Errorf("volumes %+v", pod.Spec.Volumes)
			}
			checkLeastPrivilege(t, pod, dtnflowv1alpha1.StorageOwner{User: 65532, Group: 65532})
		})
	}
}

func TestWantedWarmSlots(t *testing.T) {
	ep := testEndpoint("site-a", "/srv/a", "")
	nodes := []nodeView{{Name: "a1", Ready: true}, {Name: "a2", Ready: false}, {Name: "a3", Ready: true, Unschedulable: true}, {Name: "a4", Ready: true}}
	if got := wantedWarmSlots(ep, []string{"physics"}, nodes); len(got) != 0 {
		t.Errorf("no pool: %v", got)
	}
	ep.Spec.AgentPods = &dtnflowv1alpha1.AgentPodSettings{WarmPool: &dtnflowv1alpha1.WarmPool{AgentsPerNode: 3, Namespaces: []string{"physics", "bio"}}}
	want := map[warmSlot]int{}
	for _, ns := range []string{"physics", "bio"} {
		for _, node := range []string{"a1", "a4"} { // a2 not ready, a3 cordoned
			for _, side := range []string{contract.WarmSideSource, contract.WarmSideDestination} {
				want[warmSlot{Namespace: ns, Node: node, Side: side}] = 3
			}
		}
	}
	if d := cmp.Diff(want, wantedWarmSlots(ep, []string{"physics", "bio"}, nodes)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	ep.Spec.Storage.ReadOnly = true
	for slot := range wantedWarmSlots(ep, []string{"physics"}, nodes) {
		if slot.Side != contract.WarmSideSource {
			t.Errorf("read-only storage keeps a %s agent", slot.Side)
		}
	}
}

// TestWarmPodsToDelete: ended agents, agents whose key is not held, agents of a slot
// no longer kept, and the newest beyond a slot's count go; the oldest are kept (a job
// takes the oldest, and a cache behind a claim shows it as still waiting).
func TestWarmPodsToDelete(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	pod := func(name, node string, age int, change func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "physics", CreationTimestamp: metav1.NewTime(t0.Add(-time.Duration(age) * time.Minute)),
			Labels: map[string]string{contract.LabelWarmSide: contract.WarmSideSource}},
			Spec: corev1.PodSpec{Affinity: pinnedTo(node)}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if change != nil {
			change(p)
		}
		return p
	}
	slot := warmSlot{Namespace: "physics", Node: "a1", Side: contract.WarmSideSource}
	want := map[warmSlot]int{slot: 2}
	pods := []*corev1.Pod{
		pod("old", "a1", 30, nil),
		pod("newest", "a1", 1, nil),
		pod("middle", "a1", 10, nil),
		pod("ended", "a1", 40, func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed }),
		pod("no-key", "a1", 50, nil),
		pod("other-node", "a2", 60, nil),
		pod("leaving", "a1", 70, func(p *corev1.Pod) { p.DeletionTimestamp = ptr.To(metav1.NewTime(t0)) }),
	}
	remove, have := warmPodsToDelete(want, pods, func(p *corev1.Pod) bool { return p.Name != "no-key" })
	var names []string
	for _, p := range remove {
		names = append(names, p.Name)
	}
	slices.Sort(names)
	if d := cmp.Diff([]string{"ended", "newest", "no-key", "other-node"}, names); d != "" {
		t.Errorf("removed (-want +got):\n%s", d)
	}
	if have[slot] != 2 {
		t.Errorf("kept %d in the slot, want 2", have[slot])
	}
}

func TestSlotName(t *testing.T) {
	warm := func(labels map[string]string) *corev1.Pod {
		l := map[string]string{contract.LabelWarmPool: "site-a"}
		for k, v := range labels {
			l[k] = v
		}
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "dtnflow-warm-site-a-x1", Labels: l}}
	}
	for name, tc := range map[string]struct {
		pod  *corev1.Pod
		want string
	}{
		"a job's own pod":         {&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "calib-s1-send"}}, "calib-s1-send"},
		"a claimed coordinator":   {warm(map[string]string{contract.LabelRole: "coordinator"}), CoordinatorPodName("calib")},
		"a claimed sender":        {warm(map[string]string{contract.LabelRole: "sender", contract.LabelStripe: "3"}), AgentPodName("calib", contract.RoleSender, 3)},
		"a claimed receiver":      {warm(map[string]string{contract.LabelRole: "receiver", contract.LabelStripe: "0"}), AgentPodName("calib", contract.RoleReceiver, 0)},
		"a waiting agent":         {warm(nil), "dtnflow-warm-site-a-x1"},
		"a sender with no stripe": {warm(map[string]string{contract.LabelRole: "sender"}), "dtnflow-warm-site-a-x1"},
		"an unknown role":         {warm(map[string]string{contract.LabelRole: "admin", contract.LabelStripe: "0"}), "dtnflow-warm-site-a-x1"},
	} {
		if got := slotName("calib", tc.pod); got != tc.want {
			t.Errorf("%s: %q, want %q", name, got, tc.want)
		}
	}
}

// TestWarmRefills: a slot the pool is short of is refilled at once, except for one
// agent per claim made less than the delay ago whose job still runs it; the wait is
// until the soonest such claim is old enough. Claims of another slot, old claims, ended
// or leaving claimed agents, and claims without a time hold nothing back.
func TestWarmRefills(t *testing.T) {
	now := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	a1src := warmSlot{Namespace: "physics", Node: "a1", Side: contract.WarmSideSource}
	a1dst := warmSlot{Namespace: "physics", Node: "a1", Side: contract.WarmSideDestination}
	a2src := warmSlot{Namespace: "physics", Node: "a2", Side: contract.WarmSideSource}
	claimedAgo := func(slot warmSlot, ago time.Duration, change func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: slot.Namespace,
			Labels:      map[string]string{contract.LabelWarmSide: slot.Side},
			Annotations: map[string]string{contract.AnnotationClaimedAt: now.Add(-ago).Format(time.RFC3339Nano)}},
			Spec: corev1.PodSpec{Affinity: pinnedTo(slot.Node)}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
		if change != nil {
			change(p)
		}
		return p
	}
	want := map[warmSlot]int{a1src: 3, a1dst: 3, a2src: 3}
	for name, tc := range map[string]struct {
		have      map[warmSlot]int
		claimed   []*corev1.Pod
		delay     time.Duration
		wantStart map[warmSlot]int
		wantWait  time.Duration
	}{
		"full: nothing to start": {
			have: map[warmSlot]int{a1src: 3, a1dst: 3, a2src: 3}, claimed: []*corev1.Pod{claimedAgo(a1src, time.Second, nil)}, delay: 10 * time.Second,
			wantStart: map[warmSlot]int{},
		},
		"a new pool: every agent at once": {
			have: map[warmSlot]int{}, delay: 10 * time.Second,
			wantStart: map[warmSlot]int{a1src: 3, a1dst: 3, a2src: 3},
		},
		"a job just took two of a1's source agents and one destination agent": {
			have: map[warmSlot]int{a1src: 1, a1dst: 2, a2src: 3},
			claimed: []*corev1.Pod{claimedAgo(a1src, 2*time.Second, nil), claimedAgo(a1src, 3*time.Second, nil),
				claimedAgo(a1dst, 4*time.Second, nil)},
			delay:     10 * time.Second,
			wantStart: map[warmSlot]int{}, wantWait: 6 * time.Second,
		},
		"no delay": {
			have: map[warmSlot]int{a1src: 1, a1dst: 2, a2src: 3},
			claimed: []*corev1.Pod{claimedAgo(a1src, 2*time.Second, nil), claimedAgo(a1src, 3*time.Second, nil),
				claimedAgo(a1dst, 4*time.Second, nil)},
			wantStart: map[warmSlot]int{a1src: 2, a1dst: 1},
		},
		"old, ended, leaving and untimed claims hold nothing back; a deleted agent's refill is not held": {
			have: map[warmSlot]int{a1src: 0, a1dst: 3, a2src: 3},
			claimed: []*corev1.Pod{
				claimedAgo(a1src, 11*time.Second, nil),
				claimedAgo(a1src, time.Second, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
				claimedAgo(a1src, time.Second, func(p *corev1.Pod) { p.DeletionTimestamp = &metav1.Time{Time: now} }),
				claimedAgo(a1src, time.Second, func(p *corev1.Pod) { delete(p.Annotations, contract.AnnotationClaimedAt) }),
			},
			delay:     10 * time.Second,
			wantStart: map[warmSlot]int{a1src: 3},
		},
		"a recent claim holds back one; a claim on another node holds back none here": {
			have:      map[warmSlot]int{a1src: 0, a1dst: 3, a2src: 1},
			claimed:   []*corev1.Pod{claimedAgo(a1src, 9*time.Second, nil), claimedAgo(a2src, 5*time.Second, nil)},
			delay:     10 * time.Second,
			wantStart: map[warmSlot]int{a1src: 2, a2src: 1}, wantWait: time.Second,
		},
	} {
		t.Run(name, func(t *testing.T) {
			start, wait := warmRefills(want, tc.have, tc.claimed, now, tc.delay)
			if d := cmp.Diff(tc.wantStart, start); d != "" {
				t.Errorf("start (-want +got):\n%s", d)
			}
			if wait != tc.wantWait {
				t.Errorf("wait %v, want %v", wait, tc.wantWait)
			}
		})
	}
}
