// Package plugin tests kubectl-dtnflow against a real kube-apiserver and etcd: each
// command is run as a user runs it, with a kubeconfig file, on jobs whose status the
// tests write the way the controller does.
package plugin

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/cmd/kubectl-dtnflow/app"
	"github.com/dtnflow/dtnflow/controllers"
	"github.com/dtnflow/dtnflow/controllers/agentlogs"
	"github.com/dtnflow/dtnflow/test/integration/framework"
)

var (
	env        *framework.Env
	kubeconfig string
)

// timeout bounds what a test waits for (a watch to end, a change to show).
const timeout = 20 * time.Second

func TestMain(m *testing.M) {
	var err error
	env, err = framework.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dir, err := os.MkdirTemp("", "kubectl-dtnflow-test")
	if err == nil {
		kubeconfig = filepath.Join(dir, "kubeconfig")
		err = os.WriteFile(kubeconfig, env.KubeConfig(), 0o600)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the API server:", err)
	}
	os.Exit(code)
}

// result is what one run of the plugin printed and returned.
type result struct {
	code     int
	out, err string
}

// syncBuffer is a buffer a running command writes while the test reads.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// run runs `kubectl dtnflow ARGS` with the test's kubeconfig, plain (not terminal) output.
func run(t *testing.T, o *app.Options, args ...string) result {
	t.Helper()
	var out, errOut syncBuffer
	if o == nil {
		o = &app.Options{}
	}
	o.Kubeconfig, o.Out, o.Err = kubeconfig, &out, &errOut
	if o.Terminal == nil {
		o.Terminal = ptr.To(false)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	code := app.Run(ctx, o, args)
	return result{code: code, out: out.String(), err: errOut.String()}
}

var seq atomic.Int32

func namespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("plugin-%d", seq.Add(1))}}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func at(s int) *metav1.Time { v := metav1.NewTime(t0.Add(time.Duration(s) * time.Second)); return &v }

