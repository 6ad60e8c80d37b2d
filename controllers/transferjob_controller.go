package controllers

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/metrics"
)

// TransferJobReconciler turns a TransferJob into a probe, a plan, agent pods, measured
// progress and re-plans, and writes what it observed into the job's status — once per
// pass, after acting, with Events after the write.
type TransferJobReconciler struct {
	Client client.Client
	// APIReader reads past the cache: to confirm that a job is gone before its
	// leftovers are swept, and that an agent pod never started before its log is
	// taken as never written.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Clock     clock.PassiveClock
	Planner   Planner
	Pods      AgentPodOptions
	// ReportInterval is how often coordinators are expected to report; a pause waits
	// for the agents at most PauseReports of them before their pods are stopped.
	ReportInterval time.Duration
	// RemotePoll is how often a job with a side at a peer site looks at it when no
	// change there woke it sooner; 0 is defaultRemotePoll.
	RemotePoll time.Duration
	// AgentLogs reads the agents' logs kept when their pods are deleted
	// (transferjob_agentlogs.go); nil keeps none.
	AgentLogs AgentLogSource

	exp   *expectations
	ports *portAllocator
	// remotes reaches peer sites (jobs with spec.source.site or spec.destination.site).
	remotes *remoteClients
	rescale rescaleMemory
	// sharing serializes passes and remembers what they decided for the jobs that
	// share paths and endpoints (sharing.go).
	sharing *sharingLedger
	// authReady holds the UIDs of jobs whose secret and coordinator RBAC were created.
	authReady sync.Map
	// jobSecrets holds the secrets of the jobs this manager made them for (job UID →
	// bytes), which a claim hands to a warm agent; the manager never reads a Secret.
	jobSecrets sync.Map
	// warm holds the keys of the warm agents the pool started (warmpool.go).
	warm *warmKeys
}

// forget drops what the reconciler remembers of a job that is gone.
func (r *TransferJobReconciler) forget(uid types.UID) {
	r.exp.Forget(uid)
	r.rescale.forget(uid)
	r.sharing.forget(uid)
	r.authReady.Delete(uid)
	r.jobSecrets.Delete(uid)
}

// PauseReports is how many report intervals a suspension waits for the coordinator to
// say it paused before the agent pods are stopped anyway.
const PauseReports = 3

// staleCacheRequeue is how soon a pass that waits on the cache tries again: an old pod
// still going, a peer's answer.
const staleCacheRequeue = time.Second

// ownStatusRequeue is how soon a pass that found its own last status write missing
// from the cache tries again. The write's watch event brings the cache up to date
// within milliseconds but starts no pass (the job's events pass the
// GenerationChangedPredicate only for spec changes), so this requeue is what runs the
// pass that was refused. A report arriving just after a status write was held by it:
// with a second's requeue the plan's directive reached a coordinator 1.2 s after its
// probe ended, where it takes 0.1–0.5 s otherwise (local cluster, fourteenth session).
const ownStatusRequeue = 100 * time.Millisecond

// setDefaults fills unset fields and the in-memory helpers; SetupWithManager calls it.
func (r *TransferJobReconciler) setDefaults() {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	if r.ReportInterval <= 0 {
		r.ReportInterval = 10 * time.Second
	}
	if r.RemotePoll <= 0 {
		r.RemotePoll = defaultRemotePoll
	}
	r.exp = newExpectations(r.Clock)
	r.ports = newPortAllocator(r.Clock)
	if r.warm == nil {
		r.warm = newWarmKeys()
	}
	r.rescale = rescaleMemory{states: map[types.UID]any{}}
	r.sharing = newSharingLedger()
}

// +kubebuilder:rbac:groups=dtnflow.io,resources=transferjobs,verbs=get;list;watch;delete
// +kubebuilder:rbac:groups=dtnflow.io,resources=transferjobs/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=dtnflow.io,resources=transferendpoints,verbs=get;list;watch
// +kubebuilder:rbac:groups=dtnflow.io,resources=transferpriorityclasses,verbs=get;list;watch
// +kubebuilder:rbac:groups=dtnflow.io,resources=pathprofiles,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=dtnflow.io,resources=pathprofiles/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch;create;delete;patch
// +kubebuilder:rbac:groups="",resources=pods/resize,verbs=patch
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;create;update;delete
// +kubebuilder:rbac:groups="",resources=secrets;serviceaccounts,verbs=create
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=roles;rolebindings,verbs=create
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile is one pass over a job: read, act, write status once, then record Events.
func (r *TransferJobReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var job dtnflowv1alpha1.TransferJob
	if err := r.Client.Get(ctx, req.NamespacedName, &job); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.sweep(ctx, req.NamespacedName)
		}
		return ctrl.Result{}, err
	}
	if job.DeletionTimestamp != nil {
		return ctrl.Result{}, nil // the garbage collector removes what the job owns
	}
	if r.exp.StatusStale(job.UID, job.ResourceVersion) {
		return ctrl.Result{RequeueAfter: ownStatusRequeue}, nil
	}
	// The controller's logger already carries the job (as "TransferJob", klog.KObj).
	log := ctrl.LoggerFrom(ctx)

	// One pass at a time decides what jobs share, through to its status write.
	r.sharing.pass.Lock()
	p := newPass(&job, r.Clock.Now())
	p.firstSight()
	err := r.reconcile(ctx, p)
	if err == nil {
		p.st.ObservedGeneration = job.Generation
	}
	r.runTriggers(p)
	p.st.State = stateOf(p.st.Conditions)
	setSummaryConditions(p.st, job.Generation, p.now)
	recordRate(job.Status.Progress, p.st)
	p.ended, p.endedAfter, p.endResult = finishedNow(&job.Status, p.st) // before the write replaces job.Status
	r.sharing.record(job.UID, p.st)
	werr := r.writeStatus(ctx, &job, p.st)
	r.sharing.pass.Unlock()
	if werr != nil {
		return ctrl.Result{}, errors.Join(err, werr)
	}
	r.recordEvents(&job, p)
	r.recordMetrics(&job, p)
	if err != nil {
		log.Error(err, "Reconcile failed", "state", p.st.State)
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: p.requeueAfter}, nil
}

