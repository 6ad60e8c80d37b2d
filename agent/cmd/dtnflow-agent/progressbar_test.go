package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/dtnflow/dtnflow/agent/contract"
	"github.com/dtnflow/dtnflow/agent/coord"
)

// TestProgressBarKeepsLogsAbove draws reports and logs between them: each log record
// clears the bar's line, is printed, and the bar comes back below it; finish ends the
// line.
func TestProgressBarKeepsLogsAbove(t *testing.T) {
	var out bytes.Buffer
	bar := &termBar{w: &out}
	log := slog.New(slog.NewTextHandler(bar, &slog.HandlerOptions{ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}}))
	ch := bar.channel(log)
	log.Info("Listing")
	rep := contract.Report{Phase: contract.PhaseTransferring, BytesDone: 1 << 30, BytesTotal: 4 << 30, FilesDone: 3, FilesTotal: 12, BitsPerSecond: 1_000_000_000,
		Stripes: []contract.StripeReport{{Index: 0, Connected: true}, {Index: 1}}}
	if err := ch.Publish(context.Background(), rep); err != nil {
		t.Fatal(err)
	}
	log.Info("Re-planned", "stripes", 2)
	bar.finish()
	line := reportLine(rep)
	want := "level=INFO msg=Listing\n" +
		"\r\x1b[K" + line +
		"\r\x1b[K" + "level=INFO msg=Re-planned stripes=2\n" + line +
		"\n"
	if out.String() != want {
		t.Errorf("the terminal got\n%q\nwant\n%q", out.String(), want)
	}
	for _, part := range []string{"Transferring", "[=======>                      ]", " 25%", "1.00 GiB/4.00 GiB", "3/12 files", "1 Gbit/s", "ETA 26s", "1/2 stripes"} {
		if !strings.Contains(line, part) {
			t.Errorf("the bar %q lacks %q", line, part)
		}
	}
	bar.finish() // a second finish prints nothing
	if out.String() != want {
		t.Errorf("a second finish wrote %q", strings.TrimPrefix(out.String(), want))
	}
}

// TestNoProgressBarOffATerminal: under go test stderr is not a terminal, so a send keeps
// its logger and logs reports as lines (LogChannel).
func TestNoProgressBarOffATerminal(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	got, bar := progressOutput(log)
	if bar != nil || got != log {
		t.Fatalf("progressOutput gave a bar with stderr not a terminal")
	}
	if _, ok := bar.channel(log).(*coord.LogChannel); !ok {
		t.Errorf("without a bar the channel is %T, want *coord.LogChannel", bar.channel(log))
	}
	bar.finish() // nil-safe
}
