package mover

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	_ "io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/dtnflow/dtnflow/agent/auth"
	"github.com/dtnflow/dtnflow/agent/wire"
	. "github.com/onsi/gomega"
)

const testSecret = "receiver-test-secret-0123456789"

// hostile is a peer that speaks the protocol but ignores the sender's own checks.
type hostile struct {
	t     *testing.T
	ctrl  *wire.Conn
	ctrlW *wire.Writer
	ctrlR *wire.Reader
	data  *wire.Writer
	// flip damages the next write on the data stream, after its tag was computed:
	// a bit changed in flight.
	flip *flipConn
}

// flipConn flips one bit of the next write once armed, and holds back what is written
// past a point (a stalled path) until released.
type flipConn struct {
	net.Conn
	armed atomic.Int64 // byte offset+1 in the next write to flip (0: none)

	mu      sync.Mutex
	holding bool
	passing int    // while holding: bytes still passed on before the hold
	held    []byte // what the hold kept back
}

func (f *flipConn) Write(b []byte) (int, error) {
	if at := f.armed.Swap(0); at > 0 && int(at-1) < len(b) {
		c := append([]byte(nil), b...)
		c[at-1] ^= 0x10
		b = c
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.holding {
		return f.Conn.Write(b)
	}
	pass := min(f.passing, len(b))
	f.passing -= pass
	if _, err := f.Conn.Write(b[:pass]); err != nil {
		return 0, err
	}
	f.held = append(f.held, b[pass:]...)
	return len(b), nil
}

// holdAfter passes n more bytes on and holds back the rest.
func (f *flipConn) holdAfter(n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holding, f.passing = true, n
}

// release passes on what was held back, and every write after it.
func (f *flipConn) release() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.holding = false
	_, err := f.Conn.Write(f.held)
	f.held = nil
	return err
}

// dialFlip dials addr through a flipConn.
func dialFlip(t *testing.T, addr string) (*wire.Conn, *flipConn) {
	t.Helper()
	raw, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	fc := &flipConn{Conn: raw}
	keys, err := auth.Client(raw, []byte(testSecret))
	if err != nil {
		t.Fatal(err)
	}
	return wire.NewConn(fc, wire.Keys{MAC: keys.ClientToServer[:], Enc: keys.ClientToServerEnc[:]},
		wire.Keys{MAC: keys.ServerToClient[:], Enc: keys.ServerToClientEnc[:]}), fc
}

func startReceiver(t *testing.T) (string, string) {
	t.Helper()
	addr, dir, _ := startReceiverWith(t)
	return addr, dir
}

// startReceiverWith starts a receiver on loopback and returns it too, for tests that
// reach into its jobs.
func startReceiverWith(t *testing.T) (string, string, *Receiver) {
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
	rcv := &Receiver{Root: r, ID: "test", Log: slog.New(slog.NewTextHandler(os.Stderr, nil))}
	go Serve(ctx, ln, []byte(testSecret), 0, rcv.HandleConn, rcv.Log)
	t.Cleanup(func() { cancel(); r.Close() })
	return ln.Addr().String(), dir, rcv
}

func connect(t *testing.T, addr string) *hostile {
	t.Helper()
	return connectSession(t, addr, 77)
}

func connectSession(t *testing.T, addr string, session uint64) *hostile {
	t.Helper()
	return connectWith(t, addr, session, wire.Session{Job: "evil-job", Checksum: "SHA256", Overwrite: "Always", BlockSize: 1 << 20, ChunkSize: 1 << 20})
}

func connectWith(t *testing.T, addr string, session uint64, cfg wire.Session) *hostile {
	t.Helper()
	h := controlWith(t, addr, session, cfg)
	h.expect(wire.TypeSessionOK)
	d, flip := dialFlip(t, addr)
	h.data, h.flip = d.Writer(), flip
	h.data.WriteJSON(wire.TypeHello, wire.Hello{Role: wire.RoleData, Session: session})
	t.Cleanup(func() { d.Close() })
	return h
}

