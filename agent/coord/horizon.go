package coord

import (
	"time"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/settle"
	"github.com/dtnflow/dtnflow/optimizer"
)

// ProbeHorizonSamples is how many samples' worth of transfer must be left for one more
// probe sample to be worth taking.
//
// A sample on the job's own data costs what its changes cost: new connections in slow
// start for a change of streams or buffer, a settle of at least 12 RTT, and, when it
// measures a worse shape, its shortfall. It pays only through the plan it leads to,
// and the plan needs the samples after it too. A dataset that the best rate seen
// moves in less than three sample ceilings ends before the plan could repay them
// (the demo's 321 MB at 500 Mbit/s, 40 ms RTT: about 5 s left after the first
// sample, against ceilings of 2 s), so the probe stops and the job keeps the shape it
// has, the best one measured.
const ProbeHorizonSamples = 3

// ProbeOutlasts says whether the dataset left would be moved, at the best rate the
// samples saw, within ProbeHorizonSamples sample ceilings: taking more samples would
// cost more than the plan they lead to could save. rtt is the path's round-trip time
// (0: unknown) and ceiling bounds a sample's length (0: none beyond the RTT's).
func ProbeOutlasts(remainingBytes int64, bestBitsPerSecond float64, rtt, ceiling time.Duration) bool {
	best := bestBitsPerSecond
	if !(best > 0) || remainingBytes < 0 {
		return false
	}
	sample := settle.ForRTT(rtt).Ceiling
	if ceiling > 0 {
		sample = min(sample, ceiling)
	}
	left := time.Duration(float64(remainingBytes) * 8 / float64(best) * float64(time.Second))
	return left < ProbeHorizonSamples*sample
}

// Remaining is what the job has not yet moved and verified, in bytes.
func (c *Core) Remaining() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return max(c.dataset.Bytes-c.bytesDone, 0)
}

// bestRate is the best rate among the samples.
func bestRate(samples []contract.Sample) float64 {
	var best int64
	for _, s := range samples {
		best = max(best, s.BitsPerSecond)
	}
	return float64(best)
}

// SmallFiles says whether a dataset is one of small files for a path of this rate and
// RTT: the size classes of Arslan & Kosar (optimizer.Partition at the rate, BDP = rate
// × RTT) hold at least half of its bytes in Small and Medium files (the case for ProMC,
// optimizer.ChooseScheduler), or are one class of Small or Medium files. For such a
// dataset pipelining, concurrency and stripes are what pays (§3: "pipelining … for
// small file optimization", "parallelism … for large file optimization"), so the
// probe samples streams no further than one doubling.
func SmallFiles(ds contract.Dataset, bitsPerSecond float64, rtt time.Duration) bool {
	if ds.Files == 0 || !(bitsPerSecond > 0) {
		return false
	}
	chunks := optimizer.Partition(histogramOf(ds), bitsPerSecond, optimizer.StripeBDP(bitsPerSecond, rtt, 0))
	if len(chunks) == 1 {
		return chunks[0].Class == optimizer.Small || chunks[0].Class == optimizer.Medium
	}
	s, _ := optimizer.ChooseScheduler(chunks)
	return s == optimizer.ProActiveMultiChunk
}

func histogramOf(ds contract.Dataset) optimizer.Histogram {
	h := optimizer.Histogram{Files: ds.Files, Bytes: ds.Bytes}
	for _, b := range ds.Buckets {
		h.Buckets = append(h.Buckets, optimizer.Bucket{Log2: int(b.Log2), Files: b.Files, Bytes: b.Bytes})
	}
	return h
}
