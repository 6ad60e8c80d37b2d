package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/mover"
)

// TestSendModes runs `receive` on loopback and `send` against it in its standalone
// and memory-to-memory modes (the cluster mode needs a coordinator: its flags are
// checked by TestContractCommandLines): the job's files arrive whole under the
// destination path and the summary says so; the sample names the streams it was asked
// for and measured the bytes it was asked to send.
func TestSendModes(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	files := map[string]string{"data/a.txt": "alpha", "data/sub/b.bin": strings.Repeat("b", 3<<20)}
	for name, content := range files {
		writeFile(t, filepath.Join(src, name), content)
	}
	writeFile(t, secret, "send-modes-test-secret-0123456789")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		t.Fatal(err)
	}

	// A free loopback port for the receiver (send's stripes retry until it listens).
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	received := make(chan error, 1)
	go func() {
		received <- runReceive(ctx, []string{"--listen", addr, "--root", dst, "--secret-file", secret, "--metrics-addr", "off"}, log)
	}()
	t.Cleanup(func() { cancel(); <-received })

	out := stdoutOf(t, func() error {
		return runSend(ctx, []string{"--to", addr, "--root", src, "--secret-file", secret, "--metrics-addr", "off", "--stripes", "2",
			"--dest-path", "in", "--block-size", "1M", "--chunk-size", "1M", "data"}, log)
	})
	if !strings.HasPrefix(out, "Complete: 2 files") {
		t.Errorf("standalone send printed %q, want a summary of 2 complete files", out)
	}
	for name, content := range files {
		if b, err := os.ReadFile(filepath.Join(dst, "in", name)); err != nil || string(b) != content {
			t.Errorf("%s: %d bytes (%v), want %d", name, len(b), err, len(content))
		}
	}

	out = stdoutOf(t, func() error {
		return runSend(ctx, []string{"--mem", "--to", addr, "--secret-file", secret, "--streams", "3", "--bytes", "8M"}, log)
	})
	var res mover.ProbeResult
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("memory-to-memory send printed %q: %v", out, err)
	}
	if res.Sample.Streams != 3 || res.Bytes != 8<<20 || res.Sample.BitsPerSecond <= 0 {
		t.Errorf("sample %+v of %d bytes, want 3 streams, 8 MiB and a rate", res.Sample, res.Bytes)
	}

	if err := runSend(ctx, []string{"--mem", "--secret-file", secret}, log); err == nil || !strings.Contains(err.Error(), "--mem needs --to") {
		t.Errorf("--mem without --to: %v", err)
	}
	if err := runSend(ctx, []string{"--to", addr, "--root", src, "--secret-file", secret}, log); err == nil || !strings.Contains(err.Error(), "at least one path") {
		t.Errorf("a standalone send without paths: %v", err)
	}
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// stdoutOf runs f and returns what it printed to standard output; f must succeed.
func stdoutOf(t *testing.T, f func() error) string {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	saved := os.Stdout
	os.Stdout = w
	var buf bytes.Buffer
	copied := make(chan struct{})
	go func() { io.Copy(&buf, r); close(copied) }()
	err = f()
	os.Stdout = saved
	w.Close()
	<-copied
	if err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

// TestSendLeavesFilesInFlightToItsMode: without --concurrency, send passes none on,
// so that a fixed run keeps optimizer.DefaultConcurrency files in flight per stripe
// and --auto lets its size classes use maxCC (optimizer.DefaultMaxConcurrency); with 8
// for both, two fixed stripes took 62 s on the mixed dataset where 4 took 39.5.
func TestSendLeavesFilesInFlightToItsMode(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want int32
	}{
		{nil, 0},
		{[]string{"--auto"}, 0},
		{[]string{"--concurrency", "6"}, 6},
	} {
		fs := newFlags("send", "")
		var f sendFlags
		f.register(fs)
		if err := parse(fs, append(tc.args, "data")); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := f.job.params().Concurrency; got != tc.want {
			t.Errorf("send %v: concurrency %d passed on, want %d", tc.args, got, tc.want)
		}
	}
}