// controlWith opens a session's control connection and asks for cfg, leaving the
// receiver's answer unread.
func controlWith(t *testing.T, addr string, session uint64, cfg wire.Session) *hostile {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, addr, []byte(testSecret), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	h := &hostile{t: t, ctrl: c, ctrlW: c.Writer(), ctrlR: c.Reader(4096)}
	h.ctrlW.WriteJSON(wire.TypeHello, wire.Hello{Role: wire.RoleControl, Session: session})
	h.ctrlW.WriteJSON(wire.TypeSession, cfg)
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
		meta, _ := wire.FileMeta{Unit: uint64(i + 1), Size: uint64(len(data)), Mode: 0o644, Path: p}.Append(nil)
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

// TestReceiverChecksEveryFrame flips one bit of a File frame in flight — in its
// header, its meta (the path), its data or its tag — and checks that the receiver
// writes nothing and ends the session saying why (so that the sender retries), and
// that the same file sent intact on a new session arrives.
func TestReceiverChecksEveryFrame(t *testing.T) {
	addr, dir := startReceiver(t)
	data := []byte("the real content")
	meta, _ := wire.FileMeta{Unit: 1, Size: uint64(len(data)), Mode: 0o640, MtimeNs: 1e18, Path: "file0.txt"}.Append(nil)
	frameLen := wire.HeaderSize + len(meta) + len(data) + wire.TagSize
	for _, at := range []int{2, 9, wire.HeaderSize + 3, wire.HeaderSize + len(meta) - 1, wire.HeaderSize + len(meta) + 4, frameLen - 1} {
		h := connectSession(t, addr, uint64(100+at))
		h.flip.armed.Store(int64(at + 1))
		h.data.WriteFrame(wire.TypeFile, meta, data)
		var m wire.ErrorMsg
		if err := wire.DecodeJSON(h.expect(wire.TypeError), &m); err != nil || !m.Integrity {
			t.Fatalf("byte %d flipped: %+v %v, want an integrity error", at, m, err)
		}
		for _, name := range []string{"file0.txt", "file0.txu", "file0.tzt"} {
			if _, err := os.Lstat(filepath.Join(dir, "root", name)); err == nil {
				t.Fatalf("byte %d flipped: %s was written", at, name)
			}
		}
	}
	h := connect(t, addr)
	meta, _ = wire.FileMeta{Unit: 2, Size: uint64(len(data)), Mode: 0o640, MtimeNs: 1e18, Path: "f"}.Append(nil)
	h.data.WriteFrame(wire.TypeFile, meta, data)
	var res wire.Results
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
				Path: fmt.Sprintf("d/f%03d", i)}.Append(nil)
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

// TestReceiverRefusesImpossibleChunks: chunks announced by an authenticated peer that
// do not fit the file they name (an overflowing offset, a chunk far past the end, a
// file over the limit) and paths inside the journal directory are refused, and no
// file — sparse or not — is created for them.
func TestReceiverRefusesImpossibleChunks(t *testing.T) {
	addr, dir := startReceiver(t)
	h := connect(t, addr) // a session of 1 MiB blocks and chunks
	cases := map[string]wire.ChunkOpen{
		"overflow":      {Path: "big", FileSize: 4 << 20, Chunks: 4, Index: 0, Offset: 1 << 62, Length: 1 << 62, ChunkSize: 1 << 20, BlockSize: 1 << 20},
		"sparse 2^40":   {Path: "big", FileSize: 4 << 20, Chunks: 4, Index: 1, Offset: 1 << 40, Length: 1 << 20, ChunkSize: 1 << 20, BlockSize: 1 << 20},
		"over the max":  {Path: "big", FileSize: DefaultMaxFileSize + 1<<20, Chunks: DefaultMaxFileSize>>20 + 1, Index: 0, Length: 1 << 20, ChunkSize: 1 << 20, BlockSize: 1 << 20},
		"journal dir":   {Path: ".dtnflow/evil-job/x.log", FileSize: 4 << 20, Chunks: 4, Length: 1 << 20, ChunkSize: 1 << 20, BlockSize: 1 << 20},
		"journal entry": {Path: ".dtnflow", FileSize: 4 << 20, Chunks: 4, Length: 1 << 20, ChunkSize: 1 << 20, BlockSize: 1 << 20},
	}
	id := uint64(0)
	for name, m := range cases {
		id++
		m.ID = id
		h.ctrlW.WriteJSON(wire.TypeChunkOpen, m)
		var op wire.ChunkOpened
		if err := wire.DecodeJSON(h.expect(wire.TypeChunkOpened), &op); err != nil || op.Error == "" || op.ID != id {
			t.Errorf("%s: %+v %v, want a refusal", name, op, err)
		}
	}
	ents, _ := os.ReadDir(filepath.Join(dir, "root"))
	for _, e := range ents {
		if e.Name() != ".dtnflow" {
			t.Errorf("%s was created", e.Name())
		}
	}
	logs, _ := os.ReadDir(filepath.Join(dir, "root", ".dtnflow", "evil-job"))
	for _, e := range logs {
		if e.Name() != "test.log" {
			t.Errorf("journal directory holds %s", e.Name())
		}
	}
}

// TestReceiverManifest: the manifest lists every final file with its digest and says
// which this run made final; a final file removed or changed at the destination is
// named with the problem — replaced by another writer's file of the same size and mtime
// too; a temporary file left next to a final one is removed and counted.
func TestReceiverManifest(t *testing.T) {
	addr, dir := startReceiver(t)
	h := connect(t, addr) // job evil-job, no run id
	root := filepath.Join(dir, "root")
	for i, name := range []string{"keep", "gone", "changed", "sub/moved", "swapped"} {
		data := []byte("content of " + name)
		meta, _ := wire.FileMeta{Unit: uint64(i + 1), Size: uint64(len(data)), Mode: 0o644, MtimeNs: 1e18, Path: name}.Append(nil)
		h.data.WriteFrame(wire.TypeFile, meta, data)
		var res wire.Results
		if err := wire.DecodeJSON(h.expect(wire.TypeResult), &res); err != nil || !res.Results[0].OK {
			t.Fatalf("%s: %+v %v", name, res, err)
		}
	}
	os.Remove(filepath.Join(root, "gone"))
	os.WriteFile(filepath.Join(root, "changed"), []byte("other"), 0o644)
	// A directory the session opened, moved away from its name: its file is not at its
	// final name any more, whatever handle the session still holds.
	os.Rename(filepath.Join(root, "sub"), filepath.Join(root, "sub.old"))
	// Another writer's version, same size and mtime, renamed onto a final name.
	other := filepath.Join(root, "other-version")
	os.WriteFile(other, []byte("CONTENT OF SWAPPED"), 0o644)
	os.Chtimes(other, time.Unix(0, 1e18), time.Unix(0, 1e18))
	if err := os.Rename(other, filepath.Join(root, "swapped")); err != nil {
		t.Fatal(err)
	}
	debris := filepath.Join(root, TempName("keep", "evil-job"))
	os.WriteFile(debris, []byte("a second copy"), 0o600)
	// Names of ours that are not this job's temporaries of a final file: another job's
	// copy of the same file, and this job's of a file missing at its final name.
	others := []string{filepath.Join(root, TempName("keep", "another-job")), filepath.Join(root, TempName("gone", "evil-job"))}
	for _, o := range others {
		os.WriteFile(o, []byte("not debris of this job"), 0o600)
	}

	// Asked for the packed form, the receiver packs; asked as a sender that predates
	// it asks, it answers in JSON, with the same files.
	h.ctrlW.WriteJSON(wire.TypeManifestAsk, wire.ManifestQuery{Run: "run-1", Packed: true})
	var m wire.Manifest
	if err := wire.DecodeJSON(h.expect(wire.TypeManifest), &m); err != nil || !m.Last {
		t.Fatalf("manifest %+v %v", m, err)
	}
	if len(m.Files) != 0 || len(m.Packed) == 0 {
		t.Fatalf("asked for the packed form, got %d files in JSON and %d packed bytes", len(m.Files), len(m.Packed))
	}
	files, err := wire.UnpackManifestFiles(m.Packed)
	if err != nil {
		t.Fatal(err)
	}
	m.Files = files
	h.ctrlW.WriteJSON(wire.TypeManifestAsk, wire.ManifestQuery{Run: "run-1"})
	var plain wire.Manifest
	if err := wire.DecodeJSON(h.expect(wire.TypeManifest), &plain); err != nil || !plain.Last || len(plain.Packed) != 0 {
		t.Fatalf("manifest asked without packing: %+v %v", plain, err)
	}
	// the journal's files come in no particular order
	byPath := func(fs []wire.ManifestFile) []wire.ManifestFile {
		fs = slices.Clone(fs)
		slices.SortFunc(fs, func(a, b wire.ManifestFile) int { return strings.Compare(string(a.Path), string(b.Path)) })
		return fs
	}
	if !reflect.DeepEqual(byPath(plain.Files), byPath(m.Files)) {
		t.Errorf("the packed manifest's files\n%+v\ndiffer from the JSON one's\n%+v", m.Files, plain.Files)
	}
	got := map[string]wire.ManifestFile{}
	for _, f := range m.Files {
		got[string(f.Path)] = f
	}
	if f := got["keep"]; f.Problem != "" || f.Size != int64(len("content of keep")) || f.ThisRun {
		t.Errorf("keep: %+v (the session had no run id: not this run's)", f)
	}
	if f := got["gone"]; !strings.Contains(f.Problem, "missing at its final name") {
		t.Errorf("gone: %+v", f)
	}
	if f := got["changed"]; !strings.Contains(f.Problem, "size 5") {
		t.Errorf("changed: %+v", f)
	}
	if f := got["sub/moved"]; !strings.Contains(f.Problem, "missing at its final name") {
		t.Errorf("sub/moved, its directory moved away: %+v", f)
	}
	if f := got["swapped"]; !strings.Contains(f.Problem, "another writer's version replaced it") {
		t.Errorf("swapped, another file of its size and mtime renamed onto it: %+v", f)
	}
	if m.Debris != 1 {
		t.Errorf("debris %d, want 1", m.Debris)
	}
	if _, err := os.Stat(debris); err == nil {
		t.Error("the temporary file next to a final one is still there")
	}
	for _, o := range others {
		if _, err := os.Stat(o); err != nil {
			t.Errorf("%s, not the temporary of a final file of this job, was removed: %v", filepath.Base(o), err)
		}
	}
}

// TestReceiverVerifiesOnArrival: in verification mode OnArrival a chunk whose blocks
// do not digest to what the sender announced is refused and sent again (nothing takes
// its final name), and one whose blocks do is accepted, without a read-back.
func TestReceiverVerifiesOnArrival(t *testing.T) {
	addr, dir := startReceiver(t)
	h := connectWith(t, addr, 91, wire.Session{Job: "arrival", Checksum: "SHA256", Verify: true, VerifyMode: wire.VerifyOnArrival,
		Overwrite: "Always", BlockSize: 1 << 10, ChunkSize: 4 << 10})
	content := bytes.Repeat([]byte("0123456789abcdef"), 4<<10/16+10) // 4 KiB + 160 bytes: two chunks
	send := func(id uint64, digest []byte) wire.Result {
		h.ctrlW.WriteJSON(wire.TypeChunkOpen, wire.ChunkOpen{ID: id, Path: "f", FileSize: int64(len(content)), Mode: 0o644, MtimeNs: 1e18,
			Chunks: 2, Index: 0, Offset: 0, Length: 4 << 10, ChunkSize: 4 << 10, BlockSize: 1 << 10})
		var op wire.ChunkOpened
		if err := wire.DecodeJSON(h.expect(wire.TypeChunkOpened), &op); err != nil || op.Error != "" {
			t.Fatalf("open: %+v %v", op, err)
		}
		for off := 0; off < 4<<10; off += 1 << 10 {
			h.data.WriteFrame(wire.TypeBlock, wire.BlockMeta{Chunk: id, Offset: uint64(off)}.Put(make([]byte, 32)), content[off:off+1<<10])
		}
		h.ctrlW.WriteJSON(wire.TypeChunkEnd, wire.ChunkEnd{ID: id, Blocks: 4, Digest: digest})
		var res wire.Results
		if err := wire.DecodeJSON(h.expect(wire.TypeResult), &res); err != nil || len(res.Results) != 1 {
			t.Fatalf("result: %+v %v", res, err)
		}
		return res.Results[0]
	}
	ch := newChunkHasher("SHA256", wire.VerifyOnArrival)
	for off := 0; off < 4<<10; off += 1 << 10 {
		ch.Block(content[off : off+1<<10])
	}
	good := ch.Sum()
	plain := sha256.Sum256(content[:4<<10]) // the read-back construction: not what this mode compares
	if r := send(1, plain[:]); r.OK || !r.Retry {
		t.Errorf("a chunk announced with another construction's digest: %+v, want a retry", r)
	}
	if r := send(2, good); !r.OK {
		t.Errorf("a good chunk: %+v", r)
	}
	if _, err := os.Stat(filepath.Join(dir, "root", "f")); err == nil {
		t.Error("a file of two chunks took its final name after one")
	}
}

// oneChunk is a file of one chunk as a sender sends it, in blocks whose frames carry
// flags.
type oneChunk struct {
	t                    *testing.T
	content              []byte
	mtime                int64
	chunkSize, blockSize int64
	flags                wire.Flags
}

func (o oneChunk) open(h *hostile, id uint64) {
	o.t.Helper()
	size := int64(len(o.content))
	h.ctrlW.WriteJSON(wire.TypeChunkOpen, wire.ChunkOpen{ID: id, Path: "f", FileSize: size, Mode: 0o640, MtimeNs: o.mtime,
		Chunks: 1, Index: 0, Offset: 0, Length: size, ChunkSize: o.chunkSize, BlockSize: o.blockSize})
	var op wire.ChunkOpened
	if err := wire.DecodeJSON(h.expect(wire.TypeChunkOpened), &op); err != nil || op.Error != "" {
		o.t.Fatalf("open: %+v %v", op, err)
	}
}

func (o oneChunk) block(h *hostile, id uint64, off int64) {
	o.t.Helper()
	meta := wire.BlockMeta{Chunk: id, Offset: uint64(off)}.Put(make([]byte, 32))
	if err := h.data.WriteFrameFlags(wire.TypeBlock, o.flags, meta, o.content[off:min(off+o.blockSize, int64(len(o.content)))]); err != nil {
		o.t.Fatal(err)
	}
}

// sendWhole sends every block and the chunk's end, and fails the test unless the
// chunk's result comes, a success, within expect's wait.
func (o oneChunk) sendWhole(h *hostile, id uint64) {
	o.t.Helper()
	for off := int64(0); off < int64(len(o.content)); off += o.blockSize {
		o.block(h, id, off)
	}
	sum := sha256.Sum256(o.content)
	h.ctrlW.WriteJSON(wire.TypeChunkEnd, wire.ChunkEnd{ID: id, Blocks: (int64(len(o.content)) + o.blockSize - 1) / o.blockSize, Digest: sum[:]})
	var res wire.Results
	if err := wire.DecodeJSON(h.expect(wire.TypeResult), &res); err != nil || len(res.Results) != 1 || !res.Results[0].OK {
		o.t.Fatalf("the whole chunk: %+v %v", res, err)
	}
}

// untouched checks that the file at final is the chunk's, with its mtime.
func (o oneChunk) untouched(final, what string) {
	o.t.Helper()
	fi, err := os.Stat(final)
	if err != nil {
		o.t.Fatal(err)
	}
	if fi.ModTime().UnixNano() != o.mtime {
		o.t.Errorf("%s moved the final file's mtime to %v", what, fi.ModTime())
	}
	if b, _ := os.ReadFile(final); !bytes.Equal(b, o.content) {
		o.t.Errorf("%s changed the final file's content", what)
	}
}

// streamEnds checks that the receiver ends the data stream under fc.
func streamEnds(t *testing.T, fc *flipConn, what string) {
	t.Helper()
	fc.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := fc.Read(make([]byte, 1)); err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		t.Errorf("the stalled session's data stream is still open after %s", what)
	}
}

