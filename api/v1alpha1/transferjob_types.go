package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TransferJobSpec says what to move, where, and how much freedom the planner has.
// Only source and destination are fixed once set; tuning, suspend and the lifecycle
// fields may change while the job runs, and the controller acts on the change.
// +kubebuilder:validation:XValidation:rule="!has(self.source.site) || !has(self.destination.site)",message="spec.destination.site: only one side of a job may be at a remote site",fieldPath=".destination.site"
// +kubebuilder:validation:XValidation:rule="!has(self.trigger) || !has(self.ttlSecondsAfterFinished)",message="spec.ttlSecondsAfterFinished may not be set with spec.trigger: a recurring job does not finish for good",fieldPath=".ttlSecondsAfterFinished"
type TransferJobSpec struct {
	// source names the endpoint to read from and the files and directories to move.
	// It cannot change once set.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.source is immutable"
	// +required
	Source TransferSource `json:"source"`

	// destination names the endpoint to write to and the directory to write under.
	// It cannot change once set.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec.destination is immutable"
	// +required
	Destination TransferDestination `json:"destination"`

	// tuning chooses between the planner (Auto) and fixed parameters, and bounds both.
	// +kubebuilder:default={mode: Auto}
	// +optional
	Tuning TransferTuning `json:"tuning,omitempty"`

	// integrity chooses the end-to-end checksum. Whatever is chosen here, every frame
	// between the agents (data and control alike) also carries an AES-GMAC tag under
	// keys that each connection derives from the job's secret, checked on arrival: a
	// frame damaged, dropped, replayed or rewritten on the way ends its session and
	// what it carried is sent again.
	// +kubebuilder:default={checksum: BLAKE3, verify: true}
	// +optional
	Integrity TransferIntegrity `json:"integrity,omitempty"`

	// overwrite says what happens to a file that already exists at the destination:
	// Never leaves it and fails the job naming it; IfDifferent skips it when its size
	// and checksum match the source and replaces it otherwise; Always replaces it.
	// +kubebuilder:validation:Enum=Never;IfDifferent;Always
	// +kubebuilder:default=IfDifferent
	// +optional
	Overwrite OverwritePolicy `json:"overwrite,omitempty"`

	// sourceErrors says what a file that fails at the source does to the job: one that
	// cannot be read, that vanished since the source was listed, or that changed since
	// it was listed or while it was read. Fail fails the job naming the file. Skip
	// skips the file and goes on: the job moves and verifies every other file, lists
	// the skipped ones in status.skippedFiles (their count in progress.filesSkipped),
	// and ends PartiallyComplete, never Complete — Complete means every source file is
	// at the destination with the source's digest. A failure at the destination fails
	// the job either way. Absent means Fail. A change applies from the job's next run
	// (`kubectl dtnflow rerun`, spec.trigger); a run going on keeps its value.
	// +kubebuilder:validation:Enum=Fail;Skip
	// +optional
	SourceErrors SourceErrorPolicy `json:"sourceErrors,omitempty"`

	// backoffLimit is the number of agent failures (pods that fail or vanish) the job
	// survives; one more ends it as Failed with reason BackoffLimitExceeded.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	// +kubebuilder:default=6
	// +optional
	BackoffLimit *int32 `json:"backoffLimit,omitempty"`

	// ttlSecondsAfterFinished deletes the job this many seconds after it completes or
	// fails. Absent keeps it until deleted by hand.
	// +kubebuilder:validation:Minimum=0
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// suspend stops the job's agents when set to true, keeping what was verified;
	// setting it back to false resumes from there. A suspended recurring job starts no
	// new run.
	// +kubebuilder:default=false
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// priorityClassName names the TransferPriorityClass whose priority the job has: its
	// weight in the shares of the path and the sites it uses with other jobs, and its
	// place in their queues. The class's namespaceSelector must select the job's
	// namespace, or the job does not run. Absent: priority 1, the lowest. It may change
	// while the job runs; the shares follow.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	PriorityClassName string `json:"priorityClassName,omitempty"`
	// trigger makes the job recurring: after its first run it runs again on a cron
	// schedule, when trigger.manual changes, or both; each run moves only what is
	// missing or changed at the destination.
	// +optional
	Trigger *TransferTrigger `json:"trigger,omitempty"`
}

// RelativePath is a path under an endpoint's storage root: it has no leading '/', no
// '..' segment, no NUL character (which no file name holds, and which would end the
// path early wherever it is passed to the C library), and it does not lie in .dtnflow
// at the top of the root, where receivers keep their journals (an agent refuses to
// write there, and would send the journals as data).
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=4096
// +kubebuilder:validation:XValidation:rule="!self.startsWith('/')",message="must be relative to the endpoint's storage root (no leading '/')"
// +kubebuilder:validation:XValidation:rule="!self.matches('(^|/)[.][.](/|$)')",message="must not contain a '..' segment"
// +kubebuilder:validation:XValidation:rule=`!self.contains('\u0000')`,message="must not contain a NUL character"
// +kubebuilder:validation:XValidation:rule="!(self in ['.dtnflow', './.dtnflow'] || self.startsWith('.dtnflow/') || self.startsWith('./.dtnflow/'))",message="must not lie in .dtnflow at the top of the storage root, where receivers keep their journals"
type RelativePath string

// TransferSource is the side a job reads from.
type TransferSource struct {
	// endpoint is the name of the TransferEndpoint to read from.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Endpoint string `json:"endpoint"`

	// paths are the files and directories to move, relative to the endpoint's storage
	// root; a directory is moved with everything under it.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	// +listType=atomic
	// +required
	Paths []RelativePath `json:"paths"`

	// site names a RemoteSite: the endpoint is then one of that peer site's, served by
	// its own dtnflow, agents and nodes, under its rules. Absent: an endpoint of this
	// cluster. Only one side of a job may name a site.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Site string `json:"site,omitempty"`
}

// TransferDestination is the side a job writes to.
type TransferDestination struct {
	// endpoint is the name of the TransferEndpoint to write to.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +required
	Endpoint string `json:"endpoint"`

	// path is the directory, relative to the endpoint's storage root, that the
	// source paths are written under. Absent means the root itself.
	// +optional
	Path RelativePath `json:"path,omitempty"`

	// site names a RemoteSite: the endpoint is then one of that peer site's, served by
	// its own dtnflow, agents and nodes, under its rules. Absent: an endpoint of this
	// cluster. Only one side of a job may name a site.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	// +optional
	Site string `json:"site,omitempty"`
}

