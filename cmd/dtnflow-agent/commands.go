package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"

	"github.com/dtnflow/dtnflow/agent/auth"
	"github.com/dtnflow/dtnflow/agent/autotune"
	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/coord"
	"github.com/dtnflow/dtnflow/agent/fsroot"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/mover"
	"github.com/dtnflow/dtnflow/agent/share"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// serveMetrics serves /metrics and /status on addr ("" or "off": not at all). Failing
// to bind is not fatal: several agents on one host (pods on a host network) cannot all
// have the default port, and the data path does not need it.
func serveMetrics(ctx context.Context, addr string, status func() any, log *slog.Logger) {
	if addr == "" || addr == "off" {
		return
	}
	if _, err := metrics.Serve(ctx, addr, status, log); err != nil {
		log.Info("Not serving metrics and status", "metricsAddr", addr, "err", err.Error())
	}
}

const metricsAddrUsage = "serve /metrics and /status (which name paths and errors) on this address; keep it on loopback or a management network (\"off\": not at all)"

func openRoot(dir string) (*os.Root, error) {
	if dir == "" {
		return nil, errors.New("--root is required")
	}
	r, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("--root: %w", err)
	}
	return r, nil
}

// ---- receive ----

func runReceive(ctx context.Context, args []string, log *slog.Logger) error {
	fs := newFlags("receive", "receive --listen ADDR --root DIR --secret-file FILE [--stripe K]")
	addr := fs.String("listen", "", "address senders connect to, for example :7000 (only the authenticated protocol is spoken there)")
	rootDir := fs.String("root", "", "destination root: every path written resolves under it")
	secretFile := fs.String("secret-file", "", "file holding the job's shared secret (at least 16 bytes)")
	stripe := fs.Int32("stripe", 0, "stripe index, for metrics and journal names")
	metricsAddr := fs.String("metrics-addr", metrics.DefaultAddr, metricsAddrUsage)
	maxFile := byteSize(mover.DefaultMaxFileSize)
	fs.Var(&maxFile, "max-file-size", "largest file a sender may announce")
	maxHandshakes := fs.Int("max-handshakes", mover.DefaultMaxHandshakes, "connections allowed in their handshake at once (more are closed and counted as busy)")
	requireEnc := fs.Bool("require-encryption", false, "refuse sessions that do not encrypt their data (in-flight mode Encrypted)")
	confine := fs.String("confine", "", "write only under this directory (relative to --root), whatever a sender asks")
	if err := parse(fs, args); err != nil {
		return err
	}
	confined := ""
	if *confine != "" {
		c, err := fsroot.Clean(*confine, false)
		if err != nil {
			return fmt.Errorf("--confine: %w", err)
		}
		confined = c
	}
	secret, err := loadSecret(*secretFile)
	if err != nil {
		return err
	}
	root, err := openRoot(*rootDir)
	if err != nil {
		return err
	}
	ln, err := listen(*addr)
	if err != nil {
		return err
	}
	r := &mover.Receiver{Root: root, Stripe: *stripe, Log: log, MaxFileSize: int64(maxFile), RequireEncryption: *requireEnc, Confine: confined,
		ID: fmt.Sprintf("%s-s%d-%d-%d", hostname(), *stripe, os.Getpid(), time.Now().UnixNano())}
	serveMetrics(ctx, *metricsAddr, r.Status, log)
	log.Info("Receiving", "listen", ln.Addr().String(), "root", *rootDir, "stripe", *stripe)
	return mover.Serve(ctx, ln, secret, *maxHandshakes, r.HandleConn, log)
}

// ---- send ----

type jobFlags struct {
	streams, concurrency, pipelining int32
	buffer, blockSize, chunkSize     byteSize
	maxRate                          rateFlag
	checksum, overwrite, destPath    string
	inFlight, verifyMode             string
	sourceErrors                     string
	verify                           bool
	job                              string
	reportInterval                   time.Duration
	classMoves                       bool
}

