package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/dtnflow/dtnflow/agent/auth"
	"github.com/dtnflow/dtnflow/agent/coord"
	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/mover"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// runClusterSender is send's cluster mode: one stripe of a job whose coordinator runs
// elsewhere, reconnecting while it fails for no longer than retryFor.
func runClusterSender(ctx context.Context, stripe int32, coordinator, receiver string, root *os.Root, secret []byte, retryFor, stallTimeout time.Duration, metricsAddr string, log *slog.Logger) error {
	st := &mover.Stripe{Index: stripe, Receiver: receiver, Secret: secret, Root: root, Log: log, RetryFor: retryFor, StallTimeout: stallTimeout}
	if stripe == 0 {
		// the probe stripe runs the helpers of a probe sample of several stripes
		h := &helperStripes{ctx: ctx, coordinator: coordinator, receiver: receiver, root: root, secret: secret, log: log, stallTimeout: stallTimeout}
		defer h.cancelAll()
		st.OnConfig = func(c wire.JobConfig) { h.set(int(max(c.SampleStripes, 1)) - 1) }
		st.Helpers = h.transports
	}
	serveMetrics(ctx, metricsAddr, func() any {
		return map[string]any{"role": "sender", "stripe": stripe, "cpuSeconds": metrics.CPUSeconds()}
	}, log)
	// the receiver's handshake is made while the coordinator starts
	st.DialEarly(ctx)
	retry := mover.PeerRetry{For: retryFor}
	for {
		rem, err := coord.DialRemote(ctx, coordinator, secret, stripe)
		if errors.Is(err, auth.ErrRefused) {
			return err
		}
		if err == nil {
			retry.Connected()
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
		giveUp, warn := retry.Failed()
		if giveUp {
			return err
		}
		if warn {
			log.Warn("Lost the coordinator or receiver; reconnecting", "stripe", stripe, "err", fmt.Sprint(err))
		}
		if !retry.Wait(ctx) {
			return ctx.Err()
		}
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
		// It hands the chunks it is sending over at their next block (the probe
		// stripe continues them from what the receiver has), finishes the small
		// files it has on the wire and gives the rest back; one that cannot finish
		// in helperDrainLimit is cancelled.
		hs.st.Drain()
		go func() {
			t := time.NewTimer(helperDrainLimit)
			defer t.Stop()
			select {
			case <-hs.done:
			case <-t.C:
				hs.cancel()
			}
		}()
	}
}

// helperDrainLimit bounds how long a helper stripe told to stop may take to end: its
// chunks are handed over at once, so this is for a receiver that stopped answering.
const helperDrainLimit = 30 * time.Second

// cancelAll stops every helper at once (the sender is ending).
func (h *helperStripes) cancelAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, hs := range h.running {
		hs.cancel()
	}
	h.running = nil
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
