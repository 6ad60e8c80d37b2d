package controllers

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

func testJob() *dtnflowv1alpha1.TransferJob {
	return &dtnflowv1alpha1.TransferJob{
		ObjectMeta: metav1.ObjectMeta{Name: "calib", Namespace: "physics", UID: "job-uid"},
		Spec: dtnflowv1alpha1.TransferJobSpec{
			Source:      dtnflowv1alpha1.TransferSource{Endpoint: "site-a", Paths: []dtnflowv1alpha1.RelativePath{"runs/0427", "cal.h5"}},
			Destination: dtnflowv1alpha1.TransferDestination{Endpoint: "site-b", Path: "incoming"},
			Integrity:   dtnflowv1alpha1.TransferIntegrity{Checksum: dtnflowv1alpha1.ChecksumSHA512, Verify: ptr.To(false)},
			Overwrite:   dtnflowv1alpha1.OverwriteAlways,
		},
	}
}

func testEndpoint(name, root string, budget string) *dtnflowv1alpha1.TransferEndpoint {
	ep := &dtnflowv1alpha1.TransferEndpoint{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: dtnflowv1alpha1.TransferEndpointSpec{
			NodeSelector: map[string]string{"site": name}, Storage: dtnflowv1alpha1.EndpointStorage{HostPath: root},
			NICBitsPerSecond: 10e9, MaxStripesPerNode: 4, NamespaceSelector: &metav1.LabelSelector{},
		},
	}
	if budget != "" {
		q := resource.MustParse(budget)
		ep.Spec.CPUBudgetPerNode = &q
	}
	return ep
}

func cpu(m int64) resource.Quantity { return *resource.NewMilliQuantity(m, resource.DecimalSI) }