// createJob creates a job and writes a status like the controller's for one that
// probed, planned 2 nodes × 2 stripes × 8 streams, re-planned once and is 45 % done.
func createJob(t *testing.T, ns, name string) *dtnflowv1alpha1.TransferJob {
	t.Helper()
	ctx := context.Background()
	job := &dtnflowv1alpha1.TransferJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"team": "physics"}},
		Spec: dtnflowv1alpha1.TransferJobSpec{
			Source:      dtnflowv1alpha1.TransferSource{Endpoint: "site-a", Paths: []dtnflowv1alpha1.RelativePath{"runs/0427/raw", "runs/0427/calibration.h5"}},
			Destination: dtnflowv1alpha1.TransferDestination{Endpoint: "site-b", Path: "incoming/0427"},
			Tuning:      dtnflowv1alpha1.TransferTuning{Mode: dtnflowv1alpha1.TuningAuto, Limits: &dtnflowv1alpha1.TuningLimits{MaxNodes: ptr.To[int32](2)}},
		},
	}
	if err := env.Client.Create(ctx, job); err != nil {
		t.Fatal(err)
	}
	var samples []dtnflowv1alpha1.ProbeSample
	for i, s := range []struct {
		streams int32
		bps     int64
	}{{1, 903_410_000}, {2, 954_840_000}, {4, 990_910_000}, {8, 953_430_000}} {
		samples = append(samples, dtnflowv1alpha1.ProbeSample{Streams: s.streams, BitsPerSecond: s.bps, SourceMillicores: 300, DestinationMillicores: 500, Time: at(5 * i)})
	}
	var history []dtnflowv1alpha1.RatePoint
	for i := range 12 {
		history = append(history, dtnflowv1alpha1.RatePoint{Time: *at(40 + 10*i), BitsPerSecond: int64(1_500_000_000 + 200_000_000*(i%4)), BytesDone: int64(i+1) << 30})
	}
	job.Status = dtnflowv1alpha1.TransferJobStatus{
		State:              dtnflowv1alpha1.StateTransferring,
		ObservedGeneration: job.Generation,
		Conditions: []metav1.Condition{
			{Type: dtnflowv1alpha1.ConditionPlanned, Status: metav1.ConditionTrue, Reason: controllers.ReasonPlanned, Message: "2 node(s) × 4 stripe(s) × 8 stream(s)", LastTransitionTime: *at(30)},
			{Type: dtnflowv1alpha1.ConditionTransferring, Status: metav1.ConditionTrue, Reason: controllers.ReasonTransferring, Message: "2 of 4 stripes running", LastTransitionTime: *at(35)},
			{Type: dtnflowv1alpha1.ConditionReconciling, Status: metav1.ConditionTrue, Reason: controllers.ReasonTransferring, Message: "2 of 4 stripes running", LastTransitionTime: *at(35)},
		},
		Plan: &dtnflowv1alpha1.TransferPlan{
			SourceNodes: []string{"a-n0", "a-n1"}, DestinationNodes: []string{"b-n0", "b-n1"},
			StripesPerNode: 2, StreamsPerStripe: 8, BufferBytes: 4 << 20,
			SourceCPUMillicores: 700, DestinationCPUMillicores: 1100,
			PredictedBitsPerSecond: 3_600_000_000, BindingResource: dtnflowv1alpha1.BindingPath, PathBitsPerSecond: 3_600_000_000,
			Model: &dtnflowv1alpha1.StreamModel{Name: dtnflowv1alpha1.StreamModelDinda, A: "1.25e-18", B: "4e-20",
				OptimalStreams: 8, FitErrorBitsPerSecond: 12_000_000, PeakBitsPerSecond: 990_000_000, Reason: "least error of the papers' models"},
			SourceCPU:   &dtnflowv1alpha1.CPUModel{InterceptMillicores: 50, MillicoresPerGbps: 300, Samples: 4},
			SizeClasses: []dtnflowv1alpha1.SizeClassPlan{{Class: dtnflowv1alpha1.SizeClassLarge, Files: 100, Bytes: 10 << 30, Pipelining: 2, Parallelism: 8, Concurrency: 2, Channels: 4}},
		},
		Progress: &dtnflowv1alpha1.TransferProgress{BytesDone: 4608 << 20, BytesTotal: 10 << 30, FilesDone: 40, FilesTotal: 100, FilesFailed: 3, Percent: 45,
			CurrentBitsPerSecond: 941_000_000, AverageBitsPerSecond: 800_000_000, Rate: "941 Mbit/s", ETASeconds: ptr.To[int64](200), ETA: "3m20s", LastUpdateTime: at(150)},
		Samples: samples,
		Stripes: []dtnflowv1alpha1.StripeStatus{
			{Name: name + "-s0", State: dtnflowv1alpha1.StripeRunning, SourceNode: "a-n0", DestinationNode: "b-n0", BitsPerSecond: 500_000_000},
			{Name: name + "-s1", State: dtnflowv1alpha1.StripeRunning, SourceNode: "a-n1", DestinationNode: "b-n1", BitsPerSecond: 441_000_000},
			{Name: name + "-s2", State: dtnflowv1alpha1.StripePending},
			{Name: name + "-s3", State: dtnflowv1alpha1.StripePending},
		},
		Replans: []dtnflowv1alpha1.Replan{{Time: *at(100), Reason: "PathHasRoom", Message: "1.9 Gbit/s over 2 stripes, 95 % of the predicted: adding stripes",
			From: dtnflowv1alpha1.PlanShape{Nodes: 2, Stripes: 2, StreamsPerStripe: 8}, To: dtnflowv1alpha1.PlanShape{Nodes: 2, Stripes: 4, StreamsPerStripe: 8}}},
		FailedFiles: []dtnflowv1alpha1.FailedFile{{Path: "runs/0427/raw/b17.dat", Error: "read: input/output error"},
			{Path: `"runs/0427/raw/\xfe.dat"`, Error: "open: permission denied"}},
		RateHistory: history,
		StartTime:   at(0),
	}
	if err := env.Client.Status().Update(ctx, job); err != nil {
		t.Fatal(err)
	}
	return job
}

// setStatus changes a job's status, retrying on conflicts.
func setStatus(t *testing.T, job *dtnflowv1alpha1.TransferJob, change func(*dtnflowv1alpha1.TransferJobStatus)) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var cur dtnflowv1alpha1.TransferJob
		g.Expect(env.Client.Get(context.Background(), client.ObjectKeyFromObject(job), &cur)).To(Succeed())
		change(&cur.Status)
		g.Expect(env.Client.Status().Update(context.Background(), &cur)).To(Succeed())
	}).WithTimeout(timeout).Should(Succeed())
}

