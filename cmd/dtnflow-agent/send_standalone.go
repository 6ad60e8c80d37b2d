package main

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/coord"
	"github.com/dtnflow/dtnflow/agent/mover"
)

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
		if p := l.core.Phase(); last && !l.keepAlive && p != contract.PhaseComplete && p != contract.PhaseFailed {
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
