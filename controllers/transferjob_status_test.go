package controllers

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

func TestStateOf(t *testing.T) {
	c := func(typ string, s metav1.ConditionStatus) metav1.Condition {
		return metav1.Condition{Type: typ, Status: s}
	}
	tests := map[string]struct {
		conds []metav1.Condition
		want  dtnflowv1alpha1.TransferState
	}{
		"new job":                   {nil, dtnflowv1alpha1.StatePending},
		"blocked":                   {[]metav1.Condition{c("Planned", metav1.ConditionFalse)}, dtnflowv1alpha1.StatePending},
		"probing":                   {[]metav1.Condition{c("Probing", metav1.ConditionTrue)}, dtnflowv1alpha1.StateProbing},
		"transferring":              {[]metav1.Condition{c("Probing", metav1.ConditionFalse), c("Transferring", metav1.ConditionTrue)}, dtnflowv1alpha1.StateTransferring},
		"suspended over transfer":   {[]metav1.Condition{c("Transferring", metav1.ConditionTrue), c("Suspended", metav1.ConditionTrue)}, dtnflowv1alpha1.StateSuspended},
		"resumed":                   {[]metav1.Condition{c("Transferring", metav1.ConditionTrue), c("Suspended", metav1.ConditionFalse)}, dtnflowv1alpha1.StateTransferring},
		"complete":                  {[]metav1.Condition{c("Transferring", metav1.ConditionFalse), c("Complete", metav1.ConditionTrue)}, dtnflowv1alpha1.StateComplete},
		"failed wins over all else": {[]metav1.Condition{c("Complete", metav1.ConditionTrue), c("Failed", metav1.ConditionTrue)}, dtnflowv1alpha1.StateFailed},
		"partially complete":        {[]metav1.Condition{c("Transferring", metav1.ConditionFalse), c("PartiallyComplete", metav1.ConditionTrue)}, dtnflowv1alpha1.StatePartiallyComplete},
		"partially complete, never Complete": {[]metav1.Condition{c("Complete", metav1.ConditionTrue), c("PartiallyComplete", metav1.ConditionTrue)},
			dtnflowv1alpha1.StatePartiallyComplete},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := stateOf(tc.conds); got != tc.want {
				t.Errorf("stateOf = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestProgressFrom(t *testing.T) {
	start := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	now := start.Add(100 * time.Second)
	reported := start.Add(99 * time.Second)
	tests := map[string]struct {
		prev *dtnflowv1alpha1.TransferProgress
		rep  *contract.Report
		want dtnflowv1alpha1.TransferProgress
	}{
		"first report": {
			rep: &contract.Report{Time: reported, BytesDone: 1_000_000_000, BytesTotal: 4_000_000_000, FilesDone: 10, FilesTotal: 40, BitsPerSecond: 941_000_000},
			want: dtnflowv1alpha1.TransferProgress{BytesDone: 1_000_000_000, BytesTotal: 4_000_000_000, FilesDone: 10, FilesTotal: 40, Percent: 25,
				CurrentBitsPerSecond: 941_000_000, AverageBitsPerSecond: 80_000_000, Rate: "941 Mbit/s",
				ETASeconds: ptr.To[int64](26), ETA: "26s", LastUpdateTime: &metav1.Time{Time: reported}},
		},
		"ETA for people": {
			rep: &contract.Report{Time: reported, BytesDone: 0, BytesTotal: 25_000_000_000, BitsPerSecond: 1_000_000_000},
			want: dtnflowv1alpha1.TransferProgress{BytesTotal: 25_000_000_000, CurrentBitsPerSecond: 1e9, Rate: "1 Gbit/s",
				ETASeconds: ptr.To[int64](200), ETA: "3m20s", LastUpdateTime: &metav1.Time{Time: reported}},
		},
		"percent rounds down, never 100 before done": {
			rep: &contract.Report{Time: reported, BytesDone: 999, BytesTotal: 1000, BitsPerSecond: 8},
			want: dtnflowv1alpha1.TransferProgress{BytesDone: 999, BytesTotal: 1000, Percent: 99, CurrentBitsPerSecond: 8, AverageBitsPerSecond: 79, Rate: "8 bit/s",
				ETASeconds: ptr.To[int64](1), ETA: "1s", LastUpdateTime: &metav1.Time{Time: reported}},
		},
		"a replaced coordinator reporting less does not move progress back": {
			prev: &dtnflowv1alpha1.TransferProgress{BytesDone: 3000, BytesTotal: 4000, FilesDone: 3, FilesTotal: 4},
			rep:  &contract.Report{Time: reported, BytesDone: 1000, BytesTotal: 4000, FilesDone: 1, FilesTotal: 4, BitsPerSecond: 0},
			want: dtnflowv1alpha1.TransferProgress{BytesDone: 3000, BytesTotal: 4000, FilesDone: 3, FilesTotal: 4, Percent: 75, AverageBitsPerSecond: 240,
				Rate: "0 bit/s", LastUpdateTime: &metav1.Time{Time: reported}},
		},
		"no report (suspended): no current rate, no ETA": {
			prev: &dtnflowv1alpha1.TransferProgress{BytesDone: 500, BytesTotal: 1000, CurrentBitsPerSecond: 1e9, Rate: "1 Gbit/s", ETASeconds: ptr.To[int64](1), ETA: "1s"},
			want: dtnflowv1alpha1.TransferProgress{BytesDone: 500, BytesTotal: 1000, Percent: 50, AverageBitsPerSecond: 40, Rate: "0 bit/s"},
		},
		"done": {
			rep: &contract.Report{Time: reported, BytesDone: 1000, BytesTotal: 1000, FilesDone: 1, FilesTotal: 1},
			want: dtnflowv1alpha1.TransferProgress{BytesDone: 1000, BytesTotal: 1000, FilesDone: 1, FilesTotal: 1, Percent: 100, AverageBitsPerSecond: 80,
				Rate: "0 bit/s", ETASeconds: ptr.To[int64](0), ETA: "0s", LastUpdateTime: &metav1.Time{Time: reported}},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := progressFrom(tc.prev, tc.rep, &start, now)
			if d := cmp.Diff(tc.want, *got); d != "" {
				t.Errorf("progress (-want +got):\n%s", d)
			}
		})
	}
}

func TestAppendReplanKeepsNewest(t *testing.T) {
	var list []dtnflowv1alpha1.Replan
	for i := range 40 {
		list = appendReplan(list, dtnflowv1alpha1.Replan{Reason: "R", To: dtnflowv1alpha1.PlanShape{Stripes: int32(i)}})
	}
	if len(list) != maxReplans || list[0].To.Stripes != 8 || list[len(list)-1].To.Stripes != 39 {
		t.Errorf("kept %d replans from %d to %d", len(list), list[0].To.Stripes, list[len(list)-1].To.Stripes)
	}
}

func TestSamplesFromReport(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	rep := []contract.Sample{
		{Streams: 1, BufferBytes: 4 << 20, BitsPerSecond: 900e6, SourceMillicores: 300, DestinationMillicores: 500, WindowLimitedPercent: 53, Time: t0},
		{Streams: 2, BitsPerSecond: 950e6, Time: t0.Add(5 * time.Second)},
	}
	first := samplesFromReport(nil, rep[:1])
	again := samplesFromReport(first, rep) // the next report repeats the first sample
	if len(first) != 1 || len(again) != 2 || again[1].Streams != 2 || again[0].DestinationMillicores != 500 {
		t.Errorf("samples: %+v then %+v", first, again)
	}
	// every figure the planner reads is kept: the window share decides its fewest streams
	if s := first[0]; s.SourceMillicores != 300 || s.BufferBytes != 4<<20 || s.BitsPerSecond != 900e6 || s.WindowLimitedPercent != 53 || !s.Time.Time.Equal(t0) {
		t.Errorf("samples: %+v then %+v", first, again)
	}
	var many []contract.Sample
	for i := range 70 {
		many = append(many, contract.Sample{Streams: 1, BitsPerSecond: 1, Time: t0.Add(time.Duration(i) * time.Second)})
	}
	if got := samplesFromReport(nil, many); len(got) != maxSamples || !got[0].Time.Time.Equal(t0.Add(6*time.Second)) {
		t.Errorf("kept %d samples from %v", len(got), got[0].Time)
	}
}

func TestStripeState(t *testing.T) {
	pod := func(phase corev1.PodPhase) *corev1.Pod { return &corev1.Pod{Status: corev1.PodStatus{Phase: phase}} }
	tests := map[string]struct {
		pods []*corev1.Pod
		want dtnflowv1alpha1.StripeState
	}{
		"not created yet":   {[]*corev1.Pod{nil, pod(corev1.PodRunning)}, dtnflowv1alpha1.StripePending},
		"scheduling":        {[]*corev1.Pod{pod(corev1.PodPending), pod(corev1.PodRunning)}, dtnflowv1alpha1.StripePending},
		"both running":      {[]*corev1.Pod{pod(corev1.PodRunning), pod(corev1.PodRunning)}, dtnflowv1alpha1.StripeRunning},
		"external receiver": {[]*corev1.Pod{pod(corev1.PodRunning)}, dtnflowv1alpha1.StripeRunning},
		"one failed":        {[]*corev1.Pod{pod(corev1.PodRunning), pod(corev1.PodFailed)}, dtnflowv1alpha1.StripeFailed},
		"sender done first": {[]*corev1.Pod{pod(corev1.PodSucceeded), pod(corev1.PodRunning)}, dtnflowv1alpha1.StripeRunning},
		"both done":         {[]*corev1.Pod{pod(corev1.PodSucceeded), pod(corev1.PodSucceeded)}, dtnflowv1alpha1.StripeSucceeded},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := stripeState(tc.pods); got != tc.want {
				t.Errorf("stripeState = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestPlanHashFollowsTuning(t *testing.T) {
	job := testJob()
	plan := &dtnflowv1alpha1.TransferPlan{SourceNodes: []string{"a1"}, StripesPerNode: 2, StreamsPerStripe: 4}
	stampPlanHash(plan, job)
	if plan.Hash != planHash(plan, job) || len(plan.Hash) != 16 {
		t.Fatalf("stamped hash %q does not verify", plan.Hash)
	}
	job.Spec.Suspend = true
	if plan.Hash != planHash(plan, job) {
		t.Errorf("suspend changed the plan hash")
	}
	job.Spec.Tuning.Limits = &dtnflowv1alpha1.TuningLimits{MaxStripesPerNode: ptr.To[int32](1)}
	if plan.Hash == planHash(plan, job) {
		t.Errorf("a limit change left the plan hash as it was")
	}
}

// TestSamplesFromReportKeepStripes: a sample of several stripes keeps its count (one
// stripe is kept as absent, as the API has it), and a sample of two stripes taken at
// the same second as one of one stripe is another sample.
func TestSamplesFromReportKeepStripes(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	rep := []contract.Sample{
		{Stripes: 1, Streams: 4, BitsPerSecond: 450e6, Time: t0},
		{Stripes: 2, Streams: 4, BitsPerSecond: 880e6, Time: t0},
		{Streams: 8, BitsPerSecond: 455e6, Time: t0.Add(time.Second)}, // an older coordinator: one stripe
	}
	got := samplesFromReport(nil, rep)
	if len(got) != 3 {
		t.Fatalf("%d samples, want 3: %+v", len(got), got)
	}
	for i, want := range []int32{0, 2, 0} {
		if got[i].Stripes != want {
			t.Errorf("sample %d: stripes %d, want %d", i, got[i].Stripes, want)
		}
	}
}

func TestMillisecondsSince(t *testing.T) {
	created := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for name, c := range map[string]struct {
		at   time.Time
		want int64
	}{
		"after":                            {created.Add(2345 * time.Millisecond), 2345},
		"the same instant":                 {created, 0},
		"before (another machine's clock)": {created.Add(-300 * time.Millisecond), 0},
	} {
		if got := *millisecondsSince(created, c.at); got != c.want {
			t.Errorf("%s: %d ms, want %d", name, got, c.want)
		}
	}
}

func TestChannelStatusFrom(t *testing.T) {
	at := time.Date(2026, 11, 24, 22, 0, 0, 0, time.UTC)
	prev := &dtnflowv1alpha1.ChannelStatus{Scheduler: dtnflowv1alpha1.SchedulerMultiChunk, Moves: 1}
	many := make([]contract.ChannelMove, 12)
	for i := range many {
		many[i] = contract.ChannelMove{Time: at.Add(time.Duration(i) * time.Second), From: "Large", To: "Small", Channels: 1, Reason: strings.Repeat("é", 200)}
	}
	tests := map[string]struct {
		prev *dtnflowv1alpha1.ChannelStatus
		rep  *contract.Report
		want *dtnflowv1alpha1.ChannelStatus
	}{
		"no report keeps the status":        {prev, nil, prev},
		"a report without classes keeps it": {prev, &contract.Report{Phase: contract.PhaseTransferring}, prev},
		"classes and moves as reported": {nil, &contract.Report{Scheduler: "ProMC", ChannelMoves: 3,
			Classes:     []contract.ClassReport{{Class: "Small", Channels: 5, RemainingBytes: 100, BitsPerSecond: 8e6}, {Class: "Huge", Channels: 1, RemainingBytes: -1}, {Class: "Bogus", Channels: 2}, {Class: "Small", Channels: 9}},
			RecentMoves: []contract.ChannelMove{{Time: at, From: "Huge", To: "Small", Channels: 2, Reason: "Huge finished"}, {Time: at, From: "Huge", To: "Nope", Channels: 1}}},
			&dtnflowv1alpha1.ChannelStatus{Scheduler: dtnflowv1alpha1.SchedulerProActiveMultiChunk, Moves: 3,
				Classes:     []dtnflowv1alpha1.ClassChannels{{Class: "Small", Channels: 5, RemainingBytes: 100, BitsPerSecond: 8e6}, {Class: "Huge", Channels: 1}},
				RecentMoves: []dtnflowv1alpha1.ChannelMove{{Time: metav1.NewTime(at), From: "Huge", To: "Small", Channels: 2, Reason: "Huge finished"}}}},
		"static classes have no scheduler": {nil, &contract.Report{Classes: []contract.ClassReport{{Class: "Large", Channels: 2}}},
			&dtnflowv1alpha1.ChannelStatus{Classes: []dtnflowv1alpha1.ClassChannels{{Class: "Large", Channels: 2}}}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := channelStatusFrom(tc.prev, tc.rep); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("channelStatusFrom = %+v, want %+v", got, tc.want)
			}
		})
	}
	// the API's bounds: the newest 8 moves, reasons within 256 bytes at a rune boundary
	got := channelStatusFrom(nil, &contract.Report{Scheduler: "ProMC", ChannelMoves: 12, RecentMoves: many})
	if len(got.RecentMoves) != 8 || !got.RecentMoves[7].Time.Equal(&metav1.Time{Time: at.Add(11 * time.Second)}) {
		t.Fatalf("recent moves %d, last at %v: want the newest 8", len(got.RecentMoves), got.RecentMoves[len(got.RecentMoves)-1].Time)
	}
	if r := got.RecentMoves[0].Reason; len(r) > 256 || !utf8.ValidString(r) {
		t.Errorf("reason of %d bytes, valid UTF-8 %v", len(r), utf8.ValidString(r))
	}
}

// TestFailedFilesFrom: the status lists the union of what the coordinators reported,
// by path in the order first seen (a replaced coordinator reports again from its start),
// never more than the API allows, each text within its field's bound.
// TestPartialOutcome: a job that skipped files at the source has finished, its result
// is PartiallyComplete (not Complete), and the message says how many were skipped and
// names the first.
func TestPartialOutcome(t *testing.T) {
	st := &dtnflowv1alpha1.TransferJobStatus{Conditions: []metav1.Condition{{Type: dtnflowv1alpha1.ConditionPartiallyComplete, Status: metav1.ConditionTrue}}}
	if !finished(st) || resultOf(st) != dtnflowv1alpha1.RunPartiallyComplete {
		t.Errorf("finished %v, result %s; want finished, PartiallyComplete", finished(st), resultOf(st))
	}
	st.Conditions = append(st.Conditions, metav1.Condition{Type: dtnflowv1alpha1.ConditionFailed, Status: metav1.ConditionTrue})
	if resultOf(st) != dtnflowv1alpha1.RunFailed {
		t.Errorf("result %s of a failed job, want Failed", resultOf(st))
	}
	if resultOf(&dtnflowv1alpha1.TransferJobStatus{Conditions: []metav1.Condition{{Type: dtnflowv1alpha1.ConditionComplete, Status: metav1.ConditionTrue}}}) != dtnflowv1alpha1.RunComplete {
		t.Error("a complete job's result is not Complete")
	}
	skipped := []dtnflowv1alpha1.FailedFile{{Path: "a/x.dat", Error: "source file changed while it was read: a/x.dat"}, {Path: "a/y.dat", Error: "gone"}}
	msg := partialMessage(&dtnflowv1alpha1.TransferProgress{FilesSkipped: 37}, skipped)
	for _, want := range []string{"37 files skipped at the source", "spec.sourceErrors: Skip", "a/x.dat: source file changed", "status.skippedFiles"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not say %q", msg, want)
		}
	}
}

// TestNotMovedMessage: a finished job's message says how many source entries were not
// files and were not moved, naming the first, and nothing when there were none.
func TestNotMovedMessage(t *testing.T) {
	one := []dtnflowv1alpha1.FailedFile{{Path: "runs/latest", Error: "symlinked directory not followed"}}
	two := append(slices.Clone(one), dtnflowv1alpha1.FailedFile{Path: "runs/pipe", Error: "not a regular file"})
	for _, tc := range []struct {
		name     string
		prog     *dtnflowv1alpha1.TransferProgress
		notMoved []dtnflowv1alpha1.FailedFile
		want     string
	}{
		{"none", &dtnflowv1alpha1.TransferProgress{FilesDone: 3}, nil, ""},
		{"no progress yet", nil, nil, ""},
		{"one", &dtnflowv1alpha1.TransferProgress{EntriesNotMoved: 1}, one,
			"1 entries at the source are not files and were not moved, the first runs/latest: symlinked directory not followed"},
		{"more than listed", &dtnflowv1alpha1.TransferProgress{EntriesNotMoved: 31}, two,
			"31 entries at the source are not files and were not moved, the first runs/latest: symlinked directory not followed; status.notMoved lists them"},
		{"listed, count not yet in progress", nil, two,
			"2 entries at the source are not files and were not moved, the first runs/latest: symlinked directory not followed; status.notMoved lists them"},
	} {
		if got := notMovedMessage(tc.prog, tc.notMoved); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestUnionFiles: the status's lists of files (failed, skipped, not moved) take a
// report's by path in the order first seen, bounded and cut like the API fields. Which
// list of the report goes to which field, the integration tests check (failedfiles_test.go).
func TestUnionFiles(t *testing.T) {
	ff := func(paths ...string) []contract.FailedFile {
		var out []contract.FailedFile
		for _, p := range paths {
			out = append(out, contract.FailedFile{Path: p, Error: "read " + p + ": input/output error"})
		}
		return out
	}
	paths := func(fs []dtnflowv1alpha1.FailedFile) []string {
		var out []string
		for _, f := range fs {
			out = append(out, f.Path)
		}
		return out
	}
	first := unionFiles(nil, ff("a", "b"))
	if got := paths(first); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("first report: %v", got)
	}
	if first[0].Error != "read a: input/output error" {
		t.Errorf("error %q", first[0].Error)
	}
	// a replaced coordinator reports b again, then c
	second := unionFiles(first, ff("b", "c"))
	if got := paths(second); !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("after a replaced coordinator: %v", got)
	}
	if got := paths(unionFiles(second, nil)); !slices.Equal(got, paths(second)) {
		t.Errorf("an empty list in the report changed the status's: %v", got)
	}
	var many []string
	for i := range 2 * contract.MaxFailedFiles {
		many = append(many, fmt.Sprintf("f%03d", i))
	}
	bounded := unionFiles(second, ff(many...))
	if len(bounded) != contract.MaxFailedFiles || bounded[3].Path != "f000" {
		t.Fatalf("bounded list %v, want %d starting a b c f000", paths(bounded), contract.MaxFailedFiles)
	}
	long := unionFiles(nil, []contract.FailedFile{{Path: strings.Repeat("p", 5000), Error: strings.Repeat("e", 5000)}})
	if len(long[0].Path) != contract.MaxFailedPath || len(long[0].Error) != contract.MaxFailedError || !strings.HasSuffix(long[0].Path, "...") {
		t.Errorf("long texts cut to %d/%d bytes, want %d/%d ending in ...", len(long[0].Path), len(long[0].Error), contract.MaxFailedPath, contract.MaxFailedError)
	}
}

// TestPlanNodesKeepTheJobsOwnSlots: a node crowded past maxStripesPerNode by other jobs'
// stripes still offers a job the slots it holds there, so a job that runs cannot be
// stranded without a plan; on a node it holds nothing of, others' stripes count whole.
func TestPlanNodesKeepTheJobsOwnSlots(t *testing.T) {
	ep := &dtnflowv1alpha1.TransferEndpoint{Spec: dtnflowv1alpha1.TransferEndpointSpec{NICBitsPerSecond: 10e9, MaxStripesPerNode: 4}}
	job := &dtnflowv1alpha1.TransferJob{}
	job.UID = "mine"
	nodes := []nodeView{
		{Name: "crowded", Ready: true, StripesByJob: map[types.UID]int{"mine": 1, "a": 40, "b": 59}},
		{Name: "busy", Ready: true, StripesByJob: map[types.UID]int{"mine": 1, "a": 2}},
		{Name: "full", Ready: true, StripesByJob: map[types.UID]int{"a": 6}},
	}
	got := map[string]int{}
	for _, n := range planNodes(ep, nodes, job) {
		got[n.Name] = n.PlacedStripes
		if !n.Preferred && n.Name != "full" {
			t.Errorf("%s: the job's own node is not preferred", n.Name)
		}
	}
	want := map[string]int{"crowded": 3, "busy": 2, "full": 6}
	if !maps.Equal(got, want) {
		t.Errorf("placed stripes %v, want %v", got, want)
	}
}