func complete(st *dtnflowv1alpha1.TransferJobStatus) {
	st.State = dtnflowv1alpha1.StateComplete
	st.Conditions = append(st.Conditions, metav1.Condition{Type: dtnflowv1alpha1.ConditionComplete, Status: metav1.ConditionTrue, Reason: controllers.ReasonVerified, Message: "100 files verified", LastTransitionTime: *at(300)})
	st.Progress.BytesDone, st.Progress.FilesDone, st.Progress.Percent, st.Progress.CurrentBitsPerSecond = st.Progress.BytesTotal, st.Progress.FilesTotal, 100, 0
	st.Progress.ETASeconds, st.Progress.ETA = ptr.To[int64](0), "0s"
	st.CompletionTime = at(300)
}

func TestUsage(t *testing.T) {
	if r := run(t, nil, "--help"); r.code != 0 || !strings.Contains(r.out, "describe") || !strings.Contains(r.out, "plot") {
		t.Errorf("help: %+v", r)
	}
	if r := run(t, nil, "frobnicate"); r.code != 2 || !strings.Contains(r.err, `unknown command "frobnicate"`) {
		t.Errorf("unknown command: %+v", r)
	}
	if r := run(t, nil, "describe"); r.code != 2 || !strings.Contains(r.err, "exactly one TransferJob") {
		t.Errorf("describe without a job: %+v", r)
	}
	if r := run(t, nil, "describe", "-n", "default", "nothing-here"); r.code != 1 || !strings.Contains(r.err, `TransferJob "nothing-here" not found in namespace "default"`) {
		t.Errorf("describe of a missing job: %+v", r)
	}
}

func TestGet(t *testing.T) {
	ns := namespace(t)
	createJob(t, ns, "run-0427")
	other := createJob(t, ns, "run-0428")
	setStatus(t, other, complete)

	r := run(t, nil, "get", "-n", ns)
	if r.code != 0 {
		t.Fatalf("get: %+v", r)
	}
	lines := strings.Split(strings.TrimSpace(r.out), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "NAME") {
		t.Fatalf("get printed:\n%s", r.out)
	}
	for _, want := range []string{"run-0427", "Transferring", "[=========>          ]", "45%", "4.50 GiB/10.0 GiB", "40/100 files", "941 Mbit/s", "ETA 3m20s", "2/4 stripes"} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("the running job's row lacks %q:\n%s", want, lines[1])
		}
	}
	for _, want := range []string{"run-0428", "Complete", "[====================]", "100%", "100/100 files", "0 bit/s", "ETA 0s"} {
		if !strings.Contains(lines[2], want) {
			t.Errorf("the complete job's row lacks %q:\n%s", want, lines[2])
		}
	}
	if strings.Contains(lines[2], "stripes") {
		t.Errorf("a finished job shows stripes: %s", lines[2])
	}

	if r := run(t, nil, "get", "-A"); r.code != 0 || !strings.Contains(r.out, "NAMESPACE") || !strings.Contains(r.out, ns) {
		t.Errorf("get -A: %+v", r)
	}
	if r := run(t, nil, "get", "-n", ns, "run-0428"); r.code != 0 || strings.Contains(r.out, "run-0427") || !strings.Contains(r.out, "run-0428") {
		t.Errorf("get of one job: %+v", r)
	}
}

