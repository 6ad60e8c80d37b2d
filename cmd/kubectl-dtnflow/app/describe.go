package app

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/internal/progress"
	"github.com/dtnflow/dtnflow/optimizer"
)

func describeCommand() *command {
	return &command{
		name: "describe", short: "plan, fitted model, predicted vs achieved, re-plans, samples, events", args: "JOB",
		summary: "Show a job in full: what it moves, its plan, the fitted model, predicted against achieved,\n" +
			"every re-plan with its reason, the probe samples, stripes, conditions and events.",
		run: func(ctx context.Context, o *Options, args []string) error {
			name, err := exactlyOneJob(args)
			if err != nil {
				return err
			}
			if err := o.complete(); err != nil {
				return err
			}
			job, err := o.getJob(ctx, name)
			if err != nil {
				return err
			}
			events, evErr := o.jobEvents(ctx, job)
			describe(o.Out, job, events, evErr, o.Clock.Now())
			return nil
		},
	}
}

// jobEvents are the Events about the job, oldest first.
func (o *Options) jobEvents(ctx context.Context, job *dtnflowv1alpha1.TransferJob) ([]eventsv1.Event, error) {
	var list eventsv1.EventList
	if err := o.client.List(ctx, &list, client.InNamespace(job.Namespace)); err != nil {
		return nil, err
	}
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.UID == job.UID {
			out = append(out, e)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return eventTime(&out[i]).Before(eventTime(&out[j])) })
	return out, nil
}

func eventTime(e *eventsv1.Event) time.Time {
	switch {
	case e.Series != nil:
		return e.Series.LastObservedTime.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	case !e.DeprecatedLastTimestamp.IsZero():
		return e.DeprecatedLastTimestamp.Time
	}
	return e.CreationTimestamp.Time
}

func rate(bps int64) string { return optimizer.FormatBitsPerSecond(float64(bps)) }

// describe writes everything about a job for people.
func describe(w io.Writer, job *dtnflowv1alpha1.TransferJob, events []eventsv1.Event, evErr error, now time.Time) {
	st := &job.Status
	field := func(name, format string, args ...any) {
		fmt.Fprintf(w, "%-14s "+format+"\n", append([]any{name + ":"}, args...)...)
	}
	field("Name", "%s", job.Name)
	field("Namespace", "%s", job.Namespace)
	field("State", "%s", stateOf(job))
	for _, t := range []string{dtnflowv1alpha1.ConditionFailed, dtnflowv1alpha1.ConditionPartiallyComplete, dtnflowv1alpha1.ConditionStalled, dtnflowv1alpha1.ConditionComplete} {
		if c := condition(job, t); c != nil && c.Status == "True" {
			field("Because", "%s: %s", c.Reason, c.Message)
			break
		}
	}
	paths := make([]string, len(job.Spec.Source.Paths))
	for i, p := range job.Spec.Source.Paths {
		paths[i] = string(p)
	}
	field("Source", "%s: %s", job.Spec.Source.Endpoint, strings.Join(paths, ", "))
	dst := string(job.Spec.Destination.Path)
	if dst == "" {
		dst = "(storage root)"
	}
	field("Destination", "%s: %s", job.Spec.Destination.Endpoint, dst)
	field("Tuning", "%s", describeTuning(job.Spec.Tuning))
	field("Progress", "%s", progress.Line(snapshotOf(job), barWidth))
	if st.StartTime != nil {
		field("Started", "%s (%s ago)", st.StartTime.UTC().Format(time.RFC3339), age(now, st.StartTime.Time))
	}
	if st.CompletionTime != nil {
		field("Finished", "%s", st.CompletionTime.UTC().Format(time.RFC3339))
		if st.StartTime != nil {
			field("Took", "%s", progress.Duration(st.CompletionTime.Sub(st.StartTime.Time)))
		}
	}
	if trig := job.Spec.Trigger; trig != nil {
		var parts []string
		if trig.Schedule != "" {
			parts = append(parts, fmt.Sprintf("schedule %q", trig.Schedule))
		}
		if trig.Manual != "" {
			parts = append(parts, fmt.Sprintf("manual %q", trig.Manual))
		}
		field("Trigger", "%s", strings.Join(parts, ", "))
		run := fmt.Sprintf("%d (%s)", st.Run, st.RunTrigger)
		if st.LastRunTime != nil {
			run += fmt.Sprintf(", started %s", st.LastRunTime.UTC().Format(time.RFC3339))
		}
		field("Run", "%s", run)
		if st.NextRunTime != nil {
			field("Next run", "%s", st.NextRunTime.UTC().Format(time.RFC3339))
		}
		if st.MissedRuns > 0 {
			field("Missed runs", "%d (a scheduled time that found the previous run still going)", st.MissedRuns)
		}
	}
	if st.AgentFailures > 0 {
		field("Agent failures", "%d of spec.backoffLimit %d", st.AgentFailures, backoffLimitOf(job))
	}

	fmt.Fprintln(w)
	describePlanSection(w, job)
	describeSamples(w, st.Samples)
	describeRuns(w, st.Runs)
	describeReplans(w, st.Replans, now)
	describeFailedFiles(w, st)
	describeStripes(w, st.Stripes)
	describeConditions(w, st.Conditions, now)
	describeEvents(w, events, evErr, now)
}