// TuningMode chooses who picks the transfer parameters.
// +kubebuilder:validation:Enum=Auto;Fixed
type TuningMode string

const (
	// TuningAuto probes the path, fits the models and plans; it re-plans as measured
	// throughput changes.
	TuningAuto TuningMode = "Auto"
	// TuningFixed uses spec.tuning.fixed as given and never re-plans.
	TuningFixed TuningMode = "Fixed"
)

// TransferTuning chooses and bounds the transfer parameters.
// +kubebuilder:validation:XValidation:rule="self.mode != 'Fixed' || has(self.fixed)",message="spec.tuning.fixed is required when spec.tuning.mode is Fixed",fieldPath=".fixed"
// +kubebuilder:validation:XValidation:rule="self.mode == 'Fixed' || !has(self.fixed)",message="spec.tuning.fixed may be set only when spec.tuning.mode is Fixed",fieldPath=".fixed"
// +kubebuilder:validation:XValidation:rule="!has(self.fixed) || !has(self.limits) || !has(self.limits.maxNodes) || self.fixed.nodes <= self.limits.maxNodes",message="spec.tuning.fixed.nodes must not exceed spec.tuning.limits.maxNodes",fieldPath=".fixed.nodes"
// +kubebuilder:validation:XValidation:rule="!has(self.fixed) || !has(self.limits) || !has(self.limits.maxStripesPerNode) || self.fixed.stripesPerNode <= self.limits.maxStripesPerNode",message="spec.tuning.fixed.stripesPerNode must not exceed spec.tuning.limits.maxStripesPerNode",fieldPath=".fixed.stripesPerNode"
// +kubebuilder:validation:XValidation:rule="!has(self.fixed) || !has(self.limits) || !has(self.limits.maxStreamsPerStripe) || self.fixed.streamsPerStripe <= self.limits.maxStreamsPerStripe",message="spec.tuning.fixed.streamsPerStripe must not exceed spec.tuning.limits.maxStreamsPerStripe",fieldPath=".fixed.streamsPerStripe"
// +kubebuilder:validation:XValidation:rule="!has(self.fixed) || !has(self.limits) || !has(self.limits.maxConcurrency) || self.fixed.concurrency <= self.limits.maxConcurrency",message="spec.tuning.fixed.concurrency must not exceed spec.tuning.limits.maxConcurrency",fieldPath=".fixed.concurrency"
// +kubebuilder:validation:XValidation:rule="!has(self.fairness) || self.fairness != 'Strict' || self.mode != 'Fixed'",message="spec.tuning.fairness Strict plans the streams itself and cannot be combined with spec.tuning.mode Fixed",fieldPath=".fairness"
type TransferTuning struct {
	// mode is Auto (probe, fit, plan and re-plan) or Fixed (use fixed as given).
	// +kubebuilder:default=Auto
	// +optional
	Mode TuningMode `json:"mode,omitempty"`

	// fixed holds the parameters of Fixed mode; it is required then and refused
	// otherwise.
	// +optional
	Fixed *FixedTuning `json:"fixed,omitempty"`

	// limits bound what the planner may choose in Auto mode (and what Fixed may ask
	// for). They may be changed while the job runs: the controller re-plans within
	// the new limits.
	// +optional
	Limits *TuningLimits `json:"limits,omitempty"`

	// fairness is how the job treats traffic it does not own on a shared bottleneck.
	// Default takes the rate the model finds for the job's share, with as many
	// parallel TCP streams as pay; other TCP flows on the bottleneck then get less than
	// one flow's fair share while it runs. Strict moves the job as one TCP stream (one
	// stripe of one stream, its buffer left to the kernel's autotuning), so that every
	// competing flow keeps its fair share — at the cost of the rate one stream reaches.
	// Absent means Default (no default is written, so that jobs stored before the
	// field existed keep their tuning unchanged). status.sharing.fairness says which
	// is in effect.
	// +optional
	Fairness FairnessMode `json:"fairness,omitempty"`
}

// FairnessMode is how a job treats traffic it does not own.
// +kubebuilder:validation:Enum=Default;Strict
type FairnessMode string

const (
	FairnessDefault FairnessMode = "Default"
	FairnessStrict  FairnessMode = "Strict"
)

// FixedTuning is a complete set of transfer parameters chosen by hand.
type FixedTuning struct {
	// nodes is the number of DTN nodes used at each side.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +required
	Nodes int32 `json:"nodes"`

	// stripesPerNode is the number of stripes (sender/receiver process pairs) per node.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +required
	StripesPerNode int32 `json:"stripesPerNode"`

	// streamsPerStripe is the number of parallel TCP streams in each stripe.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	// +required
	StreamsPerStripe int32 `json:"streamsPerStripe"`

	// bufferBytes is the socket buffer size of each stream. Absent or 0 leaves the
	// size to the kernel's autotuning.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1073741824
	// +optional
	BufferBytes int64 `json:"bufferBytes,omitempty"`

	// concurrency is the number of files each stripe moves at once.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	// +required
	Concurrency int32 `json:"concurrency"`

	// pipelining is the number of file requests each stripe keeps in flight ahead of
	// the ones being moved, so that small files cost no round trip each.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1024
	// +required
	Pipelining int32 `json:"pipelining"`
}

// TuningLimits bound the parameters of a job.
type TuningLimits struct {
	// maxNodes is the most DTN nodes used at each side.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	MaxNodes *int32 `json:"maxNodes,omitempty"`

	// maxStripesPerNode is the most stripes per node.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=64
	// +optional
	MaxStripesPerNode *int32 `json:"maxStripesPerNode,omitempty"`

	// maxStreamsPerStripe is the most parallel TCP streams per stripe.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=128
	// +optional
	MaxStreamsPerStripe *int32 `json:"maxStreamsPerStripe,omitempty"`

	// maxConcurrency is the most files in flight per stripe (maxCC of Arslan & Kosar);
	// unset: 8, as `dtnflow-agent send --auto`. A class of large files gets 2
	// whatever it is. Raise it for many small files on hosts with many cores and fast
	// storage.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=256
	// +optional
	MaxConcurrency *int32 `json:"maxConcurrency,omitempty"`

	// maxBitsPerSecond caps the job's aggregate rate, so that a job can share a path
	// with others; the agents pace themselves to it.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxBitsPerSecond *int64 `json:"maxBitsPerSecond,omitempty"`
}