// TestReceiverStaleCopyCannotTouchAFinalFile: a session that stalled (the path was cut)
// left a chunk half written; the sender's next session sends the whole chunk and it
// takes its final name; then the stalled session's connection comes back and delivers
// its last block. That block must not be written into the final file (it moved the
// file's mtime, which the job's final check then found different: the chaos suite's
// wan-cut fault on the local cluster).
func TestReceiverStaleCopyCannotTouchAFinalFile(t *testing.T) {
	addr, dir := startReceiver(t)
	cfg := wire.Session{Job: "stale", Checksum: "SHA256", Verify: true, Overwrite: "Always", BlockSize: 1 << 10, ChunkSize: 8 << 10}
	stalled, next := connectWith(t, addr, 101, cfg), connectWith(t, addr, 102, cfg)
	// 4 KiB: one chunk of four blocks
	f := oneChunk{t: t, content: bytes.Repeat([]byte("0123456789abcdef"), 4<<10/16), mtime: 1e18, chunkSize: 8 << 10, blockSize: 1 << 10}
	f.open(stalled, 1)
	f.block(stalled, 1, 0)
	f.open(next, 1)
	f.sendWhole(next, 1)
	final := filepath.Join(dir, "root", "f")
	f.untouched(final, "nothing yet")
	f.block(stalled, 1, 1<<10) // the stalled connection delivers its last block
	// The receiver refuses it and ends that stream (the chunk is closed to it); without
	// the refusal nothing ends, and the wait runs out before the file is checked.
	streamEnds(t, stalled.flip, "its block for a file made final elsewhere")
	f.untouched(final, "the stalled session's block")
}