// describeFailedFiles lists the files that failed in this run, those skipped at the
// source and the source entries that are not files the job moves, with why.
func describeFailedFiles(w io.Writer, st *dtnflowv1alpha1.TransferJobStatus) {
	var failed, skipped, notMoved int64
	if st.Progress != nil {
		failed, skipped, notMoved = st.Progress.FilesFailed, st.Progress.FilesSkipped, st.Progress.EntriesNotMoved
	}
	describeFileList(w, "Failed files", st.FailedFiles, failed)
	describeFileList(w, "Skipped at the source", st.SkippedFiles, skipped)
	describeFileList(w, "Not moved (not files)", st.NotMoved, notMoved)
}

func describeFileList(w io.Writer, title string, files []dtnflowv1alpha1.FailedFile, count int64) {
	if len(files) == 0 {
		return
	}
	total := max(int64(len(files)), count)
	fmt.Fprintf(w, "%s (%d", title, total)
	if total > int64(len(files)) {
		fmt.Fprintf(w, "; the first %d", len(files))
	}
	fmt.Fprintln(w, "):")
	for _, f := range files {
		fmt.Fprintf(w, "  %s: %s\n", f.Path, f.Error)
	}
}

func backoffLimitOf(job *dtnflowv1alpha1.TransferJob) int32 {
	if job.Spec.BackoffLimit != nil {
		return *job.Spec.BackoffLimit
	}
	return 6
}

func describeTuning(t dtnflowv1alpha1.TransferTuning) string {
	mode := string(t.Mode)
	if mode == "" {
		mode = string(dtnflowv1alpha1.TuningAuto)
	}
	var parts []string
	if f := t.Fixed; f != nil {
		parts = append(parts, fmt.Sprintf("%d node(s) × %d stripe(s) × %d stream(s), concurrency %d, pipelining %d", f.Nodes, f.StripesPerNode, f.StreamsPerStripe, f.Concurrency, f.Pipelining))
	}
	if l := t.Limits; l != nil {
		for _, b := range []struct {
			name string
			v    *int32
		}{{"maxNodes", l.MaxNodes}, {"maxStripesPerNode", l.MaxStripesPerNode}, {"maxStreamsPerStripe", l.MaxStreamsPerStripe}, {"maxConcurrency", l.MaxConcurrency}} {
			if b.v != nil {
				parts = append(parts, fmt.Sprintf("%s %d", b.name, *b.v))
			}
		}
		if l.MaxBitsPerSecond != nil {
			parts = append(parts, "at most "+rate(*l.MaxBitsPerSecond))
		}
	}
	if len(parts) == 0 {
		return mode
	}
	return mode + "; " + strings.Join(parts, ", ")
}

