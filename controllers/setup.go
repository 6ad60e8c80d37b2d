package controllers

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/dtnflow/dtnflow/agent/contract"
	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers/metrics"
)

// CacheOptions restricts the manager's cache of pods to the agent pods it created
// (labelled managed-by dtnflow), so that a cluster's many pods are neither listed nor
// held in memory. The secrets and RBAC objects it creates it never reads.
func CacheOptions() cache.Options {
	ours := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{contract.LabelManagedBy: contract.ManagedByValue})}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: ours}}
}

// Config is what Setup needs besides the manager.
type Config struct {
	Planner Planner
	Pods    AgentPodOptions
	// ReportInterval is how often coordinators are expected to report.
	ReportInterval time.Duration
	// JobWorkers is the number of TransferJobs reconciled at once.
	JobWorkers int
	// Clock is the clock both reconcilers read (a fake one in tests); nil is the real one.
	Clock clock.PassiveClock
	// Namespace is the manager's own namespace, where RemoteSites' credential Secrets
	// live; "" leaves jobs with a remote side refused.
	Namespace string
	// RemotePoll is how often a job with a side at a peer site looks at it when no
	// change there woke it sooner (the peers' RemoteTransfers are watched); 0: 2 s.
	RemotePoll time.Duration
	// AgentLogs reads the agents' logs the manager keeps when it deletes their pods;
	// nil reads them through the API server (pods/log).
	AgentLogs AgentLogSource
}

// Setup registers the field indexes, both reconcilers and the metrics with a manager.
func Setup(ctx context.Context, mgr ctrl.Manager, cfg Config) error {
	if cfg.Planner == nil {
		return fmt.Errorf("controllers.Setup: no planner")
	}
	if err := SetupIndexes(ctx, mgr.GetFieldIndexer()); err != nil {
		return fmt.Errorf("registering field indexes: %w", err)
	}
	clk := cfg.Clock
	if clk == nil {
		clk = clock.RealClock{}
	}
	jobs := &TransferJobReconciler{
		Client:         mgr.GetClient(),
		APIReader:      mgr.GetAPIReader(),
		Recorder:       mgr.GetEventRecorder("dtnflow-transferjob"),
		Clock:          clk,
		Planner:        cfg.Planner,
		Pods:           cfg.Pods,
		ReportInterval: cfg.ReportInterval,
		AgentLogs:      cfg.AgentLogs,
		RemotePoll:     cfg.RemotePoll,
	}
	if jobs.AgentLogs == nil {
		logs, err := NewAgentLogSource(mgr.GetConfig())
		if err != nil {
			return fmt.Errorf("a client for the agents' logs: %w", err)
		}
		jobs.AgentLogs = logs
	}
	if cfg.Namespace != "" {
		jobs.remotes = newRemoteClients(mgr.GetAPIReader(), mgr.GetScheme(), cfg.Namespace)
		if err := mgr.Add(jobs.remotes); err != nil {
			return fmt.Errorf("adding the peers' watches: %w", err)
		}
	}
	if err := jobs.SetupWithManager(mgr, cfg.JobWorkers); err != nil {
		return fmt.Errorf("setting up the TransferJob controller: %w", err)
	}
	remote := &RemoteTransferReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("dtnflow-remotetransfer"), Clock: clk, Pods: cfg.Pods}
	if err := remote.SetupWithManager(mgr, jobs); err != nil {
		return fmt.Errorf("setting up the RemoteTransfer controller: %w", err)
	}
	if err := (&TransferPeerReconciler{Client: mgr.GetClient(), Clock: clk}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the TransferPeer controller: %w", err)
	}
	if jobs.remotes != nil {
		if err := (&RemoteSiteReconciler{Client: mgr.GetClient(), Clock: clk}).SetupWithManager(mgr, jobs.remotes); err != nil {
			return fmt.Errorf("setting up the RemoteSite controller: %w", err)
		}
	}
	pool := &WarmPoolReconciler{Client: mgr.GetClient(), Clock: clk, Pods: cfg.Pods, keys: jobs.warm, ports: jobs.ports}
	if err := pool.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the warm pool controller: %w", err)
	}
	endpoints := &TransferEndpointReconciler{Client: mgr.GetClient(), Clock: clk}
	if err := endpoints.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("setting up the TransferEndpoint controller: %w", err)
	}
	reader := mgr.GetClient()
	metrics.Register(func(ctx context.Context) ([]dtnflowv1alpha1.TransferJob, error) {
		var list dtnflowv1alpha1.TransferJobList
		if err := reader.List(ctx, &list); err != nil {
			return nil, err
		}
		return list.Items, nil
	})
	return nil
}