// TestReceiverStalledCopyDoesNotHoldUpTheJob: where nothing checks data in flight
// (HeadersOnly) a block goes from the socket into the file as it arrives. A session
// stalled in the middle of such a block (the path stopped with its connections open)
// must not hold up the next session's chunk, which makes the file final and retires the
// stalled copy: retiring waited for the stalled block's write to end, which waited for
// the peer, and the job's committer — every result and rename of the job — waited with
// it. When the rest of the block comes, it is refused and its stream ends.
func TestReceiverStalledCopyDoesNotHoldUpTheJob(t *testing.T) {
	addr, dir := startReceiver(t)
	cfg := wire.Session{Job: "stalled", Checksum: "SHA256", Verify: true, Overwrite: "Always", BlockSize: 64 << 10, ChunkSize: 256 << 10}
	stalled, next := connectWith(t, addr, 121, cfg), connectWith(t, addr, 122, cfg)
	content := make([]byte, 256<<10) // one chunk of four blocks
	for i := range content {
		content[i] = byte(i * 7 / 5)
	}
	f := oneChunk{t: t, content: content, mtime: 2e18, chunkSize: 256 << 10, blockSize: 64 << 10,
		flags: wire.FlagDataOutsideTag | wire.FlagDataUnchecked}
	f.open(stalled, 1)
	// The block's header and meta and a part of its data arrive; the rest is held
	// back, with the connection open.
	stalled.flip.holdAfter(wire.HeaderSize + 32 + 10<<10)
	f.block(stalled, 1, 0)
	f.open(next, 1)
	f.sendWhole(next, 1) // fails the test when no result comes within its wait
	final := filepath.Join(dir, "root", "f")
	f.untouched(final, "nothing yet")
	if err := stalled.flip.release(); err != nil {
		t.Fatal(err)
	}
	streamEnds(t, stalled.flip, "the rest of its block for a file made final elsewhere")
	f.untouched(final, "the rest of the stalled session's block")
}