func (j *jobFlags) register(fs interface {
	Int32Var(*int32, string, int32, string)
	StringVar(*string, string, string, string)
	BoolVar(*bool, string, bool, string)
	DurationVar(*time.Duration, string, time.Duration, string)
}, add func(v interface {
	String() string
	Set(string) error
	Type() string
}, name, usage string)) {
	fs.Int32Var(&j.streams, "streams", 4, "parallel TCP streams per stripe")
	fs.Int32Var(&j.concurrency, "concurrency", 4, "files in flight per stripe")
	fs.Int32Var(&j.pipelining, "pipelining", 16, "requests kept in flight per concurrent file (small files cost no round trip)")
	j.blockSize, j.chunkSize = mover.DefaultBlockSize, mover.DefaultChunkSize
	add(&j.buffer, "buffer", "socket buffer per stream (0: kernel autotuning), e.g. 16M")
	add(&j.blockSize, "block-size", "block size on the wire; files up to this size travel in one frame")
	add(&j.chunkSize, "chunk-size", "large files are handed out and verified in chunks of this size")
	add(&j.maxRate, "max-rate", "cap on the job's aggregate rate in bits/s, e.g. 5G (0: none)")
	fs.StringVar(&j.checksum, "checksum", "SHA256", "end-to-end digest: SHA256, SHA512 or MD5")
	fs.BoolVar(&j.verify, "verify", true, "compare every file's digest at the destination with the source's before renaming it")
	fs.StringVar(&j.verifyMode, "verify-mode", "ReadBack", "where the destination's digest comes from: ReadBack (the file read back once written: proves the file system returns the source's bytes; a second pass) or OnArrival (each block as it arrives, before it is written: proves the receiver wrote the source's bytes; one pass)")
	fs.StringVar(&j.overwrite, "overwrite", "IfDifferent", "existing destination files: Never, IfDifferent or Always")
	fs.StringVar(&j.sourceErrors, "source-errors", contract.SourceErrorsFail, "a source file that cannot be read, vanishes or changes while it is read: Fail (the job fails naming it) or Skip (it is skipped and listed; the job ends PartiallyComplete, exit code 3)")
	fs.StringVar(&j.inFlight, "in-flight", "Authenticated", "how data is checked on the way: Authenticated (every frame's data under its AES-GMAC tag), Checksum (headers, names and a CRC32C of the data under the tag: cheaper, not proof against content crafted to keep its CRC32C) or HeadersOnly (headers and names under the tag, data unchecked in flight and moved by sendfile/splice without a pass through user space; --verify then checks it end to end)")
	fs.StringVar(&j.destPath, "dest-path", "", "directory under the destination root to write under (default: the root)")
	fs.StringVar(&j.job, "job", "", "job id, names the receivers' journal (default: derived from the paths)")
	fs.DurationVar(&j.reportInterval, "report-interval", 2*time.Second, "how often progress is reported")
	fs.BoolVar(&j.classMoves, "class-moves", true, "let the size classes' scheduler (MC, ProMC) move channels between classes while the job runs; false keeps the plan's channels (to measure what the moves bring)")
}

func (j *jobFlags) params() coord.Params {
	return coord.Params{Streams: j.streams, BufferBytes: int64(j.buffer), Concurrency: j.concurrency, Pipelining: j.pipelining, MaxBitsPerSecond: int64(j.maxRate)}
}