// ChecksumAlgorithm names the end-to-end digest of every file.
// +kubebuilder:validation:Enum=BLAKE3;SHA256;SHA512;MD5
type ChecksumAlgorithm string

const (
	// ChecksumBLAKE3 (BLAKE3 with a 256-bit output) is the default: as resistant to
	// collisions as SHA-256 (128 bits), and on a CPU with AVX2 about twice its speed on
	// one core, which on a CPU-bound DTN is the verified transfer's rate.
	ChecksumBLAKE3 ChecksumAlgorithm = "BLAKE3"
	ChecksumSHA256 ChecksumAlgorithm = "SHA256"
	ChecksumSHA512 ChecksumAlgorithm = "SHA512"
	// ChecksumMD5 exists for comparison with GridFTP's -verify-checksum; it is not
	// collision-resistant.
	ChecksumMD5 ChecksumAlgorithm = "MD5"
)

// TransferIntegrity chooses how files are verified end to end.
type TransferIntegrity struct {
	// checksum is the digest computed of every file at both ends: BLAKE3 (the
	// default), SHA256, SHA512, or MD5 (not collision-resistant).
	// +kubebuilder:default=BLAKE3
	// +optional
	Checksum ChecksumAlgorithm `json:"checksum,omitempty"`

	// verify compares the destination's digest of every file (of every chunk of a
	// large file) with the source's before the file takes its final name. Turning it
	// off leaves only the in-flight checks.
	// +kubebuilder:default=true
	// +optional
	Verify *bool `json:"verify,omitempty"`

	// verifyMode says where the destination's digest comes from. ReadBack (the
	// default): the file is read back through the file system once written and what
	// is read is digested — it proves the destination's file system returns the
	// source's bytes (right after the write, from its cache: what a disk does later is
	// not seen), at the cost of a second pass over every byte. OnArrival: each block is
	// digested as it arrives, after its in-flight check and before it is written, and
	// a chunk's digest is the digest of its blocks' digests at both ends — it proves
	// the receiver got the source's bytes and handed exactly them to the file system,
	// in one pass, but not what the file system then did with them.
	// +kubebuilder:default=ReadBack
	// +optional
	VerifyMode VerifyMode `json:"verifyMode,omitempty"`

	// inFlight is how data is checked on its way between the agents. Authenticated
	// (the default): every frame's header, metadata and data carry an AES-GMAC tag
	// under keys each connection derives from the job's secret, so damage and
	// deliberate rewriting, dropping or replaying are all caught. Checksum: the tag
	// covers each frame's header and metadata (names, offsets, lengths, and a CRC32C
	// of its data), which catches damage, any forged name or offset and a naive
	// rewrite, but not a relay that crafts other content with the same CRC32C (a CRC
	// is not a cryptographic check); it costs less CPU per byte. HeadersOnly: the tag
	// covers headers and metadata and the data is not checked in flight (TCP's own
	// checksum only), so it moves between files and sockets without a pass through
	// user space (sendfile, splice); with verify on, the end-to-end digest still
	// checks every byte. Encrypted: as Authenticated, with every frame's metadata
	// and data also encrypted (AES-256-CTR under a per-connection key, then the tag
	// over the ciphertext), so nobody on the path reads names or content. Absent:
	// Encrypted when one side is at a remote site (spec.source.site or
	// spec.destination.site), Authenticated otherwise. docs/benchmarks.md gives the
	// measured costs.
	// +optional
	InFlight InFlightCheck `json:"inFlight,omitempty"`
}

// VerifyMode is where the destination's digest comes from.
// +kubebuilder:validation:Enum=ReadBack;OnArrival
type VerifyMode string

const (
	VerifyReadBack  VerifyMode = "ReadBack"
	VerifyOnArrival VerifyMode = "OnArrival"
)

// InFlightCheck is how data is checked between the agents.
// +kubebuilder:validation:Enum=Authenticated;Checksum;HeadersOnly;Encrypted
type InFlightCheck string

const (
	InFlightAuthenticated InFlightCheck = "Authenticated"
	InFlightChecksum      InFlightCheck = "Checksum"
	InFlightHeadersOnly   InFlightCheck = "HeadersOnly"
	InFlightEncrypted     InFlightCheck = "Encrypted"
)

// SourceErrorPolicy says what a file that fails at the source does to its job.
// +kubebuilder:validation:Enum=Fail;Skip
type SourceErrorPolicy string

const (
	SourceErrorsFail SourceErrorPolicy = "Fail"
	SourceErrorsSkip SourceErrorPolicy = "Skip"
)

// OverwritePolicy says what happens to a destination file that already exists.
// +kubebuilder:validation:Enum=Never;IfDifferent;Always
type OverwritePolicy string

const (
	OverwriteNever       OverwritePolicy = "Never"
	OverwriteIfDifferent OverwritePolicy = "IfDifferent"
	OverwriteAlways      OverwritePolicy = "Always"
)

