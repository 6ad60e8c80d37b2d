package controllers

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/agentlogs"
)

// The agents' logs outlive their pods: just before the manager deletes an agent pod that
// failed (to replace it under the same name) or every agent of a job that ended, it
// copies the end of each pod's log into the job's archive (controllers/agentlogs: the
// ConfigMap <job>-agent-logs, owned by the job, bounded), which `kubectl dtnflow logs`
// reads once the pods are gone. Reading logs never holds a job up: each fetch has a
// deadline, and a log that cannot be read, or an archive that cannot be written, is
// logged and the pass goes on.

// AgentLogSource reads the end of an agent pod's log.
type AgentLogSource interface {
	// TailLog returns at most limit bytes from the end of the agent container's log,
	// and whether earlier bytes were left out.
	TailLog(ctx context.Context, pod *corev1.Pod, limit int) (text []byte, cut bool, err error)
}

// How long archiving may hold a pass up: each pod's fetch, and all of them together
// (fetched archiveFetches at once). A pass runs with every job's sharing decisions
// held (one pass at a time), so the bounds are short — a 32 KiB tail comes back in
// milliseconds from a kubelet that answers — and a pod on a node that is not Ready
// is not asked at all.
const (
	logFetchTimeout = 2 * time.Second
	archiveTimeout  = 4 * time.Second
	archiveFetches  = 8
	// logTailLines is how many lines the kubelet is asked for: more than PodBytes
	// holds of the agents' lines, so that the kubelet does not send the whole log.
	logTailLines = 2000
)

// kubeletLogs reads logs through the API server (pods/log), from the kubelet.
type kubeletLogs struct{ cs kubernetes.Interface }

// NewAgentLogSource reads agent logs through the API server at cfg.
func NewAgentLogSource(cfg *rest.Config) (AgentLogSource, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return kubeletLogs{cs: cs}, nil
}

func (k kubeletLogs) TailLog(ctx context.Context, pod *corev1.Pod, limit int) ([]byte, bool, error) {
	r, err := k.cs.CoreV1().Pods(pod.Namespace).GetLogs(pod.Name, &corev1.PodLogOptions{Container: agentContainerName, TailLines: ptr.To[int64](logTailLines)}).Stream(ctx)
	if err != nil {
		return nil, false, err
	}
	defer r.Close()
	tail := &agentlogs.Tail{Limit: limit}
	if _, err := io.Copy(tail, r); err != nil {
		return nil, false, err
	}
	return tail.Bytes(), tail.Dropped(), nil
}

// AgentLogsName is the name of a job's archive of agent logs.
func AgentLogsName(jobName string) string { return namePrefix(jobName) + "-agent-logs" }

// archiveLogs copies the end of the given pods' logs into the job's archive, for reason
// agentlogs.ReasonFailed or ReasonFinished. Pods that never started have no log, and
// pods being deleted were archived before their deletion.
func (r *TransferJobReconciler) archiveLogs(ctx context.Context, p *pass, pods []*corev1.Pod, reason string) {
	if r.AgentLogs == nil {
		return
	}
	var todo []*corev1.Pod
	for _, pod := range pods {
		if pod != nil && pod.DeletionTimestamp == nil && !podStarted(pod) && r.APIReader != nil {
			// The cache may not show yet that a pod started moments ago (a replacement
			// that ran as the job ended): ask the API server before taking its log as
			// never written, since the pod is deleted next.
			var live corev1.Pod
			if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pod), &live); err == nil && live.UID == pod.UID {
				pod = &live
			}
		}
		if pod != nil && pod.DeletionTimestamp == nil && podStarted(pod) {
			todo = append(todo, pod)
		}
	}
	if len(todo) == 0 {
		return
	}
	sortAgents(todo)
	log := logf.FromContext(ctx)
	ctx, cancel := context.WithTimeout(ctx, archiveTimeout)
	defer cancel()
	logs := make([]agentlogs.Log, len(todo))
	slots := make(chan struct{}, archiveFetches)
	var wg sync.WaitGroup
	for i, pod := range todo {
		logs[i].Record = agentlogs.Record{Pod: pod.Name, UID: string(pod.UID), Role: pod.Labels[contract.LabelRole], Stripe: pod.Labels[contract.LabelStripe],
			Reason: reason, Time: r.Clock.Now().UTC().Truncate(time.Second)}
		if podTerminal(pod) {
			logs[i].Ended = contract.Cut(terminationOf(pod), 512)
		}
		if node := pinnedNode(pod); !p.obs.usable(p.obs.endpoints.SourceNodes, node) && !p.obs.usable(p.obs.endpoints.DestinationNodes, node) {
			logs[i].Error = fmt.Sprintf("not read: node %s is not ready", node)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			slots <- struct{}{}
			defer func() { <-slots }()
			fctx, cancel := context.WithTimeout(ctx, logFetchTimeout)
			defer cancel()
			text, cut, err := r.AgentLogs.TailLog(fctx, pod, agentlogs.PodBytes)
			if err != nil {
				logs[i].Error = contract.Cut(err.Error(), 512)
				return
			}
			logs[i].Text, logs[i].Cut = text, cut
		}()
	}
	wg.Wait()
	for _, l := range logs {
		if l.Error != "" {
			log.Info("Could not read an agent's log to keep it", "pod", l.Pod, "err", l.Error)
		}
	}
	if err := r.writeArchive(ctx, p.job, logs); err != nil {
		log.Error(err, "Could not keep the agents' logs; going on without them", "configMap", AgentLogsName(p.job.Name), "pods", len(logs))
		return
	}
	log.V(1).Info("Kept the agents' logs", "configMap", AgentLogsName(p.job.Name), "pods", len(logs), "reason", reason)
}