func runSend(ctx context.Context, args []string, log *slog.Logger) error {
	fs := newFlags("send", "send --to HOST:PORT --root DIR --secret-file FILE [flags] PATH...\n"+
		"       dtnflow-agent send --mem --to HOST:PORT --secret-file FILE [--streams N] [--duration D | --bytes N]\n"+
		"       dtnflow-agent send --stripe K --coordinator HOST:PORT --receiver HOST:PORT --root DIR --secret-file FILE")
	var j jobFlags
	j.register(fs, func(v interface {
		String() string
		Set(string) error
		Type() string
	}, name, usage string) {
		fs.Var(v, name, usage)
	})
	to := fs.StringSlice("to", nil, "receiver address(es); stripe k goes to the k-th (round robin)")
	rootDir := fs.String("root", "", "source root: every path read resolves under it")
	secretFile := fs.String("secret-file", "", "file holding the job's shared secret")
	stripes := fs.Int32("stripes", 1, "stripes run by this process (each its own control connection and streams); with --auto, the most it may use")
	listenAddr := fs.String("listen", "", "also accept stripes from other hosts (send --coordinator) on this address")
	metricsAddr := fs.String("metrics-addr", metrics.DefaultAddr, metricsAddrUsage)
	retryFor := fs.Duration("retry-for", 2*time.Minute, "keep trying to reach a receiver that went away for this long")
	stallTimeout := fs.Duration("stall-timeout", mover.DefaultStallTimeout, "start a stripe's session again when it has work on its way and nothing progresses for this long")
	auto := fs.Bool("auto", false, "probe the path on the job's own data and let the optimizer choose stripes, streams, buffer and per-class parameters, then keep adapting")
	maxStreams := fs.Int32("max-streams", 32, "with --auto: most streams per stripe to probe and plan")
	probeSeconds := fs.Float64("probe-seconds", 0, "with --auto: longest probe sample in seconds (0: from the RTT; a sample ends once its rate settles)")
	probeMem := fs.Bool("probe-mem", false, "with --auto: probe memory to memory (generated bytes, discarded) before the transfer instead of on the job's data")
	autoBuffers := fs.String("auto-buffers", "auto", "with --auto: sample socket buffer sizes before streams: auto (only where a fixed buffer can beat kernel autotuning), on, off")
	fs.Lookup("auto-buffers").NoOptDefVal = "on"
	fairness := fs.String("fairness", "Default", "how the job treats TCP flows it does not own on a shared bottleneck: Default (as many streams as pay) or Strict (one TCP stream in all, its buffer autotuned: each competing flow keeps its fair share)")
	shareDir := fs.String("share-dir", "", "with --auto: share the path with the other jobs that name this directory (on this host or a file system the senders share): one probes a cold path, the others plan from what it learned, and each is held to its weighted share while others run")
	priority := fs.Int32("priority", 1, "with --share-dir: the job's weight in the path's shares (1-1000)")
	var nicRate rateFlag
	fs.Var(&nicRate, "nic-rate", "with --auto: the NIC capacity in bits/s, e.g. 10G (default: unknown, not binding)")
	paths := fs.StringArray("path", nil, "source path under --root (repeatable; positional arguments work too)")
	// memory-to-memory
	mem := fs.Bool("mem", false, "memory-to-memory: send generated bytes that the receiver checks and discards")
	duration := fs.Duration("duration", 10*time.Second, "with --mem: how long to send")
	memCheck := fs.Bool("mem-check", false, "with --mem: cover every frame's data by its tag, as file transfers do, to measure what authenticating every byte costs")
	var memBytes byteSize
	fs.Var(&memBytes, "bytes", "with --mem: how much to send (wins over --duration)")
	// cluster mode
	stripe := fs.Int32("stripe", 0, "cluster mode: this sender's stripe index")
	coordinator := fs.String("coordinator", "", "cluster mode: the job's coordinator address")
	receiver := fs.String("receiver", "", "cluster mode: this stripe's receiver address")
	if err := parse(fs, args); err != nil {
		return err
	}
	if err := applyFairness(*fairness, &j, stripes, maxStreams, autoBuffers); err != nil {
		return err
	}
	if *shareDir != "" && (!*auto || *probeMem) {
		return errors.New("--share-dir needs --auto (probing on the job's data)")
	}
	if *priority < 1 || *priority > 1000 {
		return fmt.Errorf("--priority %d: want 1 to 1000", *priority)
	}
	secret, err := loadSecret(*secretFile)
	if err != nil {
		return err
	}
	if *mem {
		if len(*to) == 0 {
			return errors.New("--mem needs --to")
		}
		res, err := mover.Probe(ctx, (*to)[0], secret, mover.ProbeOptions{Streams: j.streams, BufferBytes: int64(j.buffer), Duration: *duration, Bytes: int64(memBytes), BlockSize: int64(j.blockSize), Check: *memCheck,
			Encrypt: strings.EqualFold(j.inFlight, "Encrypted")})
		if err != nil {
			return err
		}
		b, _ := json.Marshal(res)
		fmt.Println(string(b))
		return nil
	}
	root, err := openRoot(*rootDir)
	if err != nil {
		return err
	}
	if *coordinator != "" {
		if *receiver == "" {
			return errors.New("--coordinator needs --receiver")
		}
		return runClusterSender(ctx, *stripe, *coordinator, *receiver, root, secret, *retryFor, *stallTimeout, *metricsAddr, log)
	}
	all := append(append([]string(nil), *paths...), fs.Args()...)
	if len(*to) == 0 || len(all) == 0 {
		fs.Usage()
		return errors.New("send needs --to and at least one path")
	}
	if j.job == "" {
		j.job = jobID(j.destPath, all)
	}
	log, bar := progressOutput(log) // a progress bar on a terminal (progressbar.go)
	core, err := coord.New(coord.Options{Root: root, Paths: all, DestPath: j.destPath, Job: j.job, Checksum: j.checksum, Verify: j.verify, VerifyMode: j.verifyMode, InFlight: j.inFlight,
		Overwrite: j.overwrite, BlockSize: int64(j.blockSize), ChunkSize: int64(j.chunkSize), Log: log, NoChannelMoves: !j.classMoves, SourceErrors: j.sourceErrors}, j.params())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if *listenAddr != "" {
		ln, err := listen(*listenAddr)
		if err != nil {
			return err
		}
		go mover.Serve(ctx, ln, secret, 0, core.ServeConn, log)
	}
	serveMetrics(ctx, *metricsAddr, core.Status, log)
	start := time.Now()
	ls := &localStripes{core: core, cancelAll: cancel, log: log, newStripe: func(k int32) *mover.Stripe {
		return &mover.Stripe{Index: k, Receiver: (*to)[int(k)%len(*to)], Secret: secret, Root: root, Log: log, RetryFor: *retryFor, StallTimeout: *stallTimeout}
	}, keepAlive: *listenAddr != "", ctx: ctx}
	if *auto {
		policy, err := autotune.ParseBufferPolicy(*autoBuffers)
		if err != nil {
			return fmt.Errorf("--auto-buffers: %w", err)
		}
		tuner := &autotune.Tuner{Core: core, Stripes: ls, Params: j.params(), LocalLimits: mover.ReadSocketLimits(), Log: log,
			Options: autotune.Options{MaxStreams: int(*maxStreams), MaxStripes: int(*stripes), Buffers: policy,
				NICBitsPerSecond: float64(nicRate), SampleCeiling: time.Duration(*probeSeconds * float64(time.Second))}}
		if *shareDir != "" {
			dir, err := share.Open(*shareDir, share.PathKey((*to)[0]), j.job, int(*priority))
			if err != nil {
				return err
			}
			shared := &sharedSend{dir: dir, tuner: tuner, stripe: ls, maxStripes: int(*stripes), userRate: int64(j.maxRate), every: j.reportInterval, log: log, done: make(chan struct{})}
			go shared.run(ctx)
			defer func() { cancel(); <-shared.done }()
		} else if *probeMem {
			out, err := tuner.InMemory(ctx, (*to)[0], secret, int64(j.blockSize))
			if err != nil {
				return err
			}
			core.SetPhase(contract.PhaseTransferring)
			for range out.Stripes {
				ls.add(ctx)
			}
			go ls.adapt(ctx, newAdapter(out.Plan, int(*stripes)), j.reportInterval)
		} else {
			// The probe runs on the job's data while the runner below reports it.
			go func() {
				out, err := tuner.OnData(ctx)
				switch {
				case err != nil && ctx.Err() == nil:
					log.Warn("Auto-tuning failed; the transfer goes on with the parameters it has", "err", err.Error())
				case err == nil && !out.Finished:
					ls.adapt(ctx, newAdapter(out.Plan, int(*stripes)), j.reportInterval)
				}
			}()
		}
	} else {
		core.SetPhase(contract.PhaseTransferring)
		for range *stripes {
			ls.add(ctx)
		}
	}
	runner := &coord.Runner{Core: core, Channel: bar.channel(log), Interval: j.reportInterval, Grace: 30 * time.Second}
	phase := runner.Run(ctx)
	cancel()
	ls.wg.Wait()
	bar.finish()
	rep := core.Report()
	el := time.Since(start).Seconds()
	switch phase {
	case contract.PhaseComplete:
		sent := mover.BytesSent()
		integrity, stalls := mover.Repairs()
		fmt.Printf("Complete: %d files, %d bytes in %.2fs (%s); this run sent %d bytes, %d of them again; %d integrity failures and %d stalls repaired\n",
			rep.FilesDone, rep.BytesTotal, el, coord.HumanRate(int64(float64(rep.BytesTotal)*8/max(el, 1e-3))), sent, core.Resent(sent), integrity, stalls)
		return nil
	case contract.PhasePartiallyComplete:
		return partiallyComplete(rep)
	case contract.PhaseFailed:
		return fmt.Errorf("job failed: %s", rep.Error)
	}
	if err := ls.firstErr(); err != nil {
		return err
	}
	return fmt.Errorf("stopped before the job finished (%d of %d files done)", rep.FilesDone, rep.FilesTotal)
}

