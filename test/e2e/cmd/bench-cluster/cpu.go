package main

import (
	"context"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/test/e2e/framework"
)

// podCPU is what one agent pod asked for and used: its CPU request and the CPU time
// its cgroup accounted (cpuacct.usage, every container of the pod) over the time it
// was seen running. The manager resizes an agent's request when it plans, so the
// request compared is its mean over that time, each value weighted by how long it
// stood; the first and last are kept beside it.
type podCPU struct {
	Role              string `json:"role"`
	Name              string `json:"name"`
	RequestMillicores int64  `json:"requestMillicores"`
	// FirstRequestMillicores and LastRequestMillicores are the request when the pod
	// was first and last seen.
	FirstRequestMillicores int64   `json:"firstRequestMillicores"`
	LastRequestMillicores  int64   `json:"lastRequestMillicores"`
	UsedMillicores         int64   `json:"usedMillicores"`
	Seconds                float64 `json:"seconds"`
	// Ratio is used over requested, from the unrounded means (the two fields above
	// are rounded to whole millicores).
	Ratio float64 `json:"ratio"`
}

// cpuWatcher follows a job's agent pods while it runs: every quarter second it lists them and
// reads each one's cgroup (the node's cgroup parent, kubepods, the QoS class, pod<uid>
// in the cpuacct hierarchy: the local cluster's kubelets use cgroup v1 and the
// cgroupfs driver). Pods are deleted when the job ends, so what counts is the last
// reading of each.
type cpuWatcher struct {
	mu   sync.Mutex
	pods map[string]*podReading
}

type podReading struct {
	role, name    string
	first, last   time.Time
	usage0, usage uint64
	seen          bool
	// firstRequest and request are the first and the latest request seen;
	// requestSeconds is the request integrated over the time up to last (millicore
	// seconds), each reading's request standing since the one before it.
	firstRequest, request int64
	requestSeconds        float64
}

func watchCPU(ctx context.Context, c *framework.Cluster, namespace, job string) *cpuWatcher {
	w := &cpuWatcher{pods: map[string]*podReading{}}
	parents := map[string]string{}
	for _, s := range c.Sites {
		for _, n := range s.Nodes {
			parents[n.Name] = n.CgroupParent
		}
	}
	go func() {
		// a quarter second: a claimed warm agent's first reading comes within it of the claim
		t := time.NewTicker(250 * time.Millisecond)
		defer t.Stop()
		for {
			var pods corev1.PodList
			if err := c.Client.List(ctx, &pods, client.InNamespace(namespace), client.MatchingLabels{contract.LabelJob: job}); err == nil {
				for i := range pods.Items {
					w.read(&pods.Items[i], parents)
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *cpuWatcher) read(p *corev1.Pod, parents map[string]string) {
	if p.Status.Phase != corev1.PodRunning || p.Spec.NodeName == "" {
		return
	}
	qos := ""
	switch p.Status.QOSClass {
	case corev1.PodQOSBurstable:
		qos = "burstable"
	case corev1.PodQOSBestEffort:
		qos = "besteffort"
	}
	dir := filepath.Join("/sys/fs/cgroup/cpuacct", parents[p.Spec.NodeName], "kubepods", qos, "pod"+string(p.UID))
	b, err := os.ReadFile(filepath.Join(dir, "cpuacct.usage"))
	if err != nil {
		return
	}
	usage, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		return
	}
	var req int64
	for _, ctr := range p.Spec.Containers {
		req += ctr.Resources.Requests.Cpu().MilliValue()
	}
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.pods[string(p.UID)]
	if r == nil {
		// the first reading: what the pod used before it is the start's (the agent
		// starting up), counted from the pod's start
		r = &podReading{role: p.Labels[contract.LabelRole], name: p.Name, firstRequest: req, first: now, usage0: 0}
		if _, warm := p.Labels[contract.LabelWarmPool]; warm {
			// a warm pool's agent ran before the job claimed it, waiting: its time and
			// CPU count from the claim, which the job's label (what is listed) dates to
			// within a tick
			r.usage0 = usage
		} else if p.Status.StartTime != nil {
			r.first = p.Status.StartTime.Time
		}
		r.last = r.first
		w.pods[string(p.UID)] = r
	}
	r.observe(req, usage, now)
}

// observe notes a reading: the request and the cgroup's usage at now.
func (r *podReading) observe(req int64, usage uint64, now time.Time) {
	r.requestSeconds += float64(req) * now.Sub(r.last).Seconds()
	r.request, r.last, r.usage, r.seen = req, now, usage, true
}

// results are the pods' requests against the CPU they used, by role then name.
func (w *cpuWatcher) results() []podCPU {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []podCPU
	for _, r := range w.pods {
		dt := r.last.Sub(r.first).Seconds()
		if !r.seen || dt < 1 {
			continue
		}
		used := float64(r.usage-r.usage0) / 1e9 / dt * 1000
		requested := r.requestSeconds / dt
		pc := podCPU{Role: r.role, Name: r.name, RequestMillicores: int64(math.Round(requested)), UsedMillicores: int64(math.Round(used)), Seconds: dt,
			FirstRequestMillicores: r.firstRequest, LastRequestMillicores: r.request}
		if requested > 0 {
			// from the unrounded figures: a coordinator's 2.4 against 2.6 millicores is
			// 0.92, not the 2 against 3 (0.67) of the whole millicores shown
			pc.Ratio = used / requested
		}
		out = append(out, pc)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Role != out[j].Role {
			return out[i].Role < out[j].Role
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// summary is the pods' requests and use for the table: "send 250m/212m (0.85×)".
func cpuSummary(pods []podCPU) string {
	var parts []string
	for _, p := range pods {
		short := strings.TrimPrefix(p.Role, "")
		switch p.Role {
		case string(contract.RoleSender):
			short = "send"
		case string(contract.RoleReceiver):
			short = "recv"
		case string(contract.RoleCoordinator):
			short = "coord"
		}
		ratio := "–"
		if p.RequestMillicores > 0 {
			ratio = fmt.Sprintf("%.2f×", p.Ratio)
		}
		parts = append(parts, fmt.Sprintf("%s %dm/%dm (%s)", short, p.RequestMillicores, p.UsedMillicores, ratio))
	}
	return strings.Join(parts, ", ")
}
