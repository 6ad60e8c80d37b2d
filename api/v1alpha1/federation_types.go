package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Two sites, two clusters, each with its own dtnflow. The site that serves an endpoint
// (B) decides who may use it with a TransferPeer; dtnflow at B turns it into a
// credential scoped to one namespace of B, which B's admin hands to the peer (A) once.
// A stores it in a Secret named by a RemoteSite; a TransferJob at A that names the
// RemoteSite on one side makes A's manager write a RemoteTransfer into B's namespace,
// which B's manager checks against the TransferPeer's grants and runs with B's agents on
// B's nodes under B's budgets (the pattern of MultiKueue's worker clusters).

// TransferPeerSpec is what a peer site may do here.
type TransferPeerSpec struct {
	// namespace is the namespace of this cluster where the peer's RemoteTransfers, their
	// job secrets and their agent pods live; the credential dtnflow issues to the peer
	// works in it alone. It must exist (agents use the host network, so it needs the
	// privileged Pod Security level) and serve one peer only.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespace string `json:"namespace"`

	// remoteNamespaces lists the namespaces at the peer site whose TransferJobs may use
	// this site; "*" allows every one. The peer's manager states the namespace of each
	// job: what is trusted is the peer's dtnflow, proven by the credential.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^([a-z0-9]([-a-z0-9]*[a-z0-9])?|\*)$`
	// +listType=set
	// +required
	RemoteNamespaces []string `json:"remoteNamespaces"`

	// grants are the endpoints of this site the peer may read or write, and where.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +required
	Grants []TransferGrant `json:"grants"`

	// requireEncryption refuses the peer's jobs unless their data is encrypted in flight
	// (spec.integrity.inFlight Encrypted, the default between sites), and makes this
	// site's receivers refuse sessions that do not encrypt. Default true.
	// +kubebuilder:default=true
	// +optional
	RequireEncryption *bool `json:"requireEncryption,omitempty"`
}

// GrantAccess is what a grant allows on an endpoint.
// +kubebuilder:validation:Enum=Read;Write;ReadWrite
type GrantAccess string

const (
	// GrantRead: the peer's jobs may use the endpoint as their source.
	GrantRead GrantAccess = "Read"
	// GrantWrite: the peer's jobs may use the endpoint as their destination.
	GrantWrite GrantAccess = "Write"
	// GrantReadWrite allows both.
	GrantReadWrite GrantAccess = "ReadWrite"
)

// TransferGrant opens one endpoint of this site to a peer.
type TransferGrant struct {
	// endpoint is the name of a TransferEndpoint of this site.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Endpoint string `json:"endpoint"`

	// access is Read (the peer's jobs may read from it), Write (write to it) or
	// ReadWrite.
	// +required
	Access GrantAccess `json:"access"`

	// paths are the directories under the endpoint's storage root the grant covers,
	// each with everything under it: a job's source paths, or its destination path,
	// must each lie under one of them. Absent: the whole root. At a destination the
	// receivers are confined to the job's path, whatever the peer's agents ask.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Paths []RelativePath `json:"paths,omitempty"`
}

// TransferPeerStatus is the credential dtnflow made for the peer.
type TransferPeerStatus struct {
	// conditions holds Ready: True once the peer's ServiceAccount, Role, RoleBinding and
	// token Secret exist in spec.namespace.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// serviceAccount is the peer's ServiceAccount in spec.namespace.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ServiceAccount string `json:"serviceAccount,omitempty"`

	// credentialSecret is the Secret in spec.namespace that holds the peer's token (type
	// kubernetes.io/service-account-token): what the peer's kubeconfig carries.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	CredentialSecret string `json:"credentialSecret,omitempty"`
}

// TransferPeer lets a peer site's dtnflow use some of this site's endpoints: dtnflow
// issues it a credential that may only manage RemoteTransfers (and create their job
// secrets) in one namespace, and runs each RemoteTransfer that the grants allow with
// this site's agents, on this site's nodes, under this site's budgets. Deleting it
// revokes the credential and stops every transfer of the peer here.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tpeer,categories=dtnflow
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.namespace`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Credential",type=string,JSONPath=`.status.credentialSecret`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TransferPeer struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says what the peer may do here.
	// +required
	Spec TransferPeerSpec `json:"spec"`

	// status is the credential made for the peer.
	// +optional
	Status TransferPeerStatus `json:"status,omitempty"`
}

// TransferPeerList is a list of TransferPeers.
// +kubebuilder:object:root=true
type TransferPeerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TransferPeer `json:"items"`
}

// RemoteSiteSpec is how to reach a peer site and who here may use it.
type RemoteSiteSpec struct {
	// kubeconfigSecret is the name of a Secret in the manager's namespace whose key
	// "kubeconfig" holds the credential the peer issued (its TransferPeer): the peer's
	// API server address and CA, and the token.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	KubeconfigSecret string `json:"kubeconfigSecret"`

	// namespace is the namespace at the peer the credential works in (the peer's
	// TransferPeer spec.namespace): RemoteTransfers are written there.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespace string `json:"namespace"`

	// namespaceSelector selects the namespaces of this cluster whose TransferJobs may
	// name the peer; {} selects every one (it is required, so that opening a peer is a
	// decision). It holds at most 64 matchLabels and 16 matchExpressions.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.size() <= 64",message="spec.namespaceSelector.matchLabels must have at most 64 entries",fieldPath=".matchLabels"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.size() <= 16",message="spec.namespaceSelector.matchExpressions must have at most 16 items",fieldPath=".matchExpressions"
	// +required
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`
}