// Condition types of a TransferJob.
const (
	// ConditionProbing is True while the job measures the path.
	ConditionProbing = "Probing"
	// ConditionPlanned is True once a plan exists for the job.
	ConditionPlanned = "Planned"
	// ConditionTransferring is True while agents move data.
	ConditionTransferring = "Transferring"
	// ConditionComplete is True when every file is at the destination and verified.
	ConditionComplete = "Complete"
	// ConditionFailed is True when the job has ended without completing.
	ConditionFailed = "Failed"
	// ConditionPartiallyComplete is True when a job that skips source errors
	// (spec.sourceErrors Skip) has ended with every file it could read at the
	// destination and verified, and some skipped (reason SourceFilesSkipped; the message
	// says how many, status.skippedFiles which). Such a job is never Complete.
	ConditionPartiallyComplete = "PartiallyComplete"
	// ConditionSuspended is True while spec.suspend holds the job.
	ConditionSuspended = "Suspended"
	// ConditionQueued is True while the job waits for room on its path or endpoints
	// (their maxActiveJobs) or was preempted, and False once it is admitted.
	ConditionQueued = "Queued"
	// ConditionAgentsScheduled is True while every agent pod the job wants exists and
	// is on a node; False with reason PodRefused when the API server refuses to create
	// one (an admission policy, a quota, an invalid pod: the message is its answer; the
	// job is Stalled), PodCreateFailed when creating one failed otherwise, or
	// Unschedulable when the scheduler finds no node for one (the message is the
	// scheduler's); Unknown (Scheduling) while some wait for the scheduler. Each change
	// to False comes with a Warning Event. The job keeps trying; the condition goes
	// when the job's agents do.
	ConditionAgentsScheduled = "AgentsScheduled"

	// The conditions kstatus reads (sigs.k8s.io/cli-utils/pkg/kstatus), and with it
	// Flux, Argo CD's health check in docs/gitops.md and `kubectl wait`. They summarise
	// the ones above; every job has all three once the controller has seen it, except
	// that a suspended job has no Ready (kstatus would read a False one as in progress).

	// ConditionReady is True once the job has completed: every file is at the
	// destination and verified.
	ConditionReady = "Ready"
	// ConditionReconciling is True while the controller is still working towards the
	// end of the job: pending, probing, transferring, pausing, waiting for a node.
	ConditionReconciling = "Reconciling"
	// ConditionStalled is True when the job cannot go on without someone changing
	// something: it failed, or its endpoints refuse it (an endpoint missing, its
	// namespace not allowed, a read-only destination).
	ConditionStalled = "Stalled"
)

// AnnotationRerun on a TransferJob is part of what makes two jobs the same transfer
// for spec-hash purposes (see PathProfile status.expiredJobs): a job created again with
// a new value runs again even though an identical job completed before.
// `kubectl dtnflow rerun` sets it to the time of the rerun.
const AnnotationRerun = "dtnflow.io/rerun"

// TransferState is a one-word summary of a job's conditions, for `kubectl get`.
// +kubebuilder:validation:Enum=Pending;Queued;Probing;Transferring;Suspended;Complete;PartiallyComplete;Failed
type TransferState string

const (
	StatePending      TransferState = "Pending"
	StateQueued       TransferState = "Queued"
	StateProbing      TransferState = "Probing"
	StateTransferring TransferState = "Transferring"
	StateSuspended    TransferState = "Suspended"
	StateComplete     TransferState = "Complete"
	// StatePartiallyComplete: every file read at the source is at the destination and
	// verified, and some were skipped (spec.sourceErrors Skip).
	StatePartiallyComplete TransferState = "PartiallyComplete"
	StateFailed            TransferState = "Failed"
)

// TransferJobStatus is what the controller observed of a job and decided for it.
type TransferJobStatus struct {
	// state summarises the conditions in one word.
	// +optional
	State TransferState `json:"state,omitempty"`

	// conditions are Probing, Planned, Transferring, Complete, PartiallyComplete,
	// Failed and Suspended, each with a reason, and Ready, Reconciling and Stalled,
	// which summarise them the way kstatus (Flux, Argo CD, kubectl wait) reads them.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the generation of the spec that the last successful
	// reconciliation acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// plan is the current plan.
	// +optional
	Plan *TransferPlan `json:"plan,omitempty"`

	// progress is the job's measured progress.
	// +optional
	Progress *TransferProgress `json:"progress,omitempty"`

	// samples are the probe measurements the plan was fitted from.
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +optional
	Samples []ProbeSample `json:"samples,omitempty"`

	// stripes are the job's stripes as observed.
	// +kubebuilder:validation:MaxItems=512
	// +listType=map
	// +listMapKey=name
	// +optional
	Stripes []StripeStatus `json:"stripes,omitempty"`

	// replans records the most recent changes of plan, newest last.
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	// +optional
	Replans []Replan `json:"replans,omitempty"`

	// rateHistory is the job's aggregate rate over time, oldest first: a point per
	// agent report while it transfers. When the list is full every other point is
	// dropped, so it covers the whole run at a resolution that halves as the run grows
	// (`kubectl dtnflow plot` draws it).
	// +kubebuilder:validation:MaxItems=128
	// +listType=atomic
	// +optional
	RateHistory []RatePoint `json:"rateHistory,omitempty"`

	// failedFiles lists the first 20 files that failed in this run — moving them, or
	// the final check at the destination (missing, another size or digest, not in the
	// source) — each with why; progress.filesFailed counts them all. The Failed
	// condition's message names only the first.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	FailedFiles []FailedFile `json:"failedFiles,omitempty"`

	// skippedFiles lists the first 20 files skipped in this run because they failed
	// at the source (spec.sourceErrors Skip), each with why; progress.filesSkipped
	// counts them all.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	SkippedFiles []FailedFile `json:"skippedFiles,omitempty"`

	// notMoved lists the first 20 entries under the source paths that are not files
	// the job moves, each with why: a symlinked directory (not followed: it could loop
	// or lead to a tree listed twice), a symlink to nothing, a FIFO, a socket, a
	// device. They are not at the destination; a Complete job moved every regular
	// file its paths hold, and this says what else they held.
	// progress.entriesNotMoved counts them all.
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +optional
	NotMoved []FailedFile `json:"notMoved,omitempty"`

	// agentFailures counts agent pods that failed or vanished; it is compared with
	// spec.backoffLimit.
	// +optional
	AgentFailures int32 `json:"agentFailures,omitempty"`

	// startTime is when the job was first acted on.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`

	// completionTime is when the job completed or failed.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`

	// timings are how long the job took from its creation to its first byte, its plan
	// and its completion.
	// +optional
	Timings *TransferTimings `json:"timings,omitempty"`

	// channels is how the size classes share each stripe's channels while the job
	// runs, as the coordinator reports it: the scheduler, each class's channels now and
	// the moves made (Arslan & Kosar's online re-allocation).
	// +optional
	Channels *ChannelStatus `json:"channels,omitempty"`
	// run counts the runs of a recurring job (spec.trigger): 1 for the first. The
	// fields above describe the current run (or the latest, between runs).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Run int64 `json:"run,omitempty"`

	// runTrigger is what started the current run.
	// +optional
	RunTrigger RunTrigger `json:"runTrigger,omitempty"`

	// lastRunTime is when the latest run of a recurring job started.
	// +optional
	LastRunTime *metav1.Time `json:"lastRunTime,omitempty"`

	// nextRunTime is when spec.trigger.schedule starts the next run.
	// +optional
	NextRunTime *metav1.Time `json:"nextRunTime,omitempty"`

	// lastManualTrigger is the value of spec.trigger.manual last acted on.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	LastManualTrigger string `json:"lastManualTrigger,omitempty"`

	// missedRuns counts the scheduled times that found the previous run still going
	// (skipped: runs never overlap), or passed while the controller was away.
	// +kubebuilder:validation:Minimum=0
	// +optional
	MissedRuns int64 `json:"missedRuns,omitempty"`

	// runs are the latest finished runs of a recurring job, oldest first, up to 16.
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +optional
	Runs []TransferRun `json:"runs,omitempty"`

	// queue says where the job waits while it is Queued; absent otherwise.
	// +optional
	Queue *TransferQueue `json:"queue,omitempty"`

	// sharing is the job's part of what it shares with other jobs: its priority, the
	// jobs on its path and its share of the path's capacity.
	// +optional
	Sharing *TransferSharing `json:"sharing,omitempty"`

	// remote is the side of the job that a peer site runs (spec.source.site or
	// spec.destination.site), as that site last reported it.
	// +optional
	Remote *RemoteSideStatus `json:"remote,omitempty"`
}

