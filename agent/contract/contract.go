// Package contract is the interface between the dtnflow controller and the agents it
// runs: pod names and roles, the directive the controller gives a job's coordinator, and
// the report the coordinator gives back. Both sides import it; neither copies it.
//
// How a job runs on a cluster:
//
//   - One coordinator pod per job (<job>-coordinator, on a source node) runs
//     `dtnflow-agent coordinate`. It lists the source paths, hands out work (files and
//     chunks of large files) to the job's senders, and is stateless: what is verified
//     lives in the receivers' durable journals under the destination root, so a
//     replaced coordinator carries on without re-sending verified data.
//   - Each stripe k is a sender pod (<job>-s<k>-send, source node) running
//     `dtnflow-agent send --coordinator ...` and a receiver pod (<job>-s<k>-recv,
//     destination node) running `dtnflow-agent receive`. Stripes join and leave at any
//     time; a sender pulls work from the coordinator, and work leased to a stripe that
//     disappears goes back to the others.
//   - The controller writes a Directive as JSON into the coordinator pod's annotation
//     AnnotationDirective. The coordinator watches its own pod (a watch on its name,
//     with a GET every report interval as the fallback), so a new directive reaches it
//     within a round trip, and passes stream counts, buffer sizes and per-class
//     parameters on to the senders without restarting them. The directive a pod is
//     created with also reaches it through its environment (EnvInitialDirective), so
//     that it serves its stripes before its first call to the API server.
//   - The coordinator writes a Report as JSON into its own pod's annotation
//     AnnotationReport (a merge patch, every report interval and at once after a change
//     the controller acts on: a phase, a directive applied, a probe sample, the probe's
//     end, a stripe joining or leaving, the first byte). The controller watches its
//     pods, so a report wakes it; the controller stays the only writer of TransferJob
//     status.
//   - A cold job's first directive is a Transfer directive with Probe set: the
//     coordinator moves the dataset at once on stripe 0 and takes the probe samples
//     as stretches of that transfer (on the job's own data, as `send --auto` does),
//     reporting Probe Probing, then Probed; the controller plans from the samples and
//     its next directive carries the plan to the running job, whose stripe 0 goes on.
//   - The coordinator's ServiceAccount may only get, watch and patch its own pod (a
//     per-job Role with resourceNames); senders and receivers get no API access at
//     all.
//   - All agents of one job prove the job's secret (the Secret <job>-auth, key
//     SecretKey, mounted at SecretMountPath) to each other; other peers are refused.
package contract

import (
	"strconv"
	"time"
	"unicode/utf8"
)

// Annotation keys on the coordinator pod.
const (
	// AnnotationDirective holds the controller's Directive (JSON).
	AnnotationDirective = "dtnflow.io/directive"
	// AnnotationReport holds the coordinator's Report (JSON).
	AnnotationReport = "dtnflow.io/report"
)

// The warm pool (TransferEndpoint spec.agentPods.warmPool): agents started before any
// job, each waiting in `dtnflow-agent standby` until the controller claims it for one
// agent of one job.
//
//   - A warm agent's pod carries LabelWarmPool (its endpoint) and LabelWarmSide, and
//     mounts its own Secret (key WarmKey, at WarmKeyMountPath): 32 random bytes the
//     controller made for that pod alone. Its ServiceAccount may get, watch and patch
//     that pod only, as a coordinator's may.
//   - The controller claims it by writing AnnotationClaim: the claim (the job's
//     secret, the role's arguments, its environment) sealed with the pod's key and
//     bound to the pod's UID (package agent/contract/claim), so that nobody who can only edit
//     the pod's annotations can direct the agent or read the job's secret. The same
//     patch gives the pod the job's labels and the job as its controlling owner.
//   - The agent opens the claim, writes the job's secret where a job's own pod has it
//     (SecretMountPath, a memory-backed volume in a warm pod) and replaces itself
//     (exec) with the role's command: from then on it is that agent of the job.
const (
	// LabelWarmPool names the TransferEndpoint whose warm pool started the pod.
	LabelWarmPool = "dtnflow.io/warm-pool"
	// LabelWarmSide says which side of a transfer a warm agent can serve: WarmSideSource
	// (a coordinator or a sender: the storage mounted read-only) or WarmSideDestination
	// (a receiver).
	LabelWarmSide = "dtnflow.io/warm-side"
	// AnnotationClaim holds the sealed claim of a warm agent.
	AnnotationClaim = "dtnflow.io/claim"
	// AnnotationClaimedAt holds when the controller claimed a warm agent (RFC 3339):
	// the pool waits its refill delay from then before it replaces the agent.
	AnnotationClaimedAt = "dtnflow.io/claimed-at"
	// AnnotationAgentArgs holds, in the clear, the arguments a claim gave the agent
	// (JSON list), for the controller's own reading: they hold no secret.
	AnnotationAgentArgs = "dtnflow.io/agent-args"
	// WarmKeyMountPath is where a warm agent's pod mounts its own Secret; the key
	// file is WarmKeyMountPath + "/" + WarmKey.
	WarmKeyMountPath = "/var/run/dtnflow/warm"
	// WarmKey is the key of the warm agent's key in its Secret.
	WarmKey = "key"
)

