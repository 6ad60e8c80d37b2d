package wanem

import (
	"sync/atomic"
	"time"
)

// DirectionStats counts what one direction did. Segments are wire packets (a TCP
// super-packet read from the TUN counts as the segments it stands for); bytes are IP
// bytes of segments, without the configured overhead.
type DirectionStats struct {
	// Packets read from the sending side's TUN (super-packets count once).
	Packets uint64 `json:"packets"`
	// Segments and Bytes that reached the bottleneck.
	Segments uint64 `json:"segments"`
	Bytes    uint64 `json:"bytes"`
	// Delivered after their delay.
	DeliveredSegments uint64 `json:"deliveredSegments"`
	DeliveredBytes    uint64 `json:"deliveredBytes"`
	// Dropped by the full bottleneck queue (drop-tail).
	QueueDroppedSegments uint64 `json:"queueDroppedSegments"`
	QueueDroppedBytes    uint64 `json:"queueDroppedBytes"`
	// Lost on the wire (random and Gilbert-Elliott loss).
	LostSegments uint64 `json:"lostSegments"`
	LostBytes    uint64 `json:"lostBytes"`
	// Corrupted segments were delivered with one bit flipped (Direction.Corrupt);
	// they are counted in Delivered too.
	CorruptedSegments uint64 `json:"corruptedSegments"`
	CorruptedBytes    uint64 `json:"corruptedBytes"`
	// SplitPackets were super-packets cut into segments in user space, because some of
	// their segments were dropped or their serialization outlasted the granularity.
	SplitPackets uint64 `json:"splitPackets"`
	// QueueHighWaterBytes is the most the bottleneck queue ever held.
	QueueHighWaterBytes int64 `json:"queueHighWaterBytes"`
	// InFlight is what is on the delay line now (written to the far TUN when due).
	InFlightPackets int64 `json:"inFlightPackets"`
	InFlightBytes   int64 `json:"inFlightBytes"`
	// Lateness is how long after its due time each packet was written to the far
	// side: the emulator's own error on top of the configured delay.
	LatenessMean time.Duration `json:"latenessMeanNanoseconds"`
	LatenessMax  time.Duration `json:"latenessMaxNanoseconds"`
	// LatenessHistogram counts packets by lateness: bucket i holds those under
	// LatenessBucketBounds[i], the last one the rest (a packet written early counts in
	// the first).
	LatenessHistogram []uint64 `json:"latenessHistogram"`
	// EarlinessMax is the most before its due time a packet was written: the writer
	// writes a packet due within its timer lead at once rather than spin for it.
	EarlinessMax time.Duration `json:"earlinessMaxNanoseconds"`
	// KernelDropped counts packets the kernel dropped at the sending side's TUN
	// because the emulator did not read them in time: loss nobody configured. It
	// should stay 0; if not, the machine is too busy for the emulated rate.
	KernelDropped uint64 `json:"kernelDropped"`
	// Malformed packets were forwarded whole, as one segment.
	Malformed   uint64 `json:"malformed"`
	ReadErrors  uint64 `json:"readErrors"`
	WriteErrors uint64 `json:"writeErrors"`
}

// LossRatio is the share of segments on the wire that were lost (queue drops apart).
func (s DirectionStats) LossRatio() float64 {
	onWire := s.Segments - s.QueueDroppedSegments
	if onWire == 0 {
		return 0
	}
	return float64(s.LostSegments) / float64(onWire)
}

// LatenessBucketBounds are the upper bounds of DirectionStats.LatenessHistogram.
var LatenessBucketBounds = []time.Duration{
	10 * time.Microsecond, 20 * time.Microsecond, 50 * time.Microsecond,
	100 * time.Microsecond, 200 * time.Microsecond, 500 * time.Microsecond,
	time.Millisecond, 2 * time.Millisecond, 5 * time.Millisecond,
}

// counters is the live, atomically updated form of DirectionStats.
type counters struct {
	packets, segments, bytes                atomic.Uint64
	deliveredSegments, deliveredBytes       atomic.Uint64
	queueDroppedSegments, queueDroppedBytes atomic.Uint64
	lostSegments, lostBytes                 atomic.Uint64
	corruptedSegments, corruptedBytes       atomic.Uint64
	splitPackets                            atomic.Uint64
	queueHighWater                          atomic.Int64
	inFlightPackets, inFlightBytes          atomic.Int64
	latenessSum, latenessCount, latenessMax atomic.Int64
	earlinessMax                            atomic.Int64
	latenessHist                            [10]atomic.Uint64
	malformed, readErrors, writeErrors      atomic.Uint64
}

func (c *counters) observeLateness(d int64) {
	if d < 0 {
		storeMax(&c.earlinessMax, -d)
		d = 0
	}
	c.latenessSum.Add(d)
	c.latenessCount.Add(1)
	storeMax(&c.latenessMax, d)
	i := 0
	for i < len(LatenessBucketBounds) && time.Duration(d) >= LatenessBucketBounds[i] {
		i++
	}
	c.latenessHist[i].Add(1)
}

// storeMax raises m to d if d is more.
func storeMax(m *atomic.Int64, d int64) {
	for {
		old := m.Load()
		if d <= old || m.CompareAndSwap(old, d) {
			return
		}
	}
}

func (c *counters) snapshot() DirectionStats {
	s := DirectionStats{
		Packets:              c.packets.Load(),
		Segments:             c.segments.Load(),
		Bytes:                c.bytes.Load(),
		DeliveredSegments:    c.deliveredSegments.Load(),
		DeliveredBytes:       c.deliveredBytes.Load(),
		QueueDroppedSegments: c.queueDroppedSegments.Load(),
		QueueDroppedBytes:    c.queueDroppedBytes.Load(),
		LostSegments:         c.lostSegments.Load(),
		LostBytes:            c.lostBytes.Load(),
		CorruptedSegments:    c.corruptedSegments.Load(),
		CorruptedBytes:       c.corruptedBytes.Load(),
		SplitPackets:         c.splitPackets.Load(),
		QueueHighWaterBytes:  c.queueHighWater.Load(),
		InFlightPackets:      c.inFlightPackets.Load(),
		InFlightBytes:        c.inFlightBytes.Load(),
		LatenessMax:          time.Duration(c.latenessMax.Load()),
		EarlinessMax:         time.Duration(c.earlinessMax.Load()),
		Malformed:            c.malformed.Load(),
		ReadErrors:           c.readErrors.Load(),
		WriteErrors:          c.writeErrors.Load(),
		LatenessHistogram:    make([]uint64, len(c.latenessHist)),
	}
	if n := c.latenessCount.Load(); n > 0 {
		s.LatenessMean = time.Duration(c.latenessSum.Load() / n)
	}
	for i := range c.latenessHist {
		s.LatenessHistogram[i] = c.latenessHist[i].Load()
	}
	return s
}

// Stats is a snapshot of a link: its configuration and both directions' counters.
type Stats struct {
	Config Config         `json:"config"`
	Uptime time.Duration  `json:"uptimeNanoseconds"`
	AtoB   DirectionStats `json:"aToB"`
	BtoA   DirectionStats `json:"bToA"`
}
