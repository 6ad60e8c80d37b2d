package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// The chaos suite: faults injected at random moments of running transfers, a bounded
// number of times each, from a printed seed; after every job the files, the status
// history and the WAN's counters are checked (checkRound). `make test-chaos` runs the
// full profile on a cluster of two nodes per site with two manager replicas
// (TestChaos); `make test-e2e` runs the short profile as a step of TestLocalCluster.
// docs/reliability.md has the figures and the commands that made them.

// chaosProfile is what one chaos run does.
type chaosProfile struct {
	name string
	// kinds are the fault kinds, in order; "none" is the control (no fault), which
	// gives the WAN overhead of a clean job that the other rows are measured against.
	kinds []string
	// injections is how many times each recoverable fault is injected into its job
	// (a non-recoverable one ends the job at the first).
	injections int
	// dataset of every round; wanRate the WAN's rate while they run (slow enough that
	// faults land in the middle of transfers).
	dataset framework.DatasetSpec
	wanRate int64
	// cutMax bounds how long the WAN is cut (at least 5 s).
	cutMax time.Duration
	// loadJobs, when above 0, runs that many small jobs at once with faults injected
	// among them (chaos_load_test.go).
	loadJobs int
}

var (
	// shortChaos runs inside make test: one injection of the faults that need no
	// second node or replica, on a 40 MiB dataset.
	shortChaos = chaosProfile{
		name:       "short",
		kinds:      []string{"none", "receiver-kill", "sender-delete", "manager-kill", "wan-cut", "wan-corrupt"},
		injections: 1,
		dataset:    framework.DatasetSpec{Seed: 20, Large: 3, LargeBytes: 8 << 20, Medium: 3, Small: 40, Empty: 1, VariedMetadata: true},
		wanRate:    20_000_000,
		cutMax:     10 * time.Second,
	}
	// fullChaos is make test-chaos: every fault kind, an 80 MiB dataset (79.6 MiB).
	fullChaos = chaosProfile{
		name: "full",
		kinds: []string{"none",
			"manager-kill", "leader-failover",
			"coordinator-delete", "coordinator-kill", "sender-delete", "sender-kill", "receiver-delete", "receiver-kill",
			"kubelet-stop", "wan-cut", "wan-rate-halved", "apiserver-etcd-restart", "wan-corrupt",
			"agent-kills-beyond-backoff", "destination-full", "source-changed"},
		injections: 2,
		dataset:    framework.DatasetSpec{Seed: 21, Large: 4, LargeBytes: 16 << 20, Medium: 4, Small: 80, Empty: 2, VariedMetadata: true},
		wanRate:    20_000_000,
		cutMax:     60 * time.Second,
		loadJobs:   200,
	}
)

// chaosSeed is DTN_CHAOS_SEED, or a new seed; it is printed, so that a run's schedule
// (which faults at which moments, for how long) can be repeated.
func chaosSeed(t *testing.T) uint64 {
	if v := os.Getenv("DTN_CHAOS_SEED"); v != "" {
		s, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("DTN_CHAOS_SEED=%q: %v", v, err)
		}
		return s
	}
	return uint64(time.Now().UnixNano()) % 1_000_000_000
}

// TestChaos is make test-chaos: the full profile (DTN_CHAOS=full; skipped otherwise,
// since it takes half an hour and wants two nodes per site and two manager replicas).
// DTN_CHAOS_KINDS=a,b runs only those kinds; DTN_CHAOS_LOAD=0 skips the load round.
func TestChaos(t *testing.T) {
	if os.Getenv("DTN_CHAOS") != "full" {
		t.Skip("the full chaos suite runs with DTN_CHAOS=full (make test-chaos)")
	}
	p := fullChaos
	if v := os.Getenv("DTN_CHAOS_KINDS"); v != "" {
		p.kinds = strings.Split(v, ",")
	}
	if v := os.Getenv("DTN_CHAOS_LOAD"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("DTN_CHAOS_LOAD=%q: %v", v, err)
		}
		p.loadJobs = n
	}
	onFailure(t)
	runChaos(t, p)
}