// initialDirectiveEnv is the coordinator's first directive, read by the kubelet from
// the pod's own annotation as the container starts (the downward API).
var initialDirectiveEnv = corev1.EnvVar{Name: contract.EnvInitialDirective, ValueFrom: &corev1.EnvVarSource{
	FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['dtnflow.io/directive']"}}}

// TestBuildAgentPod checks, role by role, everything the builder decides: name, labels,
// owner, node pinning, host network, mounts (read-only at the source), the secret, the
// service account (only the coordinator gets a token), ports, arguments and CPU.
func TestBuildAgentPod(t *testing.T) {
	plan := &dtnflowv1alpha1.TransferPlan{
		SourceNodes: []string{"a1", "a2"}, DestinationNodes: []string{"b1", "b2"},
		StripesPerNode: 2, StreamsPerStripe: 8, SourceCPUMillicores: 700, DestinationCPUMillicores: 1100, Hash: "0123456789abcdef",
	}
	opts := AgentPodOptions{Image: "dtnflow-agent:test", ImagePullPolicy: corev1.PullNever, CoordinatorMillicores: 100, ProbeMillicores: 250,
		APIServerHost: "10.99.0.1", APIServerPort: "6443"}
	siteA, siteB := testEndpoint("site-a", "/srv/a", ""), testEndpoint("site-b", "/srv/b", "4")
	siteB.Spec.Storage.Owner = &dtnflowv1alpha1.StorageOwner{User: 3001, Group: 3002}
	defaultOwner := dtnflowv1alpha1.StorageOwner{User: 65532, Group: 65532}

	type want struct {
		name       string
		labels     map[string]string
		node       string
		readOnly   bool
		token      bool
		account    string
		ports      []corev1.ContainerPort
		args       []string
		env        []corev1.EnvVar
		resources  corev1.ResourceRequirements
		root       string
		directive  string
		hostNetwok bool
		owner      dtnflowv1alpha1.StorageOwner
	}
	tests := map[string]struct {
		plan *dtnflowv1alpha1.TransferPlan
		pod  agentPod
		want want
	}{
		"coordinator": {
			plan: plan,
			pod:  agentPod{Role: contract.RoleCoordinator, Node: "a1", Endpoint: siteA, Port: 47000, Directive: `{"generation":1}`},
			want: want{
				name:   "calib-coordinator",
				labels: map[string]string{contract.LabelManagedBy: "dtnflow", contract.LabelJob: "calib", contract.LabelRole: "coordinator", contract.LabelPlanHash: "0123456789abcdef"},
				node:   "a1", readOnly: true, token: true, account: "calib-coordinator",
				ports: []corev1.ContainerPort{{Name: "coordinator", ContainerPort: 47000, HostPort: 47000, Protocol: corev1.ProtocolTCP}},
				args: []string{"coordinate", "--listen", ":47000", "--root", "/data", "--secret-file", "/var/run/dtnflow/auth/secret", "--pod", "physics/calib-coordinator",
					"--dest-path", "incoming", "--checksum", "SHA512", "--verify=false", "--overwrite", "Always", "--path", "runs/0427", "--path", "cal.h5"},
				env:       []corev1.EnvVar{initialDirectiveEnv, {Name: "KUBERNETES_SERVICE_HOST", Value: "10.99.0.1"}, {Name: "KUBERNETES_SERVICE_PORT", Value: "6443"}},
				resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu(100)}},
				root:      "/srv/a", directive: `{"generation":1}`, owner: defaultOwner,
			},
		},
		"coordinator of a plan that sizes it: the plan's request": {
			plan: func() *dtnflowv1alpha1.TransferPlan { p := *plan; p.CoordinatorCPUMillicores = 18; return &p }(),
			pod:  agentPod{Role: contract.RoleCoordinator, Node: "a1", Endpoint: siteA, Port: 47000, Directive: `{"generation":1}`},
			want: want{
				name:   "calib-coordinator",
				labels: map[string]string{contract.LabelManagedBy: "dtnflow", contract.LabelJob: "calib", contract.LabelRole: "coordinator", contract.LabelPlanHash: "0123456789abcdef"},
				node:   "a1", readOnly: true, token: true, account: "calib-coordinator",
				ports: []corev1.ContainerPort{{Name: "coordinator", ContainerPort: 47000, HostPort: 47000, Protocol: corev1.ProtocolTCP}},
				args: []string{"coordinate", "--listen", ":47000", "--root", "/data", "--secret-file", "/var/run/dtnflow/auth/secret", "--pod", "physics/calib-coordinator",
					"--dest-path", "incoming", "--checksum", "SHA512", "--verify=false", "--overwrite", "Always", "--path", "runs/0427", "--path", "cal.h5"},
				env:       []corev1.EnvVar{initialDirectiveEnv, {Name: "KUBERNETES_SERVICE_HOST", Value: "10.99.0.1"}, {Name: "KUBERNETES_SERVICE_PORT", Value: "6443"}},
				resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu(18)}},
				root:      "/srv/a", directive: `{"generation":1}`, owner: defaultOwner,
			},
		},
		"sender, no budget: request from the source CPU model, no limit": {
			plan: plan,
			pod:  agentPod{Role: contract.RoleSender, Stripe: 3, Node: "a2", Endpoint: siteA, CoordinatorAddress: "10.0.0.1:47000", ReceiverAddress: "10.0.1.2:47001"},
			want: want{
				name:   "calib-s3-send",
				labels: map[string]string{contract.LabelManagedBy: "dtnflow", contract.LabelJob: "calib", contract.LabelRole: "sender", contract.LabelStripe: "3", contract.LabelPlanHash: "0123456789abcdef"},
				node:   "a2", readOnly: true,
				args:      []string{"send", "--stripe", "3", "--coordinator", "10.0.0.1:47000", "--receiver", "10.0.1.2:47001", "--root", "/data", "--secret-file", "/var/run/dtnflow/auth/secret"},
				resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu(700)}},
				root:      "/srv/a", owner: defaultOwner,
			},
		},
		"receiver, budget 4 CPU over 2 stripes per node: request from the destination CPU model, limit 2000m": {
			plan: plan,
			pod:  agentPod{Role: contract.RoleReceiver, Stripe: 3, Node: "b2", Endpoint: siteB, Port: 47001, MetricsPort: 47002},
			want: want{
				name:   "calib-s3-recv",
				labels: map[string]string{contract.LabelManagedBy: "dtnflow", contract.LabelJob: "calib", contract.LabelRole: "receiver", contract.LabelStripe: "3", contract.LabelPlanHash: "0123456789abcdef"},
				node:   "b2", readOnly: false,
				ports: []corev1.ContainerPort{{Name: "receiver", ContainerPort: 47001, HostPort: 47001, Protocol: corev1.ProtocolTCP},
					{Name: "metrics", ContainerPort: 47002, HostPort: 47002, Protocol: corev1.ProtocolTCP}},
				args:      []string{"receive", "--stripe", "3", "--listen", ":47001", "--root", "/data", "--secret-file", "/var/run/dtnflow/auth/secret", "--metrics-addr", "127.0.0.1:47002"},
				resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu(1100)}, Limits: corev1.ResourceList{corev1.ResourceCPU: cpu(2000)}},
				root:      "/srv/b", owner: dtnflowv1alpha1.StorageOwner{User: 3001, Group: 3002},
			},
		},
		"receiver whose share of the budget is below its request: the limit is the request": {
			plan: &dtnflowv1alpha1.TransferPlan{SourceNodes: []string{"a1"}, DestinationNodes: []string{"b1"}, StripesPerNode: 8, DestinationCPUMillicores: 900, Hash: "h"},
			pod:  agentPod{Role: contract.RoleReceiver, Stripe: 0, Node: "b1", Endpoint: siteB, Port: 47002},
			want: want{
				name:   "calib-s0-recv",
				labels: map[string]string{contract.LabelManagedBy: "dtnflow", contract.LabelJob: "calib", contract.LabelRole: "receiver", contract.LabelStripe: "0", contract.LabelPlanHash: "h"},
				node:   "b1",
				ports:  []corev1.ContainerPort{{Name: "receiver", ContainerPort: 47002, HostPort: 47002, Protocol: corev1.ProtocolTCP}},
				args:   []string{"receive", "--stripe", "0", "--listen", ":47002", "--root", "/data", "--secret-file", "/var/run/dtnflow/auth/secret"},
				resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu(900)},
					Limits: corev1.ResourceList{corev1.ResourceCPU: cpu(900)}},
				root: "/srv/b", owner: dtnflowv1alpha1.StorageOwner{User: 3001, Group: 3002},
			},
		},
		"probe sender before any plan: probe CPU, probe hash": {
			plan: nil,
			pod:  agentPod{Role: contract.RoleSender, Stripe: 0, Node: "a1", Endpoint: siteA, CoordinatorAddress: "10.0.0.1:47000", ReceiverAddress: "[fd00::2]:47000", MetricsPort: 47001},
			want: want{
				name:   "calib-s0-send",
				labels: map[string]string{contract.LabelManagedBy: "dtnflow", contract.LabelJob: "calib", contract.LabelRole: "sender", contract.LabelStripe: "0", contract.LabelPlanHash: "probe"},
				node:   "a1", readOnly: true,
				ports:     []corev1.ContainerPort{{Name: "metrics", ContainerPort: 47001, HostPort: 47001, Protocol: corev1.ProtocolTCP}},
				args:      []string{"send", "--stripe", "0", "--coordinator", "10.0.0.1:47000", "--receiver", "[fd00::2]:47000", "--root", "/data", "--secret-file", "/var/run/dtnflow/auth/secret", "--metrics-addr", "127.0.0.1:47001"},
				resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: cpu(250)}},
				root:      "/srv/a", owner: defaultOwner,
			},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := buildAgentPod(testJob(), tc.plan, tc.pod, opts)
			w := tc.want
			if pod.Name != w.name || pod.Namespace != "physics" {
				t.Errorf("name = %s/%s, want physics/%s", pod.Namespace, pod.Name, w.name)
			}
			if d := cmp.Diff(w.labels, pod.Labels); d != "" {
				t.Errorf("labels (-want +got):\n%s", d)
			}
			owner := metav1.GetControllerOf(pod)
			if owner == nil || owner.Kind != "TransferJob" || owner.Name != "calib" || owner.UID != "job-uid" || !ptr.Deref(owner.BlockOwnerDeletion, false) {
				t.Errorf("controller owner = %+v", owner)
			}
			if got := pinnedNode(pod); got != w.node {
				t.Errorf("pinned to %q, want %q", got, w.node)
			}
			if pod.Spec.NodeName != "" {
				t.Errorf("spec.nodeName = %q: pinning must leave scheduling to the scheduler", pod.Spec.NodeName)
			}
			if !pod.Spec.HostNetwork || pod.Spec.DNSPolicy != corev1.DNSDefault || pod.Spec.RestartPolicy != corev1.RestartPolicyNever {
				t.Errorf("hostNetwork %v, dnsPolicy %s, restartPolicy %s", pod.Spec.HostNetwork, pod.Spec.DNSPolicy, pod.Spec.RestartPolicy)
			}
			if got := ptr.Deref(pod.Spec.AutomountServiceAccountToken, true); got != w.token || pod.Spec.ServiceAccountName != w.account {
				t.Errorf("token %v account %q, want %v %q", got, pod.Spec.ServiceAccountName, w.token, w.account)
			}
			c := pod.Spec.Containers[0]
			if c.Image != "dtnflow-agent:test" || c.ImagePullPolicy != corev1.PullNever {
				t.Errorf("image %s %s", c.Image, c.ImagePullPolicy)
			}
			if d := cmp.Diff(w.args, c.Args); d != "" {
				t.Errorf("args (-want +got):\n%s", d)
			}
			if d := cmp.Diff(w.ports, c.Ports); d != "" {
				t.Errorf("ports (-want +got):\n%s", d)
			}
			if d := cmp.Diff(w.env, c.Env); d != "" {
				t.Errorf("env (-want +got):\n%s", d)
			}
			if d := cmp.Diff(w.resources, c.Resources, cmp.Comparer(func(a, b resource.Quantity) bool { return a.Cmp(b) == 0 })); d != "" {
				t.Errorf("resources (-want +got):\n%s", d)
			}
			mounts := map[string]corev1.VolumeMount{}
			for _, m := range c.VolumeMounts {
				mounts[m.MountPath] = m
			}
			if m := mounts[contract.DataMountPath]; m.ReadOnly != w.readOnly {
				t.Errorf("data mount read-only %v, want %v", m.ReadOnly, w.readOnly)
			}
			if m := mounts[contract.SecretMountPath]; !m.ReadOnly || m.Name == "" {
				t.Errorf("secret mount %+v", m)
			}
			vols := map[string]corev1.Volume{}
			for _, v := range pod.Spec.Volumes {
				vols[v.Name] = v
			}
			if hp := vols[mounts[contract.DataMountPath].Name].HostPath; hp == nil || hp.Path != w.root || ptr.Deref(hp.Type, "") != corev1.HostPathDirectory {
				t.Errorf("data volume %+v, want hostPath %s", vols[mounts[contract.DataMountPath].Name], w.root)
			}
			if s := vols[mounts[contract.SecretMountPath].Name].Secret; s == nil || s.SecretName != "calib-auth" {
				t.Errorf("secret volume %+v", vols[mounts[contract.SecretMountPath].Name])
			}
			if got := pod.Annotations[contract.AnnotationDirective]; got != w.directive {
				t.Errorf("directive annotation %q, want %q", got, w.directive)
			}
			checkLeastPrivilege(t, pod, w.owner)
		})
	}
}