func TestDescribe(t *testing.T) {
	ns := namespace(t)
	job := createJob(t, ns, "run-0427")
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "run-0427.replan"},
		EventTime:  metav1.NewMicroTime(t0.Add(100 * time.Second)), ReportingController: "dtnflow.io/manager", ReportingInstance: "test",
		Action: "Replan", Reason: "PathHasRoom", Type: corev1.EventTypeNormal, Note: "2 stripes → 4 stripes",
		Regarding: corev1.ObjectReference{APIVersion: dtnflowv1alpha1.GroupVersion.String(), Kind: "TransferJob", Namespace: ns, Name: job.Name, UID: job.UID},
	}
	if err := env.Client.Create(context.Background(), ev); err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "describe", "-n", ns, "run-0427")
	if r.code != 0 {
		t.Fatalf("describe: %+v", r)
	}
	for _, want := range []string{
		"site-a: runs/0427/raw, runs/0427/calibration.h5", "site-b: incoming/0427", "Auto; maxNodes 2",
		"2 node(s) × 2 stripe(s) per node (4 stripes) × 8 stream(s), buffer 4.00 MiB",
		"a-n0, a-n1 → b-n0, b-n1", "700m per sender, 1100m per receiver",
		"Predicted:    3.6 Gbit/s, bound by Path",
		"941 Mbit/s now (26% of predicted), 800 Mbit/s on average (22% of predicted), 2.1 Gbit/s at best over 12 report(s)",
		"Dinda (a′=1.25e-18 b′=4e-20): 990 Mbit/s per stripe at 8 stream(s)", "least error of the papers' models",
		"Probe samples (4):", "991 Mbit/s",
		"Re-plans (1;", "PathHasRoom", "2×2×8", "2×4×8", "adding stripes",
		"Failed files (3; the first 2):", "  runs/0427/raw/b17.dat: read: input/output error", `  "runs/0427/raw/\xfe.dat": open: permission denied`,
		"Stripes (4):", "run-0427-s1", "Conditions:", "Reconciling", "Events:", "2 stripes → 4 stripes",
	} {
		if !strings.Contains(r.out, want) {
			t.Errorf("describe lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("describe printed:\n%s", r.out)
	}
}

// TestPlot draws a job and looks at the PNG: the size asked for, and the colours of
// the samples, the model, the plan and the achieved rate present in quantity.
// partiallyComplete writes the status of a job that ended with files skipped at the
// source (spec.sourceErrors Skip).
func partiallyComplete(st *dtnflowv1alpha1.TransferJobStatus) {
	st.State = dtnflowv1alpha1.StatePartiallyComplete
	st.Progress.FilesSkipped = 23
	st.SkippedFiles = []dtnflowv1alpha1.FailedFile{{Path: "runs/0427/raw/b18.dat", Error: "source file changed while it was read: runs/0427/raw/b18.dat"}}
	st.Conditions = append(st.Conditions, metav1.Condition{Type: dtnflowv1alpha1.ConditionPartiallyComplete, Status: metav1.ConditionTrue,
		Reason: controllers.ReasonSourceFilesSkipped, Message: "23 files skipped at the source (spec.sourceErrors: Skip)", LastTransitionTime: *at(200)})
	st.Progress.EntriesNotMoved = 4
	st.NotMoved = []dtnflowv1alpha1.FailedFile{{Path: "runs/latest", Error: "symlinked directory not followed"}}
}

// TestDescribePartiallyComplete: describe says why a job is PartiallyComplete and lists
// the files it skipped at the source and the entries it did not move; get shows the
// state.
func TestDescribePartiallyComplete(t *testing.T) {
	ns := namespace(t)
	job := createJob(t, ns, "run-0432")
	setStatus(t, job, partiallyComplete)
	r := run(t, nil, "describe", "-n", ns, "run-0432")
	if r.code != 0 {
		t.Fatalf("describe: %+v", r)
	}
	for _, want := range []string{"PartiallyComplete", "Because:       SourceFilesSkipped: 23 files skipped at the source",
		"Skipped at the source (23; the first 1):", "  runs/0427/raw/b18.dat: source file changed while it was read",
		"Not moved (not files) (4; the first 1):", "  runs/latest: symlinked directory not followed"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("describe lacks %q:\n%s", want, r.out)
		}
	}
	if r := run(t, nil, "get", "-n", ns, "run-0432"); r.code != 0 || !strings.Contains(r.out, "PartiallyComplete") {
		t.Errorf("get: %+v", r)
	}
}

