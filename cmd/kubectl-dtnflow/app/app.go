// Package app holds the subcommands of kubectl-dtnflow, one file each; main only wires
// the process to Main.
package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	dtnflowv1alpha1 "github.com/dtnflow/dtnflow/api/v1alpha1"
)

// Options are what every subcommand shares: where the cluster is, which namespace, and
// where output goes. Main fills them from flags; tests may set the hooks.
type Options struct {
	Kubeconfig    string
	Context       string
	Namespace     string
	AllNamespaces bool

	Out, Err io.Writer
	Clock    clock.Clock
	// Logs streams a pod's log; nil means from the API server (pods/log).
	Logs LogStreamer
	// Terminal says whether Out is a terminal (redrawn progress) or not (plain lines);
	// nil means to ask the file descriptor behind Out.
	Terminal *bool

	config    *rest.Config
	namespace string
	client    client.WithWatch
}

// command is one subcommand.
type command struct {
	name, short, args, summary string
	flags                      func(fs *pflag.FlagSet, o *Options)
	run                        func(ctx context.Context, o *Options, args []string) error
}

func commands() []*command {
	return []*command{getCommand(), watchCommand(), describeCommand(), plotCommand(), logsCommand(),
		suspendCommand(), resumeCommand(), rerunCommand()}
}

// exitError carries an exit code other than 1 for an error already explained, or 1
// with a message.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// Main runs kubectl-dtnflow with args (without the program name) and returns the exit
// code: 0 on success, 1 on an error (or a watched job that failed), 2 on bad usage.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return Run(ctx, &Options{Out: stdout, Err: stderr}, args)
}

// Run is Main with options given (tests set the hooks).
func Run(ctx context.Context, o *Options, args []string) int {
	if o.Clock == nil {
		o.Clock = clock.RealClock{}
	}
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		usage(o.Out)
		return 0
	}
	var cmd *command
	for _, c := range commands() {
		if c.name == args[0] {
			cmd = c
		}
	}
	if cmd == nil {
		fmt.Fprintf(o.Err, "kubectl dtnflow: unknown command %q\n\n", args[0])
		usage(o.Err)
		return 2
	}
	fs := pflag.NewFlagSet("kubectl dtnflow "+cmd.name, pflag.ContinueOnError)
	fs.SetOutput(o.Err)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "path to the kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
	fs.StringVar(&o.Context, "context", o.Context, "the kubeconfig context to use")
	fs.StringVarP(&o.Namespace, "namespace", "n", o.Namespace, "the namespace of the job (default: the context's)")
	if cmd.flags != nil {
		cmd.flags(fs, o)
	}
	fs.Usage = func() {
		fmt.Fprintf(o.Err, "Usage: kubectl dtnflow %s %s\n\n%s\n\nFlags:\n%s", cmd.name, cmd.args, cmd.summary, fs.FlagUsages())
	}
	if err := fs.Parse(args[1:]); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			return 0
		}
		return 2
	}
	if err := cmd.run(ctx, o, fs.Args()); err != nil {
		var ee *exitError
		if errors.As(err, &ee) {
			if ee.msg != "" {
				fmt.Fprintln(o.Err, "Error:", ee.msg)
			}
			return ee.code
		}
		fmt.Fprintln(o.Err, "Error:", err)
		return 1
	}
	return 0
}

func usage(w io.Writer) {
	fmt.Fprintln(w, "kubectl dtnflow: see and steer dtnflow TransferJobs.\n\nCommands:")
	for _, c := range commands() {
		fmt.Fprintf(w, "  %-9s %s\n", c.name, c.short)
	}
	fmt.Fprintln(w, "\nkubectl dtnflow COMMAND --help says more. Every command takes --kubeconfig, --context and -n/--namespace.")
}

// usageError is a mistake in the command line (exit code 2).
func usageError(format string, args ...any) error {
	return &exitError{code: 2, msg: fmt.Sprintf(format, args...)}
}

// exactlyOneJob checks a command got one job name.
func exactlyOneJob(args []string) (string, error) {
	if len(args) != 1 {
		return "", usageError("give exactly one TransferJob name (got %d)", len(args))
	}
	return args[0], nil
}

// complete connects to the cluster: the kubeconfig as kubectl loads it, the namespace
// from -n or the context.
func (o *Options) complete() error {
	if o.client != nil {
		return nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.Kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: o.Context}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return fmt.Errorf("reading the kubeconfig: %w", err)
	}
	ns := o.Namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return fmt.Errorf("reading the namespace from the kubeconfig: %w", err)
		}
	}
	cfg.UserAgent = "kubectl-dtnflow"
	c, err := client.NewWithWatch(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return err
	}
	o.config, o.namespace, o.client = cfg, ns, c
	return nil
}

// Scheme knows the built-in kinds and dtnflow's.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := dtnflowv1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}

// getJob reads one job, saying which when it is not there.
func (o *Options) getJob(ctx context.Context, name string) (*dtnflowv1alpha1.TransferJob, error) {
	var job dtnflowv1alpha1.TransferJob
	if err := o.client.Get(ctx, client.ObjectKey{Namespace: o.namespace, Name: name}, &job); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("TransferJob %q not found in namespace %q", name, o.namespace)
		}
		return nil, err
	}
	return &job, nil
}

// listJobs reads the named jobs, or every job of the namespace (of all namespaces with
// -A), sorted by namespace and name.
func (o *Options) listJobs(ctx context.Context, names []string) ([]dtnflowv1alpha1.TransferJob, error) {
	if len(names) > 0 {
		var out []dtnflowv1alpha1.TransferJob
		for _, n := range names {
			j, err := o.getJob(ctx, n)
			if err != nil {
				return nil, err
			}
			out = append(out, *j)
		}
		return out, nil
	}
	var list dtnflowv1alpha1.TransferJobList
	var opts []client.ListOption
	if !o.AllNamespaces {
		opts = append(opts, client.InNamespace(o.namespace))
	}
	if err := o.client.List(ctx, &list, opts...); err != nil {
		return nil, err
	}
	sortJobs(list.Items)
	return list.Items, nil
}

func sortJobs(jobs []dtnflowv1alpha1.TransferJob) {
	sort.Slice(jobs, func(i, j int) bool {
		if jobs[i].Namespace != jobs[j].Namespace {
			return jobs[i].Namespace < jobs[j].Namespace
		}
		return jobs[i].Name < jobs[j].Name
	})
}

// isTerminal says whether output goes to a terminal.
func (o *Options) isTerminal() bool {
	if o.Terminal != nil {
		return *o.Terminal
	}
	f, ok := o.Out.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// age writes how long ago t was, the way kubectl does ("5m", "3h", "2d").
func age(now, t time.Time) string {
	if t.IsZero() {
		return "<unknown>"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}
