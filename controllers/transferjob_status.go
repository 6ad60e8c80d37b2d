package controllers

import (
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/planning"
	"github.com/dtnflow/dtnflow/optimizer"
)

// Small pure functions that derive a TransferJob's status from what was observed; each
// has its own table test. The reconciler calls them; none reads or writes the API.

// maxReplans is how many re-plans status.replans keeps (the API's bound).
const maxReplans = 32

// maxSamples is how many probe samples status.samples keeps (the API's bound).
const maxSamples = 64

// setCondition sets a condition of the job's status, keeping its transition time when
// its status did not change.
func setCondition(st *dtnflowv1alpha1.TransferJobStatus, generation int64, now metav1.Time, typ string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: typ, Status: status, Reason: reason, Message: message,
		ObservedGeneration: generation, LastTransitionTime: now,
	})
}

// clearCondition sets a condition to False, when it exists or when it is one whose False
// says something (a job that never probed has no Probing condition to clear).
func clearCondition(st *dtnflowv1alpha1.TransferJobStatus, generation int64, now metav1.Time, typ, reason, message string) {
	if meta.FindStatusCondition(st.Conditions, typ) == nil {
		return
	}
	setCondition(st, generation, now, typ, metav1.ConditionFalse, reason, message)
}

// stateOf summarises the conditions in one word for `kubectl get`.
func stateOf(conditions []metav1.Condition) dtnflowv1alpha1.TransferState {
	is := func(t string) bool { return meta.IsStatusConditionTrue(conditions, t) }
	switch {
	case is(dtnflowv1alpha1.ConditionFailed):
		return dtnflowv1alpha1.StateFailed
	case is(dtnflowv1alpha1.ConditionPartiallyComplete):
		return dtnflowv1alpha1.StatePartiallyComplete
	case is(dtnflowv1alpha1.ConditionComplete):
		return dtnflowv1alpha1.StateComplete
	case is(dtnflowv1alpha1.ConditionSuspended):
		return dtnflowv1alpha1.StateSuspended
	case is(dtnflowv1alpha1.ConditionQueued):
		return dtnflowv1alpha1.StateQueued
	case is(dtnflowv1alpha1.ConditionTransferring):
		return dtnflowv1alpha1.StateTransferring
	case is(dtnflowv1alpha1.ConditionProbing):
		return dtnflowv1alpha1.StateProbing
	}
	return dtnflowv1alpha1.StatePending
}

// finished says whether the job has ended: complete, partially complete or failed.
func finished(st *dtnflowv1alpha1.TransferJobStatus) bool {
	return meta.IsStatusConditionTrue(st.Conditions, dtnflowv1alpha1.ConditionComplete) ||
		meta.IsStatusConditionTrue(st.Conditions, dtnflowv1alpha1.ConditionPartiallyComplete) ||
		meta.IsStatusConditionTrue(st.Conditions, dtnflowv1alpha1.ConditionFailed)
}

// resultOf is how a finished job (or run) ended.
func resultOf(st *dtnflowv1alpha1.TransferJobStatus) dtnflowv1alpha1.RunResult {
	switch {
	case meta.IsStatusConditionTrue(st.Conditions, dtnflowv1alpha1.ConditionFailed):
		return dtnflowv1alpha1.RunFailed
	case meta.IsStatusConditionTrue(st.Conditions, dtnflowv1alpha1.ConditionPartiallyComplete):
		return dtnflowv1alpha1.RunPartiallyComplete
	}
	return dtnflowv1alpha1.RunComplete
}

// progressFrom is the job's progress after a report: totals and counts from the report,
// the rate of the latest interval, the average since the job started and the ETA at
// the current rate. Without a report (a coordinator replaced, a suspended job) the
// previous progress stands with no current rate.
func progressFrom(prev *dtnflowv1alpha1.TransferProgress, rep *contract.Report, start *metav1.Time, now time.Time) *dtnflowv1alpha1.TransferProgress {
	p := dtnflowv1alpha1.TransferProgress{}
	if prev != nil {
		p = *prev.DeepCopy()
	}
	if rep == nil {
		p.CurrentBitsPerSecond = 0
	} else {
		// A replaced coordinator counts from its receivers' journals and may report
		// less for a moment than was already verified; verified bytes never go back.
		p.BytesDone = max(p.BytesDone, rep.BytesDone)
		p.FilesDone = max(p.FilesDone, rep.FilesDone)
		p.FilesFailed = max(p.FilesFailed, rep.FilesFailed)
		p.FilesSkipped = max(p.FilesSkipped, rep.FilesSkipped)
		p.EntriesNotMoved = max(p.EntriesNotMoved, rep.EntriesNotMoved)
		if rep.BytesTotal > 0 || rep.FilesTotal > 0 {
			p.BytesTotal, p.FilesTotal = rep.BytesTotal, rep.FilesTotal
		}
		p.CurrentBitsPerSecond = max(rep.BitsPerSecond, 0)
		if !rep.Time.IsZero() {
			t := apiTime(rep.Time)
			p.LastUpdateTime = &t
		}
	}
	p.Percent = percent(p.BytesDone, p.BytesTotal)
	if start != nil && now.After(start.Time) {
		p.AverageBitsPerSecond = int64(float64(p.BytesDone) * 8 / now.Sub(start.Time).Seconds())
	}
	p.Rate = formatRate(p.CurrentBitsPerSecond)
	p.ETASeconds, p.ETA = eta(p.BytesTotal-p.BytesDone, p.CurrentBitsPerSecond)
	return &p
}

