// Command manager is the dtnflow operator: it reconciles TransferJobs into probes, plans,
// agent pods and live status, and keeps TransferEndpoint status up to date. One replica
// acts at a time (leader election on a Lease in the manager's namespace); everything it
// knows lives in API objects, so a restarted or newly elected manager carries on.
package main

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
	"github.com/dtnflow/dtnflow/controllers"
	"github.com/dtnflow/dtnflow/controllers/metrics"
)

// options are the manager's flags.
type options struct {
	metricsAddr, healthAddr string
	metricsSecure           bool
	leaderElect             bool
	leaderElectionNamespace string
	leaderElectionID        string
	logLevel                string
	logFormat               string
	agentImage              string
	agentPullPolicy         string
	agentPullSecrets        []string
	apiServerHost           string
	apiServerPort           string
	reportInterval          time.Duration
	jobWorkers              int
	coordinatorMillicores   int64
	probeMillicores         int64
}

func parseFlags(args []string) (options, error) {
	o := options{}
	fs := pflag.NewFlagSet("manager", pflag.ContinueOnError)
	fs.StringVar(&o.metricsAddr, "metrics-bind-address", ":8443", "Address the Prometheus metrics endpoint binds to; \"0\" turns it off.")
	fs.BoolVar(&o.metricsSecure, "metrics-secure", true,
		"Serve metrics over HTTPS and let only scrapers the API server authenticates and authorizes (get on /metrics) read them; false serves plain HTTP.")
	fs.StringVar(&o.healthAddr, "health-probe-bind-address", ":8081", "Address the /healthz and /readyz probes bind to.")
	fs.BoolVar(&o.leaderElect, "leader-elect", true, "Elect a leader through a Lease, so that of several replicas only one acts.")
	fs.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", os.Getenv("POD_NAMESPACE"),
		"Namespace of the leader election Lease: the manager's own (default $POD_NAMESPACE, else the in-cluster service account's namespace).")
	fs.StringVar(&o.leaderElectionID, "leader-election-id", "dtnflow-manager.dtnflow.io", "Name of the leader election Lease.")
	fs.StringVar(&o.logLevel, "zap-log-level", "info", "Log level: error, info, debug, or a verbosity number (0 = info, 1 = debug, higher = more).")
	fs.StringVar(&o.logFormat, "log-format", "json", "Log format: json or text.")
	fs.StringVar(&o.agentImage, "agent-image", controllers.DefaultAgentPodOptions.Image, "Image of the dtnflow-agent pods (its entrypoint must be dtnflow-agent).")
	fs.StringVar(&o.agentPullPolicy, "agent-image-pull-policy", string(controllers.DefaultAgentPodOptions.ImagePullPolicy), "Pull policy of the agent image: Always, IfNotPresent or Never.")
	fs.StringSliceVar(&o.agentPullSecrets, "agent-image-pull-secrets", nil, "Secrets, in each job's namespace, that pull the agent image (comma-separated names).")
	fs.StringVar(&o.apiServerHost, "agent-api-server-host", "",
		"When set, coordinator pods get KUBERNETES_SERVICE_HOST/PORT pointing here: for clusters without kube-proxy, where the in-cluster service address does not route.")
	fs.StringVar(&o.apiServerPort, "agent-api-server-port", "6443", "API server port given with --agent-api-server-host.")
	fs.DurationVar(&o.reportInterval, "report-interval", 10*time.Second,
		"How often coordinators are expected to report; a suspension waits for the agents to pause at most three of them.")
	fs.IntVar(&o.jobWorkers, "job-workers", 4, "TransferJobs reconciled at once.")
	fs.Int64Var(&o.coordinatorMillicores, "coordinator-cpu-millicores", controllers.DefaultAgentPodOptions.CoordinatorMillicores, "CPU request of coordinator pods.")
	fs.Int64Var(&o.probeMillicores, "probe-cpu-millicores", controllers.DefaultAgentPodOptions.ProbeMillicores, "CPU request of each side of the probe stripe (before a CPU model exists).")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	switch corev1.PullPolicy(o.agentPullPolicy) {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	default:
		return o, fmt.Errorf("--agent-image-pull-policy %q: want Always, IfNotPresent or Never", o.agentPullPolicy)
	}
	if o.reportInterval <= 0 {
		return o, fmt.Errorf("--report-interval must be positive")
	}
	return o, nil
}

