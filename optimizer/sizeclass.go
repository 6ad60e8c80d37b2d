package optimizer

import (
	"fmt"
	"math"
	"math/bits"
)

// SizeClass names a class of files by size relative to the bandwidth (Arslan & Kosar,
// "A Heuristic Approach to Protocol Tuning for High Performance Data Transfers", §3.1
// and Figure 3). The values are the API's v1alpha1.SizeClass names.
type SizeClass string

const (
	Small  SizeClass = "Small"
	Medium SizeClass = "Medium"
	Large  SizeClass = "Large"
	Huge   SizeClass = "Huge"
)

// SizeClasses lists the classes from small to huge.
var SizeClasses = []SizeClass{Small, Medium, Large, Huge}

func (c SizeClass) rank() int {
	for i, s := range SizeClasses {
		if s == c {
			return i
		}
	}
	return -1
}

// Bucket is one bucket of a size histogram: the files whose size s satisfies
// 2^(Log2−1) < s ≤ 2^Log2 (bucket 0 holds empty and 1-byte files). It mirrors
// contract.SizeBucket.
type Bucket struct {
	Log2  int
	Files int64
	Bytes int64
}

// Histogram describes a dataset by file size, as the coordinator reports it
// (contract.Dataset): enough for size classes without listing every file.
type Histogram struct {
	Files   int64
	Bytes   int64
	Buckets []Bucket
}

// BucketOf returns the histogram bucket of a file size (contract.Dataset's rule).
func BucketOf(size int64) int {
	if size <= 1 {
		return 0
	}
	return bits.Len64(uint64(size - 1))
}

// HistogramOf builds the histogram of a list of file sizes, so that a list and a
// histogram are classed the same way. Negative sizes count as empty files.
func HistogramOf(sizes []int64) Histogram {
	var counts [65]Bucket
	var h Histogram
	for _, s := range sizes {
		s = max(s, 0)
		b := BucketOf(s)
		counts[b].Files++
		counts[b].Bytes += s
		h.Files++
		h.Bytes += s
	}
	for i, c := range counts {
		if c.Files > 0 {
			h.Buckets = append(h.Buckets, Bucket{Log2: i, Files: c.Files, Bytes: c.Bytes})
		}
	}
	return h
}

// Thresholds are the upper file sizes, in bytes, of Small, Medium and Large; anything
// above LargeMax is Huge.
type Thresholds struct {
	SmallMax, MediumMax, LargeMax float64
}

// ClassThresholds returns the thresholds against the bandwidth BW, in bytes moved in
// one second: Small ≤ BW/20, Medium ≤ BW/5, Large ≤ 2·BW, Huge > 2·BW. The text of
// Arslan & Kosar leaves the values to its Figure 3; these are the seeds README's
// reading of the authors' public client.
func ClassThresholds(bandwidthBitsPerSecond float64) Thresholds {
	bw := bandwidthBitsPerSecond / 8
	return Thresholds{SmallMax: bw / 20, MediumMax: bw / 5, LargeMax: 2 * bw}
}

// Classify returns the class of a file (or mean file) size.
func (t Thresholds) Classify(size float64) SizeClass {
	switch {
	case size <= t.SmallMax:
		return Small
	case size <= t.MediumMax:
		return Medium
	case size <= t.LargeMax:
		return Large
	}
	return Huge
}

// Chunk is a group of files of one size class (a "chunk" or "partition" of Arslan &
// Kosar): a contiguous range of histogram buckets.
type Chunk struct {
	Class SizeClass
	Files int64
	Bytes int64
	// MinLog2 and MaxLog2 are the first and last histogram buckets of the chunk.
	MinLog2, MaxLog2 int
	// MaxBytes is the largest file size the chunk holds, 2^MaxLog2, or 0 for the last
	// chunk (no bound): a file belongs to the first chunk whose MaxBytes it does not
	// exceed (contract.SizeClassParam.MaxBytes).
	MaxBytes int64
}

// MeanBytes is the chunk's average file size.
func (c Chunk) MeanBytes() float64 {
	if c.Files <= 0 {
		return 0
	}
	return float64(c.Bytes) / float64(c.Files)
}

// MergeMinFiles and MergeBDPs are the undersized-chunk rule of the authors' public
// client (AdaptiveGridFTPClient, mergePartitions): a chunk with at most 2 files or
// less than 5·BDP bytes is merged into the chunk whose mean file size is closest.
const (
	MergeMinFiles = 2
	MergeBDPs     = 5
)

