package app

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/internal/progress"
)

func watchCommand() *command {
	var timeout time.Duration
	return &command{
		name: "watch", short: "follow the progress bars; with names, wait until the jobs finish", args: "[JOB...] [-A] [--timeout D]",
		summary: "Follow jobs' progress bars as they change. With job names it returns once every one has\n" +
			"finished: exit code 0 when all completed, 1 when one failed or skipped files at the source\n" +
			"(PartiallyComplete; like `globus task wait`).",
		flags: func(fs *pflag.FlagSet, o *Options) {
			fs.BoolVarP(&o.AllNamespaces, "all-namespaces", "A", false, "watch the jobs of every namespace")
			fs.DurationVar(&timeout, "timeout", 0, "give up after this long (exit code 3); 0 waits for ever")
		},
		run: func(ctx context.Context, o *Options, args []string) error {
			if err := o.complete(); err != nil {
				return err
			}
			if timeout > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, timeout)
				defer cancel()
			}
			return o.watch(ctx, args)
		},
	}
}

// watcher keeps the latest state of the watched jobs and draws them.
type watcher struct {
	o     *Options
	names map[string]bool // the jobs asked for; empty: all of the namespace
	jobs  map[string]dtnflowv1alpha1.TransferJob
	// lines are what was last printed per job (plain output prints changes only);
	// drawn is how many lines the terminal view last drew.
	lines map[string]string
	drawn int
}

func key(j *dtnflowv1alpha1.TransferJob) string { return j.Namespace + "/" + j.Name }

// watch lists the jobs, then follows their changes until every named job has finished
// (or forever without names), re-listing when the API server ends the watch.
func (o *Options) watch(ctx context.Context, names []string) error {
	w := &watcher{o: o, names: map[string]bool{}, jobs: map[string]dtnflowv1alpha1.TransferJob{}, lines: map[string]string{}}
	for _, n := range names {
		w.names[n] = true
	}
	opts := []client.ListOption{}
	if !o.AllNamespaces {
		opts = append(opts, client.InNamespace(o.namespace))
	}
	for {
		var list dtnflowv1alpha1.TransferJobList
		if err := o.client.List(ctx, &list, opts...); err != nil {
			return err
		}
		w.jobs = map[string]dtnflowv1alpha1.TransferJob{}
		for _, j := range list.Items {
			if len(w.names) == 0 || w.names[j.Name] {
				w.jobs[key(&j)] = j
			}
		}
		for _, n := range names {
			if _, ok := w.jobs[o.namespace+"/"+n]; !ok {
				return fmt.Errorf("TransferJob %q not found in namespace %q", n, o.namespace)
			}
		}
		w.draw()
		if done, err := w.done(); done {
			return err
		}
		// the watch starts where the list ended
		wi, err := o.client.Watch(ctx, &dtnflowv1alpha1.TransferJobList{}, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})...)
		if err != nil {
			return err
		}
		ended, err := w.follow(ctx, wi)
		wi.Stop()
		if ended || err != nil {
			return err
		}
	}
}

// follow applies watch events until the watched jobs are done (true) or the watch ends
// (false: list again).
func (w *watcher) follow(ctx context.Context, wi watch.Interface) (bool, error) {
	for {
		select {
		case <-ctx.Done():
			if ctx.Err() == context.DeadlineExceeded {
				return true, &exitError{code: 3, msg: "timed out waiting for the jobs to finish"}
			}
			return true, nil
		case ev, ok := <-wi.ResultChan():
			if !ok {
				return false, nil
			}
			j, isJob := ev.Object.(*dtnflowv1alpha1.TransferJob)
			if !isJob || (len(w.names) > 0 && !w.names[j.Name]) {
				continue
			}
			switch ev.Type {
			case watch.Deleted:
				delete(w.jobs, key(j))
				if len(w.names) > 0 {
					w.draw()
					return true, fmt.Errorf("TransferJob %s was deleted", key(j))
				}
			case watch.Added, watch.Modified:
				w.jobs[key(j)] = *j
			default:
				continue
			}
			w.draw()
			if done, err := w.done(); done {
				return true, err
			}
		}
	}
}

// done says whether every named job has finished, and fails when one failed.
func (w *watcher) done() (bool, error) {
	if len(w.names) == 0 {
		return false, nil
	}
	var failedJobs, partialJobs []string
	for n := range w.names {
		j, ok := w.jobs[w.o.namespace+"/"+n]
		if !ok || !finished(&j) {
			return false, nil
		}
		if failed(&j) {
			failedJobs = append(failedJobs, n)
		}
		if partial(&j) {
			partialJobs = append(partialJobs, n)
		}
	}
	var msgs []string
	if len(failedJobs) > 0 {
		msgs = append(msgs, "failed: "+strings.Join(failedJobs, ", "))
	}
	if len(partialJobs) > 0 {
		msgs = append(msgs, "partially complete (files skipped at the source): "+strings.Join(partialJobs, ", "))
	}
	if len(msgs) > 0 {
		return true, &exitError{code: 1, msg: strings.Join(msgs, "; ")}
	}
	return true, nil
}

// draw shows the jobs: redrawn in place on a terminal, a line per change otherwise.
func (w *watcher) draw() {
	jobs := make([]dtnflowv1alpha1.TransferJob, 0, len(w.jobs))
	for _, j := range w.jobs {
		jobs = append(jobs, j)
	}
	sortJobs(jobs)
	if w.o.isTerminal() {
		var b strings.Builder
		printTable(&b, jobs, w.o.Clock.Now(), w.o.AllNamespaces)
		if w.drawn > 0 {
			fmt.Fprintf(w.o.Out, "\x1b[%dA\x1b[J", w.drawn) // up over the last drawing, clear below
		}
		fmt.Fprint(w.o.Out, b.String())
		w.drawn = strings.Count(b.String(), "\n")
		return
	}
	for i := range jobs {
		j := &jobs[i]
		line := fmt.Sprintf("%s  %s", stateOf(j), progress.Line(snapshotOf(j), barWidth))
		if w.lines[key(j)] == line {
			continue
		}
		w.lines[key(j)] = line
		name := j.Name
		if w.o.AllNamespaces {
			name = key(j)
		}
		fmt.Fprintf(w.o.Out, "%s  %s  %s\n", w.o.Clock.Now().UTC().Format(time.TimeOnly), name, line)
	}
}
