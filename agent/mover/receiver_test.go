package mover

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/wire"
)

const testSecret = "receiver-test-secret-0123456789"

// hostile is a peer that speaks the protocol but ignores the sender's own checks.
type hostile struct {
	t     *testing.T
	ctrl  net.Conn
	ctrlW *wire.Writer
	ctrlR *wire.Reader
	data  *wire.Writer
}

func startReceiver(t *testing.T) (string, string) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	os.MkdirAll(root, 0o755)
	r, err := os.OpenRoot(root)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rcv := &Receiver{Root: r, ID: "test", Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	go Serve(ctx, ln, []byte(testSecret), nil, rcv.HandleConn, rcv.Log)
	t.Cleanup(func() { cancel(); r.Close() })
	return ln.Addr().String(), dir
}

func connect(t *testing.T, addr string) *hostile {
	t.Helper()
	return connectSession(t, addr, 77)
}

func connectSession(t *testing.T, addr string, session uint64) *hostile {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, []byte(testSecret), 0)
	if err != nil {
		t.Fatal(err)
	}
	h := &hostile{t: t, ctrl: c, ctrlW: wire.NewWriter(c), ctrlR: wire.NewReader(bufio.NewReader(c))}
	h.ctrlW.WriteJSON(wire.TypeHello, wire.Hello{Role: wire.RoleControl, Session: session})
	h.ctrlW.WriteJSON(wire.TypeSession, wire.Session{Job: "evil-job", Checksum: "SHA256", Overwrite: "Always", BlockSize: 1 << 20, ChunkSize: 1 << 20})
	h.expect(wire.TypeSessionOK)
	d, err := Dial(ctx, addr, []byte(testSecret), 0)
	if err != nil {
		t.Fatal(err)
	}
	h.data = wire.NewWriter(d)
	h.data.WriteJSON(wire.TypeHello, wire.Hello{Role: wire.RoleData, Session: session})
	t.Cleanup(func() { c.Close(); d.Close() })
	return h
}

// expect reads control frames (skipping stats) until one of type want.
func (h *hostile) expect(want wire.Type) []byte {
	h.t.Helper()
	h.ctrl.SetReadDeadline(time.Now().Add(10 * time.Second))
	for {
		hd, meta, err := h.ctrlR.Next()
		if err != nil {
			h.t.Fatalf("waiting for frame %d: %v", want, err)
		}
		if hd.Type == want {
			return append([]byte(nil), meta...)
		}
	}
}

func TestReceiverRefusesPathsOutsideItsRoot(t *testing.T) {
	addr, dir := startReceiver(t)
	h := connect(t, addr)
	os.MkdirAll(filepath.Join(dir, "outside"), 0o755)
	os.Symlink(filepath.Join(dir, "outside"), filepath.Join(dir, "root", "link"))
	for i, p := range []string{"../escaped", "/tmp/absolute-escape", "a/../../escaped2", "link/through-symlink"} {
		data := []byte("payload")
		meta, _ := wire.FileMeta{Unit: uint64(i + 1), Size: uint64(len(data)), Mode: 0o644, CRC: wire.CRC32C(data), Path: p}.Append(nil)
		if err := h.data.WriteFrame(wire.TypeFile, meta, data); err != nil {
			t.Fatal(err)
		}
		var res wire.Results
		if err := wire.DecodeJSON(h.expect(wire.TypeResult), &res); err != nil || len(res.Results) != 1 {
			t.Fatalf("%s: results %+v %v", p, res, err)
		}
		r := res.Results[0]
		if r.OK || !strings.Contains(r.Error, strings.TrimSuffix(p, "/through-symlink")) {
			t.Errorf("%s: result %+v, want a refusal naming the path", p, r)
		}
	}
	h.ctrlW.WriteJSON(wire.TypeChunkOpen, wire.ChunkOpen{ID: 9, Path: "../chunk-escape", FileSize: 4 << 20, Index: 0, Chunks: 4, Length: 1 << 20, ChunkSize: 1 << 20, BlockSize: 1 << 20})
	var op wire.ChunkOpened
	if err := wire.DecodeJSON(h.expect(wire.TypeChunkOpened), &op); err != nil || op.Error == "" || !strings.Contains(op.Error, "../chunk-escape") {
		t.Errorf("ChunkOpen outside the root: %+v %v", op, err)
	}
	for _, p := range []string{filepath.Join(dir, "escaped"), "/tmp/absolute-escape", filepath.Join(dir, "escaped2"), filepath.Join(dir, "outside", "through-symlink"), filepath.Join(dir, "chunk-escape")} {
		if _, err := os.Lstat(p); err == nil {
			t.Errorf("the receiver wrote %s, outside its root", p)
		}
	}
}

