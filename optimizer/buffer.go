package optimizer

import (
	"math"
	"sort"
	"time"
)

// BDPVariant names one of the readings of the bandwidth-delay product that DADC'09 §2
// lists (after Jain, Prasad & Dovrolis).
type BDPVariant int

const (
	BDP1 BDPVariant = iota + 1 // B = C × RTT_max
	BDP2                       // B = C × RTT_min
	BDP3                       // B = A × RTT_max
	BDP4                       // B = A × RTT_min
	BDP5                       // B = BTC × RTT_avg
	BDP6                       // B = B_∞, a buffer larger than any congestion window
)

// PathEstimate is what is known of a path for the BDP formulas; zero means unknown.
// C is the capacity, A the available bandwidth and BTC the throughput of a bulk
// congestion-limited transfer, all in bits per second.
type PathEstimate struct {
	CapacityBitsPerSecond  float64
	AvailableBitsPerSecond float64
	BulkBitsPerSecond      float64
	RTTMin, RTTMax, RTTAvg time.Duration
	// LargeBufferBytes is B_∞ of BDP6, typically the kernel's maximum socket buffer.
	LargeBufferBytes int64
}

// BDP returns the buffer size in bytes of one variant, and false when the estimate
// lacks what the variant needs.
func BDP(v BDPVariant, e PathEstimate) (int64, bool) {
	bdp := func(bps float64, rtt time.Duration) (int64, bool) {
		if !(bps > 0) || rtt <= 0 || math.IsInf(bps, 0) {
			return 0, false
		}
		return int64(math.Ceil(bps / 8 * rtt.Seconds())), true
	}
	switch v {
	case BDP1:
		return bdp(e.CapacityBitsPerSecond, e.RTTMax)
	case BDP2:
		return bdp(e.CapacityBitsPerSecond, e.RTTMin)
	case BDP3:
		return bdp(e.AvailableBitsPerSecond, e.RTTMax)
	case BDP4:
		return bdp(e.AvailableBitsPerSecond, e.RTTMin)
	case BDP5:
		return bdp(e.BulkBitsPerSecond, e.RTTAvg)
	case BDP6:
		return e.LargeBufferBytes, e.LargeBufferBytes > 0
	}
	return 0, false
}

// BDPPrior is the buffer size the sampling centres on: the first variant the estimate
// supports among BDP5 (measured bulk throughput, closest to what a transfer sees),
// BDP3, BDP4 (available bandwidth), BDP1, BDP2 (capacity). DADC'09 §2 argues that none
// of them is reliable on its own, which is why it samples; the paper does not say
// which one to start from, so we prefer the one closest to a measurement. It returns 0
// when none applies.
func BDPPrior(e PathEstimate) int64 {
	for _, v := range []BDPVariant{BDP5, BDP3, BDP4, BDP1, BDP2} {
		if b, ok := BDP(v, e); ok {
			return b
		}
	}
	return 0
}

// Buffer sampling bounds.
const (
	// MinSampleBufferBytes is the smallest buffer BufferCandidates proposes.
	MinSampleBufferBytes = 64 << 10
	// DefaultMaxBufferBytes is the largest buffer BufferCandidates proposes when the
	// caller gives no bound.
	DefaultMaxBufferBytes = 64 << 20
)

// BufferCandidates returns the buffer sizes to sample with one stream, ascending
// powers of two (DADC'09 §2: "the buffer size parameter is increased exponentially").
// With a BDP prior they run from prior/8 to 2·prior (the classic 2×BDP rule is the top,
// and the plateau of Figure 1 sits below it); without one, from 64 KiB to 16 MiB. Both
// ends are clamped to [64 KiB, maxBytes] (maxBytes ≤ 0 means 64 MiB).
func BufferCandidates(priorBytes, maxBytes int64) []int64 {
	if maxBytes <= 0 {
		maxBytes = DefaultMaxBufferBytes
	}
	lo, hi := int64(MinSampleBufferBytes), int64(16<<20)
	if priorBytes > 0 {
		lo, hi = pow2Floor(priorBytes/8), pow2Ceil(2*priorBytes)
	}
	lo = max(lo, MinSampleBufferBytes)
	hi = min(hi, pow2Floor(maxBytes))
	if hi < lo {
		hi = lo
	}
	var out []int64
	for b := lo; b <= hi; b *= 2 {
		out = append(out, b)
	}
	return out
}

func pow2Floor(x int64) int64 {
	if x < 1 {
		return 1
	}
	p := int64(1)
	for p <= x/2 {
		p *= 2
	}
	return p
}

func pow2Ceil(x int64) int64 {
	p := pow2Floor(x)
	if p < x && p <= math.MaxInt64/2 {
		p *= 2
	}
	return p
}

// DefaultPlateau is the relative gain below which a larger buffer is not worth it.
const DefaultPlateau = 0.05

