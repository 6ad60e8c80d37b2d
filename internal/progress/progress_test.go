package progress

import (
	"testing"
	"time"
)

func TestBar(t *testing.T) {
	tests := map[string]struct {
		fraction float64
		width    int
		want     string
	}{
		"empty":           {0, 10, "[          ]"},
		"a little":        {0.01, 10, "[>         ]"},
		"half":            {0.5, 10, "[=====>    ]"},
		"almost":          {0.99, 10, "[=========>]"},
		"full":            {1, 10, "[==========]"},
		"beyond":          {1.5, 4, "[====]"},
		"negative":        {-1, 4, "[    ]"},
		"no room at all":  {0.5, 0, "[>]"},
		"one cell, full":  {1, 1, "[=]"},
		"one cell, begun": {0.2, 1, "[>]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Bar(tc.fraction, tc.width); got != tc.want {
				t.Errorf("Bar(%v, %d) = %q, want %q", tc.fraction, tc.width, got, tc.want)
			}
			if w := max(tc.width, 1) + 2; len(Bar(tc.fraction, tc.width)) != w {
				t.Errorf("width %d, want %d", len(Bar(tc.fraction, tc.width)), w)
			}
		})
	}
}

func TestLine(t *testing.T) {
	tests := map[string]struct {
		s    Snapshot
		want string
	}{
		"running": {Snapshot{BytesDone: 4608 << 20, BytesTotal: 10 << 30, FilesDone: 40, FilesTotal: 100, BitsPerSecond: 941_000_000, ETA: 200 * time.Second, StripesRunning: 2, Stripes: 4},
			"[=========>          ]   45%  4.50 GiB/10.0 GiB  40/100 files  941 Mbit/s  ETA 3m20s  2/4 stripes"},
		"listing, nothing known": {Snapshot{ETA: -1},
			"[                    ]    0%  0 B  0 bit/s"},
		"complete": {Snapshot{BytesDone: 300 << 20, BytesTotal: 300 << 20, FilesDone: 7, FilesTotal: 7, ETA: 0},
			"[====================]  100%  300 MiB/300 MiB  7/7 files  0 bit/s  ETA 0s"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Line(tc.s, 20); got != tc.want {
				t.Errorf("Line =\n%q, want\n%q", got, tc.want)
			}
		})
	}
}

func TestBytesAndETA(t *testing.T) {
	for n, want := range map[int64]string{0: "0 B", 1023: "1023 B", 1024: "1.00 KiB", 1536: "1.50 KiB", 10 << 30: "10.0 GiB", 321 << 20: "321 MiB", 1 << 60: "1.00 EiB"} {
		if got := Bytes(n); got != want {
			t.Errorf("Bytes(%d) = %q, want %q", n, got, want)
		}
	}
	for _, tc := range []struct {
		done, total, bps int64
		want             time.Duration
	}{
		{0, 25_000_000_000, 1_000_000_000, 200 * time.Second},
		{1, 2, 3, 3 * time.Second}, // 8 bits at 3 bit/s: rounded up
		{5, 5, 0, 0},
		{0, 5, 0, -1},
		{0, 0, 100, -1},
	} {
		if got := ETA(tc.done, tc.total, tc.bps); got != tc.want {
			t.Errorf("ETA(%d, %d, %d) = %v, want %v", tc.done, tc.total, tc.bps, got, tc.want)
		}
	}
}