// TestReceiverForgetsEveryCopyOfAChunkThatFailedItsDigest: a session wrote every block
// of a chunk, one of them damaged in flight where nothing checks data (HeadersOnly),
// and broke before the chunk's end. The next session is told those blocks are there,
// sends none, and the chunk fails its digest. Every later open must start from
// nothing: when the broken session's copy still counted, each resend skipped the
// damaged block and failed the same way until the file failed (TestBitFlipsAnywhere,
// one run in thirteen).
func TestReceiverForgetsEveryCopyOfAChunkThatFailedItsDigest(t *testing.T) {
	addr, dir := startReceiver(t)
	cfg := wire.Session{Job: "damaged", Checksum: "SHA256", Verify: true, Overwrite: "Always", BlockSize: 1 << 10, ChunkSize: 8 << 10}
	broken, next := connectWith(t, addr, 111, cfg), connectWith(t, addr, 112, cfg)
	content := bytes.Repeat([]byte("fedcba9876543210"), 4<<10/16) // 4 KiB: one chunk of four blocks
	damaged := slices.Clone(content)
	damaged[2<<10+5] ^= 0x04
	sum := sha256.Sum256(content)
	open := func(h *hostile, id uint64) [][2]int64 {
		h.ctrlW.WriteJSON(wire.TypeChunkOpen, wire.ChunkOpen{ID: id, Path: "f", FileSize: int64(len(content)), Mode: 0o644, MtimeNs: 1e18,
			Chunks: 1, Index: 0, Offset: 0, Length: int64(len(content)), ChunkSize: 8 << 10, BlockSize: 1 << 10})
		var op wire.ChunkOpened
		if err := wire.DecodeJSON(h.expect(wire.TypeChunkOpened), &op); err != nil || op.Error != "" {
			t.Fatalf("open: %+v %v", op, err)
		}
		return op.Have
	}
	// send sends the blocks the receiver does not have, as the sender does, and ends
	// the chunk with the source's digest.
	send := func(h *hostile, id uint64, data []byte, have [][2]int64) {
		for b := int64(0); b < 4; b++ {
			if slices.ContainsFunc(have, func(r [2]int64) bool { return r[0] <= b && b < r[1] }) {
				continue
			}
			if err := h.data.WriteFrame(wire.TypeBlock, wire.BlockMeta{Chunk: id, Offset: uint64(b << 10)}.Put(make([]byte, 32)), data[b<<10:(b+1)<<10]); err != nil {
				t.Fatal(err)
			}
		}
	}
	end := func(h *hostile, id uint64) wire.Result {
		h.ctrlW.WriteJSON(wire.TypeChunkEnd, wire.ChunkEnd{ID: id, Blocks: 4, Digest: sum[:]})
		var res wire.Results
		if err := wire.DecodeJSON(h.expect(wire.TypeResult), &res); err != nil || len(res.Results) != 1 {
			t.Fatalf("result: %+v %v", res, err)
		}
		return res.Results[0]
	}
	send(broken, 1, damaged, open(broken, 1))
	// The broken session's blocks are written once an open of the next session sees
	// them all; then that session breaks.
	var id uint64
	NewWithT(t).Eventually(func() bool { id++; return slices.Equal(open(next, id), [][2]int64{{0, 4}}) }).
		WithTimeout(10 * time.Second).WithPolling(5 * time.Millisecond).Should(BeTrue())
	broken.ctrl.Close()
	if r := end(next, id); r.OK || !r.Retry {
		t.Fatalf("a chunk holding a damaged block: %+v, want a retry", r)
	}
	var have [][2]int64
	for attempt := uint64(300); attempt < 303; attempt++ {
		have = open(next, attempt)
		send(next, attempt, content, have)
		if r := end(next, attempt); r.OK {
			break
		} else if attempt == 302 {
			t.Fatalf("three resends after the damaged chunk all failed (the last open said the receiver had %v): %+v", have, r)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, "root", "f")); err != nil || !bytes.Equal(b, content) {
		t.Errorf("final file: %v, same as the source: %v", err, bytes.Equal(b, content))
	}
}

