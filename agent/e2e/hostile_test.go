package e2e

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// hostileNames generates file names that are legal on Linux and hard on a data mover:
// random bytes (anything but '/' and NUL, invalid UTF-8 included), names of 255 bytes,
// groups sharing a prefix longer than any cut a temporary name could make, newlines,
// pairs that differ only in an invalid byte or only in case, names that end like our
// temporary files or are shaped as them, and one that starts like our journal
// directory. Every name is unique.
func hostileNames(rng *rand.Rand) []string {
	seen := map[string]bool{}
	var out []string
	add := func(n string) {
		if n == "" || n == "." || n == ".." || seen[n] || strings.ContainsAny(n, "/\x00") || len(n) > 255 {
			return
		}
		seen[n] = true
		out = append(out, n)
	}
	randomBytes := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			for b[i] == 0 || b[i] == '/' {
				b[i] = byte(rng.UintN(256))
			}
		}
		return string(b)
	}
	for range 12 {
		add(randomBytes(1 + rng.IntN(40)))
	}
	for range 4 {
		add(randomBytes(255))
	}
	// 44 names sharing a 200-byte prefix, the first byte after it telling them apart,
	// some of them 255 bytes long.
	prefix := strings.Repeat("p", 120) + randomBytes(80)
	for i := range 44 {
		n := prefix + fmt.Sprintf("%02d", i)
		if i%3 == 0 {
			n += strings.Repeat("s", 255-len(n))
		}
		add(n)
	}
	add("bad\xfe_big.bin")
	add("bad\xff_big.bin")
	add("bad\xfe_small")
	add("bad\xff_small")
	add("\xef\xbf\xbd") // U+FFFD itself next to the invalid bytes it would replace
	add("two\nlines")
	add("trailing\n")
	add("Case.bin")
	add("case.bin")
	add("CASE.BIN")
	add("looks.like.ours.dtnpart")
	add(".looks.like.ours.0123456789abcdef0123456789abcdef.dtnpart") // shaped as TempName's, and no file's
	add(".dtnflowrc")
	add("-starts-with-dash")
	add(" space ")
	return out
}

// TestHostileNames moves a tree of generated hostile names, large and small files
// among them, and checks every destination file's digest, mode and mtime, that
// nothing else exists, and that a second run finds everything done.
func TestHostileNames(t *testing.T) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 11))
	var files []fileSpec
	names := hostileNames(rng)
	for i, n := range names {
		size := []int{0, 1, 5000, 128 << 10, 128<<10 + 1, 700 << 10}[i%6]
		if strings.HasSuffix(n, "_big.bin") || i%17 == 0 {
			size = 3 << 20
		}
		dir := "h"
		if i%5 == 1 {
			d := names[(i+7)%len(names)] // a hostile directory name too
			dir = "h/" + d[:min(len(d), 200)] + ".d"
		}
		files = append(files, fileSpec{path: dir + "/" + n, size: size})
	}
	s := newSite(t, seed, files)
	for _, extra := range [][]string{{"--stripes", "2", "--streams", "3"}, {"--concurrency", "1", "--streams", "1", "--pipelining", "1", "--job", "serial"}} {
		t.Run(strings.Join(extra, " "), func(t *testing.T) {
			s.sendAll(t, "h", len(files), extra...)
			again := start(t, nil, sendArgs(s.addr, s.src, s.key, append(extra, "h")...)...)
			if err := again.wait(60 * time.Second); err != nil {
				t.Fatalf("second send: %v\n%s", err, again.output())
			}
			if !strings.Contains(again.stdoutText(), "this run sent 0 bytes") {
				t.Errorf("a second run of a finished job sent data: %q", again.stdoutText())
			}
		})
	}
}