// TestAgentPodSettings: a site's spec.agentPods reach its agents and only its agents —
// tolerations, priority class and memory — beside the plan's CPU, and the manager's pull
// secrets reach every agent.
func TestAgentPodSettings(t *testing.T) {
	plan := &dtnflowv1alpha1.TransferPlan{SourceNodes: []string{"a1"}, DestinationNodes: []string{"b1"},
		StripesPerNode: 1, StreamsPerStripe: 4, SourceCPUMillicores: 700, DestinationCPUMillicores: 1100, Hash: "0123456789abcdef"}
	opts := AgentPodOptions{Image: "dtnflow-agent:test", CoordinatorMillicores: 100, ImagePullSecrets: []string{"regcred"}}
	tainted := testEndpoint("site-b", "/srv/b", "4")
	tolerations := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "dtn", Effect: corev1.TaintEffectNoSchedule}}
	mem, memLimit := resource.MustParse("256Mi"), resource.MustParse("1Gi")
	tainted.Spec.AgentPods = &dtnflowv1alpha1.AgentPodSettings{Tolerations: tolerations, PriorityClassName: "dtn-transfers",
		MemoryRequest: &mem, MemoryLimit: &memLimit}
	plain := testEndpoint("site-a", "/srv/a", "")

	recv := buildAgentPod(testJob(), plan, agentPod{Role: contract.RoleReceiver, Stripe: 0, Node: "b1", Port: 47001, Endpoint: tainted}, opts)
	if d := cmp.Diff(tolerations, recv.Spec.Tolerations); d != "" {
		t.Errorf("tolerations (-want +got):\n%s", d)
	}
	if recv.Spec.PriorityClassName != "dtn-transfers" {
		t.Errorf("priority class %q", recv.Spec.PriorityClassName)
	}
	res := recv.Spec.Containers[0].Resources
	if res.Requests.Memory().Cmp(mem) != 0 || res.Limits.Memory().Cmp(memLimit) != 0 || res.Requests.Cpu().MilliValue() != 1100 || res.Limits.Cpu().MilliValue() != 4000 {
		t.Errorf("resources %+v: want the plan's 1100m (limit 4 cores), memory 256Mi/1Gi", res)
	}
	if d := cmp.Diff([]corev1.LocalObjectReference{{Name: "regcred"}}, recv.Spec.ImagePullSecrets); d != "" {
		t.Errorf("pull secrets (-want +got):\n%s", d)
	}

	send := buildAgentPod(testJob(), plan, agentPod{Role: contract.RoleSender, Stripe: 0, Node: "a1", Endpoint: plain,
		CoordinatorAddress: "10.0.0.1:47000", ReceiverAddress: "10.0.0.2:47001"}, opts)
	if send.Spec.Tolerations != nil || send.Spec.PriorityClassName != "" || send.Spec.Containers[0].Resources.Requests.Memory().Value() != 0 {
		t.Errorf("the other site's settings leaked: %+v %q %+v", send.Spec.Tolerations, send.Spec.PriorityClassName, send.Spec.Containers[0].Resources)
	}
	if len(send.Spec.ImagePullSecrets) != 1 {
		t.Errorf("sender pull secrets %+v", send.Spec.ImagePullSecrets)
	}
	// the builder must not share the endpoint's slice with the pod
	recv.Spec.Tolerations[0].Value = "changed"
	if tainted.Spec.AgentPods.Tolerations[0].Value != "dtn" {
		t.Error("the pod's tolerations alias the endpoint's")
	}
}

