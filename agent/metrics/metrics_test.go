package metrics

import (
	"bufio"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
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
