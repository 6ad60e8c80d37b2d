package wan

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// WriteJSONLines writes one JSON object per result.
func WriteJSONLines(w io.Writer, rs []Result) error {
	enc := json.NewEncoder(w)
	for _, r := range rs {
		if err := enc.Encode(r); err != nil {
			return err
		}
	}
	return nil
}

// WriteMarkdown writes the table of the final runs (samples are in the JSON lines
// and the plots).
func WriteMarkdown(w io.Writer, rs []Result) error {
	var b strings.Builder
	b.WriteString("| scenario | tool | config | streams | throughput | % of link | time (s) | total incl. probing (s) | CPU s/GB | note |\n")
	b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---|\n")
	for _, r := range rs {
		if !r.Chosen {
			continue
		}
		total := fmt.Sprintf("%.1f", r.TotalSeconds)
		if r.ProbeSeconds > 0 {
			total = fmt.Sprintf("%.1f (+%.0f grid)", r.TotalSeconds, r.ProbeSeconds)
		}
		fmt.Fprintf(&b, "| %s | %s | `%s` | %d | %s | %.1f %% | %.1f | %s | %.2f | %s |\n",
			r.Scenario, r.Tool, r.Config, r.Streams, formatBPS(r.BitsPerSecond), r.PercentOfLink,
			r.Seconds, total, r.CPUSecondsPerGB, r.Note)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// Ratios are what issue 5 asks of each scenario: dtnflow --auto, its probing
// included, as a share of the best fixed configuration (the faster of the GridFTP and
// dtnflow grid winners, on the whole dataset, their grid search not counted), and as
// a multiple of globus-url-copy with its defaults and with the Globus-like preset.
// Each is a ratio of times for the same dataset, so it reads as a ratio of rates.
type Ratios struct {
	Scenario string
	// Best is the best fixed run.
	Best Result
	// AutoOverBest, AutoOverDefault, AutoOverPreset, AutoOverGridFTPBest: 0 when a
	// row is missing.
	AutoOverBest, AutoOverDefault, AutoOverPreset, AutoOverGridFTPBest float64
}

// ScenarioRatios computes Ratios for every scenario with a dtnflow-auto row, in the
// order the scenarios first appear.
func ScenarioRatios(rs []Result) []Ratios {
	var order []string
	chosen := map[string]map[string]Result{}
	for _, r := range rs {
		if !r.Chosen {
			continue
		}
		if chosen[r.Scenario] == nil {
			chosen[r.Scenario] = map[string]Result{}
			order = append(order, r.Scenario)
		}
		chosen[r.Scenario][r.Tool] = r
	}
	var out []Ratios
	for _, sc := range order {
		c := chosen[sc]
		auto, ok := c[string(DtnflowAuto)]
		if !ok || !(auto.TotalSeconds > 0) {
			continue
		}
		ra := Ratios{Scenario: sc}
		over := func(tool string) float64 {
			if r, ok := c[tool]; ok && r.Seconds > 0 {
				return r.Seconds / auto.TotalSeconds
			}
			return 0
		}
		for _, tool := range []string{string(GridFTPGrid), string(DtnflowGrid)} {
			if r, ok := c[tool]; ok && r.Seconds > 0 && (ra.Best.Tool == "" || r.Seconds < ra.Best.Seconds) {
				ra.Best = r
			}
		}
		if ra.Best.Tool != "" {
			ra.AutoOverBest = ra.Best.Seconds / auto.TotalSeconds
		}
		ra.AutoOverDefault, ra.AutoOverPreset, ra.AutoOverGridFTPBest = over(string(GridFTPDefault)), over(string(GridFTPPreset)), over(string(GridFTPGrid))
		out = append(out, ra)
	}
	return out
}

// WriteRatios writes the ratios table.
func WriteRatios(w io.Writer, rs []Result) error {
	var b strings.Builder
	b.WriteString("| scenario | best fixed | dtnflow auto ÷ best fixed | ÷ GridFTP best of grid | ÷ GridFTP defaults | ÷ Globus-like preset |\n")
	b.WriteString("|---|---|---:|---:|---:|---:|\n")
	x := func(v float64) string {
		if v <= 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f×", v)
	}
	for _, r := range ScenarioRatios(rs) {
		best := "–" // no grid ran in this scenario
		if r.Best.Tool != "" {
			best = fmt.Sprintf("%s `%s` (%.1f s)", r.Best.Tool, r.Best.Config, r.Best.Seconds)
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.Scenario, best,
			x(r.AutoOverBest), x(r.AutoOverGridFTPBest), x(r.AutoOverDefault), x(r.AutoOverPreset))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

func formatBPS(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2f Gbit/s", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.0f Mbit/s", v/1e6)
	}
	return fmt.Sprintf("%.0f kbit/s", v/1e3)
}