// The sides a warm agent serves.
const (
	WarmSideSource      = "source"
	WarmSideDestination = "destination"
)

// EnvInitialDirective is the coordinator's environment variable holding the directive
// its pod was created with: the kubelet fills it from AnnotationDirective (the downward
// API) as the container starts, so the coordinator serves its stripes on that
// directive at once instead of first asking the API server for its pod (a new TLS
// connection and a GET while the job's other pods are being created: the 100–170 ms
// before its first stripe could join). The watch of its pod brings any newer
// directive, as for every later one.
const EnvInitialDirective = "DTNFLOW_INITIAL_DIRECTIVE"

// Labels on every pod, secret and service account the controller creates for a job.
const (
	LabelJob       = "dtnflow.io/job"       // the TransferJob's name
	LabelRole      = "dtnflow.io/role"      // a Role below
	LabelStripe    = "dtnflow.io/stripe"    // stripe index, on sender and receiver pods
	LabelPlanHash  = "dtnflow.io/plan-hash" // TransferPlan.Hash the pod was built for
	LabelManagedBy = "app.kubernetes.io/managed-by"
	ManagedByValue = "dtnflow"
)

// Role is what an agent pod does for its job.
type Role string

const (
	RoleCoordinator Role = "coordinator"
	RoleSender      Role = "sender"
	RoleReceiver    Role = "receiver"
)

// The job secret.
const (
	// SecretKey is the key in the job's Secret that holds the shared secret bytes.
	SecretKey = "secret"
	// SecretMountPath is where agent pods mount the job's Secret; the file is
	// SecretMountPath + "/" + SecretKey.
	SecretMountPath = "/var/run/dtnflow/auth"
	// DataMountPath is where agent pods mount the endpoint's storage root.
	DataMountPath = "/data"
)

// Mode is what the controller asks the coordinator to do.
type Mode string

const (
	// ModeProbe: measure the path memory-to-memory with stripe 0 and report samples,
	// moving nothing of the dataset. The controller no longer sends it (a cold job
	// probes on its own data: ModeTransfer with Probe); coordinators still follow it.
	ModeProbe Mode = "Probe"
	// ModeTransfer: move the dataset with the parameters of the directive; with Probe
	// set, also take the probe's samples as stretches of the transfer.
	ModeTransfer Mode = "Transfer"
	// ModePause: finish the blocks in flight, then stop handing out work.
	ModePause Mode = "Pause"
)

// Directive is the controller's instruction to a job's coordinator. A newer Generation
// replaces an older one; the coordinator ignores a directive whose Generation is not
// newer than the last one it applied.
type Directive struct {
	Generation int64 `json:"generation"`
	Mode       Mode  `json:"mode"`

	// Probe says how to probe: memory to memory in ModeProbe; on the job's own data in
	// ModeTransfer, where each sample sets the streams and buffer it measures for the
	// whole job (StreamsPerStripe and BufferBytes are where the probe starts) and the
	// report says how far the probe is (Report.Probe).
	Probe *ProbeDirective `json:"probe,omitempty"`

	// The plan; set in ModeTransfer.
	StreamsPerStripe int32            `json:"streamsPerStripe,omitempty"`
	BufferBytes      int64            `json:"bufferBytes,omitempty"` // 0: kernel autotuning
	SizeClasses      []SizeClassParam `json:"sizeClasses,omitempty"`
	// MaxBitsPerSecond caps the aggregate rate of the job over all stripes (0: none).
	MaxBitsPerSecond int64 `json:"maxBitsPerSecond,omitempty"`
	// Stripes is the number of stripes the controller runs; the coordinator uses it to
	// size its leases, not to start anything.
	Stripes int32 `json:"stripes,omitempty"`
	// HelperStripes is how many stripes the probe stripe keeps running besides itself
	// (v1alpha1.TransferPlan.ProbeHelperStripes); 0: its probe's helpers leave.
	HelperStripes int32 `json:"helperStripes,omitempty"`
	// Scheduler is how the size classes share each stripe's channels while the job
	// runs (Arslan & Kosar): SC (one class at a time, each with its own concurrency), MC
	// (every class at once, a finished class's channels handed on) or ProMC (MC, and a
	// channel moved from a fast class to a slow one every period the imbalance lasts).
	// Empty: ProMC when the classes carry channels, otherwise none.
	Scheduler string `json:"scheduler,omitempty"`
}