func TestPlot(t *testing.T) {
	ns := namespace(t)
	createJob(t, ns, "run-0427")
	dir := t.TempDir()
	if d := os.Getenv("DTNFLOW_PLOT_DIR"); d != "" {
		dir = d // keep the images to look at
	}
	for _, size := range []struct {
		args          []string
		width, height int
	}{{nil, 1200, 900}, {[]string{"--width", "800", "--height", "600"}, 800, 600}} {
		file := filepath.Join(dir, fmt.Sprintf("job-%d.png", size.width))
		r := run(t, nil, append([]string{"plot", "-n", ns, "run-0427", "-o", file}, size.args...)...)
		if r.code != 0 {
			t.Fatalf("plot: %+v", r)
		}
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s is not a PNG: %v", file, err)
		}
		if b := img.Bounds(); b.Dx() != size.width || b.Dy() != size.height {
			t.Errorf("%s is %d×%d, want %d×%d", file, b.Dx(), b.Dy(), size.width, size.height)
		}
		counts := colourCounts(img)
		total := size.width * size.height
		if white := counts[color.RGBA{255, 255, 255, 255}]; white == total || white < total/2 {
			t.Errorf("%s: %d of %d pixels white: an empty or unreadable plot", file, white, total)
		}
		for name, c := range map[string]color.RGBA{
			"probe samples": {0x1f, 0x77, 0xb4, 0xff}, "fitted model": {0xff, 0x7f, 0x0e, 0xff},
			"plan and prediction": {0x2c, 0xa0, 0x2c, 0xff}, "achieved rate": {0xd6, 0x27, 0x28, 0xff},
		} {
			if counts[c] < 50 {
				t.Errorf("%s: %d pixels of the %s colour", file, counts[c], name)
			}
		}
	}
	if r := run(t, nil, "plot", "-n", ns, "run-0427"); r.code != 2 || !strings.Contains(r.err, "-o FILE.png is required") {
		t.Errorf("plot without -o: %+v", r)
	}
}

func colourCounts(img image.Image) map[color.RGBA]int {
	counts := map[color.RGBA]int{}
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			r, g, bl, a := img.At(x, y).RGBA()
			counts[color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(bl >> 8), uint8(a >> 8)}]++
		}
	}
	return counts
}

// TestWatch follows a job through two reports to its end: a line per change, and the
// exit code of its result.
func TestWatch(t *testing.T) {
	ns := namespace(t)
	job := createJob(t, ns, "run-0427")
	var out, errOut syncBuffer
	done := make(chan int, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		done <- app.Run(ctx, &app.Options{Kubeconfig: kubeconfig, Out: &out, Err: &errOut, Terminal: ptr.To(false)}, []string{"watch", "-n", ns, "run-0427"})
	}()
	g := NewWithT(t)
	g.Eventually(out.String).WithTimeout(timeout).Should(ContainSubstring(" 45%"))
	setStatus(t, job, func(st *dtnflowv1alpha1.TransferJobStatus) {
		st.Progress.BytesDone, st.Progress.Percent, st.Progress.ETASeconds = 8<<30, 80, ptr.To[int64](30)
	})
	g.Eventually(out.String).WithTimeout(timeout).Should(ContainSubstring(" 80%"))
	setStatus(t, job, func(st *dtnflowv1alpha1.TransferJobStatus) {
		st.RateHistory = append(st.RateHistory, st.RateHistory[0])
	}) // no visible change
	setStatus(t, job, complete)
	var code int
	g.Eventually(done).WithTimeout(timeout).Should(Receive(&code))
	if code != 0 {
		t.Errorf("watch of a completed job exited %d: %s", code, errOut.String())
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[0], "Transferring") || !strings.Contains(lines[1], " 80%") || !strings.Contains(lines[2], "Complete") || !strings.Contains(lines[2], "100%") {
		t.Errorf("watch printed (a line per visible change, three in all):\n%s", out.String())
	}

	// A failed job ends the watch at once with exit code 1.
	bad := createJob(t, ns, "run-0429")
	setStatus(t, bad, func(st *dtnflowv1alpha1.TransferJobStatus) {
		st.State = dtnflowv1alpha1.StateFailed
		st.Conditions = append(st.Conditions, metav1.Condition{Type: dtnflowv1alpha1.ConditionFailed, Status: metav1.ConditionTrue, Reason: controllers.ReasonTransferFailed, Message: "disk full", LastTransitionTime: *at(200)})
	})
	if r := run(t, nil, "watch", "-n", ns, "run-0429"); r.code != 1 || !strings.Contains(r.err, "failed: run-0429") {
		t.Errorf("watch of a failed job: %+v", r)
	}
	// So does one that skipped files at the source: not a verified copy of the source.
	partial := createJob(t, ns, "run-0431")
	setStatus(t, partial, partiallyComplete)
	if r := run(t, nil, "watch", "-n", ns, "run-0431"); r.code != 1 || !strings.Contains(r.err, "partially complete (files skipped at the source): run-0431") {
		t.Errorf("watch of a partially complete job: %+v", r)
	}
	// A terminal gets the table redrawn in place.
	term := true
	if r := run(t, &app.Options{Terminal: &term}, "watch", "-n", ns, "run-0427"); r.code != 0 || !strings.Contains(r.out, "NAME") || !strings.Contains(r.out, "100%") {
		t.Errorf("watch on a terminal: %+v", r)
	}
	if r := run(t, nil, "watch", "-n", ns, "run-0430"); r.code != 1 || !strings.Contains(r.err, "not found") {
		t.Errorf("watch of a missing job: %+v", r)
	}
}

