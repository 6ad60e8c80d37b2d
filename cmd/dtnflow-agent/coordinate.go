package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/coord"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/mover"
)

// runCoordinate is `dtnflow-agent coordinate`: it lists a job's dataset, hands its
// work to the senders that connect, and reports progress (to its pod in a cluster).
func runCoordinate(ctx context.Context, args []string, log *slog.Logger) error {
	fs := newFlags("coordinate", "coordinate --listen ADDR --root DIR --secret-file FILE --path P... [--pod NS/NAME]")
	var j jobFlags
	j.register(fs, func(v interface {
		String() string
		Set(string) error
		Type() string
	}, name, usage string) {
		fs.Var(v, name, usage)
	})
	addr := fs.String("listen", "", "address senders connect to")
	metricsAddr := fs.String("metrics-addr", metrics.DefaultAddr, metricsAddrUsage)
	rootDir := fs.String("root", "", "source root")
	secretFile := fs.String("secret-file", "", "file holding the job's shared secret")
	pod := fs.String("pod", "", "namespace/name of this coordinator's pod: read directives from it and report to it (in-cluster)")
	directiveFile := fs.String("directive-file", "", "without --pod: read directives (contract.Directive JSON) from this file every report interval; without it the job starts transferring at once")
	paths := fs.StringArray("path", nil, "source path under --root (repeatable)")
	if err := parse(fs, args); err != nil {
		return err
	}
	secret, err := loadSecret(*secretFile)
	if err != nil {
		return err
	}
	root, err := openRoot(*rootDir)
	if err != nil {
		return err
	}
	all := append(append([]string(nil), *paths...), fs.Args()...)
	if j.job == "" {
		if *pod != "" {
			ns, name, _ := strings.Cut(*pod, "/")
			j.job = ns + "." + strings.TrimSuffix(name, "-coordinator")
		} else {
			j.job = jobID(j.destPath, all)
		}
	}
	core, err := coord.New(coord.Options{Root: root, Paths: all, DestPath: j.destPath, Job: j.job, Checksum: j.checksum, Verify: j.verify, VerifyMode: j.verifyMode, InFlight: j.inFlight,
		Overwrite: j.overwrite, BlockSize: int64(j.blockSize), ChunkSize: int64(j.chunkSize), Log: log, NoChannelMoves: !j.classMoves, SourceErrors: j.sourceErrors}, j.params())
	if err != nil {
		return err
	}
	var ch coord.Channel = &coord.LogChannel{Log: log, DirectiveFile: *directiveFile}
	if *pod != "" {
		api, err := coord.InClusterAPI()
		if err != nil {
			return fmt.Errorf("--pod needs the in-cluster API server: %w", err)
		}
		pc, err := coord.NewPodChannel(api, *pod)
		if err != nil {
			return err
		}
		if d, err := coord.ParseInitialDirective(os.Getenv(contract.EnvInitialDirective)); err != nil {
			log.Warn("Reading the directive from the pod instead", "err", err.Error())
		} else if d != nil {
			pc.SetInitial(d)
			log.Info("Starting on the directive the pod was created with", "generation", d.Generation)
		}
		ch = pc
	} else if *directiveFile == "" {
		core.SetPhase(contract.PhaseTransferring)
	}
	ln, err := listen(*addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	limits := mover.ReadSocketLimits()
	runner := &coord.Runner{Core: core, Channel: ch, Interval: j.reportInterval, Grace: 30 * time.Second, Probe: probePlanner(), LocalLimits: &limits,
		Started: coord.ProcessStart, StartedCPUSeconds: coord.ProcessStartCPUSeconds}
	runner.Prepare(ctx)
	go mover.Serve(ctx, ln, secret, 0, core.ServeConn, log)
	serveMetrics(ctx, *metricsAddr, core.Status, log)
	log.Info("Coordinating", "listen", ln.Addr().String(), "job", j.job, "files", core.Dataset().Files, "bytes", core.Dataset().Bytes)
	switch phase := runner.Run(ctx); phase {
	case contract.PhaseComplete, contract.PhasePartiallyComplete:
		return nil // the report says which; the controller reads it
	case contract.PhaseFailed:
		msg, _ := core.Err()
		return fmt.Errorf("job failed: %s", msg)
	default:
		return ctx.Err()
	}
}