// emptyDir removes everything inside dir.
func emptyDir(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTopLevelDotNames: at the top of the source root only the journal directory
// (.dtnflow) is reserved, and the sender says it left it out; names that merely start
// the same way are data like any other.
func TestTopLevelDotNames(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	makeTree(t, src, 9, []fileSpec{{path: ".dtnflowrc", size: 100}, {path: ".dtnflow-notes/a", size: 5000}, {path: ".dtnflow/old-job/x.log", size: 10}, {path: "data/b", size: 300 << 10}})
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	addr := recv.waitListening()
	send := start(t, nil, sendArgs(addr, src, key, "--dest-path", "copy", ".")...)
	if err := send.wait(60 * time.Second); err != nil {
		t.Fatalf("send: %v\n%s", err, send.output())
	}
	if !strings.Contains(send.stdoutText(), "Complete: 3 files") {
		t.Errorf("want 3 files: %q", send.stdoutText())
	}
	if !strings.Contains(send.output(), `path=.dtnflow reason="the receivers' journal directory, reserved"`) {
		t.Errorf("the sender did not say it left .dtnflow out:\n%s", send.output())
	}
	for _, p := range []string{".dtnflowrc", ".dtnflow-notes/a", "data/b"} {
		a, _ := os.ReadFile(filepath.Join(src, p))
		b, err := os.ReadFile(filepath.Join(dst, "copy", p))
		if err != nil || string(a) != string(b) {
			t.Errorf("%s: %v, or its content differs", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dst, "copy", ".dtnflow")); err == nil {
		t.Error("the source's journal directory was sent")
	}
}

// TestConnectionFlood: a receiver with few file descriptors (prlimit) is flooded with
// connections that never speak. It must not exit (accept's EMFILE is waited out), and
// once the flood is gone a transfer runs to Complete. A second flood on a receiver
// with room: beyond --max-handshakes pending handshakes, connections are closed at
// once and counted as busy.
func TestConnectionFlood(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	makeTree(t, src, 12, mixed("f", 20, 1, 2<<20))
	key := writeSecret(t, dir, "key", secret)
	recv := startLimited(t, 64, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	addr := recv.waitListening()
	var flood []net.Conn
	for range 200 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			break // the backlog is full: flooded enough
		}
		flood = append(flood, c)
	}
	pollUntil(t, 20*time.Second, "EMFILE", func() bool { return strings.Contains(recv.output(), "Accepting connections failed") })
	if !strings.Contains(recv.output(), "too many open files") {
		t.Fatalf("the flood did not exhaust the receiver's descriptors (%d connections):\n%s", len(flood), recv.output())
	}
	for _, c := range flood {
		c.Close()
	}
	if recv.exited() {
		t.Fatalf("the receiver exited under the flood:\n%s", recv.output())
	}
	send := start(t, nil, sendArgs(addr, src, key, "--streams", "2", "f")...)
	if err := send.wait(60 * time.Second); err != nil {
		t.Fatalf("send after the flood: %v\n%s", err, send.output())
	}
	assertSameTree(t, src, dst, "f")

	roomy := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key, "--max-handshakes", "16")
	raddr := roomy.waitListening()
	var idle []net.Conn
	defer func() {
		for _, c := range idle {
			c.Close()
		}
	}()
	for range 150 {
		if c, err := net.Dial("tcp", raddr); err == nil {
			idle = append(idle, c)
		}
	}
	if !pollUntil(t, 20*time.Second, "busy refusals", func() bool {
		return metric(t, raddr, `dtnflow_agent_connections_refused_total{reason="busy"}`) >= 50
	}) {
		t.Errorf("connections beyond the pending limit were not refused: %v", metric(t, raddr, `dtnflow_agent_connections_refused_total{reason="busy"}`))
	}
}

// TestMtimesBeyondWhatNanosecondsHold: frames and journals carry a file's mtime as
// int64 nanoseconds, which span 1677-09-21 to 2262-04-11; a file system holds times
// beyond (ext4 to 2446; a clock set wrong writes them). A time beyond the span used to
// reach the destination as another instant and fail the final check. Small and chunked
// files with such times, and with times inside the span (before 1970 too), now end
// Complete: each destination mtime is the source's where the span holds it, else the
// nearest instant it holds; and a second run finds everything done.
func TestMtimesBeyondWhatNanosecondsHold(t *testing.T) {
	times := []time.Time{
		time.Date(2400, 1, 2, 3, 4, 5, 6, time.UTC),
		time.Date(1650, 6, 1, 0, 0, 0, 0, time.UTC), // ext4 keeps 1901-12-13 of it: inside the span
		time.Date(1960, 1, 1, 0, 0, 0, 123456789, time.UTC),
		time.Date(2262, 4, 11, 23, 47, 16, 854775807, time.UTC), // the span's last instant
		time.Date(2262, 4, 11, 23, 47, 16, 854775808, time.UTC), // one nanosecond beyond
	}
	var files []fileSpec
	for i := range times {
		files = append(files, fileSpec{path: fmt.Sprintf("m/small%d", i), size: 1000 + i}, fileSpec{path: fmt.Sprintf("m/large%d", i), size: 3<<20 + i})
	}
	s := newSite(t, 23, files)
	for i, tm := range times {
		for _, f := range []string{"small", "large"} {
			// Not os.Chtimes: it passes the time on as UnixNano, undefined beyond the span.
			ts := unix.Timespec{Sec: tm.Unix(), Nsec: int64(tm.Nanosecond())}
			if err := unix.UtimesNanoAt(unix.AT_FDCWD, filepath.Join(s.src, "m", f+strconv.Itoa(i)), []unix.Timespec{ts, ts}, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.sendAll(t, "m", len(files)) // mtimes as nearestInSpan says
	again := start(t, nil, sendArgs(s.addr, s.src, s.key, "m")...)
	if err := again.wait(60 * time.Second); err != nil || !strings.Contains(again.stdoutText(), "this run sent 0 bytes") {
		t.Errorf("a second run of the finished job: %v %q\n%s", err, again.stdoutText(), again.output())
	}
}