// errPartial is the error of a standalone job that ended PartiallyComplete: main exits
// with exitPartial, so that a script tells it from a failure and from a verified copy.
type errPartial struct{ msg string }

func (e *errPartial) Error() string { return e.msg }

// exitPartial is the exit code of a job that skipped files at the source.
const exitPartial = 3

// partiallyComplete says what a job that skipped files moved and which it skipped.
func partiallyComplete(rep contract.Report) error {
	files := make([]string, 0, len(rep.SkippedFiles))
	for _, f := range rep.SkippedFiles {
		files = append(files, f.String())
	}
	msg := fmt.Sprintf("partially complete: %d files verified at the destination; %d files skipped at the source (--source-errors Skip): %s",
		rep.FilesDone, rep.FilesSkipped, strings.Join(files, "; "))
	if n := rep.FilesSkipped - int64(len(files)); n > 0 {
		msg += fmt.Sprintf("; and %d more", n)
	}
	return &errPartial{msg: msg}
}

func runClusterSender(ctx context.Context, stripe int32, coordinator, receiver string, root *os.Root, secret []byte, retryFor, stallTimeout time.Duration, metricsAddr string, log *slog.Logger) error {
	st := &mover.Stripe{Index: stripe, Receiver: receiver, Secret: secret, Root: root, Log: log, RetryFor: retryFor, StallTimeout: stallTimeout}
	if stripe == 0 {
		// the probe stripe runs the helpers of a probe sample of several stripes
		h := &helperStripes{ctx: ctx, coordinator: coordinator, receiver: receiver, root: root, secret: secret, log: log, stallTimeout: stallTimeout}
		defer h.stopAll()
		st.OnConfig = func(c wire.JobConfig) { h.set(int(max(c.SampleStripes, 1)) - 1) }
		st.Helpers = h.transports
	}
	serveMetrics(ctx, metricsAddr, func() any {
		return map[string]any{"role": "sender", "stripe": stripe, "cpuSeconds": metrics.CPUSeconds()}
	}, log)
	var failingSince time.Time
	backoff := 100 * time.Millisecond
	everConnected := false
	for {
		rem, err := coord.DialRemote(ctx, coordinator, secret, stripe)
		if errors.Is(err, auth.ErrRefused) {
			return err
		}
		if err == nil {
			failingSince, backoff, everConnected = time.Time{}, 100*time.Millisecond, true
			sctx, cancel := context.WithCancel(ctx)
			go func() {
				select {
				case <-rem.Dead():
					cancel()
				case <-sctx.Done():
				}
			}()
			err = st.Run(sctx, rem)
			cancel()
			rem.Close()
			if err == nil {
				log.Info("Job finished; sender exits", "stripe", stripe)
				return nil
			}
			var fe *mover.FatalError
			if errors.As(err, &fe) {
				return err
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if failingSince.IsZero() {
			failingSince = time.Now()
		}
		if time.Since(failingSince) > retryFor {
			return err
		}
		log.Warn("Lost the coordinator or receiver; reconnecting", "stripe", stripe, "err", fmt.Sprint(err))
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		backoff = min(backoff*2, mover.MaxRetryBackoff(everConnected))
	}
}

// helperStripes are the probe stripe's helpers: extra stripes it runs from its own
// process, to the same receiver, while the coordinator samples several stripes at once
// on the job's data (wire.JobConfig.SampleStripes). They join the coordinator as
// stripes numbered from mover.HelperStripeBase and pull work like any stripe; when a
// configuration asks for fewer, the newest leave and their work goes back.
type helperStripes struct {
	ctx                   context.Context
	coordinator, receiver string
	root                  *os.Root
	secret                []byte
	log                   *slog.Logger
	stallTimeout          time.Duration

	mu      sync.Mutex
	running []*helperStripe
}

type helperStripe struct {
	st     *mover.Stripe
	cancel context.CancelFunc
	done   chan struct{}
}

// set runs n helpers.
func (h *helperStripes) set(n int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for len(h.running) < n {
		idx := mover.HelperStripeBase + int32(len(h.running))
		ctx, cancel := context.WithCancel(h.ctx)
		hs := &helperStripe{st: &mover.Stripe{Index: idx, Receiver: h.receiver, Secret: h.secret, Root: h.root, Log: h.log, RetryFor: time.Minute, StallTimeout: h.stallTimeout},
			cancel: cancel, done: make(chan struct{})}
		h.running = append(h.running, hs)
		h.log.Info("Starting a helper stripe for a probe sample of several stripes", "stripe", idx)
		go func() {
			defer close(hs.done)
			rem, err := coord.DialRemote(ctx, h.coordinator, h.secret, idx)
			if err != nil {
				if ctx.Err() == nil {
					h.log.Warn("A helper stripe could not join", "stripe", idx, "err", err.Error())
				}
				return
			}
			defer rem.Close()
			sctx, stop := context.WithCancel(ctx)
			defer stop()
			go func() {
				select {
				case <-rem.Dead():
					stop()
				case <-sctx.Done():
				}
			}()
			if err := hs.st.Run(sctx, rem); err != nil && ctx.Err() == nil {
				h.log.Warn("A helper stripe ended", "stripe", idx, "err", err.Error())
			}
		}()
	}
	for len(h.running) > n {
		hs := h.running[len(h.running)-1]
		h.running = h.running[:len(h.running)-1]
		h.log.Info("Stopping a helper stripe", "stripe", hs.st.Index)
		hs.cancel()
	}
}

// transports reads the running helpers' data streams.
func (h *helperStripes) transports() []mover.Transport {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]mover.Transport, 0, len(h.running))
	for _, hs := range h.running {
		out = append(out, hs.st.Transport())
	}
	return out
}

