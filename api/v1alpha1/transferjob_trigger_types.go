package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Recurring and triggered transfers: a TransferJob with spec.trigger runs again, as
// VolSync's trigger.schedule / trigger.manual and Globus timers do. Each run moves only
// what is missing or changed at the destination (the receivers' journals remember every
// verified file of the same paths), runs never overlap, and status keeps the latest runs.

// TransferTrigger says when a recurring job runs again. The first run starts when the
// job is created, like any job's.
// +kubebuilder:validation:XValidation:rule="has(self.schedule) || has(self.manual)",message="spec.trigger needs schedule, manual or both"
type TransferTrigger struct {
	// schedule starts a run at the times of a cron expression: five fields (minute,
	// hour, day of month, month, day of week) in UTC unless prefixed with CRON_TZ=<zone>,
	// or a descriptor (@hourly, @daily, @weekly, @monthly, @yearly, @every <duration>).
	// A time that comes while the previous run is still going is skipped and counted
	// (status.missedRuns, metric dtnflow_transferjob_missed_runs_total): runs never
	// overlap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^((CRON_TZ|TZ)=[^ ]+ )?(@(yearly|annually|monthly|weekly|daily|midnight|hourly)|@every [0-9a-z.]+|[^ @]+( [^ ]+){4})$`
	// +optional
	Schedule string `json:"schedule,omitempty"`

	// manual starts a run each time it is set to a value other than
	// status.lastManualTrigger (any string: a date, a counter); a run asked for while
	// another goes on starts when that one ends. `kubectl dtnflow rerun` sets it.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Manual string `json:"manual,omitempty"`
}

// ConditionScheduled is True while spec.trigger.schedule is a valid cron schedule (its
// message says when the next run starts), False when it cannot be parsed.
const ConditionScheduled = "Scheduled"

// RunTrigger says what started a run.
// +kubebuilder:validation:Enum=Created;Schedule;Manual
type RunTrigger string

const (
	// RunCreated is the first run, started when the job was created.
	RunCreated RunTrigger = "Created"
	// RunSchedule is a run started by spec.trigger.schedule.
	RunSchedule RunTrigger = "Schedule"
	// RunManual is a run started by a new spec.trigger.manual.
	RunManual RunTrigger = "Manual"
)

// RunResult is how a run ended.
// +kubebuilder:validation:Enum=Complete;PartiallyComplete;Failed
type RunResult string

const (
	RunComplete RunResult = "Complete"
	// RunPartiallyComplete: files failing at the source were skipped (spec.sourceErrors
	// Skip).
	RunPartiallyComplete RunResult = "PartiallyComplete"
	RunFailed            RunResult = "Failed"
)

// TransferRun is one finished run of a recurring job.
type TransferRun struct {
	// number counts the job's runs from 1.
	// +kubebuilder:validation:Minimum=1
	// +required
	Number int64 `json:"number"`

	// trigger is what started the run.
	// +required
	Trigger RunTrigger `json:"trigger"`

	// startTime is when the run started.
	// +required
	StartTime metav1.Time `json:"startTime"`

	// completionTime is when the run completed or failed.
	// +required
	CompletionTime metav1.Time `json:"completionTime"`

	// result is Complete or Failed.
	// +required
	Result RunResult `json:"result"`

	// reason is the reason of the condition that ended the run.
	// +kubebuilder:validation:MaxLength=64
	// +optional
	Reason string `json:"reason,omitempty"`

	// message is that condition's message: what was verified, or the error.
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	Message string `json:"message,omitempty"`

	// filesDone is the number of files at the destination and verified when it ended.
	// +kubebuilder:validation:Minimum=0
	// +optional
	FilesDone int64 `json:"filesDone,omitempty"`

	// bytesDone is the number of bytes at the destination and verified when it ended.
	// +kubebuilder:validation:Minimum=0
	// +optional
	BytesDone int64 `json:"bytesDone,omitempty"`
}
