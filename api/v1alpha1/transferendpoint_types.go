package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TransferEndpointSpec describes one site: the DTN nodes that may move its data, where
// the data lives on them, and what dtnflow may use of them.
// +kubebuilder:validation:XValidation:rule="!has(self.agentPorts) || self.agentPorts.first <= self.agentPorts.last",message="spec.agentPorts.first must not be greater than spec.agentPorts.last",fieldPath=".agentPorts"
type TransferEndpointSpec struct {
	// nodeSelector selects the site's DTN nodes by label. Agent pods of this endpoint
	// run only on Ready nodes that match. It holds at most 64 labels.
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=64
	// +required
	NodeSelector map[string]string `json:"nodeSelector"`

	// storage is where the site's data lives on each of its nodes. Every path a
	// TransferJob names is resolved under it, and nothing outside it is ever read or
	// written.
	// +required
	Storage EndpointStorage `json:"storage"`

	// nicBitsPerSecond is the capacity of each node's network interface for transfers,
	// in bits per second. The planner never puts more than this on one node.
	// +kubebuilder:validation:Minimum=1
	// +required
	NICBitsPerSecond int64 `json:"nicBitsPerSecond"`

	// diskBitsPerSecond is the rate each node's storage can read or write, in bits per
	// second, when known. Absent means the storage is not expected to bind.
	// +kubebuilder:validation:Minimum=1
	// +optional
	DiskBitsPerSecond *int64 `json:"diskBitsPerSecond,omitempty"`

	// cpuBudgetPerNode is the CPU dtnflow's agents may use on each node, in total over
	// every stripe placed there. Agent pods get CPU limits only when it is set.
	// +optional
	CPUBudgetPerNode *resource.Quantity `json:"cpuBudgetPerNode,omitempty"`

	// maxStripesPerNode is the most stripes (agent processes of one side) one node
	// runs at once, over every job.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +kubebuilder:default=4
	// +optional
	MaxStripesPerNode int32 `json:"maxStripesPerNode,omitempty"`

	// namespaceSelector selects the namespaces whose TransferJobs may use this
	// endpoint, as source or destination. An empty selector ({}) allows every
	// namespace; it is required so that opening a site's storage is a decision. It holds
	// at most 64 matchLabels and 16 matchExpressions.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.size() <= 64",message="spec.namespaceSelector.matchLabels must have at most 64 entries",fieldPath=".matchLabels"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.size() <= 16",message="spec.namespaceSelector.matchExpressions must have at most 16 items",fieldPath=".matchExpressions"
	// +required
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`

	// agentPorts is the range of TCP ports that agents of this endpoint listen on.
	// Agents use the host network, so each listening agent on a node (a coordinator, a
	// receiver) takes one port for its peers, and every agent one more for its metrics,
	// served on 127.0.0.1 only. Default 47000-47999. Keep the range out of the nodes'
	// ephemeral ports (net.ipv4.ip_local_port_range, 32768-60999 by default) or reserve
	// it (net.ipv4.ip_local_reserved_ports): an outgoing connection can otherwise hold a
	// port of it, and an agent that cannot listen there is moved to another port.
	// +optional
	AgentPorts *PortRange `json:"agentPorts,omitempty"`

	// externalAddress is the host:port of a dtnflow-agent that runs outside the
	// cluster for this site (started by hand with `dtnflow-agent receive`). When set,
	// the site's side of each stripe is not scheduled as a pod: stripes connect there.
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9.\-\[\]:]+:[0-9]{1,5}$`
	// +kubebuilder:validation:XValidation:rule="int(self.substring(self.lastIndexOf(':') + 1)) >= 1 && int(self.substring(self.lastIndexOf(':') + 1)) <= 65535",message="spec.externalAddress must end in a port from 1 to 65535"
	// +optional
	ExternalAddress string `json:"externalAddress,omitempty"`

	// sharing limits what the site's jobs take together, on every path through it.
	// +optional
	Sharing *EndpointSharing `json:"sharing,omitempty"`

	// agentPods are settings of the agent pods this site runs (its coordinators,
	// senders or receivers), for DTN nodes kept for transfers: tolerations of their
	// taints, a priority class, memory.
	// +optional
	AgentPods *AgentPodSettings `json:"agentPods,omitempty"`
}

// +kubebuilder:validation:XValidation:rule="!has(self.memoryRequest) || !has(self.memoryLimit) || !quantity(string(self.memoryRequest)).isGreaterThan(quantity(string(self.memoryLimit)))",message="spec.agentPods.memoryLimit must be at least memoryRequest",fieldPath=".memoryLimit"