// TestReceiverFilesThatAppearInADirectoryItMade: the receiver writes a small file
// into a directory it made itself without looking for one at its name first
// (rsession.presumedAbsent). Another writer can still put a file or a directory
// there after the receiver made it; under every overwrite policy the outcome must be
// what the policy promises: Never leaves the other writer's file and says so,
// IfDifferent and Always end with the source's bytes, mode and mtime, and a
// directory in the file's place fails the file naming it. In a directory that was
// there before, IfDifferent still looks, and skips an identical file.
func TestReceiverFilesThatAppearInADirectoryItMade(t *testing.T) {
	for _, policy := range []string{"Never", "IfDifferent", "Always"} {
		t.Run(policy, func(t *testing.T) {
			addr, dir := startReceiver(t)
			root := filepath.Join(dir, "root")
			h := connectWith(t, addr, 1, wire.Session{Job: "made-" + policy, Checksum: "SHA256", Overwrite: policy, BlockSize: 1 << 20, ChunkSize: 1 << 20})
			const mtime = 1_700_000_000_123_456_789
			unit := uint64(0)
			send := func(p string, data []byte) wire.Result {
				t.Helper()
				unit++
				meta, _ := wire.FileMeta{Unit: unit, Size: uint64(len(data)), Mode: 0o640, MtimeNs: mtime, Path: p}.Append(nil)
				if err := h.data.WriteFrame(wire.TypeFile, meta, data); err != nil {
					t.Fatal(err)
				}
				var res wire.Results
				if err := wire.DecodeJSON(h.expect(wire.TypeResult), &res); err != nil || len(res.Results) != 1 || res.Results[0].Unit != unit {
					t.Fatalf("%s: results %+v %v", p, res, err)
				}
				return res.Results[0]
			}
			hasSource := func(p string, want []byte) {
				t.Helper()
				fi, err := os.Stat(filepath.Join(root, p))
				b, _ := os.ReadFile(filepath.Join(root, p))
				if err != nil || !bytes.Equal(b, want) || fi.Mode().Perm() != 0o640 || fi.ModTime().UnixNano() != mtime {
					t.Errorf("%s: %q, %v, want the source's bytes %q, mode 0640 and mtime", p, b, err, want)
				}
			}
			ours, same := []byte("the source's bytes"), []byte("identical bytes")
			os.MkdirAll(filepath.Join(root, "old"), 0o755)
			os.WriteFile(filepath.Join(root, "old", "same"), same, 0o600)
			if r := send("made/first", ours); !r.OK {
				t.Fatalf("the first file, in a directory the receiver makes: %+v", r)
			}
			hasSource("made/first", ours)
			// Another writer, after the receiver made the directory.
			os.WriteFile(filepath.Join(root, "made", "theirs"), []byte("another writer's bytes"), 0o600)
			os.WriteFile(filepath.Join(root, "made", "same"), same, 0o600)
			os.Mkdir(filepath.Join(root, "made", "adir"), 0o755)

			theirs, identical, adir, old := send("made/theirs", ours), send("made/same", same), send("made/adir", ours), send("old/same", same)
			if adir.OK || !strings.Contains(adir.Error, "made/adir") || !strings.Contains(adir.Error, "directory") {
				t.Errorf("a directory in the file's place: %+v, want a failure naming the path", adir)
			}
			if fi, err := os.Lstat(filepath.Join(root, "made", "adir")); err != nil || !fi.IsDir() {
				t.Errorf("the directory in the file's place: %v %v", fi, err)
			}
			switch policy {
			case "Never":
				for p, r := range map[string]wire.Result{"made/theirs": theirs, "made/same": identical, "old/same": old} {
					if r.OK || !strings.Contains(r.Error, "destination file exists: "+p+" (overwrite: Never)") {
						t.Errorf("%s under Never: %+v", p, r)
					}
				}
				if b, _ := os.ReadFile(filepath.Join(root, "made", "theirs")); string(b) != "another writer's bytes" {
					t.Errorf("Never replaced another writer's file with %q", b)
				}
			default:
				for p, r := range map[string]wire.Result{"made/theirs": theirs, "made/same": identical} {
					if !r.OK || r.Skipped {
						t.Errorf("%s under %s: %+v, want written", p, policy, r)
					}
				}
				hasSource("made/theirs", ours)
				hasSource("made/same", same)
				// Looked at, in a directory that was there: IfDifferent skips the identical
				// file and leaves it as it was; Always writes it.
				if policy == "IfDifferent" {
					fi, _ := os.Stat(filepath.Join(root, "old", "same"))
					if !old.OK || !old.Skipped || fi == nil || fi.Mode().Perm() != 0o600 {
						t.Errorf("an identical file in a directory that was there, under IfDifferent: %+v, %v; want it skipped as it was", old, fi)
					}
				} else if !old.OK || old.Skipped {
					t.Errorf("old/same under Always: %+v, want written", old)
				} else {
					hasSource("old/same", same)
				}
			}
			ents, _ := os.ReadDir(filepath.Join(root, "made"))
			for _, e := range ents {
				if IsTempName(e.Name()) {
					t.Errorf("temporary file left: %s", e.Name())
				}
			}
		})
	}
}

