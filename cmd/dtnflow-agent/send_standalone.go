package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/dtnflow/dtnflow/agent/autotune"
	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/coord"
	"github.com/dtnflow/dtnflow/agent/mover"
	"github.com/dtnflow/dtnflow/agent/share"
)

// sendStandalone runs a whole job from this process: the coordinator's core and its
// stripes, with fixed parameters or (--auto) tuned as the job goes, and prints how it
// ended.
func sendStandalone(ctx context.Context, f *sendFlags, root *os.Root, secret []byte, log *slog.Logger) error {
	j := &f.job
	if j.job == "" {
		j.job = jobID(j.destPath, f.paths)
	}
	log, bar := progressOutput(log) // a progress bar on a terminal (progressbar.go)
	core, err := coord.New(coord.Options{Root: root, Paths: f.paths, DestPath: j.destPath, Job: j.job, Checksum: j.checksum, Verify: j.verify, VerifyMode: j.verifyMode, InFlight: j.inFlight,
		Overwrite: j.overwrite, BlockSize: int64(j.blockSize), ChunkSize: int64(j.chunkSize), Log: log, NoChannelMoves: !j.classMoves, SourceErrors: j.sourceErrors}, j.params())
	if err != nil {
		return err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if f.listenAddr != "" {
		ln, err := listen(f.listenAddr)
		if err != nil {
			return err
		}
		go mover.Serve(ctx, ln, secret, 0, core.ServeConn, log)
	}
	serveMetrics(ctx, f.metricsAddr, core.Status, log)
	start := time.Now()
	ls := &localStripes{core: core, cancelAll: cancel, log: log, newStripe: func(k int32) *mover.Stripe {
		return &mover.Stripe{Index: k, Receiver: f.to[int(k)%len(f.to)], Secret: secret, Root: root, Log: log, RetryFor: f.retryFor, StallTimeout: f.stallTimeout}
	}, keepAlive: f.listenAddr != "", ctx: ctx}
	if f.auto {
		shared, err := startAuto(ctx, f, core, ls, secret, log)
		if err != nil {
			return err
		}
		if shared != nil {
			defer func() { cancel(); <-shared.done }()
		}
	} else {
		core.SetPhase(contract.PhaseTransferring)
		for range f.stripes {
			ls.add(ctx)
		}
	}
	runner := &coord.Runner{Core: core, Channel: bar.channel(log), Interval: j.reportInterval, Grace: 30 * time.Second}
	phase := runner.Run(ctx)
	cancel()
	ls.wg.Wait()
	bar.finish()
	return sendOutcome(phase, core, ls, start)
}

// startAuto starts tuning a standalone send (--auto) in one of three ways: sharing the
// path with the other jobs of --share-dir, probing memory to memory before the
// transfer (--probe-mem), or probing on the job's data while it moves. It returns the
// path's sharing when it runs one, which the caller waits for.
func startAuto(ctx context.Context, f *sendFlags, core *coord.Core, ls *localStripes, secret []byte, log *slog.Logger) (*sharedSend, error) {
	j := &f.job
	policy, err := autotune.ParseBufferPolicy(f.autoBuffers)
	if err != nil {
		return nil, fmt.Errorf("--auto-buffers: %w", err)
	}
	tuner := &autotune.Tuner{Core: core, Stripes: ls, Params: j.params(), LocalLimits: mover.ReadSocketLimits(), Log: log,
		Options: autotune.Options{MaxStreams: int(f.maxStreams), MaxStripes: int(f.stripes), Buffers: policy,
			NICBitsPerSecond: float64(f.nicRate), SampleCeiling: time.Duration(f.probeSeconds * float64(time.Second))}}
	switch {
	case f.shareDir != "":
		dir, err := share.Open(f.shareDir, share.PathKey(f.to[0]), j.job, int(f.priority))
		if err != nil {
			return nil, err
		}
		shared := &sharedSend{dir: dir, tuner: tuner, stripe: ls, maxStripes: int(f.stripes), userRate: int64(j.maxRate), every: j.reportInterval, log: log, done: make(chan struct{})}
		go shared.run(ctx)
		return shared, nil
	case f.probeMem:
		out, err := tuner.InMemory(ctx, f.to[0], secret, int64(j.blockSize))
		if err != nil {
			return nil, err
		}
		core.SetPhase(contract.PhaseTransferring)
		for range out.Stripes {
			ls.add(ctx)
		}
		go ls.adapt(ctx, newAdapter(out.Plan, int(f.stripes), out.RTT), j.reportInterval)
	default:
		// The probe runs on the job's data while the caller's runner reports it.
		go func() {
			out, err := tuner.OnData(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				log.Warn("Auto-tuning failed; the transfer goes on with the parameters it has", "err", err.Error())
			case err == nil && !out.Finished:
				ls.adapt(ctx, newAdapter(out.Plan, int(f.stripes), out.RTT), j.reportInterval)
			}
		}()
	}
	return nil, nil
}

// sendOutcome prints a complete job's summary, or says why the job did not complete.
func sendOutcome(phase contract.Phase, core *coord.Core, ls *localStripes, start time.Time) error {
	rep := core.Report()
	el := time.Since(start).Seconds()
	switch phase {
	case contract.PhaseComplete:
		sent := mover.BytesSent()
		integrity, stalls := mover.Repairs()
		fmt.Printf("Complete: %d files, %d bytes in %.2fs (%s); this run sent %d bytes, %d of them again; %d integrity failures and %d stalls repaired\n",
			rep.FilesDone, rep.BytesTotal, el, coord.HumanRate(int64(float64(rep.BytesTotal)*8/max(el, 1e-3))), sent, core.Resent(sent), integrity, stalls)
		if msg := notMovedLine(rep); msg != "" {
			fmt.Println(msg)
		}
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

// notMovedLine names the source entries the job did not move because they are not
// files (a symlinked directory, a FIFO, …); "" when there were none.
func notMovedLine(rep contract.Report) string {
	if rep.EntriesNotMoved == 0 {
		return ""
	}
	return fmt.Sprintf("Not moved: %d entries at the source are not files: %s", rep.EntriesNotMoved, listFiles(rep.NotMoved, rep.EntriesNotMoved))
}

// listFiles joins files, saying how many more count holds.
func listFiles(files []contract.FailedFile, count int64) string {
	shown := make([]string, 0, len(files))
	for _, f := range files {
		shown = append(shown, f.String())
	}
	msg := strings.Join(shown, "; ")
	if n := count - int64(len(files)); n > 0 {
		msg += fmt.Sprintf("; and %d more", n)
	}
	return msg
}

// errPartial is the error of a standalone job that ended PartiallyComplete: main exits
// with exitPartial, so that a script tells it from a failure and from a verified copy.
type errPartial struct{ msg string }

func (e *errPartial) Error() string { return e.msg }

// exitPartial is the exit code of a job that skipped files at the source.
const exitPartial = 3

// partiallyComplete says what a job that skipped files moved and which it skipped.
func partiallyComplete(rep contract.Report) error {
	msg := fmt.Sprintf("partially complete: %d files verified at the destination; %d files skipped at the source (--source-errors Skip): %s",
		rep.FilesDone, rep.FilesSkipped, listFiles(rep.SkippedFiles, rep.FilesSkipped))
	if nm := notMovedLine(rep); nm != "" {
		msg += "\n" + nm
	}
	return &errPartial{msg: msg}
}

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

// remove stops the newest stripe: it hands the chunks it is sending over to the others
// at their next block, finishes the files it has started and gives the rest back
// (mover.Stripe.Drain); one that cannot end within helperDrainLimit is cancelled, and
// its unfinished units go back too.
func (l *localStripes) remove() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.cancels) <= 1 {
		return
	}
	cancel, st := l.cancels[len(l.cancels)-1], l.stripes[len(l.stripes)-1]
	l.cancels = l.cancels[:len(l.cancels)-1]
	l.stripes = l.stripes[:len(l.stripes)-1]
	st.Drain()
	time.AfterFunc(helperDrainLimit, cancel)
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