// ProbeDirective says how to probe.
type ProbeDirective struct {
	// MaxStreams bounds the exponential sampling 1, 2, 4, ... (ExpSelection).
	MaxStreams int32 `json:"maxStreams"`
	// BufferBytes lists socket buffer sizes to sample with one stream before the
	// stream sampling (buffer first, streams second); empty means autotuning only.
	BufferBytes []int64 `json:"bufferBytes,omitempty"`
	// SampleSeconds is how long each sample runs.
	SampleSeconds int32 `json:"sampleSeconds"`
	// Known are samples a fresh PathProfile already holds (one stripe each, at the
	// buffer the probe keeps): the probe continues from them instead of starting over.
	// The stepper counts them as taken, so no stream count of theirs is measured again,
	// and the rule that stops a probe the dataset left cannot repay
	// (coord.ProbeOutlasts) applies before the first sample of the job's own: a job
	// too small to repay one more sample takes none and is planned from the profile.
	// They are not the job's samples and are never reported as such.
	Known []Sample `json:"known,omitempty"`
	// MaxStripes, when > 1, adds a stripe stage to a probe on the job's data: once the
	// streams are sampled, the stripes are doubled (1, 2, 4, … up to MaxStripes, while
	// a doubling pays) at the streams and buffer the plan would choose, the probe
	// stripe running the extra stripes itself (wire.JobConfig.SampleStripes); the
	// samples' Stripes say how many ran, and the plan adds stripes only as far as such
	// a sample showed them paying.
	MaxStripes int32 `json:"maxStripes,omitempty"`
	// MaxConcurrency is maxCC, the most files in flight per stripe (the job's
	// limits.maxConcurrency or the planner's default), for the size classes a dataset
	// of small files is given from the probe's first sample, before the plan.
	MaxConcurrency int32 `json:"maxConcurrency,omitempty"`
}

// SizeClassParam is the per-size-class tuning (Arslan & Kosar, Algorithm 1).
type SizeClassParam struct {
	Class string `json:"class"` // Small, Medium, Large or Huge
	// MaxBytes is the largest file of the class (the class's upper threshold); a file
	// belongs to the first class whose MaxBytes it does not exceed. 0 means no bound.
	MaxBytes    int64 `json:"maxBytes,omitempty"`
	Pipelining  int32 `json:"pipelining"`
	Parallelism int32 `json:"parallelism"`
	Concurrency int32 `json:"concurrency"`
	Channels    int32 `json:"channels,omitempty"`
}

// Phase is where a coordinator is.
type Phase string

const (
	PhaseStarting     Phase = "Starting"     // listing the dataset, waiting for stripes
	PhaseProbing      Phase = "Probing"      // running probe samples
	PhaseProbed       Phase = "Probed"       // samples complete; waiting for a transfer directive
	PhaseTransferring Phase = "Transferring" // moving data
	PhasePaused       Phase = "Paused"
	PhaseComplete     Phase = "Complete" // every file at the destination and verified
	// PhasePartiallyComplete: every file that could be read at the source is at the
	// destination and verified, and the FilesSkipped others were skipped (a job run
	// with SourceErrors Skip); never Complete.
	PhasePartiallyComplete Phase = "PartiallyComplete"
	PhaseFailed            Phase = "Failed" // cannot go on; Error says why
)

// Finished says the coordinator's job has ended, whatever its outcome.
func (p Phase) Finished() bool {
	return p == PhaseComplete || p == PhasePartiallyComplete || p == PhaseFailed
}

