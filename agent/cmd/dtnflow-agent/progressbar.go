package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/coord"
	"github.com/dtnflow/dtnflow/internal/progress"
)

// `dtnflow-agent send` on a terminal: the progress reports become one bar, redrawn in
// place on the terminal's last line, with log lines printed above it. When stderr is not
// a terminal (a file, a pipe, a pod's log) nothing changes: a "Progress" log line per
// report, as before.

// progressBarWidth is the width of the bar in cells.
const progressBarWidth = 30

// termBar owns a terminal: log records are written above the bar, reports redraw it.
type termBar struct {
	mu   sync.Mutex
	w    io.Writer
	line string // the bar as last drawn; "" before the first report
}

// progressOutput returns the logger and bar of a send: when stderr is a terminal, a
// logger writing through the bar (same level as main's) and the bar; otherwise log as
// it is and a nil bar, whose methods keep the plain behaviour.
func progressOutput(log *slog.Logger) (*slog.Logger, *termBar) {
	if !term.IsTerminal(int(os.Stderr.Fd())) {
		return log, nil
	}
	bar := &termBar{w: os.Stderr}
	return slog.New(slog.NewTextHandler(bar, &slog.HandlerOptions{Level: slog.LevelInfo})), bar
}

// Write prints a log record above the bar: the bar's line is cleared, the record
// written, and the bar drawn again below it.
func (b *termBar) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.line != "" {
		fmt.Fprint(b.w, "\r\x1b[K")
	}
	n, err := b.w.Write(p)
	if b.line != "" {
		fmt.Fprint(b.w, b.line)
	}
	return n, err
}

// draw replaces the bar's line.
func (b *termBar) draw(line string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.line = line
	fmt.Fprint(b.w, "\r\x1b[K"+line)
}

// finish ends the bar's line, so that what is printed next starts on its own; the last
// bar stays on screen.
func (b *termBar) finish() {
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.line != "" {
		fmt.Fprintln(b.w)
		b.line = ""
	}
}

// channel is the coordinator's channel for a standalone send: reports drawn on the bar,
// or logged as lines without one.
func (b *termBar) channel(log *slog.Logger) coord.Channel {
	logs := &coord.LogChannel{Log: log}
	if b == nil {
		return logs
	}
	return &barChannel{LogChannel: logs, bar: b}
}

// barChannel draws every report on the bar; directives come as for LogChannel.
type barChannel struct {
	*coord.LogChannel
	bar *termBar
}

// Publish implements coord.Channel.
func (c *barChannel) Publish(_ context.Context, r contract.Report) error {
	c.bar.draw(reportLine(r))
	return nil
}

// reportLine is a report as a progress line: phase, bar, bytes, files, rate, ETA and the
// stripes connected.
func reportLine(r contract.Report) string {
	s := progress.Snapshot{BytesDone: r.BytesDone, BytesTotal: r.BytesTotal, FilesDone: r.FilesDone, FilesTotal: r.FilesTotal,
		BitsPerSecond: r.BitsPerSecond, ETA: progress.ETA(r.BytesDone, r.BytesTotal, r.BitsPerSecond), Stripes: int32(len(r.Stripes))}
	for _, st := range r.Stripes {
		if st.Connected {
			s.StripesRunning++
		}
	}
	if s.ETA > 0 {
		s.ETA = s.ETA.Round(time.Second)
	}
	return fmt.Sprintf("%-12s %s", r.Phase, progress.Line(s, progressBarWidth))
}