// RemoteSiteStatus is what the manager last saw of the peer.
type RemoteSiteStatus struct {
	// conditions holds Connected: True when the peer's API server last accepted the
	// credential; False with Unauthorized (revoked or expired), Forbidden, Unreachable or
	// CredentialInvalid otherwise.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// RemoteSite is a peer site, with its own cluster and dtnflow, whose endpoints this
// site's TransferJobs may name (spec.source.site or spec.destination.site), and the
// credential it issued for that.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=rsite,categories=dtnflow
// +kubebuilder:printcolumn:name="Connected",type=string,JSONPath=`.status.conditions[?(@.type=="Connected")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Connected")].reason`
// +kubebuilder:printcolumn:name="Namespace",type=string,JSONPath=`.spec.namespace`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RemoteSite struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says how to reach the peer.
	// +required
	Spec RemoteSiteSpec `json:"spec"`

	// status is what the manager last saw of it.
	// +optional
	Status RemoteSiteStatus `json:"status,omitempty"`
}

// RemoteSiteList is a list of RemoteSites.
// +kubebuilder:object:root=true
type RemoteSiteList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RemoteSite `json:"items"`
}

// RemoteSide is the side of a peer's job that runs here.
// +kubebuilder:validation:Enum=Source;Destination
type RemoteSide string

const (
	// RemoteSideSource: this site reads (its coordinator and senders run here).
	RemoteSideSource RemoteSide = "Source"
	// RemoteSideDestination: this site writes (its receivers run here).
	RemoteSideDestination RemoteSide = "Destination"
)

// RemoteOrigin names the TransferJob at the peer site.
type RemoteOrigin struct {
	// namespace is the job's namespace at the peer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +required
	Namespace string `json:"namespace"`

	// name is the job's name at the peer.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// uid is the job's UID at the peer.
	// +kubebuilder:validation:MaxLength=128
	// +optional
	UID string `json:"uid,omitempty"`
}

// RemoteTransferSpec is one side of a peer's TransferJob, as the peer's manager asks.
// +kubebuilder:validation:XValidation:rule="self.side == oldSelf.side && self.endpoint == oldSelf.endpoint && self.origin == oldSelf.origin",message="spec.side, spec.endpoint and spec.origin are immutable"
// +kubebuilder:validation:XValidation:rule="self.side != 'Source' || (has(self.paths) && size(self.paths) > 0)",message="spec.paths is required when spec.side is Source",fieldPath=".paths"
type RemoteTransferSpec struct {
	// origin names the job at the peer.
	// +required
	Origin RemoteOrigin `json:"origin"`

	// side is Source (this site reads spec.paths) or Destination (this site writes
	// under spec.path).
	// +required
	Side RemoteSide `json:"side"`

	// endpoint is the TransferEndpoint of this site the side uses.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Endpoint string `json:"endpoint"`

	// paths are the source paths (side Source), relative to the endpoint's root.
	// +kubebuilder:validation:MaxItems=1024
	// +listType=atomic
	// +optional
	Paths []RelativePath `json:"paths,omitempty"`

	// path is the destination directory (side Destination); absent is the root.
	// +optional
	Path RelativePath `json:"path,omitempty"`

	// integrity is the job's spec.integrity, with inFlight resolved.
	// +optional
	Integrity TransferIntegrity `json:"integrity,omitempty"`

	// overwrite is the job's spec.overwrite.
	// +kubebuilder:validation:Enum=Never;IfDifferent;Always
	// +optional
	Overwrite OverwritePolicy `json:"overwrite,omitempty"`

	// stripes is the number of stripes the side runs here (0 while the peer waits).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=512
	// +optional
	Stripes int32 `json:"stripes,omitempty"`

	// nodes are the nodes of this site the peer's plan chose (stripe k on the
	// (k mod len)-th); a node that is not usable here is replaced by one that is.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +optional
	Nodes []string `json:"nodes,omitempty"`

	// cpuMillicores is the CPU request of each agent of the side, from the peer's CPU
	// model; this site caps it at its own budget.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	// +optional
	CPUMillicores int64 `json:"cpuMillicores,omitempty"`

	// directive is the directive of this site's coordinator (side Source), as JSON.
	// +kubebuilder:validation:MaxLength=65536
	// +optional
	Directive string `json:"directive,omitempty"`

	// receivers are the host:port of the peer's receiver of each stripe, by stripe
	// index (side Source); "" while not known.
	// +kubebuilder:validation:MaxItems=512
	// +kubebuilder:validation:items:MaxLength=261
	// +listType=atomic
	// +optional
	Receivers []string `json:"receivers,omitempty"`

	// secretName is the Secret in this namespace that holds the job's shared secret (key
	// "secret"), written by the peer's manager with the RemoteTransfer as its owner.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	SecretName string `json:"secretName,omitempty"`
}