func (h *helperStripes) stopAll() {
	h.set(0)
}

// ---- coordinate ----

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
		cfg, err := rest.InClusterConfig()
		if err != nil {
			return fmt.Errorf("--pod needs the in-cluster API config: %w", err)
		}
		if ch, err = coord.NewPodChannel(cfg, *pod); err != nil {
			return err
		}
	} else if *directiveFile == "" {
		core.SetPhase(contract.PhaseTransferring)
	}
	ln, err := listen(*addr)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go mover.Serve(ctx, ln, secret, 0, core.ServeConn, log)
	serveMetrics(ctx, *metricsAddr, core.Status, log)
	log.Info("Coordinating", "listen", ln.Addr().String(), "job", j.job, "files", core.Dataset().Files, "bytes", core.Dataset().Bytes)
	runner := &coord.Runner{Core: core, Channel: ch, Interval: j.reportInterval, Grace: 30 * time.Second, Probe: probePlanner()}
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

// ---- probe ----

func runProbe(ctx context.Context, args []string, log *slog.Logger) error {
	fs := newFlags("probe", "probe --to HOST:PORT --secret-file FILE [--streams 1,2,4,8] [--seconds 3]")
	to := fs.String("to", "", "receiver address")
	secretFile := fs.String("secret-file", "", "file holding the job's shared secret")
	streams := fs.String("streams", "1,2,4,8", "stream counts to sample")
	seconds := fs.Int("seconds", 3, "seconds per sample")
	var buffer, block byteSize
	block = mover.DefaultBlockSize
	fs.Var(&buffer, "buffer", "socket buffer per stream (0: autotuning)")
	fs.Var(&block, "block-size", "block size on the wire")
	if err := parse(fs, args); err != nil {
		return err
	}
	secret, err := loadSecret(*secretFile)
	if err != nil {
		return err
	}
	list, err := parseInts(*streams)
	if err != nil {
		return fmt.Errorf("--streams: %w", err)
	}
	if *to == "" {
		return errors.New("--to is required")
	}
	enc := json.NewEncoder(os.Stdout)
	for _, n := range list {
		res, err := mover.Probe(ctx, *to, secret, mover.ProbeOptions{Streams: n, BufferBytes: int64(buffer), Duration: time.Duration(*seconds) * time.Second, BlockSize: int64(block)})
		if err != nil {
			return err
		}
		enc.Encode(res.Sample)
		fmt.Fprintf(os.Stderr, "streams %3d  %14s  source %5d m  destination %5d m\n", n, coord.HumanRate(res.Sample.BitsPerSecond), res.Sample.SourceMillicores, res.Sample.DestinationMillicores)
	}
	return nil
}

