package mover

import (
	"time"

	"github.com/dtnflow/dtnflow/agent/metrics"
	"github.com/dtnflow/dtnflow/agent/wire"
)

// What a sender measures of its stripe: the transport as read from outside
// (Stripe.Transport) and the stats it reports to the coordinator every second.

// Transport is what a stripe's data streams have done so far, for measuring it from
// outside (send --auto's probe on the job's own data).
type Transport struct {
	// DeliveredBytes counts what reached the receiver's TCP on every data stream this
	// stripe has had (TCP_INFO bytes_acked plus what is selectively acknowledged past
	// a hole: metrics.TCPInfo.DeliveredBytes): data that arrived, not data written into
	// socket buffers. It only grows.
	DeliveredBytes int64
	// MinRTT is the smallest round-trip time of the current streams (0: unknown).
	MinRTT time.Duration
	// BusyTime is how long the streams have had data to send, WindowLimited how much of
	// it a window (the receiver's, or the sender's socket buffer) held them back rather
	// than the path: both summed over every data stream the stripe has had, only
	// growing (zero on kernels without TCP_INFO's busy times).
	BusyTime, WindowLimited time.Duration
	// Streams is the number of data streams open now.
	Streams int
	// PeerCPUSeconds is the receiver process's CPU time as it last reported it, and
	// PeerTime when; zero before the first report.
	PeerCPUSeconds float64
	PeerTime       time.Time
	// PeerLimits are the receiver's socket buffer limits, nil when unknown (not yet
	// connected, or an older receiver).
	PeerLimits *wire.SocketLimits
	// Connected says a session with the receiver is up.
	Connected bool
}

// Transport reads the stripe's data streams now.
func (st *Stripe) Transport() Transport {
	t := Transport{PeerLimits: st.peerLimits.Load()}
	s := st.cur.Load()
	t.BusyTime, t.WindowLimited = time.Duration(st.retiredBusy.Load()), time.Duration(st.retiredWindowLimited.Load())
	if s == nil {
		t.DeliveredBytes = st.retiredAcked.Load()
		return t
	}
	t.Connected = true
	if p := s.peer.Load(); p != nil {
		t.PeerCPUSeconds, t.PeerTime = p.CPUSeconds, time.Unix(0, p.UnixNano)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	t.DeliveredBytes = st.retiredAcked.Load()
	for x := range s.live {
		acked, minRTT := x.readAcked()
		t.DeliveredBytes += acked
		t.BusyTime += time.Duration(x.busy.Load())
		t.WindowLimited += time.Duration(x.windowLimited.Load())
		if minRTT > 0 && (t.MinRTT == 0 || minRTT < t.MinRTT) {
			t.MinRTT = minRTT
		}
	}
	t.Streams = len(s.streams)
	return t
}

// deliveredAsNoted is what the session's stripe has delivered as its streams' last
// TCP_INFO reads noted it (Transport reads them afresh): the report, which has just
// read each stream, sums it without reading them again.
func (s *ssession) deliveredAsNoted() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.st.retiredAcked.Load()
	for x := range s.live {
		d += x.acked.Load()
	}
	return d
}

// readAcked reads the stream's delivered bytes (and min RTT); once its connection is
// closed the last value read stands, and a delivered count that fell (a selective
// acknowledgement the receiver took back) is not counted twice.
func (x *stream) readAcked() (int64, time.Duration) {
	ti := metrics.ReadTCPInfo(x.conn)
	return x.note(ti), ti.MinRTT
}

// note keeps the most delivered bytes, busy time and window-limited time a TCP_INFO
// read showed and returns the delivered bytes.
func (x *stream) note(ti metrics.TCPInfo) int64 {
	if !ti.OK {
		return x.acked.Load()
	}
	if d := ti.DeliveredBytes(); d > x.acked.Load() {
		x.acked.Store(d)
	}
	if b := int64(ti.BusyTime); b > x.busy.Load() {
		x.busy.Store(b)
	}
	if w := int64(ti.WindowLimited); w > x.windowLimited.Load() {
		x.windowLimited.Store(w)
	}
	return x.acked.Load()
}

// retire moves a stream that is closing from the live set into the stripe's total.
func (s *ssession) retire(x *stream) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.live[x]; !ok {
		return
	}
	delete(s.live, x)
	acked, _ := x.readAcked()
	s.st.retiredAcked.Add(acked)
	s.st.retiredBusy.Add(x.busy.Load())
	s.st.retiredWindowLimited.Add(x.windowLimited.Load())
}