// RemoteNode is a node of this site that may serve the side, as the peer's planner
// needs it.
type RemoteNode struct {
	// name is the Node's name.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// nicBitsPerSecond is the node's NIC capacity for transfers.
	// +kubebuilder:validation:Minimum=0
	// +optional
	NICBitsPerSecond int64 `json:"nicBitsPerSecond,omitempty"`

	// cpuBudgetMillicores is the CPU the side's agents may use on the node; 0: none set.
	// +kubebuilder:validation:Minimum=0
	// +optional
	CPUBudgetMillicores int64 `json:"cpuBudgetMillicores,omitempty"`

	// maxStripes is the most stripes the node runs over every job.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=64
	// +optional
	MaxStripes int32 `json:"maxStripes,omitempty"`

	// otherStripes is the number of stripes of other jobs on the node now.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4096
	// +optional
	OtherStripes int32 `json:"otherStripes,omitempty"`
}

// RemoteStripe is one stripe of the side here.
type RemoteStripe struct {
	// index is the stripe's index.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=511
	// +required
	Index int32 `json:"index"`

	// node is the node of the stripe's agent here.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	Node string `json:"node,omitempty"`

	// address is the host:port of the stripe's receiver (side Destination), once it
	// listens.
	// +kubebuilder:validation:MaxLength=261
	// +optional
	Address string `json:"address,omitempty"`

	// state is the stripe's agent's state here.
	// +required
	State StripeState `json:"state"`
}

// RemoteTransferStatus is what this site's manager decided and observed.
type RemoteTransferStatus struct {
	// conditions holds Accepted: True when the TransferPeer of this namespace grants the
	// side, False with the reason it does not (the peer's job shows it); and, once the
	// peer's job goes ahead (spec.secretName is set), Queued: False when this site
	// admitted the side, True while it waits behind this site's limits (the endpoint's
	// spec.sharing.maxActiveJobs counts it with this site's own jobs).
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// queue is the side's place while this site queues it: no agent runs for it then.
	// +optional
	Queue *TransferQueue `json:"queue,omitempty"`

	// observedGeneration is the generation of the spec this status was computed from.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// nodes are the usable nodes of the endpoint here, for the peer's planner.
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=name
	// +optional
	Nodes []RemoteNode `json:"nodes,omitempty"`

	// stripes are the side's stripes here.
	// +kubebuilder:validation:MaxItems=512
	// +listType=map
	// +listMapKey=index
	// +optional
	Stripes []RemoteStripe `json:"stripes,omitempty"`

	// report is the coordinator's latest report (side Source), as JSON.
	// +kubebuilder:validation:MaxLength=262144
	// +optional
	Report string `json:"report,omitempty"`

	// agentFailures counts the side's agent pods here that failed and were replaced.
	// +kubebuilder:validation:Minimum=0
	// +optional
	AgentFailures int32 `json:"agentFailures,omitempty"`
}

// RemoteTransfer is one side of a peer site's TransferJob that runs at this site. The
// peer's manager writes its spec through the credential of a TransferPeer; this site's
// manager accepts it only as far as the TransferPeer's grants go, runs its agents, and
// writes what the peer's job needs back into its status.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rtx,categories=dtnflow
// +kubebuilder:printcolumn:name="Side",type=string,JSONPath=`.spec.side`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.endpoint`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].reason`
// +kubebuilder:printcolumn:name="Stripes",type=integer,JSONPath=`.spec.stripes`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type RemoteTransfer struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the side as the peer asks for it.
	// +required
	Spec RemoteTransferSpec `json:"spec"`

	// status is what this site decided and observed.
	// +optional
	Status RemoteTransferStatus `json:"status,omitempty"`
}

// RemoteTransferList is a list of RemoteTransfers.
// +kubebuilder:object:root=true
type RemoteTransferList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RemoteTransfer `json:"items"`
}

// Condition types of the federation objects (with ConditionReady, which a
// TransferPeer sets once its credential is issued).
const (
	ConditionAccepted  = "Accepted"
	ConditionConnected = "Connected"
)

func init() {
	SchemeBuilder.Register(&TransferPeer{}, &TransferPeerList{}, &RemoteSite{}, &RemoteSiteList{}, &RemoteTransfer{}, &RemoteTransferList{})
}