var _ = net.Dial

// localStripes are the stripes a standalone send runs in its own process.
type localStripes struct {
	core      *coord.Core
	newStripe func(int32) *mover.Stripe
	cancelAll context.CancelFunc
	keepAlive bool
	log       *slog.Logger
	ctx       context.Context // of the job, for Add

	mu      sync.Mutex
	cancels []context.CancelFunc
	stripes []*mover.Stripe
	running int
	err     error
	wg      sync.WaitGroup
}

// Count, Add, Remove and Transports make localStripes the tuner's autotune.Stripes.
func (l *localStripes) Count() int { return l.count() }
func (l *localStripes) Add()       { l.add(l.ctx) }
func (l *localStripes) Remove()    { l.remove() }
func (l *localStripes) Transports() []mover.Transport {
	l.mu.Lock()
	sts := append([]*mover.Stripe(nil), l.stripes...)
	l.mu.Unlock()
	out := make([]mover.Transport, len(sts))
	for i, st := range sts {
		out[i] = st.Transport()
	}
	return out
}

func (l *localStripes) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.cancels)
}

// add starts one more stripe; it pulls work from the core like any other.
func (l *localStripes) add(ctx context.Context) {
	l.mu.Lock()
	k := int32(len(l.cancels))
	sctx, cancel := context.WithCancel(ctx)
	l.cancels = append(l.cancels, cancel)
	l.running++
	l.mu.Unlock()
	m := l.core.Join(k)
	st := l.newStripe(k)
	l.mu.Lock()
	l.stripes = append(l.stripes, st)
	l.mu.Unlock()
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		err := st.Run(sctx, m)
		m.Leave()
		l.mu.Lock()
		l.running--
		if err != nil && !errors.Is(err, context.Canceled) && l.err == nil {
			l.err = err
		}
		last := l.running == 0 && ctx.Err() == nil
		l.mu.Unlock()
		if p := l.core.Phase(); last && !l.keepAlive && !p.Finished() {
			l.cancelAll() // every local stripe gave up
		}
	}()
}

