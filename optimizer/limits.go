package optimizer

// Limits bound what the planner may choose: the user's spec.tuning.limits. A zero
// field means the user set no limit; the planner then applies the Default* ceilings
// below, which are engineering bounds, not paper values.
type Limits struct {
	// MaxNodes is the most nodes used at each side.
	MaxNodes int
	// MaxStripesPerNode is the most stripes (sender/receiver pairs) per node.
	MaxStripesPerNode int
	// MaxStreamsPerStripe is the most parallel TCP streams per stripe.
	MaxStreamsPerStripe int
	// MaxConcurrency is the most files in flight per stripe (maxCC of Arslan & Kosar).
	MaxConcurrency int
	// MaxBitsPerSecond caps the aggregate rate.
	MaxBitsPerSecond float64
}

// Ceilings applied when a limit is unset.
const (
	// DefaultMaxNodes bounds nodes per side (the API's own maximum).
	DefaultMaxNodes = 64
	// DefaultMaxStripesPerNode bounds stripes per node when neither the user nor the
	// endpoint does (the API's own maximum).
	DefaultMaxStripesPerNode = 64
	// DefaultMaxStreamsPerStripe bounds streams per stripe: ExpSelection's sequence
	// 1…64, beyond which the papers' curves have long turned down.
	DefaultMaxStreamsPerStripe = 64
	// DefaultMaxConcurrency is maxCC when unset: the most files in flight per stripe
	// that Algorithm 1 gives a size class (`send --auto` and a TransferJob alike; a
	// class of large files gets 2 whatever maxCC is). Arslan & Kosar report their
	// multi-chunk schedulers near the best from maxCC 8 on and use up to 32, on hosts
	// of many cores. On this project's 2-core test hosts (bench-cluster, 1 Gbit/s,
	// 50 ms, 20 000 files of 64 KiB beside the cluster's control plane) one stripe of
	// 4 files in flight ran at 883–892 Mbit/s with one stream and 914 with two, two
	// stripes at 958–977: the stripe, not the path, was the limit, and the probe's
	// 2-stripe sample could not show that gain within its noise, so `send --auto`
	// planned one stripe (13.0–13.2 s against 12.2–12.4 s for two fixed stripes). With
	// 8, one stripe of two streams ran at 974–978 Mbit/s (`send --auto` 12.4–12.5 s in
	// the three runs whose probe kept the second stream; one stream stays at its
	// window's 883–892 either way; docs/benchmarks.md). 16 was worse than 4 once
	// (2-stream samples of 896–901 Mbit/s against 967–993, 2026-11-25). A job raises it
	// with spec.tuning.limits.maxConcurrency.
	DefaultMaxConcurrency = 8
	// DefaultConcurrency is the files in flight per stripe of a fixed setting (`send`
	// without --auto and without --concurrency), where no size class tells large
	// files from small ones. Kept below maxCC: with 8, two fixed stripes on the 4 GiB
	// mixed dataset (36 files up to 1 GiB) took 62 s against 39.5 s with 4, one stripe
	// holding the last large files in flight while the other had nothing left to send.
	DefaultConcurrency = 4
)

// WithDefaults fills unset (zero or negative) limits with the ceilings above.
func (l Limits) WithDefaults() Limits {
	if l.MaxNodes <= 0 {
		l.MaxNodes = DefaultMaxNodes
	}
	if l.MaxStripesPerNode <= 0 {
		l.MaxStripesPerNode = DefaultMaxStripesPerNode
	}
	if l.MaxStreamsPerStripe <= 0 {
		l.MaxStreamsPerStripe = DefaultMaxStreamsPerStripe
	}
	if l.MaxConcurrency <= 0 {
		l.MaxConcurrency = DefaultMaxConcurrency
	}
	if !(l.MaxBitsPerSecond > 0) {
		l.MaxBitsPerSecond = 0
	}
	return l
}
