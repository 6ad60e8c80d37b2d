package cluster

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// The load round: profile.loadJobs small TransferJobs created at once, with faults
// injected among them every 20–40 s (a manager SIGKILLed, a receiver SIGKILLed, a
// coordinator deleted, the WAN cut for 5–15 s, the API server and etcd restarted; at
// most loadFaults in all), until every job has ended. No job may be stuck: each must
// be Complete within loadTimeout, with its copy checked like any other. The manager's
// memory and CPU are read from /proc through its container's cgroup.
const (
	loadTimeout = 30 * time.Minute
	loadFaults  = 8
)

var loadFaultKinds = []string{"manager-kill", "receiver-kill", "coordinator-delete", "wan-cut", "apiserver-etcd-restart"}

func runLoad(t *testing.T, ctx context.Context, p chaosProfile, rng *rand.Rand) *chaosResult {
	n := p.loadJobs
	res := &chaosResult{Kind: fmt.Sprintf("load: %d jobs at once", n), Jobs: n}
	type loadJob struct {
		job    *dtnflowv1alpha1.TransferJob
		source string
		tree   framework.Tree
		copy   string
	}
	jobs := make([]*loadJob, n)
	for i := range jobs {
		rel := fmt.Sprintf("chaos/load/%03d", i)
		spec := framework.DatasetSpec{Seed: uint64(1000 + i), Small: 3, Empty: i % 2, VariedMetadata: true}
		source := filepath.Join(cluster.Source().Storage, rel)
		_ = os.RemoveAll(source)
		if err := spec.Write(source); err != nil {
			t.Fatal(err)
		}
		giveTo(t, source, cluster.Source())
		tree, err := framework.ReadTree(source)
		if err != nil {
			t.Fatal(err)
		}
		res.DatasetBytes += spec.Bytes()
		job := newJob(fmt.Sprintf("load-%03d", i), rel, "chaos-out/load")
		jobs[i] = &loadJob{job: job, source: source, tree: tree,
			copy: filepath.Join(cluster.Destination().Storage, "chaos-out/load", rel)}
	}
	_ = os.RemoveAll(filepath.Join(cluster.Destination().Storage, "chaos-out/load"))
	t.Cleanup(func() {
		_ = os.RemoveAll(filepath.Join(cluster.Source().Storage, "chaos/load"))
		_ = os.RemoveAll(filepath.Join(cluster.Destination().Storage, "chaos-out/load"))
	})
	watch, err := framework.WatchStatus(cluster.Config, jobNamespace, "")
	if err != nil {
		t.Fatal(err)
	}
	wanBefore, _ := cluster.WANStats(ctx)
	mon := monitorManager(ctx)

	start := time.Now()
	var wg sync.WaitGroup
	next := make(chan *loadJob, n)
	for _, j := range jobs {
		next <- j
	}
	close(next)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				if err := cluster.Client.Create(ctx, j.job); err != nil {
					t.Errorf("creating %s: %v", j.job.Name, err)
				}
			}
		}()
	}
	wg.Wait()
	created := time.Since(start)
	t.Cleanup(func() {
		for _, j := range jobs {
			_ = cluster.Client.Delete(context.Background(), j.job, client.PropagationPolicy(metav1.DeletePropagationBackground))
		}
	})
	t.Logf("chaos load: %d jobs created in %s", n, created.Round(100*time.Millisecond))

	// Faults among the running jobs until all have ended.
	faultsDone := make(chan struct{})
	allEnded := make(chan struct{})
	go func() {
		defer close(faultsDone)
		for res.Injections < loadFaults {
			select {
			case <-allEnded:
				return
			case <-time.After(holdForRng(rng, 20*time.Second, 40*time.Second)):
			}
			kind := faultKinds[loadFaultKinds[rng.IntN(len(loadFaultKinds))]]
			var victim *dtnflowv1alpha1.TransferJob
			var list dtnflowv1alpha1.TransferJobList
			if err := cluster.Client.List(ctx, &list, client.InNamespace(jobNamespace)); err == nil {
				var running []dtnflowv1alpha1.TransferJob
				for _, j := range list.Items {
					if strings.HasPrefix(j.Name, "load-") && j.Status.State == dtnflowv1alpha1.StateTransferring {
						running = append(running, j)
					}
				}
				if len(running) == 0 {
					continue
				}
				victim = &running[rng.IntN(len(running))]
			}
			if victim == nil {
				continue
			}
			r := &chaosRound{t: t, profile: chaosProfile{cutMax: 15 * time.Second}, rng: rng, job: victim}
			at := time.Since(start)
			detail, err := kind.inject(ctx, r)
			if err != nil {
				res.Notes = append(res.Notes, fmt.Sprintf("%s at %s on %s did not take: %v", kind.name, at.Round(time.Second), victim.Name, err))
				continue
			}
			res.Injections++
			res.Details = append(res.Details, fmt.Sprintf("%s at %s (job %s): %s", kind.name, at.Round(time.Second), victim.Name, detail))
			t.Logf("chaos load: %s at %s: %s", kind.name, at.Round(time.Second), detail)
		}
	}()

	// Every job ends, within the bound.
	var allPlanned time.Duration
	deadline := time.Now().Add(loadTimeout)
	var states map[string]int
	for {
		var list dtnflowv1alpha1.TransferJobList
		if err := cluster.Client.List(ctx, &list, client.InNamespace(jobNamespace)); err == nil {
			states = map[string]int{}
			ended, planned := 0, 0
			for _, j := range list.Items {
				if !strings.HasPrefix(j.Name, "load-") {
					continue
				}
				states[string(j.Status.State)]++
				if finishedJob(&j) {
					ended++
				}
				if j.Status.Plan != nil {
					planned++
				}
			}
			if planned == n && allPlanned == 0 {
				allPlanned = time.Since(start)
			}
			if ended == n {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Errorf("chaos load: jobs stuck after %s: %v", loadTimeout, states)
			break
		}
		time.Sleep(2 * time.Second)
	}
	allEndedAt := time.Since(start)
	close(allEnded)
	<-faultsDone
	wanAfter, _ := cluster.WANStats(ctx)
	res.WANBytes = int64(wanAfter.AtoB.DeliveredBytes - wanBefore.AtoB.DeliveredBytes)
	versions, reconnects, violations := watch.Stop()
	res.StatusVersions, res.StatusViolations = versions, violations
	peak, cpu, restarts := mon.stop()

	complete := 0
	for _, j := range jobs {
		got, err := getJob(ctx, j.job)
		if err != nil {
			t.Errorf("%s: %v", j.job.Name, err)
			continue
		}
		res.AgentFailures += got.Status.AgentFailures
		if got.Status.State == dtnflowv1alpha1.StateComplete {
			complete++
		} else {
			res.Mismatches = append(res.Mismatches, fmt.Sprintf("%s ended %s", j.job.Name, describeConditions(got)))
		}
		dst, err := framework.ReadTree(j.copy)
		if err != nil {
			res.Mismatches = append(res.Mismatches, fmt.Sprintf("%s: reading the copy: %v", j.job.Name, err))
			continue
		}
		diffs, compared := framework.CompareTrees(arriving(j.tree, cluster.Destination()), dst, got.Status.State != dtnflowv1alpha1.StateComplete)
		res.FilesChecked += compared
		for _, d := range diffs {
			res.Mismatches = append(res.Mismatches, j.job.Name+": "+d)
		}
		for path := range dst {
			if framework.IsTemporary(path) && got.Status.State == dtnflowv1alpha1.StateComplete {
				res.Debris = append(res.Debris, j.job.Name+": "+path)
			}
		}
	}
	res.Outcome = fmt.Sprintf("%d of %d Complete", complete, n)
	res.Expected = complete == n
	if !res.Expected {
		res.Why = "every job must complete: the faults are all recoverable"
	}
	res.JournalBytes = dirBytes(filepath.Join(cluster.Destination().Storage, ".dtnflow"))
	note := fmt.Sprintf("all created in %s, all planned after %s, all ended after %s; manager RSS peak %.0f MiB, CPU %.1f s over %d process(es); status watch re-opened %d times",
		created.Round(100*time.Millisecond), allPlanned.Round(time.Second), allEndedAt.Round(time.Second), float64(peak)/(1<<20), cpu, restarts, reconnects)
	res.Notes = append(res.Notes, note)
	t.Logf("chaos load: %s", note)
	for _, m := range res.Mismatches {
		t.Errorf("chaos load: %s", m)
	}
	for _, d := range res.Debris {
		t.Errorf("chaos load: debris after Complete: %s", d)
	}
	report(t, res)
	return res
}

