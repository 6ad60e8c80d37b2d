package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PreemptionPolicy says whether a job may take the place of running jobs.
// +kubebuilder:validation:Enum=Never;LowerPriority
type PreemptionPolicy string

const (
	// PreemptNever: the job waits for room like any other; running jobs are never
	// stopped for it.
	PreemptNever PreemptionPolicy = "Never"
	// PreemptLowerPriority: when the job would wait for a path's or an endpoint's
	// maxActiveJobs, running jobs of lower priority there go back to the queue (their
	// agents stop; what they verified is kept and they resume from it when admitted).
	PreemptLowerPriority PreemptionPolicy = "LowerPriority"
)

// TransferPriorityClassSpec is a priority that TransferJobs may name, and who may.
type TransferPriorityClassSpec struct {
	// priority is the weight of a job of the class in the shares of the paths and
	// sites it uses with other jobs (a job of priority 2 gets twice the rate of one of
	// priority 1 where they share a bottleneck), and its place in their queues (higher
	// first). A job without a class has priority 1.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +required
	Priority int32 `json:"priority"`

	// namespaceSelector selects the namespaces whose TransferJobs may name the class.
	// An empty selector ({}) allows every namespace; it is required so that giving a
	// priority is a decision. It holds at most 64 matchLabels and 16 matchExpressions.
	// +kubebuilder:validation:XValidation:rule="!has(self.matchLabels) || self.matchLabels.size() <= 64",message="spec.namespaceSelector.matchLabels must have at most 64 entries",fieldPath=".matchLabels"
	// +kubebuilder:validation:XValidation:rule="!has(self.matchExpressions) || self.matchExpressions.size() <= 16",message="spec.namespaceSelector.matchExpressions must have at most 16 items",fieldPath=".matchExpressions"
	// +required
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`

	// preemption says whether jobs of the class may take the place of running jobs of
	// lower priority when a maxActiveJobs limit is reached: Never (the default) or
	// LowerPriority.
	// +kubebuilder:default=Never
	// +optional
	Preemption PreemptionPolicy `json:"preemption,omitempty"`

	// description says what the class is for, for people.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Description string `json:"description,omitempty"`
}

// TransferPriorityClass is a priority an admin defines for TransferJobs: their weight in
// the shares of what they use together and their order in the queues, with the
// namespaces that may use it.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=tpc,categories=dtnflow
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.spec.priority`
// +kubebuilder:printcolumn:name="Preemption",type=string,JSONPath=`.spec.preemption`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TransferPriorityClass struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the priority and who may use it.
	// +required
	Spec TransferPriorityClassSpec `json:"spec"`
}

// TransferPriorityClassList is a list of TransferPriorityClasses.
// +kubebuilder:object:root=true
type TransferPriorityClassList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TransferPriorityClass `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TransferPriorityClass{}, &TransferPriorityClassList{})
}