// channelStatusFrom is status.channels after a report: the coordinator's scheduler,
// its classes' channels and progress and its moves, as it reports them; without a
// report, or with one that runs no classes yet, the previous status stands.
func channelStatusFrom(prev *dtnflowv1alpha1.ChannelStatus, rep *contract.Report) *dtnflowv1alpha1.ChannelStatus {
	if rep == nil || (len(rep.Classes) == 0 && rep.ChannelMoves == 0) {
		return prev
	}
	out := &dtnflowv1alpha1.ChannelStatus{Scheduler: dtnflowv1alpha1.Scheduler(rep.Scheduler), Moves: max(rep.ChannelMoves, 0)}
	seen := map[string]bool{}
	for _, c := range rep.Classes {
		if !knownClass(c.Class) || seen[c.Class] || len(out.Classes) == maxStatusClasses {
			continue
		}
		seen[c.Class] = true
		out.Classes = append(out.Classes, dtnflowv1alpha1.ClassChannels{Class: dtnflowv1alpha1.SizeClass(c.Class), Channels: max(c.Channels, 0),
			RemainingBytes: max(c.RemainingBytes, 0), BitsPerSecond: max(c.BitsPerSecond, 0)})
	}
	moves := rep.RecentMoves
	if len(moves) > maxStatusMoves {
		moves = moves[len(moves)-maxStatusMoves:]
	}
	for _, m := range moves {
		if !knownClass(m.From) || !knownClass(m.To) || m.Channels < 1 {
			continue
		}
		out.RecentMoves = append(out.RecentMoves, dtnflowv1alpha1.ChannelMove{Time: apiTime(m.Time), From: dtnflowv1alpha1.SizeClass(m.From),
			To: dtnflowv1alpha1.SizeClass(m.To), Channels: m.Channels, Reason: truncateString(m.Reason, maxMoveReason)})
	}
	switch out.Scheduler {
	case dtnflowv1alpha1.SchedulerSingleChunk, dtnflowv1alpha1.SchedulerMultiChunk, dtnflowv1alpha1.SchedulerProActiveMultiChunk:
	default:
		out.Scheduler = "" // static classes (Fixed mode) or an unknown word
	}
	return out
}

// The API's bounds on status.channels.
const (
	maxStatusClasses = 4
	maxStatusMoves   = 8
	maxMoveReason    = 256
)

func knownClass(c string) bool {
	switch dtnflowv1alpha1.SizeClass(c) {
	case dtnflowv1alpha1.SizeClassSmall, dtnflowv1alpha1.SizeClassMedium, dtnflowv1alpha1.SizeClassLarge, dtnflowv1alpha1.SizeClassHuge:
		return true
	}
	return false
}

// truncateString cuts s to at most n bytes at a rune boundary.
func truncateString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// percent is done as a percentage of total, rounded down; 100 only when done.
func percent(done, total int64) int32 {
	switch {
	case total <= 0:
		return 0
	case done >= total:
		return 100
	}
	return int32(float64(done) * 100 / float64(total))
}

// formatRate writes bits per second for people, for example "941 Mbit/s".
func formatRate(bps int64) string { return optimizer.FormatBitsPerSecond(float64(bps)) }

// eta is the time left to move remaining bytes at bps, in seconds and for people
// ("3m20s"); nil and "" when the rate is zero and nothing can be promised.
func eta(remainingBytes, bps int64) (*int64, string) {
	if remainingBytes <= 0 {
		zero := int64(0)
		return &zero, "0s"
	}
	if bps <= 0 {
		return nil, ""
	}
	secs := int64(float64(remainingBytes) * 8 / float64(bps))
	if float64(remainingBytes)*8/float64(bps) > float64(secs) {
		secs++ // round up: an ETA that promises less than it takes is worse
	}
	return &secs, (time.Duration(secs) * time.Second).String()
}

// appendReplan records a change of plan, keeping the newest maxReplans.
func appendReplan(list []dtnflowv1alpha1.Replan, r dtnflowv1alpha1.Replan) []dtnflowv1alpha1.Replan {
	list = append(list, r)
	if len(list) > maxReplans {
		list = append([]dtnflowv1alpha1.Replan(nil), list[len(list)-maxReplans:]...)
	}
	return list
}