// Report is what a coordinator publishes about its job.
type Report struct {
	// Generation is the Generation of the last directive applied.
	Generation int64     `json:"generation"`
	Phase      Phase     `json:"phase"`
	Time       time.Time `json:"time"`
	// Error explains PhaseFailed (or a problem that does not stop the job), naming the
	// path involved, for example "destination file exists: data/a.bin (overwrite: Never)".
	Error string `json:"error,omitempty"`

	// Probe is where a probe on the job's own data (a Transfer directive with Probe) is:
	// PhaseProbing while it samples, PhaseProbed once its samples are complete; empty
	// when the directive applied asks for none.
	Probe Phase `json:"probe,omitempty"`
	// FirstByteTime is when the coordinator first handed a unit of the dataset to a
	// stripe connected to its receiver (its bytes leave within milliseconds); nil
	// before. A replaced coordinator starts it again.
	FirstByteTime *time.Time `json:"firstByteTime,omitempty"`

	Dataset *Dataset `json:"dataset,omitempty"`

	// Samples are the probe measurements so far, in the order taken.
	Samples []Sample `json:"samples,omitempty"`

	BytesDone  int64 `json:"bytesDone"`
	BytesTotal int64 `json:"bytesTotal"`
	FilesDone  int64 `json:"filesDone"`
	FilesTotal int64 `json:"filesTotal"`
	// UnitsUnleased is how many units (files and chunks) no stripe holds yet: what a
	// stripe added now could be given. nil before the dataset is listed and from
	// coordinators that do not say.
	UnitsUnleased *int64 `json:"unitsUnleased,omitempty"`
	// FilesFailed counts the files that failed (moving them, or the final check at the
	// destination); FailedFiles lists the first MaxFailedFiles of them with why.
	FilesFailed int64        `json:"filesFailed,omitempty"`
	FailedFiles []FailedFile `json:"failedFiles,omitempty"`
	// FilesSkipped counts the files skipped because they failed at the source (a job
	// run with SourceErrors Skip); SkippedFiles lists the first MaxFailedFiles of them
	// with why.
	FilesSkipped int64        `json:"filesSkipped,omitempty"`
	SkippedFiles []FailedFile `json:"skippedFiles,omitempty"`
	// EntriesNotMoved counts the entries under the source paths that hold no file the
	// job moves — a symlinked directory (not followed), a symlink to nothing, a FIFO, a
	// socket, a device — and so are not at the destination whatever the outcome;
	// NotMoved lists the first MaxFailedFiles of them with why. They do not make a job
	// partial: what a job moves is the regular files it lists (README, "What is not a
	// plain file"); this says which entries that left out.
	EntriesNotMoved int64        `json:"entriesNotMoved,omitempty"`
	NotMoved        []FailedFile `json:"notMoved,omitempty"`
	// BitsPerSecond is the aggregate rate over the last report interval.
	BitsPerSecond int64 `json:"bitsPerSecond"`
	// CoordinatorMillicores is the CPU the coordinator's process used over its latest
	// window of at least a second, in millicores (0: not measured yet): what its pod's
	// request follows, as the stripes' SourceMillicores and DestinationMillicores are
	// what theirs follow.
	CoordinatorMillicores int64 `json:"coordinatorMillicores,omitempty"`

	Stripes []StripeReport `json:"stripes,omitempty"`

	// Scheduler is the scheduler the coordinator runs the size classes with, Classes
	// each class's channels and progress now, ChannelMoves how many channel moves it
	// made this run and RecentMoves the last few (at most MaxRecentMoves), oldest first.
	Scheduler    string        `json:"scheduler,omitempty"`
	Classes      []ClassReport `json:"classes,omitempty"`
	ChannelMoves int64         `json:"channelMoves,omitempty"`
	RecentMoves  []ChannelMove `json:"recentMoves,omitempty"`
}

// MaxRecentMoves bounds Report.RecentMoves.
const MaxRecentMoves = 8

// ClassReport is one size class as the coordinator runs it.
type ClassReport struct {
	Class string `json:"class"`
	// Channels is the class's channels per stripe now (files of the class in flight at
	// once per stripe, each with Pipelining requests queued).
	Channels int32 `json:"channels"`
	// RemainingBytes is what the class has not yet moved and verified.
	RemainingBytes int64 `json:"remainingBytes"`
	// BitsPerSecond is the class's rate over the last reallocation periods.
	BitsPerSecond int64 `json:"bitsPerSecond"`
}

// ChannelMove is channels moved from one size class to another while the job ran.
type ChannelMove struct {
	Time     time.Time `json:"time"`
	From     string    `json:"from"`
	To       string    `json:"to"`
	Channels int32     `json:"channels"`
	Reason   string    `json:"reason"`
}

