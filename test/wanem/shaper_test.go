package wanem

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func constLen(n int) func(int) int { return func(int) int { return n } }

// admitOne runs one single-segment packet through s.
func admitOne(s *shaper, now int64, size int) (fate, int64) {
	f, a := make([]fate, 1), make([]int64, 1)
	s.admit(now, 1, constLen(size), f, a)
	return f[0], a[0]
}

func newTestShaper(d Direction, rtt time.Duration) *shaper {
	return newShaper(d, rtt, rand.New(rand.NewPCG(1, 2)))
}

func TestShaperDelayOnly(t *testing.T) {
	s := newTestShaper(Direction{Delay: 25 * time.Millisecond}, 50*time.Millisecond)
	for _, now := range []int64{0, 10, 1e6, 5e9} {
		f, a := admitOne(s, now, 9000)
		if f != fateDeliver || a != now+int64(25*time.Millisecond) {
			t.Errorf("at %d: fate %d arrival %d", now, f, a)
		}
	}
}

func TestShaperSerializesAtRate(t *testing.T) {
	// 10 Mbit/s: a 1250-byte packet takes exactly 1 ms on the line.
	s := newTestShaper(Direction{RateBitsPerSecond: 10e6, Delay: 5 * time.Millisecond, QueueBytes: 1 << 20}, 0)
	for i := range 10 {
		f, a := admitOne(s, 0, 1250)
		want := int64(i+1)*int64(time.Millisecond) + int64(5*time.Millisecond)
		if f != fateDeliver || a != want {
			t.Errorf("packet %d: fate %d arrival %v, want %v", i, f, time.Duration(a), time.Duration(want))
		}
	}
	// After the line drained, a packet goes straight through.
	f, a := admitOne(s, int64(time.Second), 1250)
	if want := int64(time.Second + 6*time.Millisecond); f != fateDeliver || a != want {
		t.Errorf("after idle: arrival %v, want %v", time.Duration(a), time.Duration(want))
	}
}

func TestShaperOverheadCountsOnTheLine(t *testing.T) {
	s := newTestShaper(Direction{RateBitsPerSecond: 8e6, OverheadBytes: 38, QueueBytes: 1 << 20}, 0)
	_, a := admitOne(s, 0, 962) // 1000 bytes on the line at 1 MB/s: 1 ms
	if a != int64(time.Millisecond) {
		t.Errorf("arrival %v, want 1ms", time.Duration(a))
	}
}

func TestShaperDropTail(t *testing.T) {
	// 8 Mbit/s = 1 byte/µs; queue of 3000 bytes holds three 1000-byte packets.
	s := newTestShaper(Direction{RateBitsPerSecond: 8e6, QueueBytes: 3000}, 0)
	var fates []fate
	for range 5 {
		f, _ := admitOne(s, 0, 1000)
		fates = append(fates, f)
	}
	want := []fate{fateDeliver, fateDeliver, fateDeliver, fateDropQueue, fateDropQueue}
	for i := range want {
		if fates[i] != want[i] {
			t.Fatalf("fates %v, want %v", fates, want)
		}
	}
	// One packet time later there is room for exactly one more.
	if f, _ := admitOne(s, 1000_000, 1000); f != fateDeliver {
		t.Errorf("after 1 ms: %d, want delivered", f)
	}
	if f, _ := admitOne(s, 1000_000, 1000); f != fateDropQueue {
		t.Errorf("second after 1 ms: %d, want dropped", f)
	}
	if s.maxBacklog != 3000 {
		t.Errorf("high water %d, want 3000", s.maxBacklog)
	}
}

func TestShaperSuperPacketTailDrop(t *testing.T) {
	s := newTestShaper(Direction{RateBitsPerSecond: 8e6, QueueBytes: 20000}, 0)
	f, a := make([]fate, 7), make([]int64, 7)
	n := s.admit(0, 7, constLen(9000), f, a)
	if n != 2 || f[0] != fateDeliver || f[1] != fateDeliver || f[2] != fateDropQueue || f[6] != fateDropQueue {
		t.Errorf("delivered %d, fates %v", n, f)
	}
	if a[1]-a[0] != 9000_000 {
		t.Errorf("segments %v apart, want 9 ms", time.Duration(a[1]-a[0]))
	}
}

func TestShaperNeverReorders(t *testing.T) {
	s := newTestShaper(Direction{Delay: 50 * time.Millisecond}, 0)
	_, first := admitOne(s, 0, 100)
	s.configure(Direction{Delay: time.Millisecond}, 0, rand.New(rand.NewPCG(1, 2)))
	_, second := admitOne(s, 1000, 100)
	if second < first {
		t.Errorf("second packet arrives at %v, before the first at %v", time.Duration(second), time.Duration(first))
	}
	_, later := admitOne(s, int64(time.Second), 100)
	if later != int64(time.Second+time.Millisecond) {
		t.Errorf("new delay not applied: %v", time.Duration(later))
	}
}