// writeArchive adds logs to the job's archive, creating it the first time. An archive
// left by an earlier job of the same name (its garbage collection not yet done) is
// replaced.
func (r *TransferJobReconciler) writeArchive(ctx context.Context, job *dtnflowv1alpha1.TransferJob, logs []agentlogs.Log) error {
	key := client.ObjectKey{Namespace: job.Namespace, Name: AgentLogsName(job.Name)}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var cm corev1.ConfigMap
		err := r.APIReader.Get(ctx, key, &cm)
		if err == nil && !ownedBy(&cm, job) {
			if err := r.Client.Delete(ctx, &cm, client.Preconditions{UID: &cm.UID}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("deleting the archive of an earlier job of the same name: %w", err)
			}
			err = apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, key.Name)
		}
		if apierrors.IsNotFound(err) {
			a, _ := agentlogs.Decode(nil)
			a.Add(logs)
			cm = corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace,
					Labels:          map[string]string{contract.LabelJob: JobLabelValue(job.Name), contract.LabelManagedBy: contract.ManagedByValue},
					OwnerReferences: []metav1.OwnerReference{controllerRefOf(job)}},
				Data: a.Data(),
			}
			if err := r.Client.Create(ctx, &cm); apierrors.IsAlreadyExists(err) {
				return apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, key.Name, err) // made meanwhile: add to it
			} else if err != nil {
				return fmt.Errorf("creating ConfigMap %s: %w", key.Name, err)
			}
			return nil
		}
		if err != nil {
			return err
		}
		a, derr := agentlogs.Decode(cm.Data)
		if derr != nil {
			a, _ = agentlogs.Decode(nil) // damaged by hand: start again
		}
		a.Add(logs)
		cm.Data = a.Data()
		return r.Client.Update(ctx, &cm)
	})
}

// ownedBy says whether obj is controlled by this very job (not an earlier one of the
// same name).
func ownedBy(obj metav1.Object, job *dtnflowv1alpha1.TransferJob) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == job.UID
}

// podStarted says whether a pod's container ran, so that it has a log.
func podStarted(pod *corev1.Pod) bool {
	switch pod.Status.Phase {
	case corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed:
		return true
	}
	return false
}

// sortAgents orders pods as `kubectl dtnflow logs` lists them: the coordinator, then
// senders and receivers by stripe, so that when an archive is short of room the
// coordinator's account of the job is kept first.
func sortAgents(pods []*corev1.Pod) {
	rank := map[string]int{string(contract.RoleCoordinator): 0, string(contract.RoleSender): 1, string(contract.RoleReceiver): 2}
	stripe := func(p *corev1.Pod) int {
		k, _ := strconv.Atoi(p.Labels[contract.LabelStripe])
		return k
	}
	sort.SliceStable(pods, func(i, j int) bool {
		a, b := pods[i], pods[j]
		ra, rb := rank[a.Labels[contract.LabelRole]], rank[b.Labels[contract.LabelRole]]
		if (ra == 0) != (rb == 0) {
			return ra == 0
		}
		if sa, sb := stripe(a), stripe(b); sa != sb {
			return sa < sb
		}
		return ra < rb
	})
}
