package app

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
	"github.com/dtnflow/dtnflow/controllers/agentlogs"
)

// LogStreamer opens the log of a pod's agent container.
type LogStreamer func(ctx context.Context, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error)

func logsCommand() *command {
	var follow, archived bool
	var tail int64
	var role string
	return &command{
		name: "logs", short: "the logs of a job's agent pods, each line prefixed with its pod", args: "JOB [-f] [--tail N] [--role coordinator|sender|receiver] [--archived]",
		summary: "Print the logs of a job's agent pods (coordinator, then senders and receivers by stripe),\n" +
			"each line prefixed with its pod; -f follows them all at once. When the job has no agent pods\n" +
			"(it ended, or was suspended) it prints what the manager kept of their logs as it deleted them:\n" +
			"the last 32 KiB of each, and of each failed pod before its replacement (the ConfigMap\n" +
			"<job>-agent-logs, kept until the job is deleted); --archived prints those while pods run too.",
		flags: func(fs *pflag.FlagSet, o *Options) {
			fs.BoolVarP(&follow, "follow", "f", false, "keep printing as the agents log")
			fs.Int64Var(&tail, "tail", -1, "lines from the end of each log (-1: all)")
			fs.StringVar(&role, "role", "", "only the pods of this role: coordinator, sender or receiver")
			fs.BoolVar(&archived, "archived", false, "print the logs kept of pods already deleted (failed ones replaced, or all once the job ended)")
		},
		run: func(ctx context.Context, o *Options, args []string) error {
			name, err := exactlyOneJob(args)
			if err != nil {
				return err
			}
			switch contract.Role(role) {
			case "", contract.RoleCoordinator, contract.RoleSender, contract.RoleReceiver:
			default:
				return usageError("--role must be coordinator, sender or receiver, not %q", role)
			}
			if err := o.complete(); err != nil {
				return err
			}
			job, err := o.getJob(ctx, name)
			if err != nil {
				return err
			}
			pods, err := o.agentPods(ctx, job, contract.Role(role))
			if err != nil {
				return err
			}
			if archived || len(pods) == 0 {
				printed, err := o.printArchive(ctx, job, contract.Role(role), tail)
				if err != nil {
					return err
				}
				if len(pods) == 0 {
					if !printed {
						return fmt.Errorf("TransferJob %s/%s has no agent pods now (state %s; they are deleted when the job finishes or is suspended) and no logs kept of them", job.Namespace, job.Name, stateOf(job))
					}
					return nil
				}
			}
			opts := &corev1.PodLogOptions{Follow: follow}
			if tail >= 0 {
				opts.TailLines = &tail
			}
			return o.printLogs(ctx, pods, opts)
		},
	}
}

// agentPods are the job's agent pods (those it controls, not an earlier job's of the
// same name): the coordinator first, then senders and receivers by stripe.
func (o *Options) agentPods(ctx context.Context, job *dtnflowv1alpha1.TransferJob, role contract.Role) ([]corev1.Pod, error) {
	var list corev1.PodList
	sel := client.MatchingLabels{contract.LabelJob: controllers.JobLabelValue(job.Name)}
	if role != "" {
		sel[contract.LabelRole] = string(role)
	}
	if err := o.client.List(ctx, &list, client.InNamespace(job.Namespace), sel); err != nil {
		return nil, fmt.Errorf("listing the agent pods of TransferJob %s/%s: %w", job.Namespace, job.Name, err)
	}
	var pods []corev1.Pod
	for _, p := range list.Items {
		if ref := metav1.GetControllerOf(&p); ref != nil && ref.UID == job.UID {
			pods = append(pods, p)
		}
	}
	rank := map[contract.Role]int{contract.RoleCoordinator: 0, contract.RoleSender: 1, contract.RoleReceiver: 2}
	stripe := func(p *corev1.Pod) int {
		k, _ := strconv.Atoi(p.Labels[contract.LabelStripe])
		return k
	}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := &pods[i], &pods[j]
		if sa, sb := stripe(a), stripe(b); sa != sb && a.Labels[contract.LabelRole] != string(contract.RoleCoordinator) && b.Labels[contract.LabelRole] != string(contract.RoleCoordinator) {
			return sa < sb
		}
		return rank[contract.Role(a.Labels[contract.LabelRole])] < rank[contract.Role(b.Labels[contract.LabelRole])]
	})
	return pods, nil
}