func TestShaperRateOverLongRun(t *testing.T) {
	// Offered 2× the rate: what gets through arrives at the rate, the rest is dropped.
	const rate = 1e9
	s := newTestShaper(Direction{RateBitsPerSecond: rate, QueueBytes: 1 << 20}, 0)
	var delivered int64
	var lastArrival int64
	for now := int64(0); now < int64(time.Second); now += 36_000 { // 9000 B every 36 µs = 2 Gbit/s
		f, a := admitOne(s, now, 9000)
		if f == fateDeliver {
			delivered += 9000
			lastArrival = a
		}
	}
	got := float64(delivered*8) / (float64(lastArrival) / 1e9)
	if math.Abs(got-rate)/rate > 0.001 {
		t.Errorf("delivered at %.4g bit/s, want %.4g", got, rate)
	}
}

func TestShaperDefaultQueueIsBDP(t *testing.T) {
	s := newTestShaper(Direction{RateBitsPerSecond: 1e9}, 50*time.Millisecond)
	if s.queueLimit != 6_250_000 {
		t.Errorf("queue %d, want one BDP 6250000", s.queueLimit)
	}
	s = newTestShaper(Direction{RateBitsPerSecond: 1e9}, 0)
	if s.queueLimit != DefaultMinQueueBytes {
		t.Errorf("queue %d, want the minimum %d", s.queueLimit, DefaultMinQueueBytes)
	}
}

func TestRandomLossRate(t *testing.T) {
	for _, p := range []float64{1e-4, 1e-3, 1e-2, 0.1} {
		s := newTestShaper(Direction{Loss: p}, 0)
		const n = 2_000_000
		lost := 0
		for i := range n {
			if f, _ := admitOne(s, int64(i), 100); f == fateDropLoss {
				lost++
			}
		}
		// Within 4 standard deviations of the binomial.
		sd := math.Sqrt(n * p * (1 - p))
		if math.Abs(float64(lost)-n*p) > 4*sd {
			t.Errorf("p=%g: lost %d of %d, want %.0f ± %.0f", p, lost, n, n*p, 4*sd)
		}
	}
}

func TestGilbertElliottLoss(t *testing.T) {
	g := GilbertElliott{P: 0.001, R: 0.25, LossGood: 0, LossBad: 1}
	m := newLossModel(0, &g, rand.New(rand.NewPCG(3, 4)))
	const n = 4_000_000
	lost, bursts, run := 0, 0, 0
	for range n {
		if m.lose() {
			lost++
			run++
		} else if run > 0 {
			bursts++
			run = 0
		}
	}
	mean := float64(lost) / n
	if want := g.MeanLoss(); math.Abs(mean-want)/want > 0.05 {
		t.Errorf("mean loss %.5f, want %.5f", mean, want)
	}
	// With LossBad 1 and LossGood 0 a burst is a stay in Bad: 1/R packets on average.
	if got := float64(lost) / float64(bursts); math.Abs(got-1/g.R)/(1/g.R) > 0.05 {
		t.Errorf("mean burst %.2f packets, want %.2f", got, 1/g.R)
	}
}

func TestMeanLossCombines(t *testing.T) {
	d := Direction{Loss: 0.01, GilbertElliott: &GilbertElliott{P: 0.01, R: 0.09, LossBad: 0.5}}
	if got, want := d.MeanLoss(), 1-(0.99*(1-0.05)); math.Abs(got-want) > 1e-12 {
		t.Errorf("MeanLoss %v, want %v", got, want)
	}
}

func BenchmarkShaperAdmit(b *testing.B) {
	s := newTestShaper(Direction{RateBitsPerSecond: 1e9, Delay: 25 * time.Millisecond, Loss: 1e-4}, 50*time.Millisecond)
	f, a := make([]fate, 7), make([]int64, 7)
	now := int64(0)
	for b.Loop() {
		now += 500_000
		s.admit(now, 7, constLen(9000), f, a)
	}
}

// TestRandomLossUnbiasedAcrossSeeds: any one seed realizes a loss rate off by its
// binomial spread (±3 % at 1e-3 over 10⁶ packets); over many seeds the mean is the
// configured rate.
func TestRandomLossUnbiasedAcrossSeeds(t *testing.T) {
	const seeds, n, p = 100, 1_000_000, 1e-3
	var sum float64
	for seed := uint64(1); seed <= seeds; seed++ {
		m := newLossModel(p, nil, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
		for range n {
			if m.lose() {
				sum++
			}
		}
	}
	mean := sum / seeds / n
	// The standard error of the mean over 10⁸ draws is 0.3 %.
	if math.Abs(mean-p)/p > 0.015 {
		t.Errorf("mean realized loss %.6f over %d seeds, configured %g", mean, seeds, p)
	}
}

func TestCorruptRate(t *testing.T) {
	const n, p = 20000, 0.05
	s := newTestShaper(Direction{Corrupt: p}, 0)
	corrupted := 0
	for range n {
		switch f, _ := admitOne(s, 0, 1500); f {
		case fateCorrupt:
			corrupted++
		case fateDeliver:
		default:
			t.Fatalf("fate %d: corruption must not drop", f)
		}
	}
	sd := math.Sqrt(n * p * (1 - p))
	if math.Abs(float64(corrupted)-n*p) > 4*sd {
		t.Errorf("corrupted %d of %d, want %.0f ± %.0f", corrupted, n, n*p, 4*sd)
	}
	// A lost packet is not also corrupted: it never arrives.
	s = newTestShaper(Direction{Loss: 1, Corrupt: 1}, 0)
	if f, _ := admitOne(s, 0, 1500); f != fateDropLoss {
		t.Errorf("fate %d, want lost", f)
	}
}