// writeStatus writes the status when it changed, with the job's resourceVersion as a
// precondition: the status is computed from the status read, and a write over a newer
// one would lose it.
func (r *TransferJobReconciler) writeStatus(ctx context.Context, job *dtnflowv1alpha1.TransferJob, st *dtnflowv1alpha1.TransferJobStatus) error {
	if equality.Semantic.DeepEqual(job.Status, *st) {
		return nil
	}
	patch := client.MergeFromWithOptions(job.DeepCopy(), client.MergeFromWithOptimisticLock{})
	replaced := job.ResourceVersion
	job.Status = *st
	if err := r.Client.Status().Patch(ctx, job, patch); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("writing the status of TransferJob %s/%s: %w", job.Namespace, job.Name, err)
	}
	if job.ResourceVersion != replaced { // a write that changed nothing leaves the version
		r.exp.StatusWritten(job.UID, replaced)
	}
	return nil
}

// recordEvents records the pass's Events, after its status write.
func (r *TransferJobReconciler) recordEvents(job *dtnflowv1alpha1.TransferJob, p *pass) {
	if r.Recorder == nil {
		return
	}
	for _, e := range p.events {
		r.Recorder.Eventf(job, nil, e.Type, e.Reason, e.Action, "%s", contract.Cut(e.Note, eventNoteLimit))
	}
}

// recordMetrics updates the metrics from what the pass wrote.
func (r *TransferJobReconciler) recordMetrics(job *dtnflowv1alpha1.TransferJob, p *pass) {
	src, dst := job.Spec.Source.Endpoint, job.Spec.Destination.Endpoint
	if p.bytesMoved > 0 {
		metrics.BytesMoved.WithLabelValues(src, dst).Add(float64(p.bytesMoved))
		metrics.JobBytes.WithLabelValues(job.Namespace, job.Name).Add(float64(p.bytesMoved))
	}
	for _, reason := range p.replanReasons {
		metrics.Replans.WithLabelValues(reason).Inc()
	}
	for _, role := range p.failedRoles {
		metrics.AgentFailures.WithLabelValues(role).Inc()
	}
	for _, trigger := range p.runsStarted {
		metrics.RunsStarted.WithLabelValues(trigger).Inc()
	}
	if p.missedRuns > 0 {
		metrics.MissedRuns.Add(float64(p.missedRuns))
	}
	if p.ended {
		metrics.JobDuration.WithLabelValues(p.endResult).Observe(p.endedAfter.Seconds())
	}
	if finished(p.st) {
		metrics.FinishJob(job.Namespace, job.Name)
		return
	}
	if prog, plan := p.st.Progress, p.st.Plan; prog != nil && plan != nil && p.st.State == dtnflowv1alpha1.StateTransferring {
		metrics.JobPredictedRate.WithLabelValues(job.Namespace, job.Name).Set(float64(plan.PredictedBitsPerSecond) / 8)
		if p.newReport && plan.PredictedBitsPerSecond > 0 && prog.CurrentBitsPerSecond > 0 {
			metrics.PredictionRatio.Observe(float64(prog.CurrentBitsPerSecond) / float64(plan.PredictedBitsPerSecond))
		}
	}
}

// finishedNow says whether the pass ended the job (or the run of a recurring job, whose
// record it added), how long it took and with what result.
func finishedNow(before, after *dtnflowv1alpha1.TransferJobStatus) (bool, time.Duration, string) {
	if after.Run > 0 { // a recurring job: the record of a run says when it ended
		n, m := len(after.Runs), len(before.Runs)
		if n == 0 || (m > 0 && after.Runs[n-1].Number == before.Runs[m-1].Number) {
			return false, 0, ""
		}
		r := after.Runs[n-1]
		return true, r.CompletionTime.Sub(r.StartTime.Time), string(r.Result)
	}
	if !finished(after) || finished(before) || keptAfterFinish(after) || after.StartTime == nil || after.CompletionTime == nil {
		return false, 0, ""
	}
	return true, after.CompletionTime.Sub(after.StartTime.Time), string(resultOf(after))
}

