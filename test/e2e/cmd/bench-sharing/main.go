// Command bench-sharing measures jobs sharing one path through the operator on the
// local cluster (make bench-sharing, issue 13): it sets the WAN (1 Gbit/s, 50 ms by
// default), runs one job alone on the cold path (its rate is the reference the shared
// runs are compared with, and it teaches the PathProfile), then starts -jobs jobs
// together with the priorities of -weights (a TransferPriorityClass per weight above
// 1), and, with -late, one more job that arrives -late-after later. It reads every job's
// status each second and reports, over the time all of them were transferring
// together, each job's rate (bytes verified over that time), its share as the operator
// planned it, its rate per unit of weight, Jain's fairness index of those, and the
// aggregate against the link and against the job alone; and for the late job, how long
// the running jobs took to re-plan for it (their Replan of reason PathJobArrived) and
// how long until it moved at 90 % of its share. Every file's SHA-256 is compared at
// site B afterwards. A table goes to stdout, one JSON line per run to -json.
//
// With -flows N it measures item 4 instead: N long-lived iperf3 flows cross the WAN
// alone for 12 s (their aggregate is the bottleneck's capacity for TCP), then one job
// of -size in -fairness mode runs on the cold path to Complete; each flow's rate from
// 5 s after the job's first byte to its end is reported as a fraction of a fair share,
// the flows' aggregate alone ÷ (N + 1).
//
//	bench-sharing -jobs 3 -weights 1,1,1 -size 1GiB
//	bench-sharing -jobs 2 -weights 2,1 -size 1GiB -late -late-after 20s
//	bench-sharing -flows 3 -fairness Strict -size 1GiB
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/bench/wan"
	"github.com/dtnflow/dtnflow/test/dataset"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
	"github.com/dtnflow/dtnflow/test/wanem"
)

// JobResult is one job of a shared run.
type JobResult struct {
	Name   string `json:"name"`
	Weight int    `json:"weight"`
	Late   bool   `json:"late,omitempty"`
	// OverlapBitsPerSecond is the job's bytes verified while every job transferred, over
	// that time.
	OverlapBitsPerSecond int64 `json:"overlapBitsPerSecond"`
	// ShareBitsPerSecond is status.sharing.shareBitsPerSecond then.
	ShareBitsPerSecond int64 `json:"shareBitsPerSecond"`
	// Timeline is the job's reports as read: seconds since the shared jobs were
	// created, bytes verified, the current rate and the share.
	Timeline [][4]int64 `json:"timeline"`
	Seconds  float64    `json:"seconds"`
	Plan     string     `json:"plan"`
	Replans  []string   `json:"replans"`
	State    string     `json:"state"`
}

// Result is one run.
type Result struct {
	Rate    int64  `json:"rateBitsPerSecond"`
	RTT     string `json:"rtt"`
	Bytes   int64  `json:"bytesPerJob"`
	Weights []int  `json:"weights"`
	// AloneBitsPerSecond is the job alone on the path: its bytes over its time from
	// Transferring to Complete, and its plan's predicted rate.
	AloneBitsPerSecond          int64 `json:"aloneBitsPerSecond"`
	AlonePredictedBitsPerSecond int64 `json:"alonePredictedBitsPerSecond"`
	Jobs                        []JobResult
	OverlapSeconds              float64 `json:"overlapSeconds"`
	AggregateBitsPerSecond      int64   `json:"aggregateBitsPerSecond"`
	Jain                        float64 `json:"jain"`
	// ReplanSeconds are, for each job running when the late one arrived, the time from
	// its creation to their Replan for it; LateShareSeconds is until the late job moved
	// at 90 % of its share.
	ReplanSeconds    []float64 `json:"replanSeconds,omitempty"`
	LateShareSeconds float64   `json:"lateShareSeconds,omitempty"`
	// OthersMinOfShare is the lowest rate the others reported in the late job's first
	// 30 s, over their share then (-1: none reported).
	OthersMinOfShare float64 `json:"othersMinOfShare,omitempty"`
	// Reported* are the same comparison from the rates the jobs reported
	// (status.progress.currentBitsPerSecond), averaged over the reads between the
	// first time every job started together reported one and the first completion:
	// a job of one file verifies its bytes in whole chunks (64 MiB, 256 MiB before 539b39f), coarse for a window
	// of 15–30 s, where the reported rate is the bytes its receiver acknowledged.
	ReportedBitsPerSecond          []int64 `json:"reportedBitsPerSecond,omitempty"`
	ReportedAggregateBitsPerSecond int64   `json:"reportedAggregateBitsPerSecond,omitempty"`
	ReportedJain                   float64 `json:"reportedJain,omitempty"`
	// OfOptimum and ReportedOfOptimum are the aggregates over one job's optimum: the
	// rate the job alone's plan predicted, the path's capacity as its model found it.
	OfOptimum         float64 `json:"ofOptimum,omitempty"`
	ReportedOfOptimum float64 `json:"reportedOfOptimum,omitempty"`
	Error             string  `json:"error,omitempty"`
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-sharing:", err)
		os.Exit(1)
	}
}