func describePlanSection(w io.Writer, job *dtnflowv1alpha1.TransferJob) {
	plan := job.Status.Plan
	fmt.Fprintln(w, "Plan:")
	if plan == nil {
		fmt.Fprintln(w, "  (none yet)")
		fmt.Fprintln(w)
		return
	}
	stripes := int32(len(plan.SourceNodes)) * plan.StripesPerNode
	buffer := "kernel autotuning"
	if plan.BufferBytes > 0 {
		buffer = progress.Bytes(plan.BufferBytes)
	}
	fmt.Fprintf(w, "  Shape:        %d node(s) × %d stripe(s) per node (%d stripes) × %d stream(s), buffer %s\n",
		len(plan.SourceNodes), plan.StripesPerNode, stripes, plan.StreamsPerStripe, buffer)
	if h := plan.ProbeHelperStripes; h > 0 {
		fmt.Fprintf(w, "                and %d stripe(s) the probe stripe runs besides its own to the end\n", h)
	}
	dstNodes := strings.Join(plan.DestinationNodes, ", ")
	if dstNodes == "" {
		dstNodes = "(external receiver)"
	}
	fmt.Fprintf(w, "  Nodes:        %s → %s\n", strings.Join(plan.SourceNodes, ", "), dstNodes)
	if plan.CoordinatorCPUMillicores > 0 {
		fmt.Fprintf(w, "  CPU:          %dm per sender, %dm per receiver, %dm for the coordinator\n", plan.SourceCPUMillicores, plan.DestinationCPUMillicores, plan.CoordinatorCPUMillicores)
	} else {
		fmt.Fprintf(w, "  CPU:          %dm per sender, %dm per receiver\n", plan.SourceCPUMillicores, plan.DestinationCPUMillicores)
	}
	if plan.PredictedBitsPerSecond > 0 {
		bound := ""
		if plan.BindingResource != "" {
			bound = ", bound by " + string(plan.BindingResource)
		}
		fmt.Fprintf(w, "  Predicted:    %s%s\n", rate(plan.PredictedBitsPerSecond), bound)
	}
	if plan.PathBitsPerSecond > 0 {
		fmt.Fprintf(w, "  Path carries: %s as far as the samples show\n", rate(plan.PathBitsPerSecond))
	}
	fmt.Fprintf(w, "  Achieved:     %s\n", predictedVsAchieved(job))
	if m := plan.Model; m != nil {
		coeffs := fmt.Sprintf("a′=%s b′=%s", m.A, m.B)
		if m.C != "" {
			coeffs += " c′=" + string(m.C)
		}
		fmt.Fprintf(w, "  Model:        %s (%s): %s per stripe at %d stream(s), fit error %s\n", m.Name, coeffs, rate(m.PeakBitsPerSecond), m.OptimalStreams, rate(m.FitErrorBitsPerSecond))
		if m.Reason != "" {
			fmt.Fprintf(w, "                %s\n", m.Reason)
		}
	} else {
		fmt.Fprintln(w, "  Model:        none (Fixed mode, or no probe)")
	}
	for _, side := range []struct {
		name string
		m    *dtnflowv1alpha1.CPUModel
	}{{"Sender CPU", plan.SourceCPU}, {"Receiver CPU", plan.DestinationCPU}} {
		if side.m != nil {
			fmt.Fprintf(w, "  %-13s %dm + %dm per Gbit/s (%d samples)\n", side.name+":", side.m.InterceptMillicores, side.m.MillicoresPerGbps, side.m.Samples)
		}
	}
	if len(plan.SizeClasses) > 0 {
		fmt.Fprintln(w, "  Size classes:")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "    CLASS\tFILES\tBYTES\tUP TO\tPIPELINING\tPARALLELISM\tCONCURRENCY\tCHANNELS")
		for _, c := range plan.SizeClasses {
			upTo := "-"
			if c.MaxBytes > 0 {
				upTo = progress.Bytes(c.MaxBytes)
			}
			fmt.Fprintf(tw, "    %s\t%d\t%s\t%s\t%d\t%d\t%d\t%d\n", c.Class, c.Files, progress.Bytes(c.Bytes), upTo, c.Pipelining, c.Parallelism, c.Concurrency, c.Channels)
		}
		tw.Flush()
	}
	fmt.Fprintln(w)
}

// predictedVsAchieved compares the plan's prediction with the current and average
// rates.
func predictedVsAchieved(job *dtnflowv1alpha1.TransferJob) string {
	p, plan := job.Status.Progress, job.Status.Plan
	if p == nil {
		return "nothing measured yet"
	}
	pct := func(v int64) string {
		if plan == nil || plan.PredictedBitsPerSecond <= 0 {
			return ""
		}
		return fmt.Sprintf(" (%d%% of predicted)", int(float64(v)*100/float64(plan.PredictedBitsPerSecond)+0.5))
	}
	s := fmt.Sprintf("%s on average%s", rate(p.AverageBitsPerSecond), pct(p.AverageBitsPerSecond))
	if !finished(job) {
		s = fmt.Sprintf("%s now%s, ", rate(p.CurrentBitsPerSecond), pct(p.CurrentBitsPerSecond)) + s
	}
	if n := len(job.Status.RateHistory); n > 0 {
		var peak int64
		for _, r := range job.Status.RateHistory {
			peak = max(peak, r.BitsPerSecond)
		}
		s += fmt.Sprintf(", %s at best over %d report(s)", rate(peak), n)
	}
	return s
}