// printLogs prints each pod's log line by line with the pod's name in front: one pod
// after the other, or all at once when following.
func (o *Options) printLogs(ctx context.Context, pods []corev1.Pod, opts *corev1.PodLogOptions) error {
	streams := o.Logs
	if streams == nil {
		cs, err := kubernetes.NewForConfig(o.config)
		if err != nil {
			return err
		}
		streams = func(ctx context.Context, pod *corev1.Pod, opts *corev1.PodLogOptions) (io.ReadCloser, error) {
			return cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, opts).Stream(ctx)
		}
	}
	var mu sync.Mutex
	copyLines := func(pod *corev1.Pod) error {
		r, err := streams(ctx, pod, opts)
		if err != nil {
			return fmt.Errorf("the log of pod %s: %w", pod.Name, err)
		}
		defer r.Close()
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			mu.Lock()
			fmt.Fprintf(o.Out, "[%s] %s\n", pod.Name, sc.Text())
			mu.Unlock()
		}
		if err := sc.Err(); err != nil && ctx.Err() == nil {
			return fmt.Errorf("the log of pod %s: %w", pod.Name, err)
		}
		return nil
	}
	var errs []error
	if !opts.Follow {
		for i := range pods {
			if err := copyLines(&pods[i]); err != nil {
				errs = append(errs, err)
			}
		}
	} else {
		var wg sync.WaitGroup
		errCh := make(chan error, len(pods))
		for i := range pods {
			wg.Add(1)
			go func(p *corev1.Pod) {
				defer wg.Done()
				if err := copyLines(p); err != nil {
					errCh <- err
				}
			}(&pods[i])
		}
		wg.Wait()
		close(errCh)
		for err := range errCh {
			errs = append(errs, err)
		}
	}
	for _, err := range errs {
		fmt.Fprintln(o.Err, "Error:", err)
	}
	if len(errs) > 0 {
		return &exitError{code: 1}
	}
	return nil
}

// printArchive prints what the manager kept of the job's deleted agents' logs (the
// ConfigMap controllers.AgentLogsName), oldest first, each line prefixed with its pod
// like a live log and each pod's lines after one that says when and why they were
// kept; false when nothing was kept.
func (o *Options) printArchive(ctx context.Context, job *dtnflowv1alpha1.TransferJob, role contract.Role, tail int64) (bool, error) {
	var cm corev1.ConfigMap
	err := o.client.Get(ctx, client.ObjectKey{Namespace: job.Namespace, Name: controllers.AgentLogsName(job.Name)}, &cm)
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("reading the logs kept of TransferJob %s/%s: %w", job.Namespace, job.Name, err)
	}
	if ref := metav1.GetControllerOf(&cm); ref == nil || ref.UID != job.UID {
		return false, nil // an earlier job's of the same name
	}
	a, err := agentlogs.Decode(cm.Data)
	if err != nil {
		return false, fmt.Errorf("ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
	}
	printed := false
	for _, r := range a.Index.Records {
		if role != "" && r.Role != string(role) {
			continue
		}
		printed = true
		why := "when the job ended"
		if r.Reason == agentlogs.ReasonFailed {
			why = "when it failed, before its replacement"
		}
		if r.Ended != "" {
			why += " (" + r.Ended + ")"
		}
		head := fmt.Sprintf("--- kept at %s %s", r.Time.UTC().Format(time.RFC3339), why)
		if r.Error != "" {
			fmt.Fprintf(o.Out, "[%s] %s; its log could not be read: %s\n", r.Pod, head, r.Error)
			continue
		}
		if r.Cut {
			head += fmt.Sprintf("; its last %d bytes", r.Bytes)
		}
		fmt.Fprintf(o.Out, "[%s] %s\n", r.Pod, head)
		lines := strings.SplitAfter(a.Texts[r.Key], "\n")
		if n := len(lines); n > 0 && lines[n-1] == "" {
			lines = lines[:n-1]
		}
		if tail >= 0 && int64(len(lines)) > tail {
			lines = lines[int64(len(lines))-tail:]
		}
		for _, l := range lines {
			fmt.Fprintf(o.Out, "[%s] %s\n", r.Pod, strings.TrimSuffix(l, "\n"))
		}
	}
	if a.Index.NotKept > 0 {
		fmt.Fprintf(o.Err, "The logs of %d more pod(s) were not kept: the archive holds at most %d KiB.\n", a.Index.NotKept, agentlogs.TotalBytes>>10)
	}
	return printed, nil
}