// newLogger builds the manager's logr.Logger on log/slog: logr's V(n) is slog level -n,
// so --log-level debug (1) shows V(1) messages.
func newLogger(level, format string) (logr.Logger, error) {
	var min slog.Level
	switch strings.ToLower(level) {
	case "info", "":
		min = slog.LevelInfo
	case "debug":
		min = slog.Level(-1)
	case "error":
		min = slog.LevelError
	default:
		n, err := strconv.Atoi(level)
		if err != nil || n < 0 {
			return logr.Logger{}, fmt.Errorf("--zap-log-level %q: want error, info, debug or a verbosity number", level)
		}
		min = slog.Level(-n)
	}
	hopts := &slog.HandlerOptions{Level: min}
	var h slog.Handler
	switch format {
	case "json":
		h = slog.NewJSONHandler(os.Stderr, hopts)
	case "text":
		h = slog.NewTextHandler(os.Stderr, hopts)
	default:
		return logr.Logger{}, fmt.Errorf("--log-format %q: want json or text", format)
	}
	return logr.FromSlogHandler(h), nil
}

func main() {
	err := run(os.Args[1:])
	switch {
	case errors.Is(err, pflag.ErrHelp): // --help printed the flags
	case err != nil:
		fmt.Fprintln(os.Stderr, "manager:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	o, err := parseFlags(args)
	if err != nil {
		return err
	}
	logger, err := newLogger(o.logLevel, o.logFormat)
	if err != nil {
		return err
	}
	ctrl.SetLogger(logger)
	klog.SetLogger(logger)
	log := logger.WithName("setup")

	scheme, err := newScheme()
	if err != nil {
		return err
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return fmt.Errorf("finding the API server: %w", err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		Cache:                         controllers.CacheOptions(),
		Metrics:                       metricsOptions(o),
		HealthProbeBindAddress:        o.healthAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionNamespace:       o.leaderElectionNamespace,
		LeaderElectionID:              o.leaderElectionID,
		LeaderElectionReleaseOnCancel: true,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	ctx := ctrl.SetupSignalHandler()
	if err := controllers.Setup(ctx, mgr, controllers.Config{
		Planner: controllers.NewPlanner(),
		Pods: controllers.AgentPodOptions{
			Image:                 o.agentImage,
			ImagePullPolicy:       corev1.PullPolicy(o.agentPullPolicy),
			APIServerHost:         o.apiServerHost,
			APIServerPort:         o.apiServerPort,
			CoordinatorMillicores: o.coordinatorMillicores,
			ProbeMillicores:       o.probeMillicores,
			ImagePullSecrets:      o.agentPullSecrets,
		},
		ReportInterval: o.reportInterval,
		JobWorkers:     o.jobWorkers,
		Namespace:      o.leaderElectionNamespace,
	}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	log.Info("Starting the manager", "leaderElection", o.leaderElect, "agentImage", o.agentImage, "reportInterval", o.reportInterval.String())
	return mgr.Start(ctx)
}

// metricsOptions serves metrics over HTTPS with authentication and authorization when
// --metrics-secure is set (the certificate is self-signed unless one is mounted in the
// controller-runtime default certificate folder).
func metricsOptions(o options) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.metricsAddr}
	if o.metricsSecure {
		m.SecureServing = true
		m.FilterProvider = metrics.AuthFilter
	}
	return m
}

// newScheme holds the built-in kinds and dtnflow's.
func newScheme() (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		return nil, err
	}
	if err := dtnflowv1alpha1.AddToScheme(s); err != nil {
		return nil, err
	}
	return s, nil
}