// shapeOf is the part of a plan a re-plan changes.
func shapeOf(plan *dtnflowv1alpha1.TransferPlan) dtnflowv1alpha1.PlanShape {
	if plan == nil {
		return dtnflowv1alpha1.PlanShape{}
	}
	return dtnflowv1alpha1.PlanShape{
		Nodes:            int32(len(plan.SourceNodes)),
		Stripes:          stripeCount(plan),
		StreamsPerStripe: plan.StreamsPerStripe,
	}
}

// stripeCount is the number of stripes of a plan: source nodes × stripes per node.
func stripeCount(plan *dtnflowv1alpha1.TransferPlan) int32 {
	if plan == nil {
		return 0
	}
	return int32(len(plan.SourceNodes)) * plan.StripesPerNode
}

// samplesFromReport merges the report's probe samples into the job's, oldest first,
// keeping the newest maxSamples; a sample already recorded (same time, streams and
// buffer) is not added twice.
func samplesFromReport(prev []dtnflowv1alpha1.ProbeSample, rep []contract.Sample) []dtnflowv1alpha1.ProbeSample {
	type key struct {
		t                int64
		stripes, streams int32
		buffer           int64
	}
	seen := map[key]bool{}
	out := append([]dtnflowv1alpha1.ProbeSample(nil), prev...)
	for _, s := range prev {
		var t int64
		if s.Time != nil {
			t = s.Time.Unix()
		}
		seen[key{t, max(s.Stripes, 1), s.Streams, s.BufferBytes}] = true
	}
	for _, s := range rep {
		k := key{s.Time.Unix(), max(s.Stripes, 1), s.Streams, s.BufferBytes}
		if seen[k] || s.Streams < 1 || s.BitsPerSecond < 0 {
			continue
		}
		seen[k] = true
		// the one conversion of a sample's figures (a copy of them here once lost the
		// window share); the time to the second
		p := planning.ProbeSampleFromContract(s)
		t := apiTime(s.Time)
		p.Time = &t
		out = append(out, p)
	}
	if len(out) > maxSamples {
		out = out[len(out)-maxSamples:]
	}
	return out
}

// millisecondsSince is t − from in whole milliseconds, 0 when t is earlier (clocks of
// two machines, or a creation time kept to the second).
func millisecondsSince(from, t time.Time) *int64 {
	ms := max(t.Sub(from).Milliseconds(), 0)
	return &ms
}

// describeShape writes a plan shape for people.
func describeShape(s dtnflowv1alpha1.PlanShape) string {
	return fmt.Sprintf("%d node(s) × %d stripe(s) × %d stream(s)", s.Nodes, s.Stripes, s.StreamsPerStripe)
}

// unionFiles adds a report's list of files (failed, skipped at the source, not moved)
// to the one the status keeps: a replaced coordinator starts its lists again, so the
// union by path, in the order first seen, bounded like the API field, each text cut to
// the field's length.
func unionFiles(prev []dtnflowv1alpha1.FailedFile, files []contract.FailedFile) []dtnflowv1alpha1.FailedFile {
	if len(files) == 0 {
		return prev
	}
	out := slices.Clone(prev)
	for _, f := range files {
		if len(out) >= contract.MaxFailedFiles {
			break
		}
		b := f.Bounded()
		ff := dtnflowv1alpha1.FailedFile{Path: b.Path, Error: b.Error}
		if !slices.ContainsFunc(out, func(o dtnflowv1alpha1.FailedFile) bool { return o.Path == ff.Path }) {
			out = append(out, ff)
		}
	}
	return out
}

// partialMessage says how many files a partially complete job skipped at the source,
// naming the first.
func partialMessage(prog *dtnflowv1alpha1.TransferProgress, skipped []dtnflowv1alpha1.FailedFile) string {
	var n int64
	if prog != nil {
		n = prog.FilesSkipped
	}
	return countedList(n, skipped, "%d files skipped at the source (spec.sourceErrors: Skip)", "status.skippedFiles")
}

// notMovedMessage says how many source entries a finished job did not move because
// they are not files, naming the first; "" when there are none.
func notMovedMessage(prog *dtnflowv1alpha1.TransferProgress, notMoved []dtnflowv1alpha1.FailedFile) string {
	var n int64
	if prog != nil {
		n = prog.EntriesNotMoved
	}
	if n == 0 && len(notMoved) == 0 {
		return ""
	}
	return countedList(n, notMoved, "%d entries at the source are not files and were not moved", "status.notMoved")
}

// countedList says how many (count, or the list's length when more) with what (a
// format of the number), names the first listed and, when it lists more, the field
// that lists them.
func countedList(count int64, list []dtnflowv1alpha1.FailedFile, what, field string) string {
	msg := fmt.Sprintf(what, max(count, int64(len(list))))
	if len(list) > 0 {
		msg += fmt.Sprintf(", the first %s: %s", list[0].Path, list[0].Error)
	}
	if len(list) > 1 {
		msg += "; " + field + " lists them"
	}
	return msg
}