// ChooseBuffer is the plateau choice of DADC'09 §2 and §4.2.2: among one-stream
// samples at different buffer sizes, the point "in which the throughput stops
// increasing and becomes stable". The paper reads it off a plot; we take the smallest
// buffer whose rate is within plateau (DefaultPlateau when ≤ 0) of the best one-stream
// rate, so that noise on a flat top does not pick an oversized buffer. Samples with
// more than one stream or buffer 0 (autotuning) are ignored. ok is false when no
// sample qualifies.
func ChooseBuffer(samples []Sample, plateau float64) (bufferBytes int64, ok bool) {
	return chooseBuffer(samples, plateau, false)
}

// chooseBuffer is ChooseBuffer, with one-stream samples at buffer 0 (autotuning)
// taken as the smallest candidate when withAutotuning.
func chooseBuffer(samples []Sample, plateau float64, withAutotuning bool) (bufferBytes int64, ok bool) {
	if !(plateau > 0) {
		plateau = DefaultPlateau
	}
	pts := bufferPoints(samples, withAutotuning)
	if len(pts) == 0 {
		return 0, false
	}
	best := 0.0
	for _, p := range pts {
		best = math.Max(best, p.rate)
	}
	for _, p := range pts {
		if p.rate >= (1-plateau)*best {
			return p.buffer, true
		}
	}
	return pts[len(pts)-1].buffer, true
}

type bufferPoint struct {
	buffer int64
	rate   float64
}

// bufferPoints are the one-stream samples with an explicit buffer (and, when
// withAutotuning, those at 0, autotuning), averaged per size and sorted by size.
func bufferPoints(samples []Sample, withAutotuning bool) []bufferPoint {
	sums := map[int64][2]float64{}
	for _, s := range samples {
		if s.Streams != 1 || s.BufferBytes < 0 || (s.BufferBytes == 0 && !withAutotuning) || !usable(s.BitsPerSecond) {
			continue
		}
		v := sums[s.BufferBytes]
		sums[s.BufferBytes] = [2]float64{v[0] + s.BitsPerSecond, v[1] + 1}
	}
	out := make([]bufferPoint, 0, len(sums))
	for b, v := range sums {
		out = append(out, bufferPoint{buffer: b, rate: v[0] / v[1]})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].buffer < out[j].buffer })
	return out
}

// ProbePhase says what a probe is measuring.
type ProbePhase string

const (
	PhaseBuffer  ProbePhase = "Buffer"  // one stream, growing buffer
	PhaseStreams ProbePhase = "Streams" // chosen buffer, growing streams
	PhaseDone    ProbePhase = "Done"
)

// ProbeStep is the next measurement a probe should take.
type ProbeStep struct {
	Phase ProbePhase
	// Streams and BufferBytes are what to measure next; unset when Phase is Done.
	Streams     int
	BufferBytes int64
}

// Prober is the combined probe of DADC'09 §4.2.2 ("2nd Settings"), buffer first and
// streams second, as a stateless stepper: Next looks at every sample so far and says
// what to measure next.
//
//  1. Buffer phase: one stream at each of BufferSizes in ascending order, stopping when
//     a doubling gains less than Plateau (the throughput "started to become stable");
//     the buffer is then ChooseBuffer's plateau choice. With no BufferSizes the buffer
//     is 0, kernel autotuning, and this phase is empty. A 0 among BufferSizes makes
//     autotuning a candidate of its own, sampled first and kept unless a fixed buffer
//     beats it by more than Plateau: the paper predates autotuning, which grows a
//     stream's buffers up to the kernel's ceiling by itself, so a fixed buffer is only
//     worth its cost (it switches autotuning off) where it reaches beyond that ceiling.
//     With RTT known, the fixed sizes that cannot beat autotuning are not sampled at
//     all (see RTT), and the sweep stops at the first fixed size that does not beat
//     it.
//  2. Stream phase: ExpSelection at the chosen buffer; the one-stream sample of the
//     buffer phase is reused.
//
// The paper found this order better than streams first (§4.2.1 vs §4.2.2: higher
// throughput with fewer streams).
type Prober struct {
	// BufferSizes are the buffer candidates (see BufferCandidates); empty means
	// autotuning only.
	BufferSizes []int64
	// Plateau is the relative gain that ends the buffer phase; 0 means DefaultPlateau.
	Plateau float64
	// RTT is the path's round-trip time, 0 when unknown. With autotuning among the
	// BufferSizes and measured, it skips every fixed size b whose window could not
	// carry more than autotuning's one-stream rate A by Plateau: b·8/RTT ≤ (1+Plateau)·A.
	//
	// Why: one stream moves at most a window per round trip, and Linux gives a socket
	// buffer of b (SO_SNDBUF/SO_RCVBUF) a window of b to 2·b (it doubles the request
	// and keeps at least half of it for data; the operator's cold probe on the e2e
	// path moved 18–19 Mbit/s with 64 KiB over 40 ms, a window of 1.4·b). A skipped
	// size whose 2·b is skipped too cannot beat autotuning at all; the largest skipped
	// one could only through a window beyond b, and then the next size, 2·b, which is
	// sampled, does at least as well (DADC'09's premise: the rate rises with the
	// buffer up to the plateau): skipping costs at most a buffer one step larger than
	// needed, never rate. chooseBuffer prefers autotuning to any fixed
	// size within the plateau, so sizes below it are never chosen anyway; the paper's
	// sweep climbs through them only because its hosts had nothing better.
	// The sweep then starts at the first size whose window (at least b) reaches beyond
	// autotuning's rate, and stops early, at that size already, when it does not beat
	// autotuning: its window could carry more than it moved, so its rate is bound by
	// the path, loss or CPU, which a larger buffer does not lift (the paper's plateau,
	// "the throughput stops increasing", with autotuning as the step below it).
	// Without RTT the sizes are taken as given (callers such as send --auto list only
	// sizes beyond autotuning's ceiling).
	RTT time.Duration
	// Streams is the stream stepper of phase 2.
	Streams ExpSelection
}