// testChaosShort is the short profile, a step of TestLocalCluster.
func testChaosShort(t *testing.T) { runChaos(t, shortChaos) }

// chaosResult is one row of the figures: a fault kind over its job(s).
type chaosResult struct {
	Kind       string `json:"kind"`
	Injections int    `json:"injections"`
	// Details says what each injection did, and when.
	Details      []string `json:"details,omitempty"`
	Jobs         int      `json:"jobs"`
	DatasetBytes int64    `json:"datasetBytes"`
	FilesChecked int      `json:"filesChecked"`
	Mismatches   []string `json:"mismatches,omitempty"`
	Debris       []string `json:"debris,omitempty"`
	// Outcome is the job's final state and reason; Expected says whether that is the
	// outcome the fault should give.
	Outcome  string `json:"outcome"`
	Expected bool   `json:"expected"`
	Why      string `json:"why,omitempty"`
	// WANBytes crossed the WAN from the source site while the job ran; Resent is what
	// that exceeds the dataset by, beyond the control row's own overhead.
	WANBytes int64 `json:"wanBytes"`
	Resent   int64 `json:"resentBytes"`
	// Recover is, for each injection, the time from the end of the fault to the first
	// verified byte after it (or the end of the job).
	Recover          []time.Duration `json:"recoverNanoseconds,omitempty"`
	AgentFailures    int32           `json:"agentFailures"`
	StatusVersions   int             `json:"statusVersions"`
	StatusViolations []string        `json:"statusViolations,omitempty"`
	JournalBytes     int64           `json:"journalBytes"`
	Notes            []string        `json:"notes,omitempty"`
}

func (r *chaosResult) ok() bool {
	return r.Expected && len(r.Mismatches) == 0 && len(r.Debris) == 0 && len(r.StatusViolations) == 0
}

// runChaos runs a profile's rounds, one fault kind at a time, then its load round, and
// prints and saves the figures.
func runChaos(t *testing.T, p chaosProfile) {
	ctx := context.Background()
	seed := chaosSeed(t)
	t.Logf("chaos: profile %s, seed %d (DTN_CHAOS_SEED=%d repeats the schedule)", p.name, seed, seed)
	rng := rand.New(rand.NewPCG(seed, 0xc4a05))
	fullRate := cluster.WAN.RateBitsPerSecond
	if err := cluster.SetWANRate(ctx, p.wanRate); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cluster.SetWANRate(context.Background(), fullRate) })
	warmUp(t, ctx)

	var results []*chaosResult
	var overhead float64 // WAN bytes per dataset byte of the control round
	for _, name := range p.kinds {
		kind, ok := faultKinds[name]
		if !ok {
			t.Fatalf("no fault kind %q (have %v)", name, kindNames())
		}
		t.Run(name, func(t *testing.T) {
			onFailure(t)
			if why := kind.unavailable(); why != "" {
				t.Skipf("chaos: %s needs %s", name, why)
			}
			res := runRound(t, ctx, p, kind, rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())))
			if name == "none" && res.DatasetBytes > 0 {
				overhead = float64(res.WANBytes) / float64(res.DatasetBytes)
			}
			if overhead > 0 {
				res.Resent = res.WANBytes - int64(overhead*float64(res.DatasetBytes))
			}
			results = append(results, res)
			report(t, res)
		})
	}
	if p.loadJobs > 0 {
		t.Run("load", func(t *testing.T) {
			onFailure(t)
			results = append(results, runLoad(t, ctx, p, rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))))
		})
	}
	saveResults(t, p, seed, results)
}

