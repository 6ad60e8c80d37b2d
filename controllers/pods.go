package controllers

import (
	"net"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// This file holds the one function that builds agent pods, and what it needs. Every
// label, the owner reference, the node pinning, the mounts and the CPU of an agent pod
// are decided here and nowhere else.

// AgentPodOptions are the manager-wide settings of agent pods, from its flags.
type AgentPodOptions struct {
	// Image is the dtnflow-agent image; its entrypoint must be dtnflow-agent, since
	// pods give it only the contract's arguments.
	Image string
	// ImagePullPolicy is the agents' pull policy (Never for locally imported images).
	ImagePullPolicy corev1.PullPolicy
	// APIServerHost and APIServerPort, when set, are given to coordinator pods as
	// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT: on a cluster without
	// kube-proxy the in-cluster service address does not route, and the coordinator is
	// the only agent that talks to the API server.
	APIServerHost string
	APIServerPort string
	// CoordinatorMillicores is the CPU request of a coordinator, which lists the
	// dataset and hands out work but moves no data, until the first sample or the
	// plan sizes it (status.plan.coordinatorCPUMillicores). The default is about an
	// idle coordinator's use (4 millicores, optimizer.CoordinatorMillicores): 100
	// millicores, held for the seconds before the first sample, made a 36-file job's
	// coordinator ask 2.8× what it used over the whole run (issue 11's side by side),
	// and the listing it does then is mostly waiting on the file system.
	CoordinatorMillicores int64
	// ProbeMillicores is the CPU request of each side of the probe stripe, before any
	// CPU model exists.
	ProbeMillicores int64
	// ImagePullSecrets name the Secrets, in each job's namespace, that pull the agent
	// image from a private registry (the chart's agent.imagePullSecrets).
	ImagePullSecrets []string
}

// DefaultAgentPodOptions are the defaults of the manager's flags.
var DefaultAgentPodOptions = AgentPodOptions{
	Image:                 "dtnflow-agent:latest",
	ImagePullPolicy:       corev1.PullIfNotPresent,
	CoordinatorMillicores: 5,
	ProbeMillicores:       250,
}

// ProbePlanHash is the plan-hash label of the pods of a probe, made before any plan.
const ProbePlanHash = "probe"

// agentContainerName is the name of the one container of every agent pod.
const agentContainerName = "agent"

// Volume names of agent pods.
const (
	dataVolume   = "data"
	secretVolume = "auth"
)

// agentPod is what varies between the agent pods of a job: role, stripe, node, port and
// the addresses of the peers.
type agentPod struct {
	Role contract.Role
	// Stripe is the stripe index of a sender or receiver.
	Stripe int32
	// Node is the node the pod is pinned to.
	Node string
	// Endpoint is the endpoint whose storage root the pod mounts: the source for the
	// coordinator and senders, the destination for receivers.
	Endpoint *dtnflowv1alpha1.TransferEndpoint
	// Port is the host port a coordinator or receiver listens on.
	Port int32
	// MetricsPort is the host port the agent serves /metrics and /status on, on
	// loopback (0: the agent's default address).
	MetricsPort int32
	// CoordinatorAddress and ReceiverAddress are the host:port a sender connects to.
	CoordinatorAddress, ReceiverAddress string
	// Directive is the JSON directive a coordinator starts with.
	Directive string
	// Secret is the Secret holding the job's shared secret; "" is SecretName(job).
	Secret string
	// Receiver are a receiver's options for another site's job.
	Receiver contract.ReceiverOptions
}

// buildAgentPod builds the pod of one agent of a job. plan is the job's plan; nil while
// the path is probed, when the probe's CPU request and the "probe" hash are used.
func buildAgentPod(job *dtnflowv1alpha1.TransferJob, plan *dtnflowv1alpha1.TransferPlan, p agentPod, opts AgentPodOptions) *corev1.Pod {
	name := AgentPodName(job.Name, p.Role, p.Stripe)
	labels := agentLabels(job, plan, p)

	secretName := p.Secret
	if secretName == "" {
		secretName = SecretName(job.Name)
	}
	container := corev1.Container{
		Name:            agentContainerName,
		Image:           opts.Image,
		ImagePullPolicy: opts.ImagePullPolicy,
		Resources:       agentResources(plan, p, opts),
		VolumeMounts: []corev1.VolumeMount{
			{Name: dataVolume, MountPath: contract.DataMountPath, ReadOnly: p.Role != contract.RoleReceiver},
			{Name: secretVolume, MountPath: contract.SecretMountPath, ReadOnly: true},
		},
		TerminationMessagePolicy: corev1.TerminationMessageFallbackToLogsOnError,
		SecurityContext:          agentContainerSecurity(),
	}
	container.Args = agentContainerArgs(job, p, name)
	switch p.Role {
	case contract.RoleCoordinator:
		container.Ports = []corev1.ContainerPort{{Name: "coordinator", ContainerPort: p.Port, HostPort: p.Port, Protocol: corev1.ProtocolTCP}}
		if p.Directive != "" {
			container.Env = append(container.Env, corev1.EnvVar{Name: contract.EnvInitialDirective, ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.annotations['" + contract.AnnotationDirective + "']"}}})
		}
		if opts.APIServerHost != "" {
			container.Env = append(container.Env,
				corev1.EnvVar{Name: "KUBERNETES_SERVICE_HOST", Value: opts.APIServerHost},
				corev1.EnvVar{Name: "KUBERNETES_SERVICE_PORT", Value: opts.APIServerPort})
		}
	case contract.RoleReceiver:
		container.Ports = []corev1.ContainerPort{{Name: "receiver", ContainerPort: p.Port, HostPort: p.Port, Protocol: corev1.ProtocolTCP}}
	}
	if p.MetricsPort > 0 {
		// Agents share their node's network: each serves its metrics on a port of its
		// own, declared so that the scheduler and the port allocator count it.
		container.Ports = append(container.Ports, corev1.ContainerPort{Name: metricsPortName, ContainerPort: p.MetricsPort, HostPort: p.MetricsPort, Protocol: corev1.ProtocolTCP})
	}

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:            name,
			Namespace:       job.Namespace,
			Labels:          labels,
			OwnerReferences: []metav1.OwnerReference{controllerRefOf(job)},
		},
		Spec: corev1.PodSpec{
			// A failed agent is replaced by the controller, which counts it against
			// spec.backoffLimit; a kubelet restart in place would hide the failure.
			RestartPolicy: corev1.RestartPolicyNever,
			HostNetwork:   true,
			// Agents resolve names as their DTN node does (its resolv.conf, and the
			// node's /etc/hosts, which the kubelet gives host-network pods): a peer
			// site's data address is a name of the site's network, never a cluster
			// Service, and the coordinator reaches the API by address. Cluster DNS
			// (ClusterFirstWithHostNet) would put the cluster's resolver and search
			// domains before the site's, and where a cluster has none the kubelet
			// writes a MissingClusterDNS warning at every sync of the pod (each
			// report, each resize: about 40 event writes in a 17 s job).
			DNSPolicy: corev1.DNSDefault,
			// Senders and receivers talk to no API; only the coordinator reads its
			// directive and writes its report, through its own pod.
			AutomountServiceAccountToken: ptr.To(p.Role == contract.RoleCoordinator),
			EnableServiceLinks:           ptr.To(false),
			Affinity:                     pinnedTo(p.Node),
			SecurityContext:              agentPodSecurity(p.Endpoint),
			Containers:                   []corev1.Container{container},
			Volumes: []corev1.Volume{
				{Name: dataVolume, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: p.Endpoint.Spec.Storage.HostPath, Type: ptr.To(corev1.HostPathDirectory)}}},
				{Name: secretVolume, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
					SecretName: secretName, DefaultMode: ptr.To[int32](0o400)}}},
			},
		},
	}
	for _, name := range opts.ImagePullSecrets {
		pod.Spec.ImagePullSecrets = append(pod.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
	}
	if s := p.Endpoint.Spec.AgentPods; s != nil {
		pod.Spec.Tolerations = slices.Clone(s.Tolerations)
		pod.Spec.PriorityClassName = s.PriorityClassName
	}
	if p.Role == contract.RoleCoordinator {
		pod.Spec.ServiceAccountName = CoordinatorAccountName(job.Name)
		if p.Directive != "" {
			pod.Annotations = map[string]string{contract.AnnotationDirective: p.Directive}
		}
	}
	return pod
}