// TestReceiverReplacesWhatIsNotARegularFile: at a file's destination name, in a
// directory that was there before (so the receiver looks), another writer left what is
// not a regular file: a FIFO where an empty file goes, and a symlink where a file of
// six bytes goes, the symlink's own size six and its target holding those same six
// bytes. Neither is the file: IfDifferent and Always end with a regular file holding
// the source's bytes, mode and mtime (the symlink's target left as it was), and Never
// refuses, naming the path. Nothing may open the FIFO: a read of it waits for a writer
// that never comes, and the session would hang.
func TestReceiverReplacesWhatIsNotARegularFile(t *testing.T) {
	for _, policy := range []string{"Never", "IfDifferent", "Always"} {
		t.Run(policy, func(t *testing.T) {
			addr, dir := startReceiver(t)
			root := filepath.Join(dir, "root")
			os.MkdirAll(filepath.Join(root, "old"), 0o755)
			if err := syscall.Mkfifo(filepath.Join(root, "old", "empty"), 0o644); err != nil {
				t.Fatal(err)
			}
			six := []byte("ABCDEF")
			os.WriteFile(filepath.Join(root, "old", "target"), six, 0o600)
			os.Symlink("target", filepath.Join(root, "old", "link")) // len("target") == len(six)
			h := connectWith(t, addr, 1, wire.Session{Job: "odd-" + policy, Checksum: "SHA256", Overwrite: policy, BlockSize: 1 << 20, ChunkSize: 1 << 20})
			const mtime = 1_700_000_000_987_654_321
			for unit, f := range []struct {
				path string
				data []byte
			}{{"old/empty", nil}, {"old/link", six}} {
				sum := sha256.Sum256(f.data)
				meta, _ := wire.FileMeta{Unit: uint64(unit + 1), Size: uint64(len(f.data)), Mode: 0o640, MtimeNs: mtime, Path: f.path, Digest: sum[:]}.Append(nil)
				if err := h.data.WriteFrame(wire.TypeFile, meta, f.data); err != nil {
					t.Fatal(err)
				}
				var res wire.Results
				if err := wire.DecodeJSON(h.expect(wire.TypeResult), &res); err != nil || len(res.Results) != 1 {
					t.Fatalf("%s: results %+v %v", f.path, res, err)
				}
				r := res.Results[0]
				fi, err := os.Lstat(filepath.Join(root, f.path))
				if policy == "Never" {
					if r.OK || !strings.Contains(r.Error, "destination file exists: "+f.path) {
						t.Errorf("%s under Never: %+v, want a refusal naming it", f.path, r)
					}
					if err != nil || fi.Mode().IsRegular() {
						t.Errorf("%s under Never: %v %v, want what another writer left", f.path, fi, err)
					}
					continue
				}
				b, _ := os.ReadFile(filepath.Join(root, f.path))
				if !r.OK || r.Skipped || err != nil || !fi.Mode().IsRegular() || !bytes.Equal(b, f.data) || fi.Mode().Perm() != 0o640 || fi.ModTime().UnixNano() != mtime {
					t.Errorf("%s under %s: result %+v, at its name %v (%v) holding %q; want a regular file with the source's bytes, mode and mtime", f.path, policy, r, fi, err, b)
				}
			}
			if b, _ := os.ReadFile(filepath.Join(root, "old", "target")); !bytes.Equal(b, six) {
				t.Errorf("the symlink's target was changed: %q", b)
			}
		})
	}
}

