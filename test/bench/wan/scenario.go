// Package wan is the side-by-side benchmark on an emulated wide-area path (make
// bench-wan): for each scenario — rate, RTT, loss, bottleneck queue, dataset, cross
// traffic — it builds a topology (test/topology: two sources, two destinations, one
// shared test/wanem bottleneck), runs every tool on the same path one after the other,
// and reports throughput, time including probing, CPU seconds per GB and the share of
// the link rate, as a markdown table, JSON lines and a PNG of throughput against
// streams per scenario.
//
// Tools are Runners; a Runner gets the scenario's Env (hosts, dataset, output
// directory) and returns Results. Runners now: iperf3 (memory-to-memory reference),
// gridftp-default (globus-url-copy with no tuning), gridftp-preset (Globus-like
// presets by average file size), gridftp-grid (the best of a grid of -p/-cc/-pp/-tcp-bs,
// each point probed on a sample of the dataset, the winner rerun on the whole),
// dtnflow-grid (the agent over streams × stripes × buffers, likewise) and dtnflow-auto
// (`dtnflow-agent send --auto`, probing included in its time).
package wan

import (
	"fmt"
	"strings"
	"time"

	"github.com/dtnflow/dtnflow/test/wanem"
)

// DatasetKind is what a scenario transfers.
type DatasetKind string

const (
	// Large is one large file.
	Large DatasetKind = "large"
	// Mixed is files of many sizes (log-uniform between a floor and a ceiling).
	Mixed DatasetKind = "mixed"
	// Small is many equal small files.
	Small DatasetKind = "small"
	// SmallMix is many equal small files and a few large ones, the small holding most
	// of the bytes: the dataset Arslan & Kosar's ProMC is for (its Figure 12).
	SmallMix DatasetKind = "smallmix"
)

// Scenario is one path and one dataset.
type Scenario struct {
	RateBitsPerSecond int64
	RTT               time.Duration
	Loss              float64
	// QueueBytes of the bottleneck; 0 is wanem's default (one BDP, at least 1 MiB).
	QueueBytes int64
	Dataset    DatasetSpec
	// CrossTraffic runs a competing iperf3 TCP flow (src1 → dst1) through the same
	// bottleneck for the whole of every tool run.
	CrossTraffic bool
}

// Name is a short label for tables and file names.
func (s Scenario) Name() string {
	n := fmt.Sprintf("%s-%s-loss%g-%s", strings.ReplaceAll(wanem.FormatRate(float64(s.RateBitsPerSecond)), "/s", ""),
		s.RTT, s.Loss, s.Dataset.Kind)
	if s.QueueBytes > 0 {
		n += fmt.Sprintf("-q%d", s.QueueBytes)
	}
	if s.CrossTraffic {
		n += "-cross"
	}
	return n
}

// Link is the emulated link of the scenario (symmetric).
func (s Scenario) Link(seed uint64) wanem.Config {
	c := wanem.Symmetric(wanem.Direction{Delay: s.RTT / 2, RateBitsPerSecond: s.RateBitsPerSecond, QueueBytes: s.QueueBytes, Loss: s.Loss})
	c.Seed = seed
	return c
}

// Matrix is every combination of the given values, in the order given (the last list
// varies fastest).
func Matrix(rates []int64, rtts []time.Duration, losses []float64, queues []int64, datasets []DatasetSpec, cross []bool) []Scenario {
	var out []Scenario
	for _, r := range rates {
		for _, d := range rtts {
			for _, q := range queues {
				for _, ds := range datasets {
					for _, c := range cross {
						for _, l := range losses {
							out = append(out, Scenario{RateBitsPerSecond: r, RTT: d, Loss: l, QueueBytes: q, Dataset: ds, CrossTraffic: c})
						}
					}
				}
			}
		}
	}
	return out
}