// agentLabels are the labels of a job's agent p: the job's, its role, its stripe and the
// plan it was made for ("probe" before any plan).
func agentLabels(job *dtnflowv1alpha1.TransferJob, plan *dtnflowv1alpha1.TransferPlan, p agentPod) map[string]string {
	planHash := ProbePlanHash
	if plan != nil && plan.Hash != "" {
		planHash = plan.Hash
	}
	labels := map[string]string{
		contract.LabelManagedBy: contract.ManagedByValue,
		contract.LabelJob:       JobLabelValue(job.Name),
		contract.LabelRole:      string(p.Role),
		contract.LabelPlanHash:  planHash,
	}
	if p.Role != contract.RoleCoordinator {
		labels[contract.LabelStripe] = strconv.Itoa(int(p.Stripe))
	}
	return labels
}

// agentContainerArgs is the command line of a job's agent p running in the pod podName.
func agentContainerArgs(job *dtnflowv1alpha1.TransferJob, p agentPod, podName string) []string {
	var args []string
	switch p.Role {
	case contract.RoleCoordinator:
		args = contract.CoordinatorArgs(p.Port, job.Namespace+"/"+podName, jobOptions(job))
	case contract.RoleSender:
		args = contract.SenderArgs(p.Stripe, p.CoordinatorAddress, p.ReceiverAddress)
	case contract.RoleReceiver:
		args = contract.ReceiverArgsWith(p.Stripe, p.Port, p.Receiver)
	}
	if p.MetricsPort > 0 {
		args = append(args, metricsAddrFlag, hostPort("127.0.0.1", p.MetricsPort))
	}
	return args
}