// TransferQueue is a job's place in the queue of its path and endpoints.
type TransferQueue struct {
	// position is the job's place among the queued jobs it waits behind: 1 is next.
	// Jobs of higher priority go first; of equal priority, first come first served.
	// +kubebuilder:validation:Minimum=1
	// +required
	Position int32 `json:"position"`

	// reason says what the job waits for: PathLimit or EndpointLimit (the path's or an
	// endpoint's maxActiveJobs is reached, or a job before it waits there), Preempted
	// (a job of higher priority whose class allows it took its place), FilesInUse
	// (another job of this cluster reads or writes where this one would write, or
	// writes where it would read — its source paths, and where they land under its
	// destination path, on the same endpoint — and it runs once that job ends; the
	// message names it), or RemoteQueued (the peer site that serves the job's other
	// side queues it behind its own limits; the message is the peer's).
	// +kubebuilder:validation:Enum=PathLimit;EndpointLimit;Preempted;FilesInUse;RemoteQueued
	// +required
	Reason string `json:"reason"`

	// message names the limit for people, for example "PathProfile a.b allows 2 jobs
	// at once (spec.maxActiveJobs)".
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`

	// since is when the job started waiting.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
}

// ShareBound names what set a job's share.
// +kubebuilder:validation:Enum=Path;SourceEndpoint;DestinationEndpoint;Demand;None
type ShareBound string

const (
	// ShareBoundPath: the path's capacity (or its PathProfile's maxBitsPerSecond),
	// divided between the path's jobs.
	ShareBoundPath ShareBound = "Path"
	// ShareBoundSourceEndpoint and ShareBoundDestinationEndpoint: an endpoint's
	// spec.sharing.maxBitsPerSecond, divided between the jobs of every path through
	// the site.
	ShareBoundSourceEndpoint      ShareBound = "SourceEndpoint"
	ShareBoundDestinationEndpoint ShareBound = "DestinationEndpoint"
	// ShareBoundDemand: the job can use less than a share (its own maxBitsPerSecond,
	// or what its nodes carry), and leaves the rest to the others.
	ShareBoundDemand ShareBound = "Demand"
	// ShareBoundNone: nothing of known capacity is shared (a path not yet measured).
	ShareBoundNone ShareBound = "None"
)

// TransferSharing is a job's part of the path and sites it shares with other jobs.
type TransferSharing struct {
	// priority is the job's priority (from spec.priorityClassName; 1 without one): its
	// weight in the shares and its place in the queues.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	// +required
	Priority int32 `json:"priority"`

	// jobsOnPath is the number of jobs admitted on the job's path and not suspended,
	// this one included.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100000
	// +optional
	JobsOnPath int32 `json:"jobsOnPath,omitempty"`

	// pathCapacityBitsPerSecond is the path's capacity the shares divide: the larger of
	// the plateau of the fitted curve and the highest aggregate measured, as its
	// PathProfile and the jobs' plans know them (within the profile's
	// spec.maxBitsPerSecond). Absent while the path is not measured.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PathCapacityBitsPerSecond int64 `json:"pathCapacityBitsPerSecond,omitempty"`

	// shareBitsPerSecond is the job's share: weighted max-min fair over the path and
	// the endpoints' rate limits. Absent when nothing of known capacity bounds it.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ShareBitsPerSecond int64 `json:"shareBitsPerSecond,omitempty"`

	// boundBy is what set the share.
	// +optional
	BoundBy ShareBound `json:"boundBy,omitempty"`

	// paced is true when the agents hold the job to its share (status.plan
	// .shareBitsPerSecond): other jobs share what bounds it, or an admin's rate limit
	// does. A job alone on a measured path is not held to the measurement.
	// +optional
	Paced bool `json:"paced,omitempty"`

	// fairness is spec.tuning.fairness as the plan applies it: Strict plans one TCP
	// stream.
	// +optional
	Fairness FairnessMode `json:"fairness,omitempty"`
}

// Scheduler names how the size classes share channels (Arslan & Kosar): SC runs one
// class at a time with its own concurrency; MC runs every class at once, channels
// dealt round robin, and hands a finished class's channels to the class with the
// largest estimated time left; ProMC deals channels by weight and size and also moves
// a channel from a fast class to a slow one when the slow one's estimated time has
// been at least twice the fast one's for three periods of 5 s.
// +kubebuilder:validation:Enum=SC;MC;ProMC
type Scheduler string

const (
	SchedulerSingleChunk         Scheduler = "SC"
	SchedulerMultiChunk          Scheduler = "MC"
	SchedulerProActiveMultiChunk Scheduler = "ProMC"
)

// ChannelStatus is the size classes' channels at run time.
type ChannelStatus struct {
	// scheduler is the scheduler the coordinator runs the classes with.
	// +optional
	Scheduler Scheduler `json:"scheduler,omitempty"`

	// moves counts the channel moves made this run of the coordinator.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Moves int64 `json:"moves,omitempty"`

	// classes are the size classes now, smallest first.
	// +kubebuilder:validation:MaxItems=4
	// +listType=map
	// +listMapKey=class
	// +optional
	Classes []ClassChannels `json:"classes,omitempty"`

	// recentMoves are the most recent moves, oldest first.
	// +kubebuilder:validation:MaxItems=8
	// +listType=atomic
	// +optional
	RecentMoves []ChannelMove `json:"recentMoves,omitempty"`
}

// ClassChannels is one size class at run time.
type ClassChannels struct {
	// class is the size class.
	// +required
	Class SizeClass `json:"class"`

	// channels is the number of files of the class in flight at once per stripe now.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Channels int32 `json:"channels,omitempty"`

	// remainingBytes is what the class has not yet moved and verified.
	// +kubebuilder:validation:Minimum=0
	// +optional
	RemainingBytes int64 `json:"remainingBytes,omitempty"`

	// bitsPerSecond is the class's rate over the last periods.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BitsPerSecond int64 `json:"bitsPerSecond,omitempty"`
}

// ChannelMove is channels moved from one size class to another.
type ChannelMove struct {
	// time is when the move was made (the coordinator's clock).
	// +required
	Time metav1.Time `json:"time"`

	// from is the class the channels left.
	// +required
	From SizeClass `json:"from"`

	// to is the class the channels joined.
	// +required
	To SizeClass `json:"to"`

	// channels is how many moved.
	// +kubebuilder:validation:Minimum=1
	// +required
	Channels int32 `json:"channels"`

	// reason says why, for people.
	// +kubebuilder:validation:MaxLength=256
	// +optional
	Reason string `json:"reason,omitempty"`
}

// RemoteSideStatus is the peer site's side of a job, as last seen.
type RemoteSideStatus struct {
	// site is the RemoteSite.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Site string `json:"site"`

	// side is the side the peer runs.
	// +required
	Side RemoteSide `json:"side"`

	// transfer is the RemoteTransfer at the peer that runs the side, as namespace/name.
	// +kubebuilder:validation:MaxLength=317
	// +optional
	Transfer string `json:"transfer,omitempty"`

	// accepted is the peer's Accepted condition: True, False (see reason and message),
	// or Unknown before the peer has answered.
	// +kubebuilder:validation:Enum=True;False;Unknown
	// +optional
	Accepted metav1.ConditionStatus `json:"accepted,omitempty"`

	// reason is the peer's (or, when the peer cannot be reached, this site's) reason.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Reason string `json:"reason,omitempty"`

	// message explains reason for people.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`

	// nodes are the peer's nodes that run the side's stripes.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +optional
	Nodes []string `json:"nodes,omitempty"`

	// agentFailures counts the side's agents that failed at the peer; they count
	// against spec.backoffLimit with this site's.
	// +kubebuilder:validation:Minimum=0
	// +optional
	AgentFailures int32 `json:"agentFailures,omitempty"`

	// lastSeenTime is when the peer's API server last answered for the side.
	// +optional
	LastSeenTime *metav1.Time `json:"lastSeenTime,omitempty"`
}