// Next returns the next measurement, or Phase Done.
func (p Prober) Next(samples []Sample) ProbeStep {
	buffer, settled := p.Buffer(samples)
	if !settled {
		return ProbeStep{Phase: PhaseBuffer, Streams: 1, BufferBytes: buffer}
	}
	n, done := p.Streams.Next(measuredPoints(samples, buffer))
	if done {
		return ProbeStep{Phase: PhaseDone}
	}
	return ProbeStep{Phase: PhaseStreams, Streams: n, BufferBytes: buffer}
}

// measuredPoints are the samples at one buffer as stream points, unusable rates
// included as 0: for the stepper a failed measurement is still a measurement (asking
// for it again would never end).
func measuredPoints(samples []Sample, bufferBytes int64) []StreamPoint {
	var pts []StreamPoint
	for _, s := range samples {
		if s.BufferBytes != bufferBytes || s.Streams < 1 {
			continue
		}
		r := s.BitsPerSecond
		if !usable(r) {
			r = 0
		}
		pts = append(pts, StreamPoint{Streams: s.Streams, BitsPerSecond: r})
	}
	return pts
}

// Buffer returns the buffer the stream phase uses and true once the buffer phase has
// ended; before that it returns the next buffer size to measure and false.
func (p Prober) Buffer(samples []Sample) (bufferBytes int64, settled bool) {
	sizes := append([]int64(nil), p.BufferSizes...)
	sort.Slice(sizes, func(i, j int) bool { return sizes[i] < sizes[j] })
	plateau := p.Plateau
	if !(plateau > 0) {
		plateau = DefaultPlateau
	}
	withAutotuning := false
	for _, b := range sizes {
		withAutotuning = withAutotuning || b == 0
	}
	measured := map[int64]float64{}
	for _, bp := range bufferPoints(samples, withAutotuning) {
		measured[bp.buffer] = bp.rate
	}
	// one-stream samples that measured nothing still count as measured
	for _, s := range samples {
		if _, ok := measured[s.BufferBytes]; !ok && s.Streams == 1 && (s.BufferBytes > 0 || s.BufferBytes == 0 && withAutotuning) {
			measured[s.BufferBytes] = 0
		}
	}
	sizes = p.beyondAutotuning(sizes, measured, plateau, withAutotuning)
	prev, havePrev := 0.0, false
	for _, b := range sizes {
		if b < 0 {
			continue
		}
		rate, ok := measured[b]
		if !ok {
			return b, false
		}
		if havePrev && rate-prev <= plateau*prev {
			break
		}
		prev, havePrev = rate, true
	}
	if !havePrev {
		return 0, true // no explicit buffer to try: autotuning
	}
	// choose among the candidates of this probe only
	var inProbe []Sample
	for _, s := range samples {
		for _, b := range sizes {
			if s.BufferBytes == b {
				inProbe = append(inProbe, s)
				break
			}
		}
	}
	chosen, ok := chooseBuffer(inProbe, plateau, withAutotuning)
	if !ok {
		return 0, true
	}
	return chosen, true
}

// beyondAutotuning drops the fixed sizes whose window cannot carry more than
// autotuning's measured one-stream rate by the plateau (see Prober.RTT); sizes is
// returned as it is until autotuning has a usable rate, or without RTT.
func (p Prober) beyondAutotuning(sizes []int64, measured map[int64]float64, plateau float64, withAutotuning bool) []int64 {
	auto, ok := measured[0]
	if !withAutotuning || p.RTT <= 0 || !ok || !usable(auto) {
		return sizes
	}
	out := sizes[:0]
	for _, b := range sizes {
		if b == 0 || float64(b)*8/p.RTT.Seconds() > (1+plateau)*auto {
			out = append(out, b)
		}
	}
	return out
}