func (s *ssession) sample() {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	last := time.Now()
	lastDelivered := s.deliveredAsNoted()
	lastCPU := metrics.CPUSeconds()
	var lastPeer *wire.PeerStats
	label := metrics.Label(s.st.Index)
	local := hostSocketLimits()
	limits := func(stats wire.StripeStats) wire.StripeStats {
		stats.SourceLimits, stats.DestinationLimits = &local, s.st.peerLimits.Load()
		return stats
	}
	// at once, not a second from now: the coordinator's first probe sample waits for
	// the hosts' limits to choose its buffer
	s.mu.Lock()
	n := len(s.streams)
	s.mu.Unlock()
	s.src.Stats(limits(wire.StripeStats{Stripe: s.st.Index, Connected: true, Streams: int32(n)}))
	for {
		select {
		case <-s.ctx.Done():
			s.src.Stats(wire.StripeStats{Stripe: s.st.Index})
			return
		case now := <-t.C:
			dt := now.Sub(last).Seconds()
			last = now
			s.mu.Lock()
			streams := append([]*stream(nil), s.streams...)
			s.mu.Unlock()
			stats := limits(wire.StripeStats{Stripe: s.st.Index, Connected: true, Streams: int32(len(streams))})
			var rttSum time.Duration
			var dRetrans, dSegs uint32
			for _, st := range streams {
				ti := metrics.ReadTCPInfo(st.conn)
				d := st.note(ti)
				bps := int64(float64(d-st.lastDelivered) * 8 / dt)
				st.lastDelivered = d
				stats.StreamBitsPerSecond = append(stats.StreamBitsPerSecond, bps)
				metrics.StreamBitsPerSecond.WithLabelValues(label, metrics.Label(st.idx)).Set(float64(bps))
				rttSum += ti.RTT
				if ti.TotalRetrans >= st.lastRetrans {
					dRetrans += ti.TotalRetrans - st.lastRetrans
				}
				if ti.SegsOut >= st.lastSegs {
					dSegs += ti.SegsOut - st.lastSegs
				}
				st.lastRetrans, st.lastSegs = ti.TotalRetrans, ti.SegsOut
			}
			if len(streams) > 0 {
				stats.RTTMicros = (rttSum / time.Duration(len(streams))).Microseconds()
			}
			if dSegs > 0 {
				stats.LossPPM = int64(dRetrans) * 1_000_000 / int64(dSegs)
			}
			// The rate is what arrived, not what was written: the sockets' buffers (up
			// to streams × buffer, 120 MiB at 30 × 4 MiB) fill in bursts whenever a
			// chunk's blocks are queued and drain while the next waits for its lease,
			// so a stripe delivering 600 Mbit/s throughout wrote at 0 and then at
			// 1.4 Gbit/s in successive seconds beside four competing flows, and the
			// rescale policy read those swings as the path moving (docs/benchmarks.md,
			// seventeenth session). The probe's samples count the same delivered bytes.
			stats.BytesSent = s.st.bytesSent.Load()
			delivered := s.deliveredAsNoted()
			stats.BitsPerSecond = int64(float64(max(delivered-lastDelivered, 0)) * 8 / dt)
			lastDelivered = max(lastDelivered, delivered)
			cpu := metrics.CPUSeconds()
			stats.SourceCPUSeconds = cpu
			stats.SourceMillicores = int64((cpu - lastCPU) / dt * 1000)
			lastCPU = cpu
			if p := s.peer.Load(); p != nil {
				stats.DestinationCPUSeconds = p.CPUSeconds
				if lastPeer != nil && p.UnixNano > lastPeer.UnixNano {
					stats.DestinationMillicores = int64((p.CPUSeconds - lastPeer.CPUSeconds) / (float64(p.UnixNano-lastPeer.UnixNano) / 1e9) * 1000)
				}
				lastPeer = p
			}
			metrics.StripeBitsPerSecond.WithLabelValues(label).Set(float64(stats.BitsPerSecond))
			metrics.RTTSeconds.WithLabelValues(label).Set(float64(stats.RTTMicros) / 1e6)
			metrics.LossRatio.WithLabelValues(label).Set(float64(stats.LossPPM) / 1e6)
			metrics.RetransmitsTotal.WithLabelValues(label).Add(float64(dRetrans))
			s.src.Stats(stats)
		}
	}
}