// agentPodSecurity runs an agent as its endpoint's storage owner, never as root, under
// the runtime's default seccomp profile. The owner's group is also the pod's fsGroup,
// so that the job's Secret (mode 0400, group-readable through fsGroup) and the
// coordinator's token can be read by it; hostPath volumes are not touched by fsGroup.
func agentPodSecurity(ep *dtnflowv1alpha1.TransferEndpoint) *corev1.PodSecurityContext {
	owner := storageOwner(ep)
	return &corev1.PodSecurityContext{
		RunAsNonRoot:        ptr.To(true),
		RunAsUser:           ptr.To(owner.User),
		RunAsGroup:          ptr.To(owner.Group),
		FSGroup:             ptr.To(owner.Group),
		FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
		SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// agentContainerSecurity is the least an agent needs: no capability at all (its ports
// are above 1023, and it only reads and writes files its user may), no way to gain
// privileges, and a read-only root file system (it writes only under the storage
// root).
func agentContainerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		Privileged:               ptr.To(false),
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
	}
}

// storageOwner is who the endpoint's agents run as.
func storageOwner(ep *dtnflowv1alpha1.TransferEndpoint) dtnflowv1alpha1.StorageOwner {
	if ep != nil && ep.Spec.Storage.Owner != nil {
		return *ep.Spec.Storage.Owner
	}
	return dtnflowv1alpha1.DefaultStorageOwner
}

// controllerRefOf is the controlling owner of a job's children: the TransferJob, or,
// for the stand-in job through which a RemoteTransfer's agents are built (its Kind set
// to RemoteTransfer, see jobForRemote), that RemoteTransfer.
func controllerRefOf(job *dtnflowv1alpha1.TransferJob) metav1.OwnerReference {
	kind := "TransferJob"
	if job.Kind == remoteTransferKind {
		kind = remoteTransferKind
	}
	return *metav1.NewControllerRef(job, dtnflowv1alpha1.GroupVersion.WithKind(kind))
}

// pinnedTo is a node affinity that admits exactly one node. Pinning through affinity
// rather than spec.nodeName keeps the scheduler in the loop, so CPU requests and host
// ports are checked against what already runs there.
func pinnedTo(node string) *corev1.Affinity {
	return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
			NodeSelectorTerms: []corev1.NodeSelectorTerm{{
				MatchFields: []corev1.NodeSelectorRequirement{{
					Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
				}},
			}},
		},
	}}
}

// pinnedNode is the node a pod was pinned to by pinnedTo, or its assigned node.
func pinnedNode(pod *corev1.Pod) string {
	if a := pod.Spec.Affinity; a != nil && a.NodeAffinity != nil && a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution != nil {
		for _, term := range a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms {
			for _, f := range term.MatchFields {
				if f.Key == "metadata.name" && f.Operator == corev1.NodeSelectorOpIn && len(f.Values) == 1 {
					return f.Values[0]
				}
			}
		}
	}
	return pod.Spec.NodeName
}

