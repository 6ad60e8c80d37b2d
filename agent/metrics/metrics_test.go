package metrics

import (
	"bufio"
	"context"
	"golang.org/x/sys/unix"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestServeClosesIdleConnections: a client that keeps a connection open after its
// request is cut off after the idle timeout, so held connections cannot pile up.
func TestServeClosesIdleConnections(t *testing.T) {
	idleTimeout = 200 * time.Millisecond
	defer func() { idleTimeout = 30 * time.Second }()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := Serve(ctx, "127.0.0.1:0", func() any { return map[string]string{"role": "test"} }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", addr.String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /status HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("status: %v %v", resp, err)
	}
	io.Copy(io.Discard, resp.Body)
	start := time.Now()
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("idle keep-alive connection: %v after %v, want the server to close it", err, time.Since(start))
	}
}

// TestServeDumpsItsGoroutines: /debug/goroutines lists every goroutine with its stack,
// this test's own among them, and the process goes on.
func TestServeDumpsItsGoroutines(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := Serve(ctx, "127.0.0.1:0", func() any { return nil }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr.String() + "/debug/goroutines")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(string(body), "goroutine ") || !strings.Contains(string(body), "metrics.TestServeDumpsItsGoroutines") {
		t.Fatalf("/debug/goroutines: %d, %.300q", resp.StatusCode, body)
	}
}

// TestReadTCPInfoSaysWhenAWindowLimits: a connection sending 8 MiB to a reader that
// takes 16 KiB every 2 ms (about 65 Mbit/s) through a 64 KiB receive buffer is busy for
// the whole of it, and most of that time the receiver's window holds it back —
// loopback has no path to limit it.
func TestReadTCPInfoSaysWhenAWindowLimits(t *testing.T) {
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		if err := c.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 64<<10) }); err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	read := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			read <- err
			return
		}
		defer c.Close()
		buf := make([]byte, 16<<10)
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for range tick.C {
			if _, err := c.Read(buf); err != nil {
				read <- nil
				return
			}
		}
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := c.Write(make([]byte, 8<<20)); err != nil {
		t.Fatal(err)
	}
	ti := ReadTCPInfo(c)
	took := time.Since(start)
	c.Close()
	if err := <-read; err != nil {
		t.Fatal(err)
	}
	if !ti.OK {
		t.Fatal("TCP_INFO not read")
	}
	if ti.BusyTime < took/2 || ti.WindowLimited < ti.BusyTime/2 {
		t.Errorf("8 MiB written in %v behind a slow reader: busy %v, window-limited %v; want busy most of it, and most of that limited by the window",
			took, ti.BusyTime, ti.WindowLimited)
	}
}
