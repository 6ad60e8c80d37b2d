package controllers

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// The conditions GitOps tools read. kstatus (sigs.k8s.io/cli-utils/pkg/kstatus), which
// Flux's health checks use, calls an object InProgress while status.observedGeneration
// lags metadata.generation or Reconciling is True, Failed when Stalled is True, and
// Current otherwise; Argo CD runs the Lua health check of docs/gitops.md, which reads the
// same three; `kubectl wait --for=condition=Ready` waits for the end of a transfer. They
// are derived, after every pass, from the job's own conditions alone.

// Reasons of Ready, Reconciling and Stalled besides those copied from the job's own
// conditions.
const (
	ReasonPending = "Pending"
)

// blockingReasons are the Planned reasons of a job its endpoints refuse (validateJob's
// blocking problems): nothing the controller does will change them.
var blockingReasons = map[string]bool{
	ReasonEndpointNotFound:      true,
	ReasonNamespaceNotAllowed:   true,
	ReasonDestinationReadOnly:   true,
	ReasonExternalSourceRefused: true,
	// a priority class missing or closed to the job's namespace (issue 13)
	ReasonPriorityClassNotFound:   true,
	ReasonPriorityClassNotAllowed: true,
}

// summary is the value of the three kstatus conditions; an empty ready leaves Ready out.
type summary struct {
	ready, reconciling, stalled metav1.ConditionStatus
	reason, message             string
}

// summarize reads the job's conditions into the kstatus conditions. The first that
// applies wins:
//
//	invalid trigger schedule → Stalled
//	Failed                   → Stalled (kstatus Failed, Argo CD Degraded)
//	PartiallyComplete        → Stalled: ended, files skipped at the source; not Ready,
//	                           as only a verified copy of the whole listing is
//	Complete                 → Ready (Current, Healthy)
//	endpoints refuse the job → Stalled
//	Suspended (agents gone)  → none of them True, Ready left out (Current; Argo CD Suspended)
//	an agent pod refused     → Stalled (an admission policy, a quota)
//	an agent pod unscheduled → Reconciling, with the scheduler's word
//	Queued                   → Reconciling: waiting for room is progress, not a failure
//	anything else            → Reconciling (InProgress, Progressing)
//
// The reason and message are those of the condition that decided, so a reader of Ready
// alone learns why the job is not done.
func summarize(conditions []metav1.Condition) summary {
	find := func(t string) *metav1.Condition { return meta.FindStatusCondition(conditions, t) }
	isTrue := func(t string) bool { return meta.IsStatusConditionTrue(conditions, t) }
	F, T := metav1.ConditionFalse, metav1.ConditionTrue
	from := func(c *metav1.Condition, ready, reconciling, stalled metav1.ConditionStatus) summary {
		return summary{ready: ready, reconciling: reconciling, stalled: stalled, reason: c.Reason, message: c.Message}
	}
	if c := find(dtnflowv1alpha1.ConditionScheduled); c != nil && c.Status == F && c.Reason == ReasonInvalidSchedule {
		return from(c, F, F, T) // a recurring job whose schedule needs fixing
	}
	if isTrue(dtnflowv1alpha1.ConditionFailed) {
		return from(find(dtnflowv1alpha1.ConditionFailed), F, F, T)
	}
	if isTrue(dtnflowv1alpha1.ConditionPartiallyComplete) {
		return from(find(dtnflowv1alpha1.ConditionPartiallyComplete), F, F, T)
	}
	if isTrue(dtnflowv1alpha1.ConditionComplete) {
		return from(find(dtnflowv1alpha1.ConditionComplete), T, F, F)
	}
	if c := find(dtnflowv1alpha1.ConditionPlanned); c != nil && c.Status == F && blockingReasons[c.Reason] {
		return from(c, F, F, T)
	}
	if c := find(dtnflowv1alpha1.ConditionSuspended); c != nil && c.Status == T {
		if c.Reason == ReasonPausing {
			return from(c, F, T, F) // the agents are still finishing their blocks
		}
		// Suspended is where spec.suspend asked the job to be, so kstatus must read it
		// as Current, not as InProgress forever (a Flux health check would time out):
		// kstatus reads a False Ready as InProgress, so Ready is left out until the
		// job resumes, and `kubectl wait --for=condition=Ready` goes on waiting.
		return from(c, "", F, F)
	}
	if c := find(dtnflowv1alpha1.ConditionAgentsScheduled); c != nil && c.Status == F {
		if c.Reason == ReasonPodRefused {
			return from(c, F, F, T) // refused until someone changes a policy, quota or spec
		}
		return from(c, F, T, F) // waiting for a node: say which pod and why
	}
	for _, t := range []string{dtnflowv1alpha1.ConditionQueued, dtnflowv1alpha1.ConditionTransferring, dtnflowv1alpha1.ConditionProbing} {
		if c := find(t); c != nil && c.Status == T {
			return from(c, F, T, F)
		}
	}
	if c := find(dtnflowv1alpha1.ConditionPlanned); c != nil {
		return from(c, F, T, F) // waiting: for the listing, a node, a plan
	}
	return summary{ready: F, reconciling: T, stalled: F, reason: ReasonPending, message: "the job has not started yet"}
}

// setSummaryConditions writes Ready, Reconciling and Stalled from the job's other
// conditions; Reconcile calls it after every pass, just before the status write.
func setSummaryConditions(st *dtnflowv1alpha1.TransferJobStatus, generation int64, now metav1.Time) {
	s := summarize(st.Conditions)
	message := s.message
	if message == "" {
		message = s.reason
	}
	if s.ready == "" {
		meta.RemoveStatusCondition(&st.Conditions, dtnflowv1alpha1.ConditionReady)
	} else {
		setCondition(st, generation, now, dtnflowv1alpha1.ConditionReady, s.ready, s.reason, message)
	}
	setCondition(st, generation, now, dtnflowv1alpha1.ConditionReconciling, s.reconciling, s.reason, message)
	setCondition(st, generation, now, dtnflowv1alpha1.ConditionStalled, s.stalled, s.reason, message)
}
