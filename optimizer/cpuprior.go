package optimizer

import "math"

// The CPU priors: what a side's agents are assumed to need before they have measured
// themselves. A job that probes fits seed 002's regression (U_cpu = a + b·Th) on its own
// samples, and a path's profile keeps the fit for the next job; the prior only sizes the
// first pods' CPU requests. It is taken from the data plane as measured, per side,
// because the two ends cost differently (Liu et al., NDM'13 §5.1: a slope per side) and
// because what a job asks of each byte (a digest, encryption) changes the slope.

// DataPlane is what a job's agents do to each byte besides moving it, as far as it
// decides their CPU per byte.
type DataPlane struct {
	// Verify: every file's SHA-256 at both ends (spec.integrity.verify, the default).
	Verify bool
	// Encrypted: AES-256-CTR at both ends besides the per-frame tag
	// (spec.integrity.inFlight Encrypted).
	Encrypted bool
}

// measuredCPUHundredthsPerGB is each side's CPU in hundredths of a CPU second per GB
// moved, {source, destination}, as make bench-peers measures them (rusage of the
// sender, /proc of the receiver; docs/benchmarks.md, "CPU priors"): the small-files case
// (2000 × 64 KiB over 4 streams, the dearest shape per byte — an open, a rename and an
// mtime per 64 KiB), in-flight Authenticated (the default) or Encrypted, verification
// by read-back (the default) or none. The clear rows are 2026-11-24's figures (0.79 /
// 1.45 and 1.19 / 1.83) times what the data plane costs now against the build they were
// measured on, side by side in six runs (2026-12-01, medians: 0.83 / 0.86 without
// verification, 0.88 / 0.86 with it) — the machine's own speed moves from day to day by
// more than the change (the old build cost 1.1–1.35× its 11-24 figures that day), so
// only a ratio measured in one run carries over; the encrypted rows are the clear ones
// times encryption's cost in the same runs (1.11 / 1.03 and 1.01 / 1.04). A dataset of
// large files costs less (2026-11-30: 0.29 / 0.64 without verification, 0.83 / 1.26
// with it), so the prior errs on the side of a request too large, which only reserves
// idle CPU, rather than one too small, which throttles the transfer.
var measuredCPUHundredthsPerGB = map[DataPlane][2]int{
	{}:                              {66, 124},
	{Verify: true}:                  {105, 158},
	{Encrypted: true}:               {73, 127},
	{Verify: true, Encrypted: true}: {106, 164},
}

// priorMarginPercent is the head-room over the measurement: the measuring machine was
// shared and a DTN's file system and NIC driver may cost more than tmpfs and loopback.
const priorMarginPercent = 125

// priorInterceptMillicores is a, what an idle agent uses (its keepalives, reports and
// metrics), which the benchmarks cannot separate from b at one rate.
const priorInterceptMillicores = 100

// PriorCPUModel is the CPU model a side is assumed to have before it has measured:
// a = 100 millicores, b = the measured CPU per GB of its data plane × 125 %, in
// millicores per Gbit/s (1 CPU s/GB = 125 millicores per Gbit/s: 1 Gbit/s is 0.125
// GB/s), rounded up to 10 millicores.
func PriorCPUModel(side CPUSide, dp DataPlane) CPUModel {
	m := measuredCPUHundredthsPerGB[dp]
	h := m[0]
	if side == Destination {
		h = m[1]
	}
	// h/100 s/GB × 125 mc per (s/GB · Gbit/s) × 125 % = h × 15625 / 10000 mc per Gbit/s
	millicores := (h*125*priorMarginPercent + 9_999) / 10_000
	millicores = (millicores + 9) / 10 * 10
	return CPUModel{InterceptMillicores: priorInterceptMillicores, MillicoresPerGbps: float64(millicores)}
}

// The coordinator moves no data: its work is per file — a lease handed out, a
// completion and its digest checked, a journal line, the final manifest check — so its
// CPU follows the files it settles per second. On the local cluster (docs/benchmarks.md,
// issue 11's side by side, cgroup accounting) it used 3–5 millicores for 36 files in
// 40–50 s (four runs: 3, 4, 4, 5), an idle coordinator's 4; and, settling 20 000 × 64
// KiB at 1130–1230 files/s on average, 121–143 millicores in three runs once a lease no
// longer walked the whole job (before: 191–215, the 170 millicores per thousand files
// per second this constant was): 95, 103 and 123 per thousand files per second. 100,
// so that with the 125 % head-room the three runs would have used 0.77–0.99 of what
// they asked, rather than 0.72–0.89 at their mean.
const (
	coordinatorIdleMillicores                 = 4
	coordinatorMillicoresPerThousandFilesPerS = 100
)

// CoordinatorMillicores is the CPU a coordinator needs to settle a dataset of files
// and bytes moved at bitsPerSecond: its idle use plus the measured cost per file per
// second with the priors' 125 % head-room. A dataset of no bytes, or no rate, gets
// the idle use.
func CoordinatorMillicores(bitsPerSecond float64, files, bytes int64) float64 {
	if files <= 0 || bytes <= 0 || !(bitsPerSecond > 0) || math.IsInf(bitsPerSecond, 0) {
		return coordinatorIdleMillicores
	}
	filesPerSecond := bitsPerSecond / 8 / (float64(bytes) / float64(files))
	return coordinatorIdleMillicores + filesPerSecond*coordinatorMillicoresPerThousandFilesPerS/1000*priorMarginPercent/100
}

// PodStartCPUSeconds is the CPU a cold agent pod's cgroup counts for its start, before
// the agent measures anything of its own: the pod's sandbox (its pause container), the
// runtime starting the agent's container, and the agent's process starting. On the
// local cluster (docs/benchmarks.md, "A cold pod's start in its CPU request",
// cpuacct.usage of the pod read every 100 ms) a coordinator's pod spent 163–233 ms on
// it over three watched runs, 83 ms of that in its pause container, and then 6.5–8.2
// millicores while the 4 GiB job ran for 44–48 s: the start was a third of what the
// pod used, and no process of the pod can see the part outside its own container.
const PodStartCPUSeconds = 0.2

// StartMillicores is PodStartCPUSeconds spread over a pod's expected life, in whole
// millicores (rounded): the share of its CPU request that its start accounts for.
// An unknown or empty life gets none.
func StartMillicores(lifeSeconds float64) int64 {
	if !(lifeSeconds > 0) || math.IsInf(lifeSeconds, 0) {
		return 0
	}
	return int64(math.Round(PodStartCPUSeconds / lifeSeconds * 1000))
}