// MaxFailedFiles bounds the failed files a report lists (and the job's status keeps):
// enough to act on, and a report stays small however many files fail.
const MaxFailedFiles = 20

// FailedFile is a file that failed and why.
type FailedFile struct {
	// Path is the file's path under the job's root, as people read it (fsname.Show:
	// quoted with escapes when it is not valid UTF-8).
	Path string `json:"path"`
	// Error is why, for example "open data/a.bin: permission denied".
	Error string `json:"error"`
}

func (f FailedFile) String() string { return f.Path + ": " + f.Error }

// MaxFailedPath and MaxFailedError bound a FailedFile's path and error as a report
// carries them (the API's FailedFile keeps the same), and MaxError a report's Error. A
// report travels in one annotation of the coordinator's pod, and a pod's annotations
// may hold 256 KiB in all: unbounded, three lists of twenty paths of 4096 bytes, shown
// with escapes (up to four bytes for each), would not fit, the report would never be
// written and the job never heard to end.
const (
	MaxFailedPath  = 1024
	MaxFailedError = 512
	MaxError       = 4096
)

// Bounded is f cut to MaxFailedPath and MaxFailedError (Cut).
func (f FailedFile) Bounded() FailedFile {
	return FailedFile{Path: Cut(f.Path, MaxFailedPath), Error: Cut(f.Error, MaxFailedError)}
}

// Cut cuts s to at most n bytes, ending in "..." when cut, at a rune boundary (a
// string cut inside a UTF-8 sequence would not be valid UTF-8, which the API refuses).
func Cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n - len("...")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

// Dataset summarises the files to move: totals and a histogram by size, enough for the
// planner's size classes without listing every file.
type Dataset struct {
	Files int64 `json:"files"`
	Bytes int64 `json:"bytes"`
	// Buckets[i] counts the files whose size s satisfies 2^(i-1) < s <= 2^i
	// (bucket 0 holds empty and 1-byte files).
	Buckets []SizeBucket `json:"buckets,omitempty"`
}

// SizeBucket is one bucket of the Dataset histogram.
type SizeBucket struct {
	Log2  int32 `json:"log2"`
	Files int64 `json:"files"`
	Bytes int64 `json:"bytes"`
}

// Sample is one probe measurement.
type Sample struct {
	// Stripes is how many stripes ran together, each with Streams streams, and
	// BitsPerSecond their aggregate; 0 (absent, an older coordinator) means one.
	Stripes               int32 `json:"stripes,omitempty"`
	Streams               int32 `json:"streams"`
	BufferBytes           int64 `json:"bufferBytes,omitempty"`
	BitsPerSecond         int64 `json:"bitsPerSecond"`
	SourceMillicores      int64 `json:"sourceMillicores"`
	DestinationMillicores int64 `json:"destinationMillicores"`
	// LossPPM is retransmitted segments per million sent while the sample ran.
	LossPPM int64 `json:"lossPPM,omitempty"`
	// RTTMicros is the smallest round-trip time the sample's streams saw (0: not
	// measured). The probe planner reads the path's RTT from it, so that it stays
	// stateless (optimizer.Prober.RTT).
	RTTMicros int64 `json:"rttMicros,omitempty"`
	// WindowLimitedPercent is the share of the streams' busy time that a window (the
	// receiver's, or the sender's socket buffer), not the path, held them back while
	// the sample ran (0: none, or not measured).
	WindowLimitedPercent int32     `json:"windowLimitedPercent,omitempty"`
	Time                 time.Time `json:"time"`
}

// StripeReport is one stripe as its coordinator sees it.
type StripeReport struct {
	Index         int32 `json:"index"`
	Connected     bool  `json:"connected"`
	Streams       int32 `json:"streams"`
	BitsPerSecond int64 `json:"bitsPerSecond"`
	BytesDone     int64 `json:"bytesDone"`
	RTTMicros     int64 `json:"rttMicros,omitempty"`
	// LossPPM is retransmitted segments per million sent over the last interval.
	LossPPM               int64 `json:"lossPPM,omitempty"`
	SourceMillicores      int64 `json:"sourceMillicores,omitempty"`
	DestinationMillicores int64 `json:"destinationMillicores,omitempty"`
}

// The command lines the controller gives agent pods. The agent's flag parsing must
// accept exactly these; the controller builds them only through these functions.