// TestReceiverRefusesAFIFOAtItsTemporaryName: a temporary name is the receiver's own,
// but another writer of the destination can put a FIFO there first. A write into it
// waits, once the pipe's buffer is full, for a reader that never comes; a rename would
// make the FIFO the file. The small file (larger than a pipe's buffer) and the chunk
// both fail at once, naming the temporary name and what is in the way, and the FIFOs
// stay FIFOs.
func TestReceiverRefusesAFIFOAtItsTemporaryName(t *testing.T) {
	addr, dir := startReceiver(t)
	root := filepath.Join(dir, "root")
	const job = "fifo-job"
	os.MkdirAll(filepath.Join(root, "new"), 0o755)
	for _, p := range []string{"new/small", "new/large"} {
		if err := syscall.Mkfifo(filepath.Join(root, TempName(p, job)), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	h := connectWith(t, addr, 1, wire.Session{Job: job, Checksum: "SHA256", Overwrite: "Always", BlockSize: 1 << 20, ChunkSize: 1 << 20})
	data := bytes.Repeat([]byte("fifo"), 50<<10) // 200 KiB, beyond a pipe's 64 KiB
	meta, _ := wire.FileMeta{Unit: 1, Size: uint64(len(data)), Mode: 0o640, MtimeNs: 1e18, Path: "new/small"}.Append(nil)
	if err := h.data.WriteFrame(wire.TypeFile, meta, data); err != nil {
		t.Fatal(err)
	}
	var res wire.Results
	if err := wire.DecodeJSON(h.expect(wire.TypeResult), &res); err != nil || len(res.Results) != 1 {
		t.Fatalf("results %+v %v", res, err)
	}
	if r := res.Results[0]; r.OK || !strings.Contains(r.Error, TempName("new/small", job)) || !strings.Contains(r.Error, "not a regular file (a FIFO)") {
		t.Errorf("a small file whose temporary name holds a FIFO: %+v, want a failure naming both", r)
	}
	h.ctrlW.WriteJSON(wire.TypeChunkOpen, wire.ChunkOpen{ID: 2, Path: "new/large", FileSize: 4 << 20, Mode: 0o640, MtimeNs: 1e18, Index: 0, Chunks: 4, Length: 1 << 20, ChunkSize: 1 << 20, BlockSize: 1 << 20})
	var op wire.ChunkOpened
	if err := wire.DecodeJSON(h.expect(wire.TypeChunkOpened), &op); err != nil || !strings.Contains(op.Error, TempName("new/large", job)) || !strings.Contains(op.Error, "not a regular file (a FIFO)") {
		t.Errorf("a chunk whose temporary name holds a FIFO: %+v %v, want a failure naming both", op, err)
	}
	for _, p := range []string{"new/small", "new/large"} {
		if fi, err := os.Lstat(filepath.Join(root, TempName(p, job))); err != nil || fi.Mode()&fs.ModeNamedPipe == 0 {
			t.Errorf("%s's temporary name: %v %v, want the FIFO left as it was", p, fi, err)
		}
		if _, err := os.Lstat(filepath.Join(root, p)); err == nil {
			t.Errorf("%s was made final", p)
		}
	}
}

// TestReceiverRefusesAChecksumItDoesNotKnow: a session naming a digest the receiver
// does not have is refused with an error naming it, and the receiver goes on serving
// the next session (no digest of nothing taken later).
func TestReceiverRefusesAChecksumItDoesNotKnow(t *testing.T) {
	addr, _ := startReceiver(t)
	h := controlWith(t, addr, 7, wire.Session{Job: "crc", Checksum: "CRC32", Overwrite: "Always", BlockSize: 1 << 20, ChunkSize: 1 << 20})
	var e wire.ErrorMsg
	if err := wire.DecodeJSON(h.expect(wire.TypeError), &e); err != nil || !strings.Contains(e.Error, `"CRC32"`) {
		t.Fatalf("refusal %+v %v, want an error naming the checksum", e, err)
	}
	for i, sum := range []string{"BLAKE3", "SHA256", "sha512", "MD5", ""} {
		connectWith(t, addr, uint64(8+i), wire.Session{Job: "known", Checksum: sum, Overwrite: "Always", BlockSize: 1 << 20, ChunkSize: 1 << 20})
	}
}

// TestRetiredCopyRecordsNoBlock: a block whose last piece went in just before its copy
// was retired (the chunk reset after a failed digest, which forgot what the copy held)
// is not recorded for that copy: the next round of journal records would take it for
// durable, and every resend would skip it.
func TestRetiredCopyRecordsNoBlock(t *testing.T) {
	s := &rsession{r: &Receiver{}}
	c := &rchunk{nblocks: 4, open: wire.ChunkOpen{Length: 4 << 10, BlockSize: 1 << 10}}
	s.blockWritten(c, 0, 1<<10, nil)
	c.retire()
	c.forget()
	s.blockWritten(c, 1, 1<<10, nil)
	if got := c.have.Count(); got != 0 {
		t.Errorf("a retired, forgotten copy holds %d blocks, want 0", got)
	}
}