// AgentPodSettings are a site's settings of its agent pods. CPU is not among them: the
// plan sizes each agent's CPU request (seed 002's regression), within cpuBudgetPerNode.
type AgentPodSettings struct {
	// tolerations let the agents run on nodes with these taints (DTN nodes are often
	// tainted so that nothing else lands on them). The agents are still pinned to the
	// nodes the plan picked among those nodeSelector matches.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Tolerations []corev1.Toleration `json:"tolerations,omitempty"`

	// priorityClassName is the PriorityClass of the agent pods, so that a busy node
	// makes room for a transfer (or a transfer for more important work).
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`

	// memoryRequest is each agent's memory request; none by default. An agent's
	// memory grows with its streams and their buffers, so measure an agent under the
	// site's usual plans (kubectl top pod) before setting memoryLimit.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.agentPods.memoryRequest must be positive"
	// +optional
	MemoryRequest *resource.Quantity `json:"memoryRequest,omitempty"`

	// memoryLimit is each agent's memory limit; none by default. At least
	// memoryRequest.
	// +kubebuilder:validation:XValidation:rule="quantity(string(self)).isGreaterThan(quantity('0'))",message="spec.agentPods.memoryLimit must be positive"
	// +optional
	MemoryLimit *resource.Quantity `json:"memoryLimit,omitempty"`

	// warmPool keeps agents started and waiting on the endpoint's ready DTN nodes
	// before any job needs them. A job takes a waiting agent for each agent it starts
	// on such a node (in its own namespace), so its first bytes move without waiting
	// for a pod to start (about a second on a cluster); the pool starts a replacement
	// behind it. A job that finds no waiting agent starts its own pods, as without a
	// pool. Waiting agents use a few millicores each.
	// +optional
	WarmPool *WarmPool `json:"warmPool,omitempty"`
}

// WarmPool is how many agents wait on each DTN node of an endpoint, and for which
// namespaces' jobs.
type WarmPool struct {
	// agentsPerNode is how many agents wait on each ready DTN node, for each side of a
	// transfer the endpoint can serve (a coordinator or a sender reads the storage; a
	// receiver writes it, unless storage.readOnly) and in each of namespaces. A job on
	// one node takes two on its source side (its coordinator and first sender) and one
	// on its destination side.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=8
	AgentsPerNode int32 `json:"agentsPerNode"`

	// namespaces are the namespaces whose jobs the pool serves. An agent waits in the
	// namespace of the job that will take it, since a pod never moves to another
	// namespace, and runs as the storage owner with the storage root mounted, as a
	// job's own agents do; a namespace that namespaceSelector does not select gets no
	// agents.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +listType=set
	Namespaces []string `json:"namespaces"`

	// refillDelaySeconds is how long the pool waits, after a job claims one of its
	// agents, before it starts the agent's replacement on that node, while the job
	// still runs there. Starting a pod costs the node CPU (the container runtime, the
	// kubelet, the agent's own start) at the moment the job that took the agent starts
	// moving data on it, and a transfer's rate follows the CPU it gets; the other
	// agents of the pool serve jobs meanwhile. 0 starts the replacement at once.
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=600
	// +optional
	RefillDelaySeconds *int32 `json:"refillDelaySeconds,omitempty"`
}

// EndpointSharing limits the jobs that use a site, as source or destination, over every
// path (FTS3's limits per storage; a site's WAN link).
type EndpointSharing struct {
	// maxActiveJobs is the most jobs that use the site at once; more wait in the
	// Queued state, higher priority first and, at equal priority, first come first
	// served. Lowering it stops no running job.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxActiveJobs *int32 `json:"maxActiveJobs,omitempty"`

	// maxBitsPerSecond is the most the site's jobs move together, in bits per second
	// (the share of its WAN link dtnflow may use). The jobs divide it by weighted
	// max-min fairness with the capacity of their paths, and their agents pace to
	// their shares.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxBitsPerSecond *int64 `json:"maxBitsPerSecond,omitempty"`
}

// EndpointStorage is the storage root of a site on its DTN nodes.
type EndpointStorage struct {
	// hostPath is the absolute path of the storage root on every node of the site
	// (typically a parallel file system mounted on all of them).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/')",message="spec.storage.hostPath must be an absolute path"
	// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.](/|$)')",message="spec.storage.hostPath must not contain a '..' segment"
	// +kubebuilder:validation:XValidation:rule=`!self.contains('\u0000')`,message="spec.storage.hostPath must not contain a NUL character"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^[/.]+$')",message="spec.storage.hostPath must name a directory below /: a storage root of / would give every job the node's whole file system"
	// +required
	HostPath string `json:"hostPath"`

	// readOnly makes the site usable only as a source: agents mount the root
	// read-only, and a TransferJob that names it as destination is refused.
	// +optional
	ReadOnly bool `json:"readOnly,omitempty"`

	// owner is the user and group dtnflow's agents run as on the site's nodes: files and
	// directories written under the root belong to them, and at a source the agents read
	// as them (so they read only what that user may read). Absent means user and group
	// 65532. Agents never run as root, so neither may be 0.
	// +optional
	Owner *StorageOwner `json:"owner,omitempty"`
}

// StorageOwner is a numeric user and group of a site's nodes.
type StorageOwner struct {
	// user is the numeric user ID (not 0: agents never run as root).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	// +required
	User int64 `json:"user"`

	// group is the numeric group ID (not 0).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=2147483647
	// +required
	Group int64 `json:"group"`
}

// DefaultStorageOwner is who agents run as when an endpoint states no owner.
var DefaultStorageOwner = StorageOwner{User: 65532, Group: 65532}

// PortRange is an inclusive range of TCP ports.
type PortRange struct {
	// first is the lowest port of the range.
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +required
	First int32 `json:"first"`

	// last is the highest port of the range.
	// +kubebuilder:validation:Minimum=1024
	// +kubebuilder:validation:Maximum=65535
	// +required
	Last int32 `json:"last"`
}

// TransferEndpointStatus is what the controller observed of the site's nodes.
type TransferEndpointStatus struct {
	// conditions holds Ready: true when at least one selected node is Ready; and, with
	// spec.agentPods.warmPool, WarmPoolReady: true when every agent the pool keeps is
	// running, waiting for a job, and every namespace it lists gets agents.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// readyNodes is the number of selected nodes that are Ready.
	// +optional
	ReadyNodes int32 `json:"readyNodes,omitempty"`

	// nodes lists the selected nodes, Ready or not, with their observed capacity.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	// +optional
	Nodes []EndpointNode `json:"nodes,omitempty"`

	// warmPool counts the agents the warm pool keeps waiting, as observed; absent without
	// spec.agentPods.warmPool.
	// +optional
	WarmPool *WarmPoolStatus `json:"warmPool,omitempty"`
}

// WarmPoolStatus counts an endpoint's waiting agents. Agents that jobs claimed are the
// jobs' and not counted.
type WarmPoolStatus struct {
	// wanted is how many agents the pool keeps waiting: agentsPerNode on each usable
	// node, for each side the endpoint serves, in each listed namespace that exists and
	// that spec.namespaceSelector selects.
	// +kubebuilder:validation:Minimum=0
	// +required
	Wanted int32 `json:"wanted"`

	// ready is how many of them run, each ready for a job to claim.
	// +kubebuilder:validation:Minimum=0
	// +required
	Ready int32 `json:"ready"`

	// starting is how many of them were created and do not run yet.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Starting int32 `json:"starting,omitempty"`
}

// EndpointNode is one node of a site as observed.
type EndpointNode struct {
	// name is the Node's name.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// ready is true when the Node's Ready condition is True.
	// +required
	Ready bool `json:"ready"`

	// allocatableCPU is the Node's allocatable CPU.
	// +optional
	AllocatableCPU *resource.Quantity `json:"allocatableCPU,omitempty"`

	// cpuBudget is the CPU dtnflow may use on the node: the endpoint's budget, or the
	// node's allocatable CPU when no budget is set.
	// +optional
	CPUBudget *resource.Quantity `json:"cpuBudget,omitempty"`

	// nicBitsPerSecond is the NIC capacity the planner uses for the node.
	// +optional
	NICBitsPerSecond int64 `json:"nicBitsPerSecond,omitempty"`

	// stripes is the number of dtnflow agent pods (over every job) on the node.
	// +optional
	Stripes int32 `json:"stripes,omitempty"`
}

// TransferEndpoint is a site that TransferJobs move data from or to: its DTN nodes, its
// storage root and what dtnflow may use of them.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tep,categories=dtnflow
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Nodes",type=integer,JSONPath=`.status.readyNodes`
// +kubebuilder:printcolumn:name="Warm",type=integer,JSONPath=`.status.warmPool.ready`
// +kubebuilder:printcolumn:name="NIC bit/s",type=integer,JSONPath=`.spec.nicBitsPerSecond`
// +kubebuilder:printcolumn:name="Root",type=string,JSONPath=`.spec.storage.hostPath`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TransferEndpoint struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec describes the site.
	// +required
	Spec TransferEndpointSpec `json:"spec"`

	// status is what the controller observed of the site.
	// +optional
	Status TransferEndpointStatus `json:"status,omitempty"`
}

// TransferEndpointList is a list of TransferEndpoints.
// +kubebuilder:object:root=true
type TransferEndpointList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TransferEndpoint `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TransferEndpoint{}, &TransferEndpointList{})
}