// checkLeastPrivilege checks that an agent pod runs as owner (never root) with nothing
// it does not need: no capability, no privilege escalation, a read-only root file
// system, the runtime's default seccomp profile, and owner's group as fsGroup (so the
// secret is readable by it).
func checkLeastPrivilege(t *testing.T, pod *corev1.Pod, owner dtnflowv1alpha1.StorageOwner) {
	t.Helper()
	ps := pod.Spec.SecurityContext
	if ps == nil || !ptr.Deref(ps.RunAsNonRoot, false) || ptr.Deref(ps.RunAsUser, 0) != owner.User || ptr.Deref(ps.RunAsGroup, 0) != owner.Group ||
		ptr.Deref(ps.FSGroup, 0) != owner.Group || ps.SeccompProfile == nil || ps.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod security context %+v, want non-root %d:%d, fsGroup %d, seccomp RuntimeDefault", ps, owner.User, owner.Group, owner.Group)
	}
	cs := pod.Spec.Containers[0].SecurityContext
	if cs == nil || ptr.Deref(cs.Privileged, true) || ptr.Deref(cs.AllowPrivilegeEscalation, true) || !ptr.Deref(cs.ReadOnlyRootFilesystem, false) ||
		cs.Capabilities == nil || !cmp.Equal(cs.Capabilities.Drop, []corev1.Capability{"ALL"}) || len(cs.Capabilities.Add) != 0 {
		t.Errorf("container security context %+v, want unprivileged, no escalation, read-only root, every capability dropped", cs)
	}
}

func TestNodeAddress(t *testing.T) {
	tests := map[string]struct {
		addrs []corev1.NodeAddress
		want  string
		ok    bool
	}{
		"internal first": {[]corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "dtn1"}, {Type: corev1.NodeExternalIP, Address: "192.0.2.1"}, {Type: corev1.NodeInternalIP, Address: "10.0.0.1"}}, "10.0.0.1", true},
		"external next":  {[]corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "dtn1"}, {Type: corev1.NodeExternalIP, Address: "192.0.2.1"}}, "192.0.2.1", true},
		"hostname last":  {[]corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "dtn1"}}, "dtn1", true},
		"none":           {nil, "", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, ok := nodeAddress(&corev1.Node{Status: corev1.NodeStatus{Addresses: tc.addrs}})
			if got != tc.want || ok != tc.ok {
				t.Errorf("nodeAddress = %q, %v; want %q, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}