func TestSuspendResumeRerun(t *testing.T) {
	ns := namespace(t)
	job := createJob(t, ns, "run-0427")
	ctx := context.Background()
	get := func() *dtnflowv1alpha1.TransferJob {
		var j dtnflowv1alpha1.TransferJob
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), &j); err != nil {
			t.Fatal(err)
		}
		return &j
	}
	if r := run(t, nil, "suspend", "-n", ns, "run-0427"); r.code != 0 || !get().Spec.Suspend || !strings.Contains(r.out, "suspended") {
		t.Errorf("suspend: %+v", r)
	}
	if r := run(t, nil, "resume", "-n", ns, "run-0427"); r.code != 0 || get().Spec.Suspend || !strings.Contains(r.out, "resumed") {
		t.Errorf("resume: %+v", r)
	}
	if r := run(t, nil, "rerun", "-n", ns, "run-0427"); r.code != 1 || !strings.Contains(r.err, "not finished") {
		t.Errorf("rerun of a running job: %+v", r)
	}
	setStatus(t, job, complete)
	if r := run(t, nil, "suspend", "-n", ns, "run-0427"); r.code != 1 || !strings.Contains(r.err, "already finished") {
		t.Errorf("suspend of a finished job: %+v", r)
	}
	before := get()
	r := run(t, &app.Options{Clock: clockAt(t0.Add(time.Hour))}, "rerun", "-n", ns, "run-0427")
	if r.code != 0 {
		t.Fatalf("rerun: %+v", r)
	}
	after := get()
	switch {
	case after.UID == before.UID:
		t.Errorf("rerun kept the old job")
	case after.Annotations[dtnflowv1alpha1.AnnotationRerun] != "2026-03-01T13:00:00Z":
		t.Errorf("rerun annotation %q", after.Annotations[dtnflowv1alpha1.AnnotationRerun])
	case after.Labels["team"] != "physics":
		t.Errorf("rerun lost the labels: %v", after.Labels)
	case after.Status.State != "" || len(after.Status.Conditions) != 0:
		t.Errorf("rerun kept the old status")
	}
	after.Spec.Suspend, before.Spec.Suspend = false, false
	if !equalSpecs(after.Spec, before.Spec) {
		t.Errorf("rerun changed the spec:\n%+v\n%+v", after.Spec, before.Spec)
	}
	if err := env.Client.Delete(ctx, after); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func equalSpecs(a, b dtnflowv1alpha1.TransferJobSpec) bool {
	return fmt.Sprintf("%+v", a.Source)+fmt.Sprintf("%+v", a.Destination)+fmt.Sprintf("%v", *a.Tuning.Limits.MaxNodes) ==
		fmt.Sprintf("%+v", b.Source)+fmt.Sprintf("%+v", b.Destination)+fmt.Sprintf("%v", *b.Tuning.Limits.MaxNodes)
}