// TransferTimings are how long a job took to reach each milestone, in milliseconds from
// the start of its run: firstSeenTime when the manager saw the run begin within a
// second of the job's metadata.creationTimestamp (which the API server keeps to the
// second only, so that a figure measured from it could be up to a second long) or when
// a recurring job's run was triggered, else the creationTimestamp (a manager that was
// away when the job was created counts the wait). Each is set once, when the milestone
// is first observed, and kept.
type TransferTimings struct {
	// firstSeenTime is when the manager first saw this run of the job, to the
	// microsecond: tens of milliseconds after the job's creation on an idle manager.
	// +optional
	FirstSeenTime *metav1.MicroTime `json:"firstSeenTime,omitempty"`

	// firstByteMilliseconds is the time to the first byte of the dataset: when the
	// coordinator first handed a unit of it to a stripe connected to its receiver
	// (the coordinator's clock). A cold job's first byte comes before its plan: it
	// probes on its own data.
	// +kubebuilder:validation:Minimum=0
	// +optional
	FirstByteMilliseconds *int64 `json:"firstByteMilliseconds,omitempty"`

	// planMilliseconds is the time to the first plan (the Planned condition), probing
	// included.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PlanMilliseconds *int64 `json:"planMilliseconds,omitempty"`

	// completeMilliseconds is the time to Complete: every file at the destination and
	// verified (the coordinator's report of it).
	// +kubebuilder:validation:Minimum=0
	// +optional
	CompleteMilliseconds *int64 `json:"completeMilliseconds,omitempty"`
}

// BindingResource names what limits a plan's predicted rate.
// +kubebuilder:validation:Enum=Path;NIC;CPU;Disk;Nodes;UserLimit;Share
type BindingResource string

const (
	BindingPath BindingResource = "Path"
	BindingNIC  BindingResource = "NIC"
	BindingCPU  BindingResource = "CPU"
	BindingDisk BindingResource = "Disk"
	// BindingNodes: every node the endpoints offer is in use, up to its stripe cap
	// (the endpoint's maxStripesPerNode, less other jobs' stripes).
	BindingNodes     BindingResource = "Nodes"
	BindingUserLimit BindingResource = "UserLimit"
	// BindingShare: the job's share of a path or site it shares with other jobs
	// (status.sharing).
	BindingShare BindingResource = "Share"
)

