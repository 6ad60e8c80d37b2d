package controllers

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/optimizer"
)

// TestJobTrees: a job reads its source paths at its source endpoint and writes where
// they land under its destination path; a peer site's Destination side writes anywhere
// under its path here, and its Source side reads its paths here.
func TestJobTrees(t *testing.T) {
	job := &dtnflowv1alpha1.TransferJob{Spec: dtnflowv1alpha1.TransferJobSpec{
		Source:      dtnflowv1alpha1.TransferSource{Endpoint: "a", Paths: []dtnflowv1alpha1.RelativePath{"runs/0427", "cal"}},
		Destination: dtnflowv1alpha1.TransferDestination{Endpoint: "b", Path: "archive"}}}
	want := []optimizer.Tree{{Endpoint: "a", Path: "runs/0427"}, {Endpoint: "b", Path: "archive/runs/0427", Writes: true},
		{Endpoint: "a", Path: "cal"}, {Endpoint: "b", Path: "archive/cal", Writes: true}}
	if got := jobTrees(job); !slices.Equal(got, want) {
		t.Errorf("a job's trees %+v, want %+v", got, want)
	}
	rt := func(side dtnflowv1alpha1.RemoteSide) *dtnflowv1alpha1.RemoteTransfer {
		return &dtnflowv1alpha1.RemoteTransfer{ObjectMeta: metav1.ObjectMeta{Namespace: "peer-a", Name: "x"},
			Spec: dtnflowv1alpha1.RemoteTransferSpec{Side: side, Endpoint: "dtn", Origin: dtnflowv1alpha1.RemoteOrigin{Namespace: "lab", Name: "run"},
				Paths: []dtnflowv1alpha1.RelativePath{"outgoing/run"}, Path: "incoming/site-a/run"}}
	}
	dst := jobTrees(remoteStandIn(rt(dtnflowv1alpha1.RemoteSideDestination)))
	if !slices.Contains(dst, optimizer.Tree{Endpoint: "dtn", Path: "incoming/site-a/run", Writes: true}) ||
		slices.ContainsFunc(dst, func(tr optimizer.Tree) bool { return tr.Endpoint == "dtn" && tr.Path != "incoming/site-a/run" }) {
		t.Errorf("a peer's Destination side's trees %+v, want it to write incoming/site-a/run at dtn and use nothing else there", dst)
	}
	src := jobTrees(remoteStandIn(rt(dtnflowv1alpha1.RemoteSideSource)))
	if !slices.Contains(src, optimizer.Tree{Endpoint: "dtn", Path: "outgoing/run"}) ||
		slices.ContainsFunc(src, func(tr optimizer.Tree) bool { return tr.Endpoint == "dtn" && (tr.Writes || tr.Path != "outgoing/run") }) {
		t.Errorf("a peer's Source side's trees %+v, want it to read outgoing/run at dtn and use nothing else there", src)
	}
}

// TestFilesWaitMessage names the job waited for — a peer site's as such — and the first
// trees where the two meet.
func TestFilesWaitMessage(t *testing.T) {
	me := &groupMember{key: "lab/b", trees: []optimizer.Tree{{Endpoint: "a", Path: "runs/0427/raw"}, {Endpoint: "b", Path: "archive/runs/0427/raw", Writes: true}}}
	local := &groupMember{key: "lab/a", trees: []optimizer.Tree{{Endpoint: "a", Path: "runs/0427"}, {Endpoint: "b", Path: "archive/runs/0427", Writes: true}}}
	peer := &groupMember{key: remoteTransferKind + " peer-a/x", trees: []optimizer.Tree{{Endpoint: "b", Path: "archive", Writes: true}}}
	for _, tc := range []struct {
		of, want string
	}{
		{"lab/a", "waits for the files of TransferJob lab/a: it writes archive/runs/0427 at endpoint b, where this job writes archive/runs/0427/raw; position 2, higher priority first, then first come first served"},
		{remoteTransferKind + " peer-a/x", "waits for the files of RemoteTransfer peer-a/x (a peer site's job): it writes archive at endpoint b, where this job writes archive/runs/0427/raw; position 2, higher priority first, then first come first served"},
	} {
		got := filesWaitMessage(optimizer.Admission{FilesOf: tc.of, Position: 2, WaitingFor: optimizer.FilesLink}, me, []*groupMember{me, local, peer})
		if got != tc.want {
			t.Errorf("waiting for %s:\n got %q\nwant %q", tc.of, got, tc.want)
		}
	}
}