func run() error {
	rate := flag.String("rate", "1G", "bottleneck rate (bits/s)")
	rtt := flag.Duration("rtt", 50*time.Millisecond, "round-trip time")
	jobs := flag.Int("jobs", 3, "jobs started together")
	weights := flag.String("weights", "", "the jobs' priorities, comma-separated (default all 1)")
	size := flag.String("size", "1GiB", "each job's one file")
	aloneSize := flag.String("alone-size", "", "the file of the job alone (default -size)")
	late := flag.Bool("late", false, "one more job (priority 1) arrives -late-after after the others")
	lateAfter := flag.Duration("late-after", 20*time.Second, "when the late job arrives")
	jsonOut := flag.String("json", "", "append one JSON line per run to this file")
	reuse := flag.Bool("reuse", false, "use the running local cluster instead of starting one")
	keep := flag.Bool("keep", false, "leave the cluster running at the end")
	timeout := flag.Duration("timeout", 15*time.Minute, "bound of each phase")
	filesOf := flag.String("files-of", "0", "each job's bytes as files of this size (0: one file of -size, whose verified bytes move in whole chunks of 64 MiB; with 64 files of 16 MiB the job alone's probe stopped early, its profile left incomplete, and the shared jobs took turns probing, each starting about 6 s after the one before)")
	managerLog := flag.String("manager-log", "", "write the manager's log here at the end of the run (why a job waited is in it)")
	flows := flag.Int("flows", 0, "instead of shared jobs: one job of -size against this many long-lived iperf3 flows on the WAN, in -fairness mode")
	fairnessMode := flag.String("fairness", "Strict", "the job's spec.tuning.fairness with -flows: Strict or Default")
	flag.Parse()

	linkRate, err := wanem.ParseRate(*rate)
	if err != nil {
		return err
	}
	fileBytes, err := wanem.ParseBytes(*size)
	if err != nil {
		return err
	}
	aloneBytes := fileBytes
	if *aloneSize != "" {
		if aloneBytes, err = wanem.ParseBytes(*aloneSize); err != nil {
			return err
		}
	}
	ws := make([]int, *jobs)
	for i := range ws {
		ws[i] = 1
	}
	if *weights != "" {
		parts := strings.Split(*weights, ",")
		if len(parts) != *jobs {
			return fmt.Errorf("-weights has %d values for %d jobs", len(parts), *jobs)
		}
		for i, p := range parts {
			if ws[i], err = strconv.Atoi(strings.TrimSpace(p)); err != nil || ws[i] < 1 {
				return fmt.Errorf("-weights %q: want integers ≥ 1", *weights)
			}
		}
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	var c *framework.Cluster
	if *reuse {
		c, err = framework.Load(framework.Dir())
	} else {
		c, err = framework.Up(ctx, os.Stderr)
		if err == nil && !*keep {
			defer func() { _ = framework.Down(context.Background(), os.Stderr) }()
		}
	}
	if err != nil {
		return err
	}
	if out, err := c.InstallDtnflow(ctx); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	if err := applyEndpoints(ctx, c, int32(*jobs+1)); err != nil {
		return err
	}
	if err := c.SetWAN(ctx, linkRate, *rtt/2, 0, 0); err != nil {
		return err
	}
	res := Result{Rate: linkRate, RTT: rtt.String(), Bytes: fileBytes, Weights: ws}
	filesOfBytes := int64(0)
	if *filesOf != "0" {
		if filesOfBytes, err = wanem.ParseBytes(*filesOf); err != nil {
			return err
		}
	}
	b := &bench{c: c, fileBytes: fileBytes, aloneBytes: aloneBytes, filesOf: filesOfBytes, timeout: *timeout}
	defer b.cleanup()
	if *managerLog != "" {
		defer func() {
			out, err := c.Kubectl(context.Background(), "-n", "dtnflow-system", "logs", "deploy/dtnflow-manager", "--tail=-1")
			if err != nil {
				fmt.Fprintln(os.Stderr, "bench-sharing: the manager's log:", err)
			}
			if werr := os.WriteFile(*managerLog, []byte(out), 0o644); werr != nil {
				fmt.Fprintln(os.Stderr, "bench-sharing: the manager's log:", werr)
			}
		}()
	}
	if *flows > 0 {
		fr, err := b.fairness(ctx, dtnflowv1alpha1.FairnessMode(*fairnessMode), *flows)
		reportFairness(os.Stdout, fr)
		if jerr := appendJSON(*jsonOut, struct {
			Rate     int64  `json:"rateBitsPerSecond"`
			RTT      string `json:"rtt"`
			Bytes    int64  `json:"bytesPerJob"`
			Fairness FairnessResult
			Error    string `json:"error,omitempty"`
		}{linkRate, rtt.String(), fileBytes, fr, errString(err)}); jerr != nil {
			return jerr
		}
		return err
	}
	if err := b.measure(ctx, &res, ws, *late, *lateAfter); err != nil {
		res.Error = err.Error()
	}
	report(os.Stdout, &res)
	if err := appendJSON(*jsonOut, res); err != nil {
		return err
	}
	if res.Error != "" {
		return fmt.Errorf("%s", res.Error)
	}
	return nil
}

// appendJSON appends v as one JSON line to path (nothing when path is empty).
func appendJSON(path string, v any) error {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	line, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(f, string(line))
	return err
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

type bench struct {
	c                     *framework.Cluster
	fileBytes, aloneBytes int64
	// filesOf, when set, splits each job's bytes into files of this size
	filesOf int64
	timeout time.Duration
	dirs    []string
	objects []client.Object
}

func (b *bench) cleanup() {
	for _, o := range b.objects {
		_ = b.c.Client.Delete(context.Background(), o)
	}
	for _, d := range b.dirs {
		_ = os.RemoveAll(d)
	}
}

// job writes a job's file of size bytes at site A and returns the job (not created).
func (b *bench) job(name string, class string, size int64) (*dtnflowv1alpha1.TransferJob, error) {
	rel := "sharing/" + name
	dir := filepath.Join(b.c.Source().Storage, rel)
	_ = os.RemoveAll(dir)
	spec := wan.DatasetSpec{Kind: wan.Large, LargeBytes: size, Seed: uint64(len(b.dirs) + 1)}
	if b.filesOf > 0 && b.filesOf < size {
		// files of filesOf bytes: a job's verified bytes then move in steps of one file,
		// not of one 64 MiB chunk, and a window of a few seconds reads its rate
		spec = wan.DatasetSpec{Kind: wan.Small, SmallCount: int(size / b.filesOf), SmallBytes: b.filesOf, Seed: spec.Seed}
	}
	if _, err := wan.Generate(spec, dir); err != nil {
		return nil, err
	}
	dest := filepath.Join(b.c.Destination().Storage, "incoming-sharing")
	b.dirs = append(b.dirs, dir, filepath.Join(dest, rel))
	verify := false
	j := &dtnflowv1alpha1.TransferJob{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "bench"},
		Spec: dtnflowv1alpha1.TransferJobSpec{
			Source:            dtnflowv1alpha1.TransferSource{Endpoint: b.c.Source().Name, Paths: []dtnflowv1alpha1.RelativePath{dtnflowv1alpha1.RelativePath(rel)}},
			Destination:       dtnflowv1alpha1.TransferDestination{Endpoint: b.c.Destination().Name, Path: "incoming-sharing"},
			Integrity:         dtnflowv1alpha1.TransferIntegrity{Checksum: dtnflowv1alpha1.ChecksumBLAKE3, Verify: &verify},
			PriorityClassName: class,
		},
	}
	_ = b.c.Client.Delete(context.Background(), j)
	for i := 0; i < 120; i++ {
		if err := b.c.Client.Get(context.Background(), client.ObjectKeyFromObject(j), &dtnflowv1alpha1.TransferJob{}); apierrors.IsNotFound(err) {
			break
		}
		time.Sleep(500 * time.Millisecond)
	}
	return j, nil
}

func (b *bench) create(ctx context.Context, o client.Object) error {
	if err := b.c.Client.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	b.objects = append(b.objects, o)
	return nil
}

// sample is one reading of a job's status.
type sample struct {
	at       time.Time
	state    dtnflowv1alpha1.TransferState
	bytes    int64
	current  int64
	share    int64
	reported time.Time
}

func (b *bench) read(ctx context.Context, j *dtnflowv1alpha1.TransferJob) (*dtnflowv1alpha1.TransferJob, sample, error) {
	var got dtnflowv1alpha1.TransferJob
	if err := b.c.Client.Get(ctx, client.ObjectKeyFromObject(j), &got); err != nil {
		return nil, sample{}, err
	}
	s := sample{at: time.Now(), state: got.Status.State}
	if p := got.Status.Progress; p != nil {
		s.bytes, s.current = p.BytesDone, p.CurrentBitsPerSecond
		if p.LastUpdateTime != nil {
			s.reported = p.LastUpdateTime.Time
		}
	}
	if sh := got.Status.Sharing; sh != nil {
		s.share = sh.ShareBitsPerSecond
	}
	return &got, s, nil
}

func done(s dtnflowv1alpha1.TransferState) bool {
	return s == dtnflowv1alpha1.StateComplete || s == dtnflowv1alpha1.StateFailed
}

func (b *bench) measure(ctx context.Context, res *Result, weights []int, late bool, lateAfter time.Duration) error {
	// the path cold, then one job alone
	if err := b.forgetPath(ctx); err != nil {
		return err
	}
	alone, err := b.job("alone", "", b.aloneBytes)
	if err != nil {
		return err
	}
	if err := b.create(ctx, alone); err != nil {
		return err
	}
	var first, last sample
	deadline := time.Now().Add(b.timeout)
	for {
		got, s, err := b.read(ctx, alone)
		if err != nil {
			return err
		}
		if s.state == dtnflowv1alpha1.StateTransferring && first.at.IsZero() {
			first = s
		}
		if done(s.state) {
			if s.state != dtnflowv1alpha1.StateComplete {
				return fmt.Errorf("the job alone ended %s", s.state)
			}
			last = s
			if got.Status.Plan != nil {
				res.AlonePredictedBitsPerSecond = got.Status.Plan.PredictedBitsPerSecond
			}
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the job alone is not complete after %s", b.timeout)
		}
		time.Sleep(time.Second)
	}
	res.AloneBitsPerSecond = int64(float64(last.bytes-first.bytes) * 8 / last.at.Sub(first.at).Seconds())
	// its files make room for the shared jobs' (the storage is tmpfs)
	_ = os.RemoveAll(filepath.Join(b.c.Source().Storage, "sharing", alone.Name))
	_ = os.RemoveAll(filepath.Join(b.c.Destination().Storage, "incoming-sharing", "sharing", alone.Name))

	// the priority classes, then the jobs together
	classes := map[int]string{}
	for _, w := range weights {
		if w == 1 || classes[w] != "" {
			continue
		}
		pc := &dtnflowv1alpha1.TransferPriorityClass{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-priority-%d", w)},
			Spec: dtnflowv1alpha1.TransferPriorityClassSpec{Priority: int32(w), NamespaceSelector: &metav1.LabelSelector{}}}
		if err := b.create(ctx, pc); err != nil {
			return err
		}
		classes[w] = pc.Name
	}
	var jobs []*dtnflowv1alpha1.TransferJob
	for i, w := range weights {
		j, err := b.job(fmt.Sprintf("shared-%d", i), classes[w], b.fileBytes)
		if err != nil {
			return err
		}
		jobs = append(jobs, j)
		res.Jobs = append(res.Jobs, JobResult{Name: j.Name, Weight: w})
	}
	var lateJob *dtnflowv1alpha1.TransferJob
	if late {
		if lateJob, err = b.job("late", "", b.fileBytes); err != nil {
			return err
		}
		res.Jobs = append(res.Jobs, JobResult{Name: lateJob.Name, Weight: 1, Late: true})
	}
	start := time.Now()
	for _, j := range jobs {
		if err := b.create(ctx, j); err != nil {
			return err
		}
	}
	all := append([]*dtnflowv1alpha1.TransferJob(nil), jobs...)
	samples := make([][]sample, len(weights)+1)
	var lateCreated time.Time
	finished := map[int]*dtnflowv1alpha1.TransferJob{}
	deadline = time.Now().Add(b.timeout)
	for len(finished) < len(all) || (late && lateCreated.IsZero()) {
		if late && lateCreated.IsZero() && time.Since(start) >= lateAfter {
			if err := b.create(ctx, lateJob); err != nil {
				return err
			}
			lateCreated = time.Now()
			all = append(all, lateJob)
		}
		for i, j := range all {
			if finished[i] != nil {
				continue
			}
			got, s, err := b.read(ctx, j)
			if err != nil {
				return err
			}
			samples[i] = append(samples[i], s)
			if done(s.state) {
				finished[i] = got
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the shared jobs are not complete after %s", b.timeout)
		}
		time.Sleep(time.Second)
	}

	// the window where every job started together transferred, and they alone: from
	// the last one's first report of bytes moved to the first one's last report before
	// it completed (report times, as the coordinators stamped them), or to the late
	// job's creation if that comes first — from then on the path has five jobs, each
	// paced to a fifth, and the four's sum is four fifths of the path, not the
	// aggregate. The late job is measured by its own figures below: over the few
	// seconds all five overlap, rates read from verified chunks are too coarse to
	// compare (Jain 0.73 over 7 s in the first run).
	var from, to time.Time
	for i := range jobs {
		pts := reports(samples[i])
		if len(pts) == 0 {
			return fmt.Errorf("job %s never reported bytes moved", all[i].Name)
		}
		if f := pts[0].reported; f.After(from) {
			from = f
		}
		if e := pts[len(pts)-1].reported; to.IsZero() || e.Before(to) {
			to = e
		}
	}
	if !lateCreated.IsZero() && lateCreated.Before(to) {
		to = lateCreated
	}
	res.OverlapSeconds = to.Sub(from).Seconds()
	var perWeight []float64
	for i := range all {
		jr := &res.Jobs[i]
		got := finished[i]
		jr.State = string(got.Status.State)
		jr.Seconds = got.Status.CompletionTime.Sub(got.CreationTimestamp.Time).Seconds()
		if p := got.Status.Plan; p != nil {
			jr.Plan = fmt.Sprintf("%d × %d × %d", len(p.SourceNodes), p.StripesPerNode, p.StreamsPerStripe)
		}
		for _, r := range got.Status.Replans {
			jr.Replans = append(jr.Replans, fmt.Sprintf("%s@%s", r.Reason, r.Time.Sub(got.CreationTimestamp.Time).Round(time.Second)))
		}
		pts := reports(samples[i])
		if secs := to.Sub(from).Seconds(); secs > 0 && i < len(jobs) && len(pts) > 0 {
			jr.OverlapBitsPerSecond = int64((bytesAt(pts, to) - bytesAt(pts, from)) * 8 / secs)
		}
		jr.ShareBitsPerSecond = at(samples[i], from.Add(to.Sub(from)/2)).share
		for _, s := range samples[i] {
			jr.Timeline = append(jr.Timeline, [4]int64{int64(s.at.Sub(start) / time.Second), s.bytes, s.current, s.share})
		}
		if i < len(jobs) {
			res.AggregateBitsPerSecond += jr.OverlapBitsPerSecond
			perWeight = append(perWeight, float64(jr.OverlapBitsPerSecond)/float64(jr.Weight))
		}
		if jr.State != string(dtnflowv1alpha1.StateComplete) {
			return fmt.Errorf("job %s ended %s", jr.Name, jr.State)
		}
	}
	res.Jain = wan.Jain(perWeight)
	res.reportedRates(samples[:len(jobs)], weights, lateCreated)
	if res.AlonePredictedBitsPerSecond > 0 {
		res.OfOptimum = float64(res.AggregateBitsPerSecond) / float64(res.AlonePredictedBitsPerSecond)
		res.ReportedOfOptimum = float64(res.ReportedAggregateBitsPerSecond) / float64(res.AlonePredictedBitsPerSecond)
	}
	if late {
		li := len(all) - 1
		for i := range jobs {
			got := finished[i]
			for _, r := range got.Status.Replans {
				if r.Reason == "PathJobArrived" && !r.Time.Time.Before(lateCreated.Truncate(time.Second)) {
					res.ReplanSeconds = append(res.ReplanSeconds, r.Time.Sub(lateCreated.Truncate(time.Second)).Seconds())
					break
				}
			}
		}
		// the others while the late one joins: their lowest reported rate over its
		// first 30 s, as a fraction of their share then (a stall reads 0)
		res.OthersMinOfShare = -1
		for i := range jobs {
			for _, s := range samples[i] {
				if s.at.Before(lateCreated) || s.at.After(lateCreated.Add(30*time.Second)) || s.state != dtnflowv1alpha1.StateTransferring || s.share <= 0 {
					continue
				}
				if f := float64(s.current) / float64(s.share); res.OthersMinOfShare < 0 || f < res.OthersMinOfShare {
					res.OthersMinOfShare = f
				}
			}
		}
		res.LateShareSeconds = -1 // not reached
		for _, s := range samples[li] {
			if s.reported.After(lateCreated) && s.share > 0 && s.current >= s.share*9/10 {
				res.LateShareSeconds = s.reported.Sub(lateCreated).Seconds()
				break
			}
		}
	}
	// every file as it was
	for _, j := range all {
		if err := b.sameFiles(j); err != nil {
			return err
		}
	}
	return nil
}

// reportedRates fills the Reported* figures from the shared jobs' reads, over the
// window from the read where the last of them first reported a rate to the first
// completion, or to until (the late job's creation) if that is earlier and not zero.
func (res *Result) reportedRates(samples [][]sample, weights []int, until time.Time) {
	var from, to time.Time
	for _, ss := range samples {
		first, done := time.Time{}, time.Time{}
		for _, s := range ss {
			if first.IsZero() && s.current > 0 {
				first = s.at
			}
			if done.IsZero() && s.state == dtnflowv1alpha1.StateComplete {
				done = s.at
			}
		}
		if first.After(from) {
			from = first
		}
		if !done.IsZero() && (to.IsZero() || done.Before(to)) {
			to = done
		}
	}
	if !until.IsZero() && (to.IsZero() || until.Before(to)) {
		to = until
	}
	var perWeight []float64
	for i, ss := range samples {
		var sum float64
		n := 0
		for _, s := range ss {
			if !s.at.Before(from) && s.at.Before(to) {
				sum, n = sum+float64(s.current), n+1
			}
		}
		rate := 0.0
		if n > 0 {
			rate = sum / float64(n)
		}
		res.ReportedBitsPerSecond = append(res.ReportedBitsPerSecond, int64(rate))
		res.ReportedAggregateBitsPerSecond += int64(rate)
		perWeight = append(perWeight, rate/float64(weights[i]))
	}
	res.ReportedJain = wan.Jain(perWeight)
}

// sameFiles compares a job's copy at site B with its source, file by file (SHA-256).
func (b *bench) sameFiles(j *dtnflowv1alpha1.TransferJob) error {
	src := filepath.Join(b.c.Source().Storage, string(j.Spec.Source.Paths[0]))
	dst := filepath.Join(b.c.Destination().Storage, "incoming-sharing", string(j.Spec.Source.Paths[0]))
	diff, _, err := dataset.CompareFolders(src, dst)
	if err != nil {
		return fmt.Errorf("job %s: %w", j.Name, err)
	}
	if diff != "" {
		return fmt.Errorf("job %s: the copy differs: %s", j.Name, strings.SplitN(diff, "\n", 2)[0])
	}
	return nil
}

// reports are a job's distinct reports while it moved data: the first sample of each
// report time with bytes verified.
func reports(ss []sample) []sample {
	var out []sample
	for _, s := range ss {
		if s.bytes <= 0 || s.reported.IsZero() || (len(out) > 0 && !s.reported.After(out[len(out)-1].reported)) {
			continue
		}
		out = append(out, s)
	}
	return out
}

// bytesAt is the bytes verified at t, interpolated linearly between reports.
func bytesAt(pts []sample, t time.Time) float64 {
	if !t.After(pts[0].reported) {
		return float64(pts[0].bytes)
	}
	for i := 1; i < len(pts); i++ {
		if !t.After(pts[i].reported) {
			a, z := pts[i-1], pts[i]
			f := t.Sub(a.reported).Seconds() / z.reported.Sub(a.reported).Seconds()
			return float64(a.bytes) + f*float64(z.bytes-a.bytes)
		}
	}
	return float64(pts[len(pts)-1].bytes)
}

// at is the latest sample at or before t (the first one when none is).
func at(ss []sample, t time.Time) sample {
	i := sort.Search(len(ss), func(i int) bool { return ss[i].at.After(t) })
	if i == 0 {
		return ss[0]
	}
	return ss[i-1]
}

func mbits(xs []int64) []int64 {
	out := make([]int64, len(xs))
	for i, x := range xs {
		out[i] = int64(math.Round(float64(x) / 1e6))
	}
	return out
}

func report(w io.Writer, r *Result) {
	fmt.Fprintf(w, "link %s, RTT %s, %d MiB per job; alone: %.0f Mbit/s (plan predicted %.0f)\n\n", wanem.FormatRate(float64(r.Rate)), r.RTT, r.Bytes>>20,
		float64(r.AloneBitsPerSecond)/1e6, float64(r.AlonePredictedBitsPerSecond)/1e6)
	fmt.Fprintf(w, "| job | weight | share Mbit/s | measured Mbit/s | measured / weight | plan | time s | re-plans (reason@since creation) |\n|---|---|---|---|---|---|---|---|\n")
	for _, j := range r.Jobs {
		name := j.Name
		if j.Late {
			name += " (late)"
		}
		fmt.Fprintf(w, "| %s | %d | %.0f | %.0f | %.0f | %s | %.0f | %s |\n", name, j.Weight, float64(j.ShareBitsPerSecond)/1e6,
			float64(j.OverlapBitsPerSecond)/1e6, float64(j.OverlapBitsPerSecond)/1e6/float64(j.Weight), j.Plan, j.Seconds, strings.Join(j.Replans, " "))
	}
	fmt.Fprintf(w, "\nthe jobs started together, all transferring and no other, for %.0f s: aggregate %.0f Mbit/s = %.2f of the link, %.2f of the job alone, %.3f of its plan's optimum; Jain's index of rate per weight %.3f\n",
		r.OverlapSeconds, float64(r.AggregateBitsPerSecond)/1e6, float64(r.AggregateBitsPerSecond)/float64(r.Rate),
		float64(r.AggregateBitsPerSecond)/math.Max(1, float64(r.AloneBitsPerSecond)), r.OfOptimum, r.Jain)
	fmt.Fprintf(w, "from the rates they reported over that time: %v Mbit/s, aggregate %.0f Mbit/s = %.2f of the link, %.2f of the job alone, %.3f of its plan's optimum; Jain's index of rate per weight %.3f\n",
		mbits(r.ReportedBitsPerSecond), float64(r.ReportedAggregateBitsPerSecond)/1e6, float64(r.ReportedAggregateBitsPerSecond)/float64(r.Rate),
		float64(r.ReportedAggregateBitsPerSecond)/math.Max(1, float64(r.AloneBitsPerSecond)), r.ReportedOfOptimum, r.ReportedJain)
	if len(r.ReplanSeconds) > 0 || r.LateShareSeconds != 0 {
		moved := fmt.Sprintf("it moved at 90 %% of its share %.0f s after its creation", r.LateShareSeconds)
		if r.LateShareSeconds < 0 {
			moved = "it never reported 90 % of its share while the others ran"
		}
		fmt.Fprintf(w, "late job: the running jobs re-planned for it %v s after its creation; %s; the others' lowest rate in its first 30 s: %.2f of their share\n",
			r.ReplanSeconds, moved, r.OthersMinOfShare)
	}
	if r.Error != "" {
		fmt.Fprintf(w, "error: %s\n", r.Error)
	}
}

// applyEndpoints creates the cluster's TransferEndpoints, each node allowing at least
// minStripes stripes: every job of a run holds one stripe at site A's one node, and the
// cluster's default of 4 would keep a fifth job waiting for a slot (NoFreeStripeSlot)
// instead of sharing the path.
func applyEndpoints(ctx context.Context, c *framework.Cluster, minStripes int32) error {
	raw, err := os.ReadFile(c.Endpoints)
	if err != nil {
		return err
	}
	for _, doc := range strings.Split(string(raw), "\n---") {
		var ep dtnflowv1alpha1.TransferEndpoint
		if err := yaml.Unmarshal([]byte(doc), &ep); err != nil || ep.Name == "" {
			continue
		}
		ep.Spec.MaxStripesPerNode = max(ep.Spec.MaxStripesPerNode, minStripes)
		if err := c.Client.Create(ctx, &ep); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench", Labels: map[string]string{"dtnflow.io/transfers": "allowed"}}}
	if err := c.Client.Create(ctx, ns); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, site := range c.Sites {
		for {
			var ep dtnflowv1alpha1.TransferEndpoint
			if err := c.Client.Get(ctx, client.ObjectKey{Name: site.Name}, &ep); err == nil && meta.IsStatusConditionTrue(ep.Status.Conditions, "Ready") {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("TransferEndpoint %s is not Ready", site.Name)
			}
			time.Sleep(time.Second)
		}
	}
	return nil
}
