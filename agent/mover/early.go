package mover

import (
	"context"
	"sync"
	"time"

	"github.com/dtnflow/dtnflow/agent/wire"
)

// A cluster's sender starts beside its coordinator and its receiver, and waits for
// the coordinator (its pod starts as the sender's does, and reads its directive
// before it serves) before its first session connects to the receiver: a TCP
// handshake and the authentication's challenge, two round trips of the WAN, that
// could as well have been made while it waited. DialEarly makes them then; the first
// session takes the connection as its control connection.

// earlyControlMaxAge bounds how long a control connection dialed early may wait for
// its session: an older one is closed and the session dials afresh (a receiver keeps
// an idle authenticated connection, but a path that drops idle flows would not).
const earlyControlMaxAge = 30 * time.Second

type earlyControl struct {
	done chan struct{}
	conn *wire.Conn
	err  error
	at   time.Time
}

// DialEarly dials the stripe's receiver and authenticates in the background, for the
// stripe's first session to use as its control connection. A dial that fails costs
// nothing: the session dials as it would have. Call it once, before Run.
func (st *Stripe) DialEarly(ctx context.Context) {
	e := &earlyControl{done: make(chan struct{})}
	st.earlyMu.Lock()
	defer st.earlyMu.Unlock()
	if st.early != nil {
		return
	}
	st.early = e
	go func() {
		defer close(e.done)
		e.conn, e.err = Dial(ctx, st.Receiver, st.Secret, 0)
		e.at = time.Now()
	}()
}

// takeEarly returns the connection DialEarly made, waiting for a dial in flight, or
// nil when there is none to use (none dialed, it failed, it is too old, or ctx ended).
// Only the first call can return one.
func (st *Stripe) takeEarly(ctx context.Context) *wire.Conn {
	st.earlyMu.Lock()
	e := st.early
	st.early = nil
	st.earlyMu.Unlock()
	if e == nil {
		return nil
	}
	select {
	case <-e.done:
	case <-ctx.Done():
		go func() {
			<-e.done
			if e.conn != nil {
				e.conn.Close()
			}
		}()
		return nil
	}
	if e.err != nil {
		return nil
	}
	if time.Since(e.at) > earlyControlMaxAge {
		e.conn.Close()
		return nil
	}
	return e.conn
}

// earlyState is the part of Stripe that DialEarly and takeEarly share.
type earlyState struct {
	earlyMu sync.Mutex
	early   *earlyControl
}