// TestLogs creates the pods a job's agents would run in (and one of an earlier job of
// the same name) and reads their logs through a stand-in for the kubelet, which envtest
// does not run.
func TestLogs(t *testing.T) {
	ns := namespace(t)
	job := createJob(t, ns, "run-0427")
	ctx := context.Background()
	pod := func(name string, role contract.Role, stripe string, owner types.UID) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{contract.LabelJob: "run-0427", contract.LabelRole: string(role)}},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "dtnflow-agent:test"}}}}
		if stripe != "" {
			p.Labels[contract.LabelStripe] = stripe
		}
		p.OwnerReferences = []metav1.OwnerReference{{APIVersion: dtnflowv1alpha1.GroupVersion.String(), Kind: "TransferJob", Name: "run-0427", UID: owner, Controller: ptr.To(true)}}
		if err := env.Client.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	pod("run-0427-s1-recv", contract.RoleReceiver, "1", job.UID)
	pod("run-0427-s0-send", contract.RoleSender, "0", job.UID)
	pod("run-0427-coordinator", contract.RoleCoordinator, "", job.UID)
	pod("run-0427-s0-recv", contract.RoleReceiver, "0", job.UID)
	pod("run-0427-s9-send", contract.RoleSender, "9", "an-earlier-job")
	var asked []string
	var mu sync.Mutex
	logs := func(_ context.Context, p *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, fmt.Sprintf("%s follow=%v tail=%v", p.Name, opts.Follow, ptr.Deref(opts.TailLines, -1)))
		return io.NopCloser(strings.NewReader("started\nmoving data\n")), nil
	}
	r := run(t, &app.Options{Logs: logs}, "logs", "-n", ns, "run-0427", "--tail", "5")
	want := ""
	for _, p := range []string{"run-0427-coordinator", "run-0427-s0-send", "run-0427-s0-recv", "run-0427-s1-recv"} {
		want += fmt.Sprintf("[%s] started\n[%s] moving data\n", p, p)
	}
	if r.code != 0 || r.out != want {
		t.Errorf("logs printed (exit %d, %s):\n%s\nwant:\n%s", r.code, r.err, r.out, want)
	}
	if len(asked) != 4 || asked[0] != "run-0427-coordinator follow=false tail=5" {
		t.Errorf("logs asked for %v", asked)
	}
	asked = nil
	if r := run(t, &app.Options{Logs: logs}, "logs", "-n", ns, "run-0427", "-f", "--role", "sender"); r.code != 0 || r.out != "[run-0427-s0-send] started\n[run-0427-s0-send] moving data\n" || len(asked) != 1 || asked[0] != "run-0427-s0-send follow=true tail=-1" {
		t.Errorf("logs -f --role sender: %+v, asked %v", r, asked)
	}
	none := createJob(t, ns, "run-0431")
	if r := run(t, &app.Options{Logs: logs}, "logs", "-n", ns, none.Name); r.code != 1 || !strings.Contains(r.err, "has no agent pods now") {
		t.Errorf("logs of a job without pods: %+v", r)
	}
}

// TestLogsKeptAfterTheJob: once a job's agent pods are gone, logs prints what the
// manager kept of them (the ConfigMap <job>-agent-logs, written here as the manager
// writes it), oldest first, saying for each pod when and why it was kept.
func TestLogsKeptAfterTheJob(t *testing.T) {
	ns := namespace(t)
	job := createJob(t, ns, "run-0433")
	a, _ := agentlogs.Decode(nil)
	a.Add([]agentlogs.Log{{Record: agentlogs.Record{Pod: "run-0433-s0-send", UID: "u1", Role: "sender", Stripe: "0", Reason: agentlogs.ReasonFailed,
		Ended: "exit code 1, Error: connection reset by peer", Time: t0.Add(time.Minute)}, Text: []byte("started\nopening source a/b: input/output error\n")}})
	a.Add([]agentlogs.Log{
		{Record: agentlogs.Record{Pod: "run-0433-coordinator", UID: "u2", Role: "coordinator", Reason: agentlogs.ReasonFinished, Time: t0.Add(time.Hour), Cut: true},
			Text: []byte("Listed the dataset\nJob finished phase=Complete\n")},
		{Record: agentlogs.Record{Pod: "run-0433-s0-recv", UID: "u3", Role: "receiver", Stripe: "0", Reason: agentlogs.ReasonFinished, Time: t0.Add(time.Hour),
			Error: "the kubelet did not answer"}},
	})
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controllers.AgentLogsName(job.Name),
		OwnerReferences: []metav1.OwnerReference{{APIVersion: dtnflowv1alpha1.GroupVersion.String(), Kind: "TransferJob", Name: job.Name, UID: job.UID, Controller: ptr.To(true)}}},
		Data: a.Data()}
	if err := env.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	r := run(t, nil, "logs", "-n", ns, job.Name)
	want := "[run-0433-s0-send] --- kept at 2026-03-01T12:01:00Z when it failed, before its replacement (exit code 1, Error: connection reset by peer)\n" +
		"[run-0433-s0-send] started\n[run-0433-s0-send] opening source a/b: input/output error\n" +
		"[run-0433-coordinator] --- kept at 2026-03-01T13:00:00Z when the job ended; its last 47 bytes\n" +
		"[run-0433-coordinator] Listed the dataset\n[run-0433-coordinator] Job finished phase=Complete\n" +
		"[run-0433-s0-recv] --- kept at 2026-03-01T13:00:00Z when the job ended; its log could not be read: the kubelet did not answer\n"
	if r.code != 0 || r.out != want {
		t.Errorf("logs printed (exit %d, %s):\n%s\nwant:\n%s", r.code, r.err, r.out, want)
	}
	r = run(t, nil, "logs", "-n", ns, job.Name, "--role", "coordinator", "--tail", "1")
	if r.code != 0 || r.out != "[run-0433-coordinator] --- kept at 2026-03-01T13:00:00Z when the job ended; its last 47 bytes\n[run-0433-coordinator] Job finished phase=Complete\n" {
		t.Errorf("logs --role coordinator --tail 1: %+v", r)
	}
}

