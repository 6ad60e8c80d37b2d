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

func formatBPS(v float64) string {
	switch {
	case v >= 1e9:
		return fmt.Sprintf("%.2f Gbit/s", v/1e9)
	case v >= 1e6:
		return fmt.Sprintf("%.0f Mbit/s", v/1e6)
	}
	return fmt.Sprintf("%.0f kbit/s", v/1e3)
}
