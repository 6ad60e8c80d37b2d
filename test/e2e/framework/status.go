package framework

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// StatusSteps checks one step of a TransferJob's life as a watch sees it, from prev to
// next, and describes every way in which next went backwards or lost what prev had:
// verified bytes and files, percent, agent failures, re-plans and probe samples only
// grow (up to the API's bounds on the lists); start and completion times, once set,
// never change; a finished job stays finished in the same state; the resourceVersion
// and observedGeneration never go back. A status written over a newer one without the
// resourceVersion precondition would show here as a count or a list going back.
func StatusSteps(prev, next *dtnflowv1alpha1.TransferJob) []string {
	var bad []string
	add := func(format string, args ...any) { bad = append(bad, fmt.Sprintf(format, args...)) }
	ps, ns := &prev.Status, &next.Status
	if a, errA := strconv.ParseUint(prev.ResourceVersion, 10, 64); errA == nil {
		if b, errB := strconv.ParseUint(next.ResourceVersion, 10, 64); errB == nil && b < a {
			add("resourceVersion %d after %d", b, a)
		}
	}
	if ns.ObservedGeneration < ps.ObservedGeneration {
		add("observedGeneration %d after %d", ns.ObservedGeneration, ps.ObservedGeneration)
	}
	if pp := ps.Progress; pp != nil {
		np := ns.Progress
		switch {
		case np == nil:
			add("progress vanished (was %d bytes)", pp.BytesDone)
		default:
			if np.BytesDone < pp.BytesDone {
				add("bytesDone %d after %d", np.BytesDone, pp.BytesDone)
			}
			if np.FilesDone < pp.FilesDone {
				add("filesDone %d after %d", np.FilesDone, pp.FilesDone)
			}
			if np.Percent < pp.Percent {
				add("percent %d after %d", np.Percent, pp.Percent)
			}
			if pp.LastUpdateTime != nil && (np.LastUpdateTime == nil || np.LastUpdateTime.Before(pp.LastUpdateTime)) {
				add("progress.lastUpdateTime %v after %v", np.LastUpdateTime, pp.LastUpdateTime)
			}
		}
	}
	if ns.AgentFailures < ps.AgentFailures {
		add("agentFailures %d after %d", ns.AgentFailures, ps.AgentFailures)
	}
	if len(ns.Replans) < len(ps.Replans) {
		add("%d re-plans after %d", len(ns.Replans), len(ps.Replans))
	} else if n := len(ps.Replans); n > 0 && !containsReplan(ns.Replans, ps.Replans[n-1]) {
		add("the last re-plan (%s at %v) is gone", ps.Replans[n-1].Reason, ps.Replans[n-1].Time)
	}
	if len(ns.Samples) < len(ps.Samples) {
		add("%d probe samples after %d", len(ns.Samples), len(ps.Samples))
	}
	if ps.StartTime != nil && (ns.StartTime == nil || !ns.StartTime.Equal(ps.StartTime)) {
		add("startTime %v after %v", ns.StartTime, ps.StartTime)
	}
	if ps.CompletionTime != nil && (ns.CompletionTime == nil || !ns.CompletionTime.Equal(ps.CompletionTime)) {
		add("completionTime %v after %v", ns.CompletionTime, ps.CompletionTime)
	}
	for _, end := range []string{dtnflowv1alpha1.ConditionComplete, dtnflowv1alpha1.ConditionFailed} {
		if meta.IsStatusConditionTrue(ps.Conditions, end) && !meta.IsStatusConditionTrue(ns.Conditions, end) {
			add("condition %s was True and is not any more (state %s)", end, ns.State)
		}
	}
	return bad
}

func containsReplan(list []dtnflowv1alpha1.Replan, r dtnflowv1alpha1.Replan) bool {
	for _, x := range list {
		if x.Time.Equal(&r.Time) && x.Reason == r.Reason {
			return true
		}
	}
	return false
}

// StatusWatch follows one TransferJob through a watch — re-opened from the last
// resourceVersion when it breaks (an API server restart), from a fresh read when that
// version is gone — and applies StatusSteps to every version it sees.
type StatusWatch struct {
	mu         sync.Mutex
	last       map[string]*dtnflowv1alpha1.TransferJob // by name
	versions   int
	reconnects int
	violations []string
	stop       context.CancelFunc
	done       chan struct{}
}

// WatchStatus starts following the job namespace/name (every job of the namespace
// when name is "").
func WatchStatus(cfg *rest.Config, namespace, name string) (*StatusWatch, error) {
	wc, err := client.NewWithWatch(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	w := &StatusWatch{stop: cancel, done: make(chan struct{}), last: map[string]*dtnflowv1alpha1.TransferJob{}}
	go w.run(ctx, wc, namespace, name)
	return w, nil
}

func (w *StatusWatch) observe(job *dtnflowv1alpha1.TransferJob) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if last := w.last[job.Name]; last != nil {
		if job.ResourceVersion == last.ResourceVersion {
			return
		}
		for _, v := range StatusSteps(last, job) {
			w.violations = append(w.violations, fmt.Sprintf("%s at resourceVersion %s: %s", job.Name, job.ResourceVersion, v))
		}
	}
	w.last[job.Name] = job.DeepCopy()
	w.versions++
}

func (w *StatusWatch) run(ctx context.Context, wc client.WithWatch, namespace, name string) {
	defer close(w.done)
	rv := ""
	for ctx.Err() == nil {
		if rv == "" {
			var list dtnflowv1alpha1.TransferJobList
			opts := []client.ListOption{client.InNamespace(namespace)}
			if name != "" {
				opts = append(opts, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", name)})
			}
			if err := wc.List(ctx, &list, opts...); err != nil {
				sleepCtx(ctx, time.Second)
				continue
			}
			for i := range list.Items {
				w.observe(&list.Items[i])
			}
			rv = list.ResourceVersion
		}
		var list dtnflowv1alpha1.TransferJobList
		opts := &client.ListOptions{Namespace: namespace, Raw: &metav1.ListOptions{ResourceVersion: rv}}
		if name != "" {
			opts.FieldSelector = fields.OneTermEqualSelector("metadata.name", name)
		}
		watcher, err := wc.Watch(ctx, &list, opts)
		if err != nil {
			sleepCtx(ctx, time.Second)
			continue
		}
		for ev := range watcher.ResultChan() {
			switch ev.Type {
			case watch.Added, watch.Modified:
				if job, ok := ev.Object.(*dtnflowv1alpha1.TransferJob); ok {
					w.observe(job)
					rv = job.ResourceVersion
				}
			case watch.Error:
				if apierrors.IsResourceExpired(apierrors.FromObject(ev.Object)) || apierrors.IsGone(apierrors.FromObject(ev.Object)) {
					rv = ""
				}
			}
		}
		watcher.Stop()
		w.mu.Lock()
		w.reconnects++
		w.mu.Unlock()
		sleepCtx(ctx, 200*time.Millisecond)
	}
}

func sleepCtx(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// Stop ends the watch and returns how many versions it saw, how often it had to
// re-open, and every violation of StatusSteps.
func (w *StatusWatch) Stop() (versions, reconnects int, violations []string) {
	w.stop()
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.versions, w.reconnects, append([]string(nil), w.violations...)
}