func holdForRng(rng *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(rng.Int64N(int64(hi-lo)))
}

// managerMonitor samples the manager's processes every 2 s: the peak resident memory,
// and the CPU time of every process it saw (a killed manager's included).
type managerMonitor struct {
	mu    sync.Mutex
	peak  int64
	cpu   map[int]float64
	stopc chan struct{}
	done  chan struct{}
}

func monitorManager(ctx context.Context) *managerMonitor {
	m := &managerMonitor{cpu: map[int]float64{}, stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for {
			m.sample(ctx)
			select {
			case <-m.stopc:
				return
			case <-time.After(2 * time.Second):
			}
		}
	}()
	return m
}

func (m *managerMonitor) sample(ctx context.Context) {
	var pods corev1.PodList
	if err := cluster.Client.List(ctx, &pods, client.InNamespace(framework.ReleaseNamespace),
		client.MatchingLabels{"app.kubernetes.io/component": "manager"}); err != nil {
		return
	}
	for i := range pods.Items {
		pids, err := cluster.ContainerPIDs(&pods.Items[i], "manager")
		if err != nil {
			continue
		}
		for _, pid := range pids {
			rss, cpu := procRSS(pid), procCPU(pid)
			m.mu.Lock()
			m.peak = max(m.peak, rss)
			if cpu > m.cpu[pid] {
				m.cpu[pid] = cpu
			}
			m.mu.Unlock()
		}
	}
}

// stop returns the peak RSS, the CPU seconds of all manager processes seen, and how
// many there were.
func (m *managerMonitor) stop() (int64, float64, int) {
	close(m.stopc)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	var cpu float64
	for _, c := range m.cpu {
		cpu += c
	}
	return m.peak, cpu, len(m.cpu)
}

func procRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

func procCPU(pid int) float64 {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100
}
