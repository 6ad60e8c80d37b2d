// Package progress draws a transfer's progress for people, one line per transfer: a bar,
// bytes, files, rate, ETA and stripes. `kubectl dtnflow get/watch` and `dtnflow-agent
// send` on a terminal draw the same line.
package progress

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/dtnflow/dtnflow/optimizer"
)

// Snapshot is what a line shows. Zero totals, rates and stripes are unknown and left
// out; ETA < 0 is unknown.
type Snapshot struct {
	BytesDone, BytesTotal int64
	FilesDone, FilesTotal int64
	BitsPerSecond         int64
	ETA                   time.Duration
	// StripesRunning of Stripes are moving data.
	StripesRunning, Stripes int32
}

// Bar is a bar of width cells (brackets not counted) filled to fraction (clamped to
// [0, 1]): "[=========>          ]".
func Bar(fraction float64, width int) string {
	if width < 1 {
		width = 1
	}
	if math.IsNaN(fraction) || fraction < 0 {
		fraction = 0
	}
	fraction = min(fraction, 1)
	full := int(fraction * float64(width))
	var b strings.Builder
	b.WriteByte('[')
	b.WriteString(strings.Repeat("=", full))
	if full < width {
		if full > 0 || fraction > 0 {
			b.WriteByte('>')
		} else {
			b.WriteByte(' ')
		}
		b.WriteString(strings.Repeat(" ", width-full-1))
	}
	b.WriteByte(']')
	return b.String()
}

// Fraction is done over total, 0 when the total is unknown.
func Fraction(done, total int64) float64 {
	if total <= 0 {
		return 0
	}
	return float64(done) / float64(total)
}

// Percent is done as a whole percentage of total, rounded down, 100 only when done.
func Percent(done, total int64) int {
	switch {
	case total <= 0:
		return 0
	case done >= total:
		return 100
	}
	return int(float64(done) * 100 / float64(total))
}

// Line is the whole line: bar, percentage, bytes, files, rate, ETA and stripes, for
// example "[=====>    ]  45%  4.50 GiB/10.0 GiB  40/100 files  941 Mbit/s  ETA 3m20s  2/4 stripes".
func Line(s Snapshot, barWidth int) string {
	parts := []string{Bar(Fraction(s.BytesDone, s.BytesTotal), barWidth), fmt.Sprintf("%3d%%", Percent(s.BytesDone, s.BytesTotal))}
	if s.BytesTotal > 0 {
		parts = append(parts, Bytes(s.BytesDone)+"/"+Bytes(s.BytesTotal))
	} else {
		parts = append(parts, Bytes(s.BytesDone))
	}
	if s.FilesTotal > 0 {
		parts = append(parts, fmt.Sprintf("%d/%d files", s.FilesDone, s.FilesTotal))
	} else if s.FilesDone > 0 {
		parts = append(parts, fmt.Sprintf("%d files", s.FilesDone))
	}
	parts = append(parts, optimizer.FormatBitsPerSecond(float64(max(s.BitsPerSecond, 0))))
	if s.ETA >= 0 {
		parts = append(parts, "ETA "+Duration(s.ETA))
	}
	if s.Stripes > 0 {
		parts = append(parts, fmt.Sprintf("%d/%d stripes", s.StripesRunning, s.Stripes))
	}
	return strings.Join(parts, "  ")
}

// Bytes writes a size in IEC units with three significant digits: "4.50 GiB".
func Bytes(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 5 {
		v /= unit
		i++
	}
	digits := 2
	switch {
	case v >= 100:
		digits = 0
	case v >= 10:
		digits = 1
	}
	return fmt.Sprintf("%.*f %ciB", digits, v, "KMGTPE"[i])
}

// Duration writes a duration in whole seconds ("3m20s", "0s").
func Duration(d time.Duration) string {
	return d.Round(time.Second).String()
}

// ETA is the time left to move the remaining bytes at bps; -1 when nothing can be
// promised.
func ETA(done, total, bps int64) time.Duration {
	switch {
	case total > 0 && done >= total:
		return 0
	case total <= 0 || bps <= 0:
		return -1
	}
	return time.Duration(math.Ceil(float64(total-done)*8/float64(bps))) * time.Second
}
