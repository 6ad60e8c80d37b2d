package framework

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

func TestStatusSteps(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	base := func() *dtnflowv1alpha1.TransferJob {
		j := &dtnflowv1alpha1.TransferJob{}
		j.ResourceVersion = "100"
		j.Status = dtnflowv1alpha1.TransferJobStatus{
			StartTime:     &t0,
			AgentFailures: 2,
			Progress:      &dtnflowv1alpha1.TransferProgress{BytesDone: 500, BytesTotal: 1000, FilesDone: 5, Percent: 50, LastUpdateTime: &t0},
			Replans:       []dtnflowv1alpha1.Replan{{Time: t0, Reason: "PathHasRoom"}},
		}
		return j
	}
	complete := func(j *dtnflowv1alpha1.TransferJob) {
		j.Status.Conditions = []metav1.Condition{{Type: dtnflowv1alpha1.ConditionComplete, Status: metav1.ConditionTrue}}
		j.Status.CompletionTime = &t1
	}
	cases := map[string]struct {
		change func(next *dtnflowv1alpha1.TransferJob)
		prev   func(prev *dtnflowv1alpha1.TransferJob)
		want   []string // substrings of the violations, in order; none: a valid step
	}{
		"forward": {change: func(n *dtnflowv1alpha1.TransferJob) {
			n.ResourceVersion = "101"
			n.Status.Progress.BytesDone, n.Status.Progress.Percent, n.Status.Progress.LastUpdateTime = 700, 70, &t1
			n.Status.Replans = append(n.Status.Replans, dtnflowv1alpha1.Replan{Time: t1, Reason: "HighLoss"})
		}},
		"finished stays finished": {prev: complete, change: func(n *dtnflowv1alpha1.TransferJob) { n.ResourceVersion = "101" }},
		"bytes back":              {change: func(n *dtnflowv1alpha1.TransferJob) { n.Status.Progress.BytesDone = 400 }, want: []string{"bytesDone 400 after 500"}},
		"files and percent back": {change: func(n *dtnflowv1alpha1.TransferJob) { n.Status.Progress.FilesDone, n.Status.Progress.Percent = 4, 49 },
			want: []string{"filesDone 4 after 5", "percent 49 after 50"}},
		"progress vanished":  {change: func(n *dtnflowv1alpha1.TransferJob) { n.Status.Progress = nil }, want: []string{"progress vanished"}},
		"failures lost":      {change: func(n *dtnflowv1alpha1.TransferJob) { n.Status.AgentFailures = 1 }, want: []string{"agentFailures 1 after 2"}},
		"replan lost":        {change: func(n *dtnflowv1alpha1.TransferJob) { n.Status.Replans = nil }, want: []string{"0 re-plans after 1"}},
		"replan overwritten": {change: func(n *dtnflowv1alpha1.TransferJob) { n.Status.Replans[0].Reason = "Other" }, want: []string{"last re-plan (PathHasRoom"}},
		"start moved":        {change: func(n *dtnflowv1alpha1.TransferJob) { n.Status.StartTime = &t1 }, want: []string{"startTime"}},
		"version back":       {change: func(n *dtnflowv1alpha1.TransferJob) { n.ResourceVersion = "99" }, want: []string{"resourceVersion 99 after 100"}},
		"completion undone": {prev: complete, change: func(n *dtnflowv1alpha1.TransferJob) {
			n.Status.Conditions, n.Status.CompletionTime = nil, nil
		}, want: []string{"completionTime", "condition Complete was True"}},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			prev := base()
			if c.prev != nil {
				c.prev(prev)
			}
			next := prev.DeepCopy()
			c.change(next)
			got := StatusSteps(prev, next)
			if len(got) != len(c.want) {
				t.Fatalf("violations %q, want %d matching %q", got, len(c.want), c.want)
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("violation %d: %q, want it to say %q", i, got[i], w)
				}
			}
		})
	}
}

func TestCompareTreesSeesEveryDifference(t *testing.T) {
	src := Tree{
		"a": {Size: 1, SHA256: "aa", UID: 0, GID: 0, Mode: 0o644, MtimeNs: 1},
		"b": {Size: 1, SHA256: "bb", Mode: 0o600, MtimeNs: 2},
		"c": {Size: 1, SHA256: "cc", Mode: 0o600, MtimeNs: 3},
	}
	dst := Tree{
		"a":                      {Size: 1, SHA256: "aa", UID: 1000, GID: 0, Mode: 0o640, MtimeNs: 9},
		"b":                      {Size: 1, SHA256: "bX", Mode: 0o600, MtimeNs: 2},
		"extra":                  {},
		".c.0123.dtnpart":        {},
		".dtnflow/job/journal-0": {},
	}
	diffs, compared := CompareTrees(src, dst, false)
	want := []string{
		"different at the destination: a (owner 1000:0, source 0:0; mode -rw-r-----, source -rw-r--r--; mtime 9, source 1)",
		"different at the destination: b (sha256 bX, source bb)",
		"missing at the destination: c",
		"not in the source: extra",
	}
	if compared != 2 || strings.Join(diffs, "\n") != strings.Join(want, "\n") {
		t.Errorf("compared %d, diffs:\n%s\nwant 2:\n%s", compared, strings.Join(diffs, "\n"), strings.Join(want, "\n"))
	}
	if diffs, _ := CompareTrees(src, dst, true); len(diffs) != 3 {
		t.Errorf("partial: %q, want the missing file allowed", diffs)
	}
}