func TestReceiverChecksEveryFrame(t *testing.T) {
	addr, dir := startReceiver(t)
	h := connect(t, addr)
	data := []byte("the real content")
	meta, _ := wire.FileMeta{Unit: 1, Size: uint64(len(data)), Mode: 0o640, MtimeNs: 1e18, CRC: wire.CRC32C(data) ^ 1, Path: "f"}.Append(nil)
	h.data.WriteFrame(wire.TypeFile, meta, data)
	var res wire.Results
	wire.DecodeJSON(h.expect(wire.TypeResult), &res)
	if r := res.Results[0]; r.OK || !r.Retry {
		t.Fatalf("a file with a bad CRC32C: %+v, want a retry", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "root", "f")); err == nil {
		t.Fatal("a damaged file took its final name")
	}
	meta, _ = wire.FileMeta{Unit: 2, Size: uint64(len(data)), Mode: 0o640, MtimeNs: 1e18, CRC: wire.CRC32C(data), Path: "f"}.Append(nil)
	h.data.WriteFrame(wire.TypeFile, meta, data)
	wire.DecodeJSON(h.expect(wire.TypeResult), &res)
	if r := res.Results[0]; !r.OK {
		t.Fatalf("a good file: %+v", r)
	}
	fi, err := os.Stat(filepath.Join(dir, "root", "f"))
	if err != nil || fi.Mode().Perm() != 0o640 || fi.ModTime().UnixNano() != 1e18 {
		t.Fatalf("final file %v %v: want mode 0640 and the source mtime", fi, err)
	}
}

// TestReceiverSameSmallFileTwice: a stripe that leaves gives its files back and another
// sends them again, possibly while the first copies are still being committed. Every
// copy is answered OK and each file ends complete under its final name, with its mode
// and mtime, and no temporary file is left.
func TestReceiverSameSmallFileTwice(t *testing.T) {
	addr, dir := startReceiver(t)
	a, b := connectSession(t, addr, 77), connectSession(t, addr, 78)
	const files = 200
	content := func(i int) []byte { return []byte(strings.Repeat(string(rune('a'+i%26)), 1000+i)) }
	send := func(h *hostile, unitBase uint64) {
		for i := range files {
			data := content(i)
			meta, _ := wire.FileMeta{Unit: unitBase + uint64(i), Size: uint64(len(data)), Mode: 0o640, MtimeNs: 1e18 + int64(i),
				CRC: wire.CRC32C(data), Path: fmt.Sprintf("d/f%03d", i)}.Append(nil)
			if err := h.data.WriteFrame(wire.TypeFile, meta, data); err != nil {
				t.Error(err)
				return
			}
		}
	}
	go send(a, 1000)
	go send(b, 2000)
	for _, h := range []*hostile{a, b} {
		for got := 0; got < files; {
			var res wire.Results
			if err := wire.DecodeJSON(h.expect(wire.TypeResult), &res); err != nil {
				t.Fatal(err)
			}
			for _, r := range res.Results {
				if !r.OK {
					t.Errorf("unit %d: %+v, want OK", r.Unit, r)
				}
			}
			got += len(res.Results)
		}
	}
	for i := range files {
		p := filepath.Join(dir, "root", "d", fmt.Sprintf("f%03d", i))
		b, err := os.ReadFile(p)
		fi, serr := os.Stat(p)
		if err != nil || serr != nil || string(b) != string(content(i)) || fi.Mode().Perm() != 0o640 || fi.ModTime().UnixNano() != 1e18+int64(i) {
			t.Fatalf("%s: %v %v, %d bytes, mode %v, mtime %v", p, err, serr, len(b), fi.Mode(), fi.ModTime().UnixNano())
		}
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "root", "d"))
	for _, e := range ents {
		if IsTempName(e.Name()) {
			t.Errorf("temporary file left: %s", e.Name())
		}
	}
}