// pass is one reconciliation of one job: what it read, the status it is building and
// what it will record after the status write.
type pass struct {
	job *dtnflowv1alpha1.TransferJob
	st  *dtnflowv1alpha1.TransferJobStatus
	now metav1.Time
	// at is now to the clock's precision (now is whole seconds, as the API stores
	// times): the timings are measured with it.
	at  time.Time
	obs *observed
	// share is the job's place among the jobs it shares paths and endpoints with, once
	// the pass has admitted it.
	share *shareView

	events        []jobEvent
	replanReasons []string
	failedRoles   []string
	bytesMoved    int64
	newReport     bool
	runsStarted   []string // triggers of runs started (recurring jobs)
	missedRuns    int64    // scheduled runs skipped
	requeueAfter  time.Duration

	// ended says the pass ended the job (or a run of a recurring one), after how long
	// and with what result.
	ended      bool
	endedAfter time.Duration
	endResult  string
}

type jobEvent struct{ Type, Reason, Action, Note string }

func newPass(job *dtnflowv1alpha1.TransferJob, now time.Time) *pass {
	return &pass{job: job, st: job.Status.DeepCopy(), now: apiTime(now), at: now}
}

// timing records a milestone reached at t in status.timings, once: the field field
// picks, set to the milliseconds from the run's start (never below 0).
func (p *pass) timing(field func(*dtnflowv1alpha1.TransferTimings) **int64, t time.Time) {
	if p.st.Timings == nil {
		p.st.Timings = &dtnflowv1alpha1.TransferTimings{}
	}
	f := field(p.st.Timings)
	if *f == nil {
		*f = millisecondsSince(runStart(p.job.CreationTimestamp.Time, p.st), t)
	}
}

// firstSight records when the manager first saw the job's current run, before any
// milestone: the instant its timings are measured from when it is the better one
// (runStart). A job that has timings already (from a manager that recorded no such
// time) or has finished is left alone.
func (p *pass) firstSight() {
	if p.st.Timings == nil && !finished(p.st) {
		seen := metav1.NewMicroTime(p.at.Truncate(time.Microsecond))
		p.st.Timings = &dtnflowv1alpha1.TransferTimings{FirstSeenTime: &seen}
	}
}

// runStart is the instant a run's timings are measured from: when the manager first saw
// the run, if that was a recurring job's later run or came within the second that the
// creation timestamp (kept to whole seconds) names; else the creation timestamp (the
// manager saw the job late, and the time it waited counts; or it recorded no sight).
func runStart(created time.Time, st *dtnflowv1alpha1.TransferJobStatus) time.Time {
	if st.Timings == nil || st.Timings.FirstSeenTime == nil {
		return created
	}
	seen := st.Timings.FirstSeenTime.Time
	if st.Run > 1 || (!seen.Before(created) && seen.Sub(created) < time.Second) {
		return seen
	}
	return created
}

// apiTime is t as the API stores it: whole seconds, so that a status computed twice
// from the same observations compares equal to the one stored.
func apiTime(t time.Time) metav1.Time { return metav1.NewTime(t.Truncate(time.Second)) }

// eventNoteLimit is the most an Event's note may hold: the API server refuses a longer
// one (NoteLengthLimit), and the Event is lost.
const eventNoteLimit = 1024

// event queues an Event for after the status write.
func (p *pass) event(typ, reason, action, note string) {
	p.events = append(p.events, jobEvent{Type: typ, Reason: reason, Action: action, Note: note})
}

// requeue asks for another pass after d at the latest.
func (p *pass) requeue(d time.Duration) {
	if d <= 0 {
		d = time.Millisecond
	}
	if p.requeueAfter == 0 || d < p.requeueAfter {
		p.requeueAfter = d
	}
}

// condition sets a condition of the status being built.
func (p *pass) condition(typ string, status metav1.ConditionStatus, reason, message string) {
	setCondition(p.st, p.job.Generation, p.now, typ, status, reason, message)
}

// clear sets a condition False if the job has it.
func (p *pass) clear(typ, reason, message string) {
	clearCondition(p.st, p.job.Generation, p.now, typ, reason, message)
}

// rescaleMemory holds the rescale policy's memory per job. It lives only in memory:
// losing it (a restart) costs one settle time and window of measurements before the
// next change, never a wrong one.
type rescaleMemory struct {
	mu     sync.Mutex
	states map[types.UID]any
}

func (m *rescaleMemory) get(uid types.UID) any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.states[uid]
}

func (m *rescaleMemory) set(uid types.UID, s any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.states[uid] = s
}

func (m *rescaleMemory) forget(uid types.UID) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.states, uid)
}

// podKey is a pod's namespace/name, for port reservations.
func podKey(pod *corev1.Pod) string { return pod.Namespace + "/" + pod.Name }