// remove stops the newest stripe; its unfinished work goes back to the others.
func (l *localStripes) remove() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.cancels) <= 1 {
		return
	}
	l.cancels[len(l.cancels)-1]()
	l.cancels = l.cancels[:len(l.cancels)-1]
	l.stripes = l.stripes[:len(l.stripes)-1]
}

func (l *localStripes) firstErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

// adapt runs the optimizer's rescale policy every interval and applies its intents.
func (l *localStripes) adapt(ctx context.Context, a *adapter, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if l.core.Phase() != contract.PhaseTransferring {
			continue
		}
		l.step(ctx, a)
	}
}

// step runs one round of the rescale policy and applies its intent.
func (l *localStripes) step(ctx context.Context, a *adapter) {
	p := l.core.Params()
	it := a.step(l.core.Report(), l.count(), int(p.Streams))
	switch it.Action {
	case "AddStripes":
		for range it.Stripes {
			l.add(ctx)
		}
	case "RemoveStripes":
		for range it.Stripes {
			l.remove()
		}
	case "ChangeStreams":
		p.Streams = int32(it.To.StreamsPerStripe)
		l.core.SetParams(p)
	default:
		return
	}
	l.log.Info("Re-planned", "action", it.Action, "reason", it.Reason, "stripes", it.To.Stripes, "streams", it.To.StreamsPerStripe, "message", it.Message)
}

// applyFairness narrows send's flags to what --fairness allows. Strict is one TCP
// stream with the kernel's buffer autotuning: on a bottleneck shared with other TCP
// flows the job is one ordinary flow among them. A fixed buffer beyond autotuning's
// ceiling would let its one stream keep more in flight than the others and take more
// than a flow's share (bench-sharing-wan: 1.5× with 4 MiB against three iperf3 flows).
func applyFairness(mode string, j *jobFlags, stripes, maxStreams *int32, autoBuffers *string) error {
	switch mode {
	case "Default":
	case "Strict":
		j.streams, *stripes, *maxStreams, j.buffer, *autoBuffers = 1, 1, 1, 0, "off"
	default:
		return fmt.Errorf("--fairness %q: want Default or Strict", mode)
	}
	return nil
}
