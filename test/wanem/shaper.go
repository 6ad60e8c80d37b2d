package wanem

import (
	"math/rand/v2"
	"time"
)

// fate is what the link does with one segment.
type fate uint8

const (
	fateDeliver fate = iota
	fateDropQueue
	fateDropLoss
	// fateCorrupt: delivered with one bit flipped (Direction.Corrupt).
	fateCorrupt
)

// shaper is the model of one direction, with no I/O: given the instant a packet
// reaches the bottleneck and the sizes of its wire segments, it decides each segment's
// fate and the instant it arrives at the far end. Times are nanoseconds of
// CLOCK_MONOTONIC. It is a fluid model of a serializing line: the line is busy until
// lineFree, so the bytes still waiting at time t are (lineFree-t)·rate, which is what
// the drop-tail queue limit is compared with. Nothing is ever reordered: a segment
// never arrives before the one admitted before it, even after the delay shrinks.
type shaper struct {
	dir        Direction
	queueLimit int64
	loss       lossModel
	rng        *rand.Rand

	lineFree    int64 // when the line has serialized everything admitted
	lastArrival int64 // latest arrival handed out

	maxBacklog int64 // high-water mark of the queue, bytes
}

func newShaper(d Direction, rtt time.Duration, rng *rand.Rand) *shaper {
	s := &shaper{}
	s.configure(d, rtt, rng)
	return s
}

// configure changes the direction's parameters; packets already admitted keep the
// fate and arrival they were given (they are already on the wire).
func (s *shaper) configure(d Direction, rtt time.Duration, rng *rand.Rand) {
	s.dir = d
	s.queueLimit = d.effectiveQueue(rtt)
	s.loss = newLossModel(d.Loss, d.GilbertElliott, rng)
	s.rng = rng
}

// pick draws a number in [0, n) from the direction's generator: where a corrupted
// packet's bit flips.
func (s *shaper) pick(n int) int { return s.rng.IntN(n) }

// admit decides the fate of the wire segments of one packet that reached the
// bottleneck at now; wireLen(i) is the IP length of segment i. It fills fates and
// arrivals (len ≥ segs) and returns the number of segments delivered (corrupted ones
// included).
func (s *shaper) admit(now int64, segs int, wireLen func(int) int, fates []fate, arrivals []int64) (delivered int) {
	rate := s.dir.RateBitsPerSecond
	delay := int64(s.dir.Delay)
	for i := 0; i < segs; i++ {
		finish := now
		if rate > 0 {
			size := int64(wireLen(i) + s.dir.OverheadBytes)
			backlog := int64(0)
			if s.lineFree > now {
				backlog = int64(float64(s.lineFree-now) * float64(rate) / 8e9)
			}
			if backlog+size > s.queueLimit {
				fates[i] = fateDropQueue
				continue
			}
			if backlog+size > s.maxBacklog {
				s.maxBacklog = backlog + size
			}
			start := max(s.lineFree, now)
			s.lineFree = start + (size*8_000_000_000+rate/2)/rate
			finish = s.lineFree
		}
		if s.loss.lose() {
			fates[i] = fateDropLoss
			continue
		}
		arrival := max(finish+delay, s.lastArrival)
		s.lastArrival = arrival
		fates[i] = fateDeliver
		// Drawn only when corruption is on, so that a seed gives the same losses
		// with and without this feature.
		if s.dir.Corrupt > 0 && s.rng.Float64() < s.dir.Corrupt {
			fates[i] = fateCorrupt
		}
		arrivals[i] = arrival
		delivered++
	}
	return delivered
}