// SetupWithManager registers the TransferJob reconciler. It wakes on changes to a job's
// spec, on every event of its pods (a report is an annotation change of the
// coordinator pod), on spec changes of the endpoints it names, on nodes that change
// readiness, on namespaces whose labels change (endpoints select namespaces), and — for
// what jobs share — on the jobs of its endpoints arriving, leaving or changing state,
// plan or share, on its path's PathProfile, and on the priority classes jobs name.
func (r *TransferJobReconciler) SetupWithManager(mgr ctrl.Manager, workers int) error {
	r.setDefaults()
	if workers <= 0 {
		workers = 4
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("transferjob").
		For(&dtnflowv1alpha1.TransferJob{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.Pod{}).
		Watches(&dtnflowv1alpha1.TransferEndpoint{}, handler.EnqueueRequestsFromMapFunc(r.jobsForEndpoint),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(r.jobsForNode), builder.WithPredicates(nodeChanged())).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.jobsInNamespace), builder.WithPredicates(labelsChanged())).
		Watches(&dtnflowv1alpha1.TransferJob{}, handler.EnqueueRequestsFromMapFunc(r.jobsSharingWith), builder.WithPredicates(sharingChanged())).
		Watches(&dtnflowv1alpha1.PathProfile{}, handler.EnqueueRequestsFromMapFunc(r.jobsOnPath)).
		Watches(&dtnflowv1alpha1.TransferPriorityClass{}, handler.EnqueueRequestsFromMapFunc(r.jobsOfClass)).
		Watches(&dtnflowv1alpha1.RemoteTransfer{}, handler.EnqueueRequestsFromMapFunc(r.jobsOfRemoteEndpoint), builder.WithPredicates(remoteSlotChanged()))
	if r.remotes != nil {
		// the peers' RemoteTransfers, watched at the peers: a job's pass runs as soon as
		// its side there moves
		b = b.WatchesRawSource(source.Channel(r.remotes.changed, &handler.TypedEnqueueRequestForObject[*dtnflowv1alpha1.TransferJob]{}))
	}
	return b.WithOptions(controller.Options{MaxConcurrentReconciles: workers}).Complete(r)
}

// jobsForEndpoint maps an endpoint to the jobs that name it.
func (r *TransferJobReconciler) jobsForEndpoint(ctx context.Context, o client.Object) []reconcile.Request {
	return r.jobsOfEndpoint(ctx, o.GetName())
}

// jobsOfEndpoint lists the unfinished jobs that name an endpoint (IndexJobEndpoint's
// key) as requests; none when the cache cannot say (logged).
func (r *TransferJobReconciler) jobsOfEndpoint(ctx context.Context, endpoint string) []reconcile.Request {
	var jobs dtnflowv1alpha1.TransferJobList
	if err := r.Client.List(ctx, &jobs, client.MatchingFields{IndexJobEndpoint: endpoint}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the jobs of an endpoint", "endpoint", endpoint)
		return nil
	}
	return requestsFor(jobs.Items)
}

// jobsForNode maps a node to the jobs that may use it: those of the endpoints that
// select it (a job waiting for a Ready node, a job whose stripes must move).
func (r *TransferJobReconciler) jobsForNode(ctx context.Context, o client.Object) []reconcile.Request {
	var eps dtnflowv1alpha1.TransferEndpointList
	if err := r.Client.List(ctx, &eps); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing endpoints for a node event")
		return nil
	}
	var reqs []reconcile.Request
	seen := map[types.NamespacedName]bool{}
	for _, ep := range eps.Items {
		if len(ep.Spec.NodeSelector) == 0 || !labels.SelectorFromSet(ep.Spec.NodeSelector).Matches(labels.Set(o.GetLabels())) {
			continue
		}
		for _, req := range r.jobsOfEndpoint(ctx, ep.Name) {
			if !seen[req.NamespacedName] {
				seen[req.NamespacedName] = true
				reqs = append(reqs, req)
			}
		}
	}
	return reqs
}