// warmUp moves a small dataset first, so that the path has a PathProfile and the
// rounds start warm: their WAN bytes then hold no probe traffic.
func warmUp(t *testing.T, ctx context.Context) {
	t.Helper()
	source := dataset(t, "chaos/warmup", framework.DatasetSpec{Seed: 19, Small: 10})
	job := newJob("chaos-warmup", "chaos/warmup", "chaos-out/warmup")
	dest := createJob(ctx, t, job)
	done, err := waitFinished(ctx, job, transferTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if done.Status.State != dtnflowv1alpha1.StateComplete {
		t.Fatalf("the warm-up job ended %s", describeConditions(done))
	}
	expectIdentical(t, source, dest)
}

// waitFinished waits until the job is Complete or Failed, riding out API errors (the
// API server may be restarting), and fails only when it stays unfinished for timeout.
func waitFinished(ctx context.Context, job *dtnflowv1alpha1.TransferJob, timeout time.Duration) (*dtnflowv1alpha1.TransferJob, error) {
	deadline := time.Now().Add(timeout)
	var last *dtnflowv1alpha1.TransferJob
	for {
		got, err := getJob(ctx, job)
		if err == nil {
			last = got
			if finishedJob(got) {
				return got, nil
			}
		}
		if time.Now().After(deadline) {
			if last == nil {
				return nil, fmt.Errorf("TransferJob %s: not finished after %s and unreadable: %v", job.Name, timeout, err)
			}
			return last, fmt.Errorf("TransferJob %s not finished after %s: %s, progress %+v", job.Name, timeout, describeConditions(last), last.Status.Progress)
		}
		time.Sleep(time.Second)
	}
}

func finishedJob(job *dtnflowv1alpha1.TransferJob) bool {
	return meta.IsStatusConditionTrue(job.Status.Conditions, dtnflowv1alpha1.ConditionComplete) ||
		meta.IsStatusConditionTrue(job.Status.Conditions, dtnflowv1alpha1.ConditionFailed)
}

// bytesDone is the job's verified bytes, -1 when it cannot be read; finished says
// whether it has ended.
func bytesDone(ctx context.Context, job *dtnflowv1alpha1.TransferJob) (done int64, total int64, finished bool) {
	got, err := getJob(ctx, job)
	if err != nil {
		return -1, 0, false
	}
	if got.Status.Progress == nil {
		return 0, 0, finishedJob(got)
	}
	return got.Status.Progress.BytesDone, got.Status.Progress.BytesTotal, finishedJob(got)
}

// chaosRound is one fault kind's job: what the faults act on and what they leave for
// the checks.
type chaosRound struct {
	t        *testing.T
	profile  chaosProfile
	rng      *rand.Rand
	job      *dtnflowv1alpha1.TransferJob
	source   string // the source folder
	destRoot string // the job's destination folder (its spec.destination.path)
	copyDir  string // where the copy of source lands
	srcTree  framework.Tree
	// changed is the source file a source-changed fault rewrote ("" when none).
	changed string
	// preparedUndo undoes what a kind's prepare did (a mount), after the checks.
	preparedUndo func()
}

func (r *chaosRound) logf(format string, args ...any) {
	r.t.Helper()
	r.t.Logf("chaos %s: "+format, append([]any{r.job.Name}, args...)...)
}

// runRound runs one fault kind: a job, its faults at random moments, then the checks.
func runRound(t *testing.T, ctx context.Context, p chaosProfile, kind *faultKind, rng *rand.Rand) *chaosResult {
	res := &chaosResult{Kind: kind.name, Jobs: 1, DatasetBytes: p.dataset.Bytes()}
	rel := "chaos/" + kind.name
	destPath := "chaos-out/" + kind.name
	r := &chaosRound{t: t, profile: p, rng: rng,
		job:      newJob("chaos-"+kind.name, rel, destPath),
		destRoot: filepath.Join(cluster.Destination().Storage, destPath)}
	r.job.Spec.BackoffLimit = kind.backoffLimit
	r.source = dataset(t, rel, p.dataset)
	giveTo(t, r.source, cluster.Source())
	var err error
	if r.srcTree, err = framework.ReadTree(r.source); err != nil {
		t.Fatal(err)
	}
	if kind.prepare != nil {
		_ = os.RemoveAll(r.destRoot)
		if err := kind.prepare(ctx, r); err != nil {
			t.Fatalf("preparing %s: %v", kind.name, err)
		}
		if r.preparedUndo != nil {
			t.Cleanup(r.preparedUndo)
		}
	}
	watch, err := framework.WatchStatus(cluster.Config, r.job.Namespace, r.job.Name)
	if err != nil {
		t.Fatal(err)
	}
	wanBefore, _ := cluster.WANStats(ctx)
	r.copyDir = createJobKeepingDest(ctx, t, r.job, kind.prepare != nil)

	injections := p.injections
	if !kind.recoverable {
		injections = 1
	}
	if kind.inject == nil {
		injections = 0
	}
	// The transfer's expected length at the profile's WAN rate: the i-th of n
	// injections lands at a random moment of the i-th n-th of its middle (10 % to 80 %
	// of it after the job started moving data). Verified bytes are no clock: they move
	// in steps as whole files and chunks are verified.
	expected := time.Duration(float64(p.dataset.Bytes()) * 8 / float64(p.wanRate) * float64(time.Second))
	moving, ended := waitMoving(ctx, r.job)
	for i := 0; i < injections && !ended; i++ {
		frac := 0.1 + 0.7*(float64(i)+rng.Float64())/float64(injections)
		var at int32
		at, ended = waitUntil(ctx, r.job, moving.Add(time.Duration(frac*float64(expected))))
		if ended {
			res.Notes = append(res.Notes, fmt.Sprintf("the job ended before injection %d (planned %.0f %% into its expected %s)", i+1, 100*frac, expected.Round(time.Second)))
			break
		}
		detail, err := kind.inject(ctx, r)
		if err != nil {
			t.Errorf("injection %d of %s: %v", i+1, kind.name, err)
			break
		}
		res.Injections++
		res.Details = append(res.Details, fmt.Sprintf("at %d%%: %s", at, detail))
		r.logf("injection %d at %d%% verified: %s", i+1, at, detail)
		if kind.recoverable {
			res.Recover = append(res.Recover, timeToRecover(ctx, r.job))
		}
	}

	final, err := waitFinished(ctx, r.job, 2*transferTimeout)
	if err != nil {
		t.Error(err)
	}
	wanAfter, _ := cluster.WANStats(ctx)
	res.WANBytes = int64(wanAfter.AtoB.DeliveredBytes - wanBefore.AtoB.DeliveredBytes)
	versions, _, violations := watch.Stop()
	res.StatusVersions, res.StatusViolations = versions, violations
	if final != nil {
		res.Outcome = outcomeOf(final)
		res.AgentFailures = final.Status.AgentFailures
		if kind.recoverable {
			res.Expected = final.Status.State == dtnflowv1alpha1.StateComplete
			if !res.Expected {
				res.Why = "a recoverable fault must end Complete"
			}
		} else if why := kind.expectFailed(final, r); why != "" {
			res.Why = why
		} else {
			res.Expected = true
		}
	}
	checkFiles(t, r, final, res)
	if kind.after != nil && final != nil {
		kind.after(ctx, r, final, res)
	}
	return res
}

// createJobKeepingDest is createJob, except that a destination a kind prepared (a
// mount) is not removed first.
func createJobKeepingDest(ctx context.Context, t *testing.T, job *dtnflowv1alpha1.TransferJob, prepared bool) string {
	if !prepared {
		return createJob(ctx, t, job)
	}
	if err := cluster.Client.Create(ctx, job); err != nil {
		t.Fatalf("creating TransferJob %s: %v", job.Name, err)
	}
	t.Cleanup(func() { dumpIfFailed(t); _ = cluster.Client.Delete(context.Background(), job) })
	return filepath.Join(cluster.Destination().Storage, string(job.Spec.Destination.Path), string(job.Spec.Source.Paths[0]))
}

// waitMoving waits until the job is Transferring with its dataset listed, and returns
// when that was seen, or reports that it ended first.
func waitMoving(ctx context.Context, job *dtnflowv1alpha1.TransferJob) (time.Time, bool) {
	deadline := time.Now().Add(transferTimeout)
	for time.Now().Before(deadline) {
		got, err := getJob(ctx, job)
		if err == nil {
			if finishedJob(got) {
				return time.Now(), true
			}
			if got.Status.State == dtnflowv1alpha1.StateTransferring && got.Status.Progress != nil && got.Status.Progress.BytesTotal > 0 {
				return time.Now(), false
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return time.Now(), true
}

// waitUntil waits until the moment and returns the job's percent then, or reports
// that it ended first.
func waitUntil(ctx context.Context, job *dtnflowv1alpha1.TransferJob, moment time.Time) (int32, bool) {
	for {
		done, total, finished := bytesDone(ctx, job)
		if finished {
			return 0, true
		}
		if !time.Now().Before(moment) {
			if total <= 0 {
				return 0, false
			}
			return int32(100 * done / total), false
		}
		time.Sleep(min(250*time.Millisecond, time.Until(moment)))
	}
}

// timeToRecover is the time from now (the end of a fault) until the job verifies a
// byte more than it had, or finishes.
func timeToRecover(ctx context.Context, job *dtnflowv1alpha1.TransferJob) time.Duration {
	start := time.Now()
	base := int64(-1)
	for time.Since(start) < transferTimeout {
		done, _, finished := bytesDone(ctx, job)
		if finished {
			break
		}
		if done >= 0 {
			if base < 0 {
				base = done
			} else if done > base {
				break
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return time.Since(start)
}

func outcomeOf(job *dtnflowv1alpha1.TransferJob) string {
	for _, typ := range []string{dtnflowv1alpha1.ConditionComplete, dtnflowv1alpha1.ConditionFailed} {
		if c := meta.FindStatusCondition(job.Status.Conditions, typ); c != nil && c.Status == "True" {
			return fmt.Sprintf("%s/%s", job.Status.State, c.Reason)
		}
	}
	return string(job.Status.State)
}

// checkFiles compares the copy with the source as it was listed (mode, mtime, SHA-256 of
// every file, and as owner the destination site's agents' user, who wrote it; nothing
// the source lacks), looks for debris, and measures the
// journal the receivers keep (<destination root>/.dtnflow/, documented in the README).
// A job that failed may have copied part of the dataset, but what it copied must be
// right.
func checkFiles(t *testing.T, r *chaosRound, final *dtnflowv1alpha1.TransferJob, res *chaosResult) {
	t.Helper()
	dst, err := framework.ReadTree(r.copyDir)
	if err != nil {
		t.Errorf("reading the copy %s: %v", r.copyDir, err)
		return
	}
	complete := final != nil && final.Status.State == dtnflowv1alpha1.StateComplete
	diffs, compared := framework.CompareTrees(arriving(r.srcTree, cluster.Destination()), dst, !complete)
	res.FilesChecked, res.Mismatches = compared, diffs
	if complete {
		// after Complete nothing of the agents' is left in the destination folder
		all, err := framework.ReadTree(r.destRoot)
		if err == nil {
			for path := range all {
				if framework.IsTemporary(path) {
					res.Debris = append(res.Debris, path)
				}
			}
		}
		sort.Strings(res.Debris)
	}
	res.JournalBytes = dirBytes(filepath.Join(cluster.Destination().Storage, ".dtnflow"))
	for _, m := range res.Mismatches {
		t.Errorf("chaos %s: %s", r.job.Name, m)
	}
	for _, d := range res.Debris {
		t.Errorf("chaos %s: debris after Complete: %s", r.job.Name, d)
	}
}

func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// report logs a round's row and fails the test on anything wrong in it.
func report(t *testing.T, res *chaosResult) {
	t.Helper()
	t.Logf("chaos %s: %d injection(s) %v; %s (expected: %v %s); %d files checked, %d mismatches, %d debris; WAN %d bytes for %d (re-sent %d); recover %s; %d agent failures; %d status versions, %d violations; journal %d bytes; notes %v",
		res.Kind, res.Injections, res.Details, res.Outcome, res.Expected, res.Why, res.FilesChecked, len(res.Mismatches), len(res.Debris),
		res.WANBytes, res.DatasetBytes, res.Resent, durations(res.Recover), res.AgentFailures, res.StatusVersions, len(res.StatusViolations), res.JournalBytes, res.Notes)
	if !res.Expected {
		t.Errorf("chaos %s: outcome %s: %s", res.Kind, res.Outcome, res.Why)
	}
	for _, v := range res.StatusViolations {
		t.Errorf("chaos %s: status went backwards: %s", res.Kind, v)
	}
}

func durations(ds []time.Duration) string {
	if len(ds) == 0 {
		return "-"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("median %s max %s", s[(len(s)-1)/2].Round(100*time.Millisecond), s[len(s)-1].Round(100*time.Millisecond))
}

// saveResults writes the figures as JSON into the artifacts folder and logs them as a
// Markdown table (docs/reliability.md).
func saveResults(t *testing.T, p chaosProfile, seed uint64, results []*chaosResult) {
	dir := framework.ArtifactsDir("chaos")
	_ = os.MkdirAll(dir, 0o755)
	b, _ := json.MarshalIndent(map[string]any{"profile": p.name, "seed": seed, "results": results}, "", "  ")
	path := filepath.Join(dir, fmt.Sprintf("%s-%d.json", p.name, seed))
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Error(err)
	}
	var rows []string
	rows = append(rows, "| fault | injections | data moved | files checked | mismatches | outcome (expected?) | bytes re-sent | recover median / max | status versions (violations) |",
		"|---|---|---|---|---|---|---|---|---|")
	for _, r := range results {
		med, mx := "-", "-"
		if len(r.Recover) > 0 {
			s := slices.Clone(r.Recover)
			slices.Sort(s)
			med, mx = fmt.Sprintf("%.1f s", s[(len(s)-1)/2].Seconds()), fmt.Sprintf("%.1f s", s[len(s)-1].Seconds())
		}
		expected := "yes"
		if !r.Expected {
			expected = "NO: " + r.Why
		}
		moved := fmt.Sprintf("%.1f MiB", float64(r.DatasetBytes)/(1<<20))
		if r.Jobs > 1 {
			moved += fmt.Sprintf(" (%d jobs)", r.Jobs)
		}
		// Re-sent bytes mean something when the whole dataset crossed.
		resent := "-"
		if strings.Contains(r.Outcome, "Complete") || r.Jobs > 1 && r.Expected {
			resent = fmt.Sprintf("%.1f MiB", float64(r.Resent)/(1<<20))
		}
		rows = append(rows, fmt.Sprintf("| %s | %d | %s | %d | %d | %s (%s) | %s | %s / %s | %d (%d) |",
			r.Kind, r.Injections, moved, r.FilesChecked, len(r.Mismatches)+len(r.Debris), r.Outcome, expected,
			resent, med, mx, r.StatusVersions, len(r.StatusViolations)))
	}
	t.Logf("chaos %s, seed %d (%s):\n%s", p.name, seed, path, strings.Join(rows, "\n"))
}

// giveTo gives dir and everything in it to site's agents' user, as a site's data to
// transfer belongs to (or is readable by) its transfer user: the agents run as it, not as
// root, and the dataset's varied modes (0600 among them) would otherwise refuse them.
func giveTo(t *testing.T, dir string, site *framework.Site) {
	t.Helper()
	uid, gid := int(site.Owner.User), int(site.Owner.Group)
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, uid, gid)
	})
	if err != nil {
		t.Fatalf("giving %s to %d:%d: %v", dir, uid, gid, err)
	}
}

// arriving is tree as it must arrive at site: the same bytes, modes and mtimes, owned by
// the site's agents' user (who writes every file there).
func arriving(tree framework.Tree, site *framework.Site) framework.Tree {
	out := make(framework.Tree, len(tree))
	for path, st := range tree {
		st.UID, st.GID = uint32(site.Owner.User), uint32(site.Owner.Group)
		out[path] = st
	}
	return out
}