func clockAt(t time.Time) *clocktesting.FakeClock { return clocktesting.NewFakeClock(t) }

// TestRecurringJob: describe shows the trigger, the runs and the next run; rerun asks for
// a run through spec.trigger.manual instead of creating the job again.
func TestRecurringJob(t *testing.T) {
	ns := namespace(t)
	ctx := context.Background()
	job := createJob(t, ns, "nightly")
	var j dtnflowv1alpha1.TransferJob
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), &j); err != nil {
		t.Fatal(err)
	}
	j.Spec.Trigger = &dtnflowv1alpha1.TransferTrigger{Schedule: "30 2 * * *"}
	if err := env.Client.Update(ctx, &j); err != nil {
		t.Fatal(err)
	}
	setStatus(t, job, func(st *dtnflowv1alpha1.TransferJobStatus) {
		st.Run, st.RunTrigger, st.LastRunTime, st.NextRunTime, st.MissedRuns = 3, dtnflowv1alpha1.RunSchedule, at(0), at(86400), 1
		st.Runs = []dtnflowv1alpha1.TransferRun{
			{Number: 1, Trigger: dtnflowv1alpha1.RunCreated, StartTime: *at(-172800), CompletionTime: *at(-172800 + 3600), Result: dtnflowv1alpha1.RunComplete, FilesDone: 100, BytesDone: 10 << 30, Message: "100 files verified"},
			{Number: 2, Trigger: dtnflowv1alpha1.RunSchedule, StartTime: *at(-86400), CompletionTime: *at(-86400 + 120), Result: dtnflowv1alpha1.RunFailed, FilesDone: 98, BytesDone: 9 << 30, Message: "disk full at site-b"},
		}
	})
	r := run(t, nil, "describe", "-n", ns, "nightly")
	for _, want := range []string{`schedule "30 2 * * *"`, "3 (Schedule), started 2026-03-01T12:00:00Z", "Next run:", "2026-03-02T12:00:00Z", "Missed runs:   1",
		"Runs (the latest 2):", "1h0m0s", "Complete", "disk full at site-b", "Failed"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("describe lacks %q", want)
		}
	}
	if t.Failed() {
		t.Logf("describe printed:\n%s", r.out)
	}
	uid := j.UID
	r = run(t, &app.Options{Clock: clockAt(t0.Add(time.Hour))}, "rerun", "-n", ns, "nightly")
	if r.code != 0 || !strings.Contains(r.out, "the next run starts when run 3 ends") {
		t.Fatalf("rerun of a recurring job: %+v", r)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(job), &j); err != nil {
		t.Fatal(err)
	}
	if j.UID != uid || j.Spec.Trigger.Manual != "2026-03-01T13-00-00Z" {
		t.Errorf("after rerun: uid kept %v, spec.trigger.manual %q", j.UID == uid, j.Spec.Trigger.Manual)
	}
}
