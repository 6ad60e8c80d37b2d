package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PathProfileSpec names the path a profile describes. The controller creates one
// profile per path, named <source>.<destination>, the first time a job uses the path.
type PathProfileSpec struct {
	// sourceEndpoint is the TransferEndpoint data is read from.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.sourceEndpoint is immutable"
	// +required
	SourceEndpoint string `json:"sourceEndpoint"`

	// destinationEndpoint is the TransferEndpoint data is written to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.destinationEndpoint is immutable"
	// +required
	DestinationEndpoint string `json:"destinationEndpoint"`

	// maxAgeSeconds is how long what was learned stays fresh: a job that starts within
	// it skips or shortens its probe and starts from the stored model.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:default=86400
	// +optional
	MaxAgeSeconds *int64 `json:"maxAgeSeconds,omitempty"`

	// maxActiveJobs is the most jobs that run on the path at once (FTS3's max active
	// per link); more wait in the Queued state, higher priority first and, at equal
	// priority, first come first served. Lowering it stops no running job.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	// +optional
	MaxActiveJobs *int32 `json:"maxActiveJobs,omitempty"`

	// maxBitsPerSecond is the most the path's jobs move together, in bits per second;
	// below the path's measured capacity it is what their shares divide, and their
	// agents pace to their shares.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxBitsPerSecond *int64 `json:"maxBitsPerSecond,omitempty"`
}

// PathProfileStatus is what was learned about the path.
type PathProfileStatus struct {
	// model is the fitted throughput-vs-streams model of one stripe.
	// +optional
	Model *StreamModel `json:"model,omitempty"`

	// sourceCPU is the CPU-vs-throughput regression of the sending side.
	// +optional
	SourceCPU *CPUModel `json:"sourceCPU,omitempty"`

	// destinationCPU is the CPU-vs-throughput regression of the receiving side.
	// +optional
	DestinationCPU *CPUModel `json:"destinationCPU,omitempty"`

	// bufferBytes is the socket buffer size chosen for the path; 0 is kernel
	// autotuning.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BufferBytes int64 `json:"bufferBytes,omitempty"`

	// bestBitsPerSecond is the highest aggregate rate a job achieved on the path.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BestBitsPerSecond int64 `json:"bestBitsPerSecond,omitempty"`

	// samples are the most recent measurements, with their times, oldest first.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Samples []ProbeSample `json:"samples,omitempty"`

	// capacity is the path's capacity as its jobs measured it, which concurrent jobs
	// divide between them.
	// +optional
	Capacity *PathCapacityStatus `json:"capacity,omitempty"`

	// lastUpdateTime is when the profile last learned something.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`

	// contributingJobs are the most recent jobs (namespace/name) that taught the
	// profile something, newest last.
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=317
	// +listType=atomic
	// +optional
	ContributingJobs []string `json:"contributingJobs,omitempty"`

	// expiredJobs are jobs on this path that completed and were then deleted by the
	// controller after their spec.ttlSecondsAfterFinished, newest last (oldest dropped
	// beyond 64). A job created again with the same namespace, name and spec hash —
	// a GitOps tool restoring what Git still declares — is marked Complete from its
	// record, moves no data and is not deleted again, so the two do not loop.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	ExpiredJobs []ExpiredJob `json:"expiredJobs,omitempty"`
}

// ExpiredJob is a completed job deleted after its ttlSecondsAfterFinished.
type ExpiredJob struct {
	// namespace is the job's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +required
	Namespace string `json:"namespace"`

	// name is the job's name.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// specHash identifies what the job moved: its source, destination, overwrite and
	// integrity settings and its dtnflow.io/rerun annotation (not its tuning, which
	// changes how, not what).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +required
	SpecHash string `json:"specHash"`

	// completionTime is when the job completed.
	// +required
	CompletionTime metav1.Time `json:"completionTime"`

	// filesDone is the number of files the job had at the destination, verified.
	// +kubebuilder:validation:Minimum=0
	// +optional
	FilesDone int64 `json:"filesDone,omitempty"`

	// bytesDone is the number of bytes the job had at the destination, verified.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BytesDone int64 `json:"bytesDone,omitempty"`
}

// PathCapacityStatus is what the path's jobs measured of its capacity, each figure with
// when it was measured: it is used while the profile is fresh (spec.maxAgeSeconds).
type PathCapacityStatus struct {
	// plateauBitsPerSecond is the plateau of the fitted throughput curve: what the
	// samples show the path carries.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PlateauBitsPerSecond int64 `json:"plateauBitsPerSecond,omitempty"`

	// plateauTime is when the plateau was fitted.
	// +optional
	PlateauTime *metav1.Time `json:"plateauTime,omitempty"`

	// highestAggregateBitsPerSecond is the highest rate the path's jobs reached
	// together, in one report interval.
	// +kubebuilder:validation:Minimum=0
	// +optional
	HighestAggregateBitsPerSecond int64 `json:"highestAggregateBitsPerSecond,omitempty"`

	// highestAggregateJobs is how many jobs reached it.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	// +optional
	HighestAggregateJobs int32 `json:"highestAggregateJobs,omitempty"`

	// highestAggregateTime is when it was measured.
	// +optional
	HighestAggregateTime *metav1.Time `json:"highestAggregateTime,omitempty"`
}

// PathProfile is what dtnflow learned about one source → destination path, so the
// next job on the path starts warm.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=pp,categories=dtnflow
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.spec.sourceEndpoint`
// +kubebuilder:printcolumn:name="Destination",type=string,JSONPath=`.spec.destinationEndpoint`
// +kubebuilder:printcolumn:name="Model",type=string,JSONPath=`.status.model.name`
// +kubebuilder:printcolumn:name="Streams",type=integer,JSONPath=`.status.model.optimalStreams`
// +kubebuilder:printcolumn:name="Best bit/s",type=integer,JSONPath=`.status.bestBitsPerSecond`
// +kubebuilder:printcolumn:name="Plateau bit/s",type=integer,JSONPath=`.status.capacity.plateauBitsPerSecond`,priority=1
// +kubebuilder:printcolumn:name="Aggregate bit/s",type=integer,JSONPath=`.status.capacity.highestAggregateBitsPerSecond`,priority=1
// +kubebuilder:printcolumn:name="Max jobs",type=integer,JSONPath=`.spec.maxActiveJobs`,priority=1
// +kubebuilder:printcolumn:name="Updated",type=date,JSONPath=`.status.lastUpdateTime`
type PathProfile struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the path.
	// +required
	Spec PathProfileSpec `json:"spec"`

	// status is what was learned.
	// +optional
	Status PathProfileStatus `json:"status,omitempty"`
}

// PathProfileList is a list of PathProfiles.
// +kubebuilder:object:root=true
type PathProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PathProfile `json:"items"`
}

func init() {
	SchemeBuilder.Register(&PathProfile{}, &PathProfileList{})
}