// agentResources is the CPU of one agent: the plan's request for its side (the CPU
// regression of that side at the stripe's predicted rate, so sender and receiver differ
// as Liu et al. found), and a limit only when the endpoint sets a CPU budget: the
// node's budget shared among the job's stripes on the node, never below the request.
func agentResources(plan *dtnflowv1alpha1.TransferPlan, p agentPod, opts AgentPodOptions) corev1.ResourceRequirements {
	var millicores int64
	switch {
	case p.Role == contract.RoleCoordinator && plan != nil && plan.CoordinatorCPUMillicores > 0:
		millicores = plan.CoordinatorCPUMillicores
	case p.Role == contract.RoleCoordinator:
		millicores = opts.CoordinatorMillicores
	case plan == nil:
		millicores = opts.ProbeMillicores
	case p.Role == contract.RoleSender:
		millicores = plan.SourceCPUMillicores
	default:
		millicores = plan.DestinationCPUMillicores
	}
	var res corev1.ResourceRequirements
	if millicores > 0 {
		res.Requests = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(millicores, resource.DecimalSI)}
	}
	if budget := p.Endpoint.Spec.CPUBudgetPerNode; budget != nil && !budget.IsZero() {
		stripesOnNode := int64(1)
		if plan != nil && plan.StripesPerNode > 0 {
			stripesOnNode = int64(plan.StripesPerNode)
		}
		limit := max(budget.MilliValue()/stripesOnNode, millicores)
		res.Limits = corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(limit, resource.DecimalSI)}
	}
	if s := p.Endpoint.Spec.AgentPods; s != nil {
		if s.MemoryRequest != nil {
			if res.Requests == nil {
				res.Requests = corev1.ResourceList{}
			}
			res.Requests[corev1.ResourceMemory] = s.MemoryRequest.DeepCopy()
		}
		if s.MemoryLimit != nil {
			if res.Limits == nil {
				res.Limits = corev1.ResourceList{}
			}
			res.Limits[corev1.ResourceMemory] = s.MemoryLimit.DeepCopy()
		}
	}
	return res
}

// jobOptions are the parts of a job's spec the coordinator is told on its command line.
func jobOptions(job *dtnflowv1alpha1.TransferJob) contract.JobOptions {
	paths := make([]string, len(job.Spec.Source.Paths))
	for i, p := range job.Spec.Source.Paths {
		paths[i] = string(p)
	}
	checksum := job.Spec.Integrity.Checksum
	if checksum == "" {
		checksum = dtnflowv1alpha1.ChecksumBLAKE3
	}
	overwrite := job.Spec.Overwrite
	if overwrite == "" {
		overwrite = dtnflowv1alpha1.OverwriteIfDifferent
	}
	inFlight := job.Spec.Integrity.InFlight
	if _, side, _ := remoteOf(job); inFlight == "" && side != "" {
		inFlight = dtnflowv1alpha1.InFlightEncrypted // between sites, by default
	}
	return contract.JobOptions{
		SourcePaths:     paths,
		DestinationPath: string(job.Spec.Destination.Path),
		Checksum:        string(checksum),
		Verify:          job.Spec.Integrity.Verify == nil || *job.Spec.Integrity.Verify,
		Overwrite:       string(overwrite),
		InFlight:        string(inFlight),
		VerifyMode:      string(job.Spec.Integrity.VerifyMode),
		SourceErrors:    string(job.Spec.SourceErrors),
	}
}

// nodeAddress is the address other agents reach a host-network agent on the node at:
// its InternalIP, else ExternalIP, else Hostname.
func nodeAddress(node *corev1.Node) (string, bool) {
	for _, kind := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP, corev1.NodeHostName} {
		for _, a := range node.Status.Addresses {
			if a.Type == kind && a.Address != "" {
				return a.Address, true
			}
		}
	}
	return "", false
}

// hostPort joins an address and a port.
func hostPort(address string, port int32) string {
	return net.JoinHostPort(address, strconv.Itoa(int(port)))
}

// senderFor reports whether a sender pod was made as stripe k's sender to coordAddr
// and recvAddr; its metrics address is its own and not compared.
func senderFor(pod *corev1.Pod, k int32, coordAddr, recvAddr string) bool {
	args := agentArgs(pod)
	if i := slices.Index(args, metricsAddrFlag); i >= 0 && i+1 < len(args) {
		args = slices.Delete(slices.Clone(args), i, i+2)
	}
	return slices.Equal(args, contract.SenderArgs(k, coordAddr, recvAddr))
}

// listenPortOf is the host port an agent pod listens on for its peers, 0 for a sender
// (its metrics port, on loopback, is not one).
func listenPortOf(pod *corev1.Pod) int32 {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.HostPort != 0 && p.Name != metricsPortName {
				return p.HostPort
			}
		}
	}
	return 0
}