// jobsInNamespace maps a namespace to its jobs.
func (r *TransferJobReconciler) jobsInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var jobs dtnflowv1alpha1.TransferJobList
	if err := r.Client.List(ctx, &jobs, client.InNamespace(o.GetName())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the jobs of a namespace")
		return nil
	}
	return requestsFor(jobs.Items)
}

func requestsFor(jobs []dtnflowv1alpha1.TransferJob) []reconcile.Request {
	reqs := make([]reconcile.Request, 0, len(jobs))
	for _, j := range jobs {
		if finished(&j.Status) {
			continue
		}
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: j.Namespace, Name: j.Name}})
	}
	return reqs
}

// labelsChanged passes creations, deletions and updates that change labels.
func labelsChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return !equality.Semantic.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
		},
	}
}

// jobsSharingWith maps a job to the other jobs of its endpoints: they share with it.
func (r *TransferJobReconciler) jobsSharingWith(ctx context.Context, o client.Object) []reconcile.Request {
	job := o.(*dtnflowv1alpha1.TransferJob)
	var reqs []reconcile.Request
	seen := map[types.NamespacedName]bool{{Namespace: job.Namespace, Name: job.Name}: true}
	src, dst := jobEndpointKeys(job)
	for _, ep := range []string{src, dst} {
		var jobs dtnflowv1alpha1.TransferJobList
		if err := r.Client.List(ctx, &jobs, client.MatchingFields{IndexJobEndpoint: ep}); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "Listing the jobs of an endpoint")
			return nil
		}
		for _, req := range requestsFor(jobs.Items) {
			if !seen[req.NamespacedName] {
				seen[req.NamespacedName] = true
				reqs = append(reqs, req)
			}
		}
	}
	return reqs
}

// jobsOnPath maps a PathProfile to the jobs of its path.
func (r *TransferJobReconciler) jobsOnPath(ctx context.Context, o client.Object) []reconcile.Request {
	pp := o.(*dtnflowv1alpha1.PathProfile)
	var jobs dtnflowv1alpha1.TransferJobList
	if err := r.Client.List(ctx, &jobs, client.MatchingFields{IndexJobEndpoint: pp.Spec.SourceEndpoint}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the jobs of a path")
		return nil
	}
	var onPath []dtnflowv1alpha1.TransferJob
	for _, j := range jobs.Items {
		if PathProfileNameFor(&j) == pp.Name {
			onPath = append(onPath, j)
		}
	}
	return requestsFor(onPath)
}

// jobsOfClass maps a TransferPriorityClass to the jobs that name it.
func (r *TransferJobReconciler) jobsOfClass(ctx context.Context, o client.Object) []reconcile.Request {
	var jobs dtnflowv1alpha1.TransferJobList
	if err := r.Client.List(ctx, &jobs); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the jobs of a priority class")
		return nil
	}
	var named []dtnflowv1alpha1.TransferJob
	for _, j := range jobs.Items {
		if j.Spec.PriorityClassName == o.GetName() {
			named = append(named, j)
		}
	}
	return requestsFor(named)
}

// sharingChanged passes the job events that change what the job's peers share:
// arrivals and departures, and updates of its suspension, priority class, state,
// admission, or of the plan's nodes, stripes, rate, share or path capacity.
func sharingChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return sharingSignature(e.ObjectOld.(*dtnflowv1alpha1.TransferJob)) != sharingSignature(e.ObjectNew.(*dtnflowv1alpha1.TransferJob))
		},
	}
}

func sharingSignature(j *dtnflowv1alpha1.TransferJob) string {
	s := fmt.Sprintf("%v/%s/%s", j.Spec.Suspend, j.Spec.PriorityClassName, j.Status.State)
	if c := meta.FindStatusCondition(j.Status.Conditions, dtnflowv1alpha1.ConditionProbing); c != nil {
		s += "/" + string(c.Status) + c.Reason
	}
	if c := meta.FindStatusCondition(j.Status.Conditions, dtnflowv1alpha1.ConditionQueued); c != nil {
		s += "/" + string(c.Status)
	}
	if p := j.Status.Plan; p != nil {
		s += fmt.Sprintf("/%s/%d/%d/%d/%s", p.Hash, p.PredictedBitsPerSecond, p.ShareBitsPerSecond, p.PathBitsPerSecond, p.BindingResource)
	}
	return s
}