// Partition splits a dataset histogram into size-class chunks (Arslan & Kosar §3.1,
// partitionFiles of Algorithms 2 and 3) and merges undersized chunks into a neighbour.
//
// Each histogram bucket is classed by its mean file size; buckets hold sizes within a
// factor of two, so the thresholds are applied to that resolution, and a chunk is a
// contiguous run of buckets whose upper bound the agents can test a file against
// (MaxBytes). A list of file sizes goes through HistogramOf first, so both inputs give
// the same chunks. Undersized chunks (MergeMinFiles, MergeBDPs) are merged, smallest
// class first, into the neighbour with the closest mean file size, and the merged
// chunk is classed again by its mean (as the client does). bdpBytes ≤ 0 disables the
// byte rule.
func Partition(h Histogram, bandwidthBitsPerSecond, bdpBytes float64) []Chunk {
	th := ClassThresholds(bandwidthBitsPerSecond)
	// merge repeated buckets and bring Log2 into the histogram's range (empty files
	// to 2^62), in order
	var byLog2 [63]Bucket
	for _, b := range h.Buckets {
		if b.Files <= 0 {
			continue
		}
		i := min(max(b.Log2, 0), 62)
		byLog2[i].Log2 = i
		byLog2[i].Files += b.Files
		byLog2[i].Bytes += max(b.Bytes, 0)
	}
	buckets := byLog2[:]
	var chunks []Chunk
	for _, b := range buckets {
		if b.Files <= 0 {
			continue
		}
		class := th.Classify(float64(b.Bytes) / float64(b.Files))
		if n := len(chunks); n > 0 && chunks[n-1].Class.rank() >= class.rank() {
			// means grow with buckets, so this only joins a bucket to its own class
			c := &chunks[n-1]
			c.Files += b.Files
			c.Bytes += b.Bytes
			c.MaxLog2 = b.Log2
			continue
		}
		chunks = append(chunks, Chunk{Class: class, Files: b.Files, Bytes: b.Bytes, MinLog2: b.Log2, MaxLog2: b.Log2})
	}
	undersized := func(c Chunk) bool {
		return c.Files <= MergeMinFiles || (bdpBytes > 0 && float64(c.Bytes) < MergeBDPs*bdpBytes)
	}
	for len(chunks) > 1 {
		i := -1
		for j, c := range chunks {
			if undersized(c) {
				i = j
				break
			}
		}
		if i < 0 {
			break
		}
		// neighbour with the closest mean file size
		into := i - 1
		if i == 0 || (i+1 < len(chunks) &&
			math.Abs(chunks[i+1].MeanBytes()-chunks[i].MeanBytes()) < math.Abs(chunks[i-1].MeanBytes()-chunks[i].MeanBytes())) {
			into = i + 1
		}
		lo, hi := min(i, into), max(i, into)
		merged := Chunk{Files: chunks[lo].Files + chunks[hi].Files, Bytes: chunks[lo].Bytes + chunks[hi].Bytes,
			MinLog2: chunks[lo].MinLog2, MaxLog2: chunks[hi].MaxLog2}
		merged.Class = th.Classify(merged.MeanBytes())
		chunks[lo] = merged
		chunks = append(chunks[:hi], chunks[hi+1:]...)
	}
	// Classes must stay unique and ordered (the API keys size classes by class); a
	// merge can only move a class between its neighbours' classes, but guard anyway.
	// A chunk out of order after the last class has no class left to take: it joins
	// the chunk before it (FuzzPartition found two Huge chunks, of files of 2^60 and
	// 2^61 bytes, once the guard could only repeat the last class).
	for i := 1; i < len(chunks); {
		prev := &chunks[i-1]
		if chunks[i].Class.rank() > prev.Class.rank() {
			i++
			continue
		}
		if next := prev.Class.rank() + 1; next < len(SizeClasses) {
			chunks[i].Class = SizeClasses[next]
			i++
			continue
		}
		prev.Files += chunks[i].Files
		prev.Bytes += chunks[i].Bytes
		prev.MaxLog2 = chunks[i].MaxLog2
		chunks = append(chunks[:i], chunks[i+1:]...)
	}
	for i := range chunks {
		if i == len(chunks)-1 {
			chunks[i].MaxBytes = 0
		} else {
			chunks[i].MaxBytes = int64(1) << min(chunks[i].MaxLog2, 62)
		}
	}
	return chunks
}

// ClassParams are the per-chunk parameters of Algorithm 1.
type ClassParams struct {
	// Pipelining is the number of file requests kept in flight per channel.
	Pipelining int
	// Parallelism is the number of streams one file is spread over.
	Parallelism int
	// Concurrency is the number of files of the chunk in flight at once.
	Concurrency int
}

// MaxPipelining caps Algorithm 1's pipelining (the seeds README's reading of the
// client: pp = min(BDP/avg, 100)).
const MaxPipelining = 100

// Algorithm1 is FINDOPTIMALPARAMETERS of Arslan & Kosar (Algorithm 1) with the bounds of
// the authors' client (seeds README; AdaptiveGridFTPClient, getBestParams):
//
//	pipelining  = min(round(BDP/avg), 100), at least 1
//	parallelism = max(min(⌈BDP/buf⌉, ⌈avg/buf⌉), 1)
//	concurrency = min(max(round(BDP/avg), 2), files, maxCC), at least 1
//
// The client rounds BDP/avg to the nearest integer; the paper does not say. Pipelining
// is at least 1 because the API counts the request being served. bufferBytes ≤ 0
// (kernel autotuning) is read as 4 MiB, Linux's default maximum send buffer
// (net.ipv4.tcp_wmem), which autotuning grows to.
func Algorithm1(avgFileBytes, bdpBytes, bufferBytes float64, files int64, maxCC int) ClassParams {
	if !(bufferBytes > 0) {
		bufferBytes = AutotuneBufferBytes
	}
	avg := math.Max(avgFileBytes, 1)
	bdp := math.Max(bdpBytes, 0)
	fill := math.Round(bdp / avg)
	if math.IsNaN(fill) || math.IsInf(fill, 0) {
		fill = 0
	}
	pp := int(math.Max(1, math.Min(fill, MaxPipelining)))
	par := int(math.Max(1, math.Min(math.Ceil(bdp/bufferBytes), math.Ceil(avg/bufferBytes))))
	cc := math.Max(fill, 2)
	cc = math.Min(cc, float64(max(files, 1)))
	if maxCC > 0 {
		cc = math.Min(cc, float64(maxCC))
	}
	return ClassParams{Pipelining: pp, Parallelism: par, Concurrency: int(math.Max(1, cc))}
}

// AutotuneBufferBytes is the buffer Algorithm1 assumes under kernel autotuning.
const AutotuneBufferBytes = 4 << 20

// String describes a chunk.
func (c Chunk) String() string {
	return fmt.Sprintf("%s: %d files, %d bytes, ≤ %d bytes", c.Class, c.Files, c.Bytes, c.MaxBytes)
}