// TransferPlan is the planner's decision for a job (the OPT_B flow model of Yildirim &
// Kosar for nodes × stripes × streams; Arslan & Kosar for the per-size-class
// parameters; Liu et al. for the CPU of each side).
type TransferPlan struct {
	// sourceNodes are the source nodes chosen.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +optional
	SourceNodes []string `json:"sourceNodes,omitempty"`

	// destinationNodes are the destination nodes chosen.
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	// +optional
	DestinationNodes []string `json:"destinationNodes,omitempty"`

	// stripesPerNode is the number of stripes on each chosen node.
	// +kubebuilder:validation:Minimum=1
	// +required
	StripesPerNode int32 `json:"stripesPerNode"`

	// streamsPerStripe is the number of parallel TCP streams per stripe.
	// +kubebuilder:validation:Minimum=1
	// +required
	StreamsPerStripe int32 `json:"streamsPerStripe"`

	// probeHelperStripes is how many stripes besides its own the probe stripe keeps
	// running to the job's end from its own agents, as it ran them for the probe's
	// stripes sample. Set only by a plan made with less of the job left than a new
	// stripe's pods take to start and pay (about 10 s), when that sample measured more
	// than the plan's one stripe is predicted to carry: the job keeps the shape it
	// measured best instead of shedding it for one it cannot add to in time. Absent:
	// none.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=63
	// +optional
	ProbeHelperStripes int32 `json:"probeHelperStripes,omitempty"`

	// bufferBytes is the socket buffer size per stream; 0 is kernel autotuning.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BufferBytes int64 `json:"bufferBytes,omitempty"`

	// sizeClasses are the per-size-class parameters of the dataset.
	// +kubebuilder:validation:MaxItems=4
	// +listType=map
	// +listMapKey=class
	// +optional
	SizeClasses []SizeClassPlan `json:"sizeClasses,omitempty"`

	// scheduler is how the size classes share channels, chosen for the dataset: SC for
	// one class, ProMC when small and medium files hold at least half of the bytes, MC
	// otherwise. Absent in Fixed mode, where every class runs at once with its own
	// concurrency.
	// +optional
	Scheduler Scheduler `json:"scheduler,omitempty"`

	// sourceCPUMillicores is the CPU request of each sending agent.
	// +kubebuilder:validation:Minimum=0
	// +optional
	SourceCPUMillicores int64 `json:"sourceCPUMillicores,omitempty"`

	// destinationCPUMillicores is the CPU request of each receiving agent.
	// +kubebuilder:validation:Minimum=0
	// +optional
	DestinationCPUMillicores int64 `json:"destinationCPUMillicores,omitempty"`

	// coordinatorCPUMillicores is the CPU request of the coordinator, which moves no
	// data and whose work is per file: its idle use plus its measured cost per file
	// settled per second, at the predicted rate and the dataset's mean file size.
	// +kubebuilder:validation:Minimum=0
	// +optional
	CoordinatorCPUMillicores int64 `json:"coordinatorCPUMillicores,omitempty"`

	// predictedBitsPerSecond is the aggregate rate the plan is predicted to reach.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PredictedBitsPerSecond int64 `json:"predictedBitsPerSecond,omitempty"`

	// bindingResource is what limits the predicted rate.
	// +optional
	BindingResource BindingResource `json:"bindingResource,omitempty"`

	// pathBitsPerSecond is the aggregate the path carries as far as the samples show
	// it: the plateau of the stream model for one stripe, more only as far as more
	// stripes were measured to pay. The plan adds no stripe beyond it, and the rescale
	// policy does not add stripes towards a higher rate. Absent in Fixed mode without
	// samples.
	// +kubebuilder:validation:Minimum=0
	// +optional
	PathBitsPerSecond int64 `json:"pathBitsPerSecond,omitempty"`

	// shareBitsPerSecond is the rate the plan is sized for when the job is held to its
	// share of a path or site it shares with other jobs (status.sharing): stripes,
	// streams and CPU requests for that rate, and the agents pace to it. Absent when
	// the job is not held to a share.
	// +kubebuilder:validation:Minimum=0
	// +optional
	ShareBitsPerSecond int64 `json:"shareBitsPerSecond,omitempty"`

	// model is the fitted throughput-vs-streams model of one stripe; absent in Fixed
	// mode, which does not probe.
	// +optional
	Model *StreamModel `json:"model,omitempty"`

	// sourceCPU is the CPU-vs-throughput regression of the sending side.
	// +optional
	SourceCPU *CPUModel `json:"sourceCPU,omitempty"`

	// destinationCPU is the CPU-vs-throughput regression of the receiving side.
	// +optional
	DestinationCPU *CPUModel `json:"destinationCPU,omitempty"`

	// hash identifies the plan; agent pods carry it in a label.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Hash string `json:"hash,omitempty"`
}

// SizeClass names a class of files by size relative to the path's bandwidth-delay
// product (Arslan & Kosar).
// +kubebuilder:validation:Enum=Small;Medium;Large;Huge
type SizeClass string

const (
	SizeClassSmall  SizeClass = "Small"
	SizeClassMedium SizeClass = "Medium"
	SizeClassLarge  SizeClass = "Large"
	SizeClassHuge   SizeClass = "Huge"
)

// SizeClassPlan is the plan for one class of files.
type SizeClassPlan struct {
	// class is the size class.
	// +required
	Class SizeClass `json:"class"`

	// files is the number of files in the class.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Files int64 `json:"files,omitempty"`

	// bytes is the total size of the class.
	// +kubebuilder:validation:Minimum=0
	// +optional
	Bytes int64 `json:"bytes,omitempty"`

	// maxBytes is the largest file the class holds: a file belongs to the first class
	// whose maxBytes it does not exceed. Absent on the last class, which has no bound.
	// +kubebuilder:validation:Minimum=1
	// +optional
	MaxBytes int64 `json:"maxBytes,omitempty"`

	// pipelining is the number of requests kept in flight per channel.
	// +kubebuilder:validation:Minimum=1
	// +required
	Pipelining int32 `json:"pipelining"`

	// parallelism is the number of streams a file of the class is spread over.
	// +kubebuilder:validation:Minimum=1
	// +required
	Parallelism int32 `json:"parallelism"`

	// concurrency is the number of files of the class in flight at once.
	// +kubebuilder:validation:Minimum=1
	// +required
	Concurrency int32 `json:"concurrency"`

	// channels is the number of channels allocated to the class at the start (MC and
	// ProMC; status.channels has them as they are now).
	// +kubebuilder:validation:Minimum=0
	// +optional
	Channels int32 `json:"channels,omitempty"`
}

// FailedFile is a file that failed in a run, and why.
type FailedFile struct {
	// path is the file's path under the job's source root (destination root for a
	// file only the destination has), quoted with escapes when it is not valid UTF-8.
	// +kubebuilder:validation:MaxLength=1024
	Path string `json:"path"`

	// error is why it failed, for example "open data/a.bin: permission denied".
	// +kubebuilder:validation:MaxLength=512
	Error string `json:"error"`
}

