// Package optimizer holds the models and algorithms of the papers dtnflow is built
// from (../shared/seeds/), as a pure library: it takes samples, capacities and limits
// and returns decisions, deterministically, with no Kubernetes client, no clock and no
// I/O. It imports neither controller-runtime, client-go nor api/v1alpha1;
// controllers/planning is the one adapter between the API types and this package.
//
// # Units
//
// Rates are float64 bits per second everywhere (fields end in BitsPerSecond). CPU is
// float64 millicores (fields end in Millicores), with CPU-model slopes per Gbit/s as
// the API carries them. Sizes are int64 bytes. Durations are time.Duration. Stream,
// stripe and node counts are int.
//
// # Sources
//
//   - 000: Yildirim & Kosar, "End-to-end Data-flow Parallelism for Throughput
//     Optimization in High-speed Networks" (Condor Week 2011): OPT_B, the CPU model
//     U_cpu = a + b·Th, exponential sampling, the LONI case study.
//   - 001: Yildirim, Yin & Kosar, "Balancing TCP Buffer vs Parallel Streams in
//     Application Level Throughput Optimization" (DADC'09): the Dinda, Newton and full
//     second order models (§3.1), ExpSelection and BestCmb (§3.2), buffer sampling
//     (§2) and buffer first, streams second (§4.2.2).
//   - 002: Liu, Veeraraghavan et al., "On Causes of GridFTP Transfer Throughput
//     Variance" (NDM'13) §5.1: the concomitant CPU regression with a B-spline loss term.
//   - 003: Arslan & Kosar, "A Heuristic Approach to Protocol Tuning for High
//     Performance Data Transfers": size classes, Algorithm 1, SC, MC and ProMC, online
//     channel re-allocation; thresholds and merge rule from the authors' public client
//     as the seeds README reads it.
//
// Every exported algorithm cites its paper and section in its doc comment, and says
// what it chose where the paper is silent.
//
// # Probing: a stateless stepper
//
// The agent's `send --auto` and the coordinator's probe ask, after every measurement,
// what to measure next:
//
//	p := optimizer.Prober{
//		BufferSizes: optimizer.BufferCandidates(optimizer.BDPPrior(est), maxBuffer), // or nil: autotuning
//		Streams:     optimizer.ExpSelection{MaxStreams: limits.MaxStreamsPerStripe},
//	}
//	for step := p.Next(samples); step.Phase != optimizer.PhaseDone; step = p.Next(samples) {
//		samples = append(samples, measure(step.Streams, step.BufferBytes))
//	}
//	buffer, _ := p.Buffer(samples)
//	fit, err := optimizer.BestCmb(optimizer.StreamPoints(samples, buffer))
//
// Next depends only on the samples, so a restarted prober resumes where it was, and
// samples a PathProfile already holds (contract.ProbeDirective.Known) are not taken
// again. ExpSelection alone is the same stepper for streams at a fixed buffer. A
// measurement that failed (rate 0) counts as taken. A 0 among BufferSizes makes
// kernel autotuning a buffer candidate of its own, sampled first (the agent does so
// where a fixed buffer can reach beyond autotuning's ceiling; the operator's probe
// always does, and gives the Prober the RTT so that fixed sizes autotuning already
// outruns are not sampled).
//
// # Planning
//
// MakePlan chains the steps: buffer (Prober.Buffer), stream model (FitStreams: BestCmb,
// else the measured plateau, FitPlateau, when no model of the papers fits; a stored
// model only when the samples give neither), CPU model per side (FitCPUModel, falling
// back to a stored model or the data plane's PriorCPUModel), the path's capacity as far as the
// samples show it (PathCapacity: the stream curve's plateau, raised only by stripe
// counts measured to pay), nodes × stripes × streams within it and CPU per agent
// (OptB: the fewest stripes, nodes and streams within 2 % of the best rate), and size
// classes with Algorithm 1 parameters and channel shares (PlanChunks: Partition,
// Algorithm1, AllocateChannels). Its input:
//
//	PlanInput{
//		Samples:    probe samples (streams, buffer, bit/s, CPU millicores at each end),
//		Prober:     how they were taken,
//		Warm:       a PathProfile's fit, CPU models and buffer,
//		SourceNodes, DestinationNodes: []Node{name, NIC bit/s, CPU budget, disk bit/s,
//		            stripes of other jobs, the endpoint's stripe cap},
//		Limits:     max nodes, stripes/node, streams/stripe, concurrency, bit/s,
//		Dataset:    Histogram (HistogramOf for a list of sizes; contract.Dataset's buckets),
//		StripeRates: aggregate rates measured with 1, 2, 4, … stripes (optional),
//		RTT, PathBitsPerSecond (optional), Scheduler (SC, MC, ProMC; default: the
//		            one ChooseScheduler picks for the dataset),
//	}
//
// and its output, Plan, carries what v1alpha1.TransferPlan needs: the fit (model,
// coefficients, optimum, fit error), buffer, nodes and their names, stripes per node,
// streams per stripe, CPU models and CPU per agent at each side, the predicted rate
// and the binding resource, and the size classes (files, bytes, MaxBytes, pipelining,
// parallelism, concurrency, channels). EvaluateShape predicts a shape chosen by hand
// (Fixed mode).
//
// Where the samples end: a model's optimum lies beyond the largest sample only where
// the model is trusted there (TrustedBeyondSamples: the samples still rose at their
// end and the model fits them within half the gain that counts as a rise), at most
// one doubling beyond, and FitStreams' reason and Plan.Notes say so; otherwise it is
// held at the largest sample. Nor does a plan count on more than the best sample for
// one stripe (NewPathCapacity), unless that trusted extrapolation says more. The
// papers' own numbers are checked against all of this in papers_test.go, and curves of
// known optimum in synthetic_test.go (docs/models.md).
//
// CPU sizing: OptB sizes agents with the per-side linear models of 000. The NDM'13
// regression (FitConcomitant, CPUFor, RateFor, with eq. 2's residual term ε: the CPU
// the faster end has beyond eq. 1's line) needs each measurement's loss rate, which
// probe samples do not carry; it is there for measurements that do (the coordinator's
// per-stripe LossPPM).
//
// # While a transfer runs
//
// RescalePolicy.Decide takes the current shape, the latest measurement (aggregate and
// per stripe), the limits, the stream curve, OPT_B's planned stripes and rate and the
// path's capacity the samples showed (which it never climbs or probes beyond), and
// returns an Intent — AddStripes k, RemoveStripes k, ChangeStreams, or Hold — with a
// CamelCase Reason and a Message for people, plus the state for the next round.
// Rebalance is a scheduler's online step, run by the job's coordinator every
// ReallocationPeriod: MC hands a finished class's channels to the class with the
// largest ETA, ProMC also moves a channel from a fast class to a slow one
// (Reallocate), SC runs one class at a time and moves nothing.
//
// # Stability
//
// The exported names above are the package's API; consumers should not depend on
// unexported behaviour. Defaults that are engineering choices rather than paper values
// are exported constants or variables (DefaultCPUModel, DefaultAccuracy,
// DefaultPlateau, DefaultRTT, AutotuneBufferBytes, Default* limits) so that callers can
// cite them.
package optimizer