// CoordinatorArgs are the arguments of `dtnflow-agent coordinate` in a coordinator pod.
// listenPort is the host-network port senders connect to; selfPod is the pod's
// "namespace/name", which the coordinator reads directives from and reports to.
func CoordinatorArgs(listenPort int32, selfPod string, o JobOptions) []string {
	args := []string{"coordinate",
		"--listen", ":" + itoa(int64(listenPort)),
		"--root", DataMountPath,
		"--secret-file", SecretMountPath + "/" + SecretKey,
		"--pod", selfPod,
		"--dest-path", o.DestinationPath,
		"--checksum", o.Checksum,
		"--verify=" + boolString(o.Verify),
		"--overwrite", o.Overwrite,
	}
	if o.InFlight != "" && o.InFlight != "Authenticated" {
		args = append(args, "--in-flight", o.InFlight) // the default needs no flag
	}
	if o.VerifyMode != "" && o.VerifyMode != "ReadBack" {
		args = append(args, "--verify-mode", o.VerifyMode)
	}
	if o.SourceErrors != "" && o.SourceErrors != SourceErrorsFail {
		args = append(args, "--source-errors", o.SourceErrors)
	}
	for _, p := range o.SourcePaths {
		args = append(args, "--path", p)
	}
	return args
}

// SenderArgs are the arguments of `dtnflow-agent send` in the sender pod of stripe k.
func SenderArgs(stripe int32, coordinatorAddr, receiverAddr string) []string {
	return []string{"send",
		"--stripe", itoa(int64(stripe)),
		"--coordinator", coordinatorAddr,
		"--receiver", receiverAddr,
		"--root", DataMountPath,
		"--secret-file", SecretMountPath + "/" + SecretKey,
	}
}

// ReceiverArgs are the arguments of `dtnflow-agent receive` in the receiver pod of
// stripe k. The receiver writes under DataMountPath; the coordinator tells it the
// destination directory and the job's policies over the authenticated connection.
func ReceiverArgs(stripe int32, listenPort int32) []string {
	return ReceiverArgsWith(stripe, listenPort, ReceiverOptions{})
}

// ReceiverOptions are what a site asks of its receivers for another site's job.
type ReceiverOptions struct {
	// Confine is the one directory (relative to the root) the receiver writes under.
	Confine string
	// RequireEncryption refuses sessions that do not encrypt.
	RequireEncryption bool
}

// ReceiverArgsWith are ReceiverArgs with a site's options.
func ReceiverArgsWith(stripe int32, listenPort int32, o ReceiverOptions) []string {
	args := []string{"receive",
		"--stripe", itoa(int64(stripe)),
		"--listen", ":" + itoa(int64(listenPort)),
		"--root", DataMountPath,
		"--secret-file", SecretMountPath + "/" + SecretKey,
	}
	if o.Confine != "" {
		args = append(args, "--confine", o.Confine)
	}
	if o.RequireEncryption {
		args = append(args, "--require-encryption")
	}
	return args
}

// JobOptions are the parts of a TransferJob's spec the coordinator needs.
type JobOptions struct {
	SourcePaths     []string
	DestinationPath string // "" is the destination root
	Checksum        string // BLAKE3, SHA256, SHA512 or MD5
	Verify          bool
	Overwrite       string // Never, IfDifferent or Always
	InFlight        string // Authenticated (default, also "") or Checksum
	VerifyMode      string // ReadBack (default, also "") or OnArrival
	SourceErrors    string // SourceErrorsFail (default, also "") or SourceErrorsSkip
}

// What a job does with a file that fails at its source (it cannot be read, vanished, or
// changed since it was listed or while it was read).
const (
	// SourceErrorsFail fails the job, naming the file.
	SourceErrorsFail = "Fail"
	// SourceErrorsSkip skips the file and lists it (Report.SkippedFiles); the job goes on
	// and ends PartiallyComplete, not Complete.
	SourceErrorsSkip = "Skip"
)

func boolString(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func itoa(v int64) string { return strconv.FormatInt(v, 10) }

// LeastRTT is the smallest round-trip time the samples saw (TCP's min_rtt of their
// streams): the path's own, with the least queue; 0 when none says.
func LeastRTT(samples []Sample) time.Duration {
	var rtt time.Duration
	for _, s := range samples {
		if d := time.Duration(s.RTTMicros) * time.Microsecond; d > 0 && (rtt == 0 || d < rtt) {
			rtt = d
		}
	}
	return rtt
}