// TransferProgress is a job's measured progress.
type TransferProgress struct {
	// bytesDone is the number of bytes written and verified at the destination.
	// +optional
	BytesDone int64 `json:"bytesDone,omitempty"`

	// bytesTotal is the size of the dataset.
	// +optional
	BytesTotal int64 `json:"bytesTotal,omitempty"`

	// filesDone is the number of files complete at the destination.
	// +optional
	FilesDone int64 `json:"filesDone,omitempty"`

	// filesTotal is the number of files in the dataset.
	// +optional
	FilesTotal int64 `json:"filesTotal,omitempty"`

	// filesFailed is the number of files that failed in this run, moving them or at
	// the final check (a file the check rejects was written, and stays in filesDone);
	// status.failedFiles lists the first of them.
	// +optional
	FilesFailed int64 `json:"filesFailed,omitempty"`

	// filesSkipped is the number of files skipped in this run because they failed at
	// the source (spec.sourceErrors Skip); status.skippedFiles lists the first of them.
	// +optional
	FilesSkipped int64 `json:"filesSkipped,omitempty"`

	// entriesNotMoved is the number of entries under the source paths that hold no
	// file the job moves (a symlinked directory, which is not followed; a symlink to
	// nothing; a FIFO, socket or device); status.notMoved lists the first of them.
	// +optional
	EntriesNotMoved int64 `json:"entriesNotMoved,omitempty"`

	// percent is bytesDone as a percentage of bytesTotal, rounded down.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=100
	// +optional
	Percent int32 `json:"percent,omitempty"`

	// currentBitsPerSecond is the aggregate rate over the latest measurement period.
	// +optional
	CurrentBitsPerSecond int64 `json:"currentBitsPerSecond,omitempty"`

	// averageBitsPerSecond is bytesDone over the time spent transferring.
	// +optional
	AverageBitsPerSecond int64 `json:"averageBitsPerSecond,omitempty"`

	// rate is currentBitsPerSecond for people, for example "941 Mbit/s".
	// +kubebuilder:validation:MaxLength=32
	// +optional
	Rate string `json:"rate,omitempty"`

	// etaSeconds is the estimated time left, from the current rate.
	// +optional
	ETASeconds *int64 `json:"etaSeconds,omitempty"`

	// eta is etaSeconds for people, for example "3m20s".
	// +kubebuilder:validation:MaxLength=32
	// +optional
	ETA string `json:"eta,omitempty"`

	// lastUpdateTime is when the agents last reported.
	// +optional
	LastUpdateTime *metav1.Time `json:"lastUpdateTime,omitempty"`
}

// StripeState is the observed state of one stripe.
// +kubebuilder:validation:Enum=Pending;Running;Succeeded;Failed
type StripeState string

const (
	StripePending   StripeState = "Pending"
	StripeRunning   StripeState = "Running"
	StripeSucceeded StripeState = "Succeeded"
	StripeFailed    StripeState = "Failed"
)

// StripeStatus is one stripe as observed.
type StripeStatus struct {
	// name is the stripe's name; its agent pods are named after it.
	// +kubebuilder:validation:MaxLength=253
	// +required
	Name string `json:"name"`

	// sourceNode is the node of the sending agent.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	SourceNode string `json:"sourceNode,omitempty"`

	// destinationNode is the node of the receiving agent.
	// +kubebuilder:validation:MaxLength=253
	// +optional
	DestinationNode string `json:"destinationNode,omitempty"`

	// state is the stripe's state.
	// +required
	State StripeState `json:"state"`

	// bitsPerSecond is the stripe's latest measured rate.
	// +optional
	BitsPerSecond int64 `json:"bitsPerSecond,omitempty"`
}

// RatePoint is the job's aggregate rate at one agent report.
type RatePoint struct {
	// time is when the agents reported.
	// +required
	Time metav1.Time `json:"time"`

	// bitsPerSecond is the aggregate rate over the report's interval.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BitsPerSecond int64 `json:"bitsPerSecond,omitempty"`

	// bytesDone is the number of bytes verified at the destination by then.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BytesDone int64 `json:"bytesDone,omitempty"`
}

// PlanShape is the part of a plan a re-plan changes.
type PlanShape struct {
	// nodes is the number of nodes at each side.
	// +optional
	Nodes int32 `json:"nodes,omitempty"`

	// stripes is the total number of stripes.
	// +optional
	Stripes int32 `json:"stripes,omitempty"`

	// streamsPerStripe is the number of streams per stripe.
	// +optional
	StreamsPerStripe int32 `json:"streamsPerStripe,omitempty"`
}

// Replan records one change of plan.
type Replan struct {
	// time is when the change was made.
	// +required
	Time metav1.Time `json:"time"`

	// reason is a CamelCase word for why, for example ThroughputDropped.
	// +kubebuilder:validation:MaxLength=64
	// +required
	Reason string `json:"reason"`

	// message explains the change for people.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`

	// from is the shape before the change.
	// +required
	From PlanShape `json:"from"`

	// to is the shape after the change.
	// +required
	To PlanShape `json:"to"`
}

// TransferJob moves files from one TransferEndpoint to another as fast as the path
// allows: dtnflow probes the path, plans nodes × stripes × streams, runs agent pods
// sized from a CPU model, and re-plans as measured throughput changes.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=tj,categories=dtnflow
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Queue",type=integer,JSONPath=`.status.queue.position`
// +kubebuilder:printcolumn:name="Progress%",type=integer,JSONPath=`.status.progress.percent`
// +kubebuilder:printcolumn:name="Rate",type=string,JSONPath=`.status.progress.rate`
// +kubebuilder:printcolumn:name="ETA",type=string,JSONPath=`.status.progress.eta`
// +kubebuilder:printcolumn:name="Stripes",type=integer,JSONPath=`.status.plan.stripesPerNode`,priority=1
// +kubebuilder:printcolumn:name="Streams",type=integer,JSONPath=`.status.plan.streamsPerStripe`,priority=1
// +kubebuilder:printcolumn:name="Priority",type=integer,JSONPath=`.status.sharing.priority`,priority=1
// +kubebuilder:printcolumn:name="Share bit/s",type=integer,JSONPath=`.status.sharing.shareBitsPerSecond`,priority=1
// +kubebuilder:printcolumn:name="Run",type=integer,JSONPath=`.status.run`,priority=1
// +kubebuilder:printcolumn:name="Next Run",type=string,JSONPath=`.status.nextRunTime`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type TransferJob struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says what to move and how.
	// +required
	Spec TransferJobSpec `json:"spec"`

	// status is what the controller observed and decided.
	// +optional
	Status TransferJobStatus `json:"status,omitempty"`
}

// TransferJobList is a list of TransferJobs.
// +kubebuilder:object:root=true
type TransferJobList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []TransferJob `json:"items"`
}

func init() {
	SchemeBuilder.Register(&TransferJob{}, &TransferJobList{})
}