func describeSamples(w io.Writer, samples []dtnflowv1alpha1.ProbeSample) {
	fmt.Fprintf(w, "Probe samples (%d):\n", len(samples))
	if len(samples) == 0 {
		fmt.Fprintln(w, "  (none)")
		fmt.Fprintln(w)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  STREAMS\tBUFFER\tRATE\tSENDER CPU\tRECEIVER CPU\tLOSS\tTIME")
	for _, s := range samples {
		buffer := "auto"
		if s.BufferBytes > 0 {
			buffer = progress.Bytes(s.BufferBytes)
		}
		at := ""
		if s.Time != nil {
			at = s.Time.UTC().Format(time.TimeOnly)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%dm\t%dm\t%d ppm\t%s\n", s.Streams, buffer, rate(s.BitsPerSecond), s.SourceMillicores, s.DestinationMillicores, s.LossPPM, at)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func shape(s dtnflowv1alpha1.PlanShape) string {
	return fmt.Sprintf("%d×%d×%d", s.Nodes, s.Stripes, s.StreamsPerStripe)
}

func describeReplans(w io.Writer, replans []dtnflowv1alpha1.Replan, now time.Time) {
	fmt.Fprintf(w, "Re-plans (%d; shapes are nodes×stripes×streams):\n", len(replans))
	if len(replans) == 0 {
		fmt.Fprintln(w, "  (none)")
		fmt.Fprintln(w)
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  AGE\tREASON\tFROM\tTO\tMESSAGE")
	for _, r := range replans {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", age(now, r.Time.Time), r.Reason, shape(r.From), shape(r.To), r.Message)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func describeStripes(w io.Writer, stripes []dtnflowv1alpha1.StripeStatus) {
	if len(stripes) == 0 {
		return
	}
	fmt.Fprintf(w, "Stripes (%d):\n", len(stripes))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  NAME\tSTATE\tRATE\tSOURCE NODE\tDESTINATION NODE")
	for _, s := range stripes {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", s.Name, s.State, rate(s.BitsPerSecond), s.SourceNode, s.DestinationNode)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func describeConditions(w io.Writer, conds []metav1.Condition, now time.Time) {
	fmt.Fprintln(w, "Conditions:")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  TYPE\tSTATUS\tREASON\tSINCE\tMESSAGE")
	for _, c := range conds {
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\n", c.Type, c.Status, c.Reason, age(now, c.LastTransitionTime.Time), c.Message)
	}
	tw.Flush()
	fmt.Fprintln(w)
}

func describeEvents(w io.Writer, events []eventsv1.Event, err error, now time.Time) {
	fmt.Fprintln(w, "Events:")
	if err != nil {
		fmt.Fprintf(w, "  (not readable: %v)\n", err)
		return
	}
	if len(events) == 0 {
		fmt.Fprintln(w, "  (none)")
		return
	}
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  AGE\tTYPE\tREASON\tNOTE")
	for i := range events {
		e := &events[i]
		fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\n", age(now, eventTime(e)), e.Type, e.Reason, e.Note)
	}
	tw.Flush()
}

func describeRuns(w io.Writer, runs []dtnflowv1alpha1.TransferRun) {
	if len(runs) == 0 {
		return
	}
	fmt.Fprintf(w, "Runs (the latest %d):\n", len(runs))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  RUN\tTRIGGER\tSTARTED\tTOOK\tRESULT\tFILES\tBYTES\tMESSAGE")
	for _, r := range runs {
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Number, r.Trigger, r.StartTime.UTC().Format(time.RFC3339),
			progress.Duration(r.CompletionTime.Sub(r.StartTime.Time)), r.Result, r.FilesDone, progress.Bytes(r.BytesDone), r.Message)
	}
	tw.Flush()
	fmt.Fprintln(w)
}
