package e2e

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

const secret = "e2e-secret-0123456789abcdef"

// small blocks and chunks make a few megabytes into many chunks and blocks.
var smallUnits = []string{"--block-size", "128K", "--chunk-size", "512K"}

func sendArgs(addr, src, secretFile string, extra ...string) []string {
	a := append([]string{"send", "--to", addr, "--root", src, "--secret-file", secretFile, "--retry-for", "30s", "--report-interval", "500ms"}, smallUnits...)
	return append(a, extra...)
}

func TestTransferTree(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	makeTree(t, src, 1, mixed("data", 120, 3, 3<<20))
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	addr := recv.waitListening()
	send := start(t, nil, sendArgs(addr, src, key, "--stripes", "2", "--streams", "3", "data")...)
	if err := send.wait(60 * time.Second); err != nil {
		t.Fatalf("send: %v\n%s", err, send.output())
	}
	assertSameTree(t, src, dst, "data")
	if !strings.Contains(send.stdoutText(), "Complete: 125 files") {
		t.Errorf("unexpected summary: %q", send.stdoutText())
	}
	if !strings.Contains(send.output(), "checking the destination against the listing") {
		t.Errorf("Complete without the final check against the listing:\n%s", send.output())
	}
	// Running it again finds everything done in the journal and sends nothing.
	again := start(t, nil, sendArgs(addr, src, key, "--stripes", "2", "--streams", "3", "data")...)
	if err := again.wait(30 * time.Second); err != nil {
		t.Fatalf("second send: %v\n%s", err, again.output())
	}
	if !strings.Contains(again.stdoutText(), "this run sent 0 bytes") {
		t.Errorf("a second run of a finished job sent data: %q", again.stdoutText())
	}
	if st := httpGet(t, addr, "/status"); !strings.Contains(st, `"role": "receiver"`) {
		t.Errorf("status endpoint: %q", st)
	}
}

// TestVerifyOnArrival: with digests taken as blocks arrive, a transfer, a resume after
// the receiver is killed half way (blocks from the journal are read back for the
// chunk's digest), and a second run that sends nothing.
func TestVerifyOnArrival(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	total := makeTree(t, src, 21, mixed("v", 60, 3, 4<<20))
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	addr := recv.waitListening()
	args := sendArgs(addr, src, key, "--verify-mode", "OnArrival", "--streams", "3", "--max-rate", "100M", "v")
	send := start(t, nil, args...)
	pollUntil(t, 30*time.Second, "half", func() bool { return send.exited() || receivedBytes(t, addr) >= total/2 })
	recv.kill()
	recv = start(t, nil, "receive", "--listen", addr, "--root", dst, "--secret-file", key)
	recv.waitListening()
	if err := send.wait(90 * time.Second); err != nil {
		t.Fatalf("send: %v\n%s", err, send.output())
	}
	assertSameTree(t, src, dst, "v")
	again := start(t, nil, args...)
	if err := again.wait(30 * time.Second); err != nil || !strings.Contains(again.stdoutText(), "this run sent 0 bytes") {
		t.Fatalf("second run: %v %q", err, again.stdoutText())
	}
}

// TestZeroCopyPaths: in-flight mode HeadersOnly moves blocks by sendfile (when the
// sender takes no digest) and splice at the receiver (when it verifies by read-back or
// not at all); each combination ends byte-identical, and so does memory to memory with
// the receiver splicing unchecked frames into /dev/null.
func TestZeroCopyPaths(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	makeTree(t, src, 23, mixed("z", 30, 3, 5<<20+4321))
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	addr := recv.waitListening()
	for i, v := range [][]string{{"--verify=false"}, {"--verify=true"}, {"--verify=true", "--verify-mode", "OnArrival"}} {
		t.Run(strings.Join(v, " "), func(t *testing.T) {
			emptyDir(t, dst)
			args := append(sendArgs(addr, src, key, "--in-flight", "HeadersOnly", "--streams", "3", "--job", fmt.Sprintf("zc%d", i)), v...)
			send := start(t, nil, append(args, "z")...)
			if err := send.wait(60 * time.Second); err != nil {
				t.Fatalf("send: %v\n%s", err, send.output())
			}
			assertSameTree(t, src, dst, "z")
		})
	}
	for _, check := range []bool{false, true} {
		mem := start(t, nil, "send", "--mem", "--to", addr, "--secret-file", key, "--streams", "2", "--bytes", "64M", "--mem-check="+strconv.FormatBool(check))
		if err := mem.wait(60 * time.Second); err != nil || !strings.Contains(mem.stdoutText(), `"bitsPerSecond"`) {
			t.Fatalf("memory to memory (check %v): %v\n%s", check, err, mem.output())
		}
	}
}

// TestEncryptedOnThePath: in-flight mode Encrypted, through a relay that records
// everything both ways: the job completes, and neither a file's name nor any run of
// its bytes crosses the path in the clear. A receiver that requires encryption refuses
// a job without it, naming why.
func TestEncryptedOnThePath(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	makeTree(t, src, 31, []fileSpec{{path: "e/secret-name-small.txt", size: 3000}, {path: "e/secret-name-large.bin", size: 3 << 20}})
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key, "--require-encryption")
	addr := recv.waitListening()
	var mu sync.Mutex
	var seen []byte
	via := startRelay(t, addr, func(conn int, up bool, dst io.Writer, src io.Reader) {
		buf := make([]byte, 32<<10)
		for {
			n, err := src.Read(buf)
			if n > 0 {
				mu.Lock()
				seen = append(seen, buf[:n]...)
				mu.Unlock()
				if _, werr := dst.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	})
	send := start(t, nil, sendArgs(via, src, key, "--in-flight", "Encrypted", "--streams", "2", "e")...)
	if err := send.wait(60 * time.Second); err != nil {
		t.Fatalf("send: %v\n%s", err, send.output())
	}
	assertSameTree(t, src, dst, "e")
	mu.Lock()
	defer mu.Unlock()
	if len(seen) < 3<<20 {
		t.Fatalf("the relay saw %d bytes: the data did not go through it", len(seen))
	}
	for _, name := range []string{"secret-name-small", "secret-name-large"} {
		if bytes.Contains(seen, []byte(name)) {
			t.Errorf("the name %s crossed the path in the clear", name)
		}
	}
	for _, p := range []string{"e/secret-name-small.txt", "e/secret-name-large.bin"} {
		content, _ := os.ReadFile(filepath.Join(src, p))
		for off := 0; off+64 <= len(content); off += len(content)/7 + 1 {
			if bytes.Contains(seen, content[off:off+64]) {
				t.Fatalf("64 bytes of %s at %d crossed the path in the clear", p, off)
			}
		}
	}
	clear := start(t, nil, sendArgs(addr, src, key, "--job", "clear", "e")...)
	if err := clear.wait(30 * time.Second); err == nil || !strings.Contains(clear.output(), "only encrypted") {
		t.Fatalf("a clear job to a receiver that requires encryption: %v\n%s", err, clear.output())
	}
}

func TestOverwritePolicies(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	makeTree(t, src, 2, []fileSpec{{path: "p/a.dat", size: 5000}, {path: "p/b.dat", size: 700 << 10}})
	os.MkdirAll(filepath.Join(dst, "p"), 0o755)
	os.WriteFile(filepath.Join(dst, "p", "a.dat"), []byte("old content"), 0o644)
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	addr := recv.waitListening()

	never := start(t, nil, sendArgs(addr, src, key, "--overwrite", "Never", "p")...)
	err := never.wait(30 * time.Second)
	if err == nil || !strings.Contains(never.output(), "destination file exists: p/a.dat (overwrite: Never)") {
		t.Fatalf("Never over an existing file: err %v, output:\n%s", err, never.output())
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "p", "a.dat")); string(b) != "old content" {
		t.Fatalf("Never replaced the file")
	}
	ifdiff := start(t, nil, sendArgs(addr, src, key, "--overwrite", "IfDifferent", "--job", "second", "p")...)
	if err := ifdiff.wait(30 * time.Second); err != nil {
		t.Fatalf("IfDifferent: %v\n%s", err, ifdiff.output())
	}
	assertSameTree(t, src, dst, "p")

	// IfDifferent without verification: the sender sends no digest, and the receiver
	// compares the existing file with the bytes that arrived — an identical file is
	// left as it is (the same inode), a different one replaced.
	inode := func(p string) uint64 {
		fi, err := os.Stat(filepath.Join(dst, p))
		if err != nil {
			t.Fatal(err)
		}
		return fi.Sys().(*syscall.Stat_t).Ino
	}
	same := inode("p/a.dat")
	os.WriteFile(filepath.Join(src, "p", "c.dat"), []byte("new"), 0o644)
	os.MkdirAll(filepath.Join(dst, "p"), 0o755)
	os.WriteFile(filepath.Join(dst, "p", "c.dat"), []byte("old"), 0o644)
	noverify := start(t, nil, sendArgs(addr, src, key, "--overwrite", "IfDifferent", "--verify=false", "--job", "third", "p")...)
	if err := noverify.wait(30 * time.Second); err != nil {
		t.Fatalf("IfDifferent without verification: %v\n%s", err, noverify.output())
	}
	if inode("p/a.dat") != same {
		t.Errorf("an identical file was written again")
	}
	if b, _ := os.ReadFile(filepath.Join(dst, "p", "c.dat")); string(b) != "new" {
		t.Errorf("a different file of the same size was kept: %q", b)
	}
}

// TestKill9Resume kills the sender or the receiver with SIGKILL at a random point of
// a transfer, restarts it, and checks that the destination ends byte-identical with
// nothing missing or extra. -soak runs many more rounds.
func TestKill9Resume(t *testing.T) {
	runs := 6
	if *soak {
		runs = 60
	}
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(seed, 7))
	for i := 0; i < runs; i++ {
		victim := []string{"sender", "receiver"}[i%2]
		frac := 0.05 + 0.85*rng.Float64()
		t.Run(fmt.Sprintf("%02d-%s-at-%.0f%%", i, victim, frac*100), func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			os.MkdirAll(dst, 0o755)
			total := makeTree(t, src, seed+uint64(i), mixed("set", 80, 3, 4<<20))
			key := writeSecret(t, dir, "key", secret)
			recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
			addr := recv.waitListening()
			args := sendArgs(addr, src, key, "--streams", "4", "--max-rate", "150M", "set")
			send := start(t, nil, args...)
			target := int64(frac * float64(total))
			pollUntil(t, 30*time.Second, "progress", func() bool { return send.exited() || receivedBytes(t, addr) >= target })
			if victim == "sender" {
				send.kill()
				send = start(t, nil, args...)
			} else {
				recv.kill()
				// Same address: the sender keeps retrying and carries on by itself.
				recv = start(t, nil, "receive", "--listen", addr, "--root", dst, "--secret-file", key)
				recv.waitListening()
			}
			if err := send.wait(90 * time.Second); err != nil {
				t.Fatalf("send after kill: %v\n%s", err, send.output())
			}
			assertSameTree(t, src, dst, "set")
		})
	}
}

var sentRE = regexp.MustCompile(`this run sent (\d+) bytes`)

// TestResumeSendsOnlyWhatIsMissing kills the sender half way through large files and
// checks that the second run sends about what was missing, not everything again.
func TestResumeSendsOnlyWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	total := makeTree(t, src, 3, []fileSpec{{path: "big/a", size: 8 << 20}, {path: "big/b", size: 8 << 20}, {path: "big/c", size: 8 << 20}, {path: "big/d", size: 8 << 20}})
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	addr := recv.waitListening()
	args := sendArgs(addr, src, key, "--streams", "2", "--max-rate", "48M", "big")
	send := start(t, nil, args...)
	var killedAt int64
	pollUntil(t, 30*time.Second, "half", func() bool { killedAt = receivedBytes(t, addr); return killedAt >= total/2 })
	send.kill()
	again := start(t, nil, args...)
	if err := again.wait(60 * time.Second); err != nil {
		t.Fatalf("resume: %v\n%s", err, again.output())
	}
	m := sentRE.FindStringSubmatch(again.stdoutText())
	if m == nil {
		t.Fatalf("no summary: %q", again.stdoutText())
	}
	sent, _ := strconv.ParseInt(m[1], 10, 64)
	// What was received but not yet journaled (at most about a second at 6 MB/s plus
	// the blocks in flight) may be sent again; verified blocks may not.
	slack := int64(8 << 20)
	if sent > total-killedAt+slack {
		t.Errorf("resumed run sent %d bytes; %d of %d were already received (allowed %d)", sent, killedAt, total, total-killedAt+slack)
	}
	assertSameTree(t, src, dst, "big")
}

// TestResumeAcrossAChunkSizeChange kills the sender half way through large files and
// resumes with another chunk size — what an upgrade that changes the default (256 to 64
// MiB) does to a job in flight. The receiver's journal holds chunks and blocks of the
// first chunking, whose indexes name other byte ranges in the second: none of them may
// stand for a chunk of the second, and every file must end at the source's bytes.
func TestResumeAcrossAChunkSizeChange(t *testing.T) {
	for _, sizes := range [][2]string{{"2M", "512K"}, {"512K", "2M"}, {"2M", "1536K"}} {
		t.Run(sizes[0]+"-then-"+sizes[1], func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			os.MkdirAll(dst, 0o755)
			// sizes that are no multiple of either chunk: last chunks of every length
			total := makeTree(t, src, 5, []fileSpec{{path: "big/a", size: 8<<20 + 1}, {path: "big/b", size: 7<<20 - 4095}, {path: "big/c", size: 6<<20 + 131073}})
			key := writeSecret(t, dir, "key", secret)
			recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
			addr := recv.waitListening()
			first := start(t, nil, sendArgs(addr, src, key, "--streams", "2", "--max-rate", "40M", "--chunk-size", sizes[0], "big")...)
			pollUntil(t, 30*time.Second, "half", func() bool { return first.exited() || receivedBytes(t, addr) >= total/2 })
			if first.exited() {
				t.Fatalf("the first run ended before half of the files arrived: nothing to resume\n%s", first.output())
			}
			first.kill()
			again := start(t, nil, sendArgs(addr, src, key, "--streams", "2", "--chunk-size", sizes[1], "big")...)
			if err := again.wait(60 * time.Second); err != nil {
				t.Fatalf("resume at another chunk size: %v\n%s", err, again.output())
			}
			assertSameTree(t, src, dst, "big")
			// The digests would repair a chunk resumed from the other chunking's blocks;
			// none may need it: those blocks are not taken for this chunking's.
			if m := repairsRE.FindStringSubmatch(again.stdoutText()); m != nil && m[1] != "0" {
				t.Errorf("the resumed run repaired %s chunks that failed their digest: it trusted the first chunking's records\n%s", m[1], again.stdoutText())
			}
		})
	}
}

var repairsRE = regexp.MustCompile(`(\d+) integrity failures and (\d+) stalls repaired`)

// TestBitFlipsAnywhere sends a dataset through a relay that flips single bits at random
// places of random connections, both ways — handshakes, headers, meta, data, tags — and
// checks that the job ends Complete with every file byte-identical and nothing else,
// the sender saying how many sessions it repaired; in both in-flight modes (data under
// the tag, or under a CRC32C).
func TestBitFlipsAnywhere(t *testing.T) {
	// HeadersOnly leaves data unchecked in flight: the end-to-end digest (verify, on
	// in these runs) is what catches a flipped data bit there.
	for _, mode := range []string{"Authenticated", "Checksum", "HeadersOnly", "Encrypted"} {
		t.Run(mode, func(t *testing.T) { bitFlipsAnywhere(t, mode) })
	}
}

func bitFlipsAnywhere(t *testing.T, mode string) {
	seed := uint64(time.Now().UnixNano())
	t.Logf("seed %d", seed)
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	makeTree(t, src, seed, mixed("c", 60, 3, 2<<20))
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	addr := recv.waitListening()
	// At most 6 landed flips: fewer than the 8 sessions in a row without progress that
	// would fail the job, so it must end Complete whatever they hit.
	fl := &flipper{rng: rand.New(rand.NewPCG(seed, 3)), p: 1, window: 256 << 10, perConn: 3, budget: 6, inHandshake: 1}
	via := startRelay(t, addr, fl.damage)
	send := start(t, nil, sendArgs(via, src, key, "--streams", "3", "--stall-timeout", "2s", "--in-flight", mode, "c")...)
	if err := send.wait(180 * time.Second); err != nil {
		t.Fatalf("send: %v\n%s\nreceiver:\n%s", err, send.output(), recv.output())
	}
	assertSameTree(t, src, dst, "c")
	m := repairsRE.FindStringSubmatch(send.stdoutText())
	if m == nil {
		t.Fatalf("the final line does not say what was repaired: %q", send.stdoutText())
	}
	fl.mu.Lock()
	flipped := fl.flipped
	fl.mu.Unlock()
	t.Logf("%d bits flipped; %s", flipped, m[0])
	if flipped < 3 {
		t.Fatalf("the relay flipped %d bits: too few for the test to prove anything", flipped)
	}
}

// TestTamperingRelayFailsTheJob puts a relay on the path that rewrites the content of
// every file and block the sender sends (it does not hold the secret, so it cannot
// forge the frames' tags). The job must fail saying why, and nothing it wrote may hold
// the relay's bytes.
func TestTamperingRelayFailsTheJob(t *testing.T) {
	for _, mode := range []string{"Authenticated", "Checksum", "HeadersOnly", "Encrypted"} {
		t.Run(mode, func(t *testing.T) { tamperingRelay(t, mode) })
	}
}

func tamperingRelay(t *testing.T, mode string) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	makeTree(t, src, 4, mixed("c", 20, 1, 2<<20))
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	addr := recv.waitListening()
	via := startRelay(t, addr, rewriter)
	send := start(t, nil, sendArgs(via, src, key, "--streams", "2", "--in-flight", mode, "c")...)
	err := send.wait(120 * time.Second)
	if err == nil || strings.Contains(send.output(), "Complete:") {
		t.Fatalf("a job whose data was rewritten on the way did not fail: %v\n%s", err, send.output())
	}
	if !strings.Contains(send.output(), "integrity") && !strings.Contains(send.output(), "digest mismatch") {
		t.Errorf("the failure does not say the data was damaged on the way:\n%s", send.output())
	}
	// Partial temporary files stay for a resume; every file at a final name must be
	// the source's.
	want := tree(t, src, "c")
	filepath.WalkDir(filepath.Join(dst, "c"), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(d.Name(), ".dtnpart") {
			return err
		}
		b, _ := os.ReadFile(p)
		sum := sha256.Sum256(b)
		rel, _ := filepath.Rel(filepath.Join(dst, "c"), p)
		if w, ok := want[rel]; !ok || w.sum != hex.EncodeToString(sum[:]) {
			t.Errorf("%q at the destination does not hold the source's bytes", rel)
		}
		return nil
	})
	// In flight (the tag, or the tagged CRC32C), or end to end (HeadersOnly: the digest).
	caught := metric(t, addr, "dtnflow_agent_integrity_failures_total") + metric(t, addr, "dtnflow_agent_verify_failures_total")
	if caught < 1 {
		t.Errorf("the receiver counted no integrity or verification failure")
	}
}

func TestRefusals(t *testing.T) {
	dir := t.TempDir()
	src, dst, outside := filepath.Join(dir, "src"), filepath.Join(dir, "dst"), filepath.Join(dir, "outside")
	os.MkdirAll(dst, 0o755)
	os.MkdirAll(outside, 0o755)
	makeTree(t, src, 5, []fileSpec{{path: "ok/a", size: 10}})
	os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o600)
	os.Symlink(filepath.Join(outside, "secret"), filepath.Join(src, "ok", "link-out"))
	key := writeSecret(t, dir, "key", secret)
	wrong := writeSecret(t, dir, "wrong", "another-secret-0123456789")
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	addr := recv.waitListening()

	t.Run("wrong secret", func(t *testing.T) {
		before := metric(t, addr, `dtnflow_agent_connections_refused_total{reason="auth"}`)
		os.Remove(filepath.Join(src, "ok", "link-out"))
		defer os.Symlink(filepath.Join(outside, "secret"), filepath.Join(src, "ok", "link-out"))
		s := start(t, nil, sendArgs(addr, src, wrong, "ok")...)
		if err := s.wait(30 * time.Second); err == nil || !strings.Contains(s.output(), "authentication refused") {
			t.Fatalf("a sender with the wrong secret: err %v\n%s", err, s.output())
		}
		if after := metric(t, addr, `dtnflow_agent_connections_refused_total{reason="auth"}`); after <= before {
			t.Errorf("refused connections not counted: %v -> %v", before, after)
		}
	})
	t.Run("not the protocol", func(t *testing.T) {
		before := metric(t, addr, `dtnflow_agent_connections_refused_total{reason="protocol"}`)
		c := exec.Command("bash", "-c", "exec 3<>/dev/tcp/"+strings.Replace(addr, ":", "/", 1)+"; printf 'SSH-2.0-x\\r\\n' >&3; cat <&3")
		c.Run()
		if after := metric(t, addr, `dtnflow_agent_connections_refused_total{reason="protocol"}`); after <= before {
			t.Errorf("a non-protocol connection was not refused and counted")
		}
	})
	t.Run("HTTP on the data port", func(t *testing.T) {
		// /status names paths and errors: it is not served where senders connect.
		before := metric(t, addr, `dtnflow_agent_connections_refused_total{reason="protocol"}`)
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		io.WriteString(c, "GET /status HTTP/1.1\r\nHost: x\r\nUser-Agent: curl/8\r\n\r\n")
		c.SetReadDeadline(time.Now().Add(20 * time.Second))
		if b, _ := io.ReadAll(c); len(b) != 0 {
			t.Errorf("the data port answered HTTP: %q", b)
		}
		if after := metric(t, addr, `dtnflow_agent_connections_refused_total{reason="protocol"}`); after <= before {
			t.Errorf("an HTTP request on the data port was not refused and counted")
		}
	})
	cases := map[string]struct {
		args []string
		want string
	}{
		"dotdot":           {[]string{"../outside"}, `"../outside"`},
		"absolute":         {[]string{filepath.Join(outside, "secret")}, "absolute paths are not allowed"},
		"symlink outside":  {[]string{"ok"}, `"ok/link-out" refused: a symlink leads outside the root`},
		"dest-path dotdot": {[]string{"--dest-path", "../x", "ok/a"}, `"../x"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			s := start(t, nil, sendArgs(addr, src, key, tc.args...)...)
			if err := s.wait(30 * time.Second); err == nil || !strings.Contains(s.output(), tc.want) {
				t.Fatalf("want a refusal naming %s; err %v\n%s", tc.want, err, s.output())
			}
		})
	}
	if _, err := os.Stat(filepath.Join(dir, "x")); err == nil {
		t.Fatal("something was written outside the destination root")
	}
	t.Run("destination symlink outside", func(t *testing.T) {
		os.Symlink(outside, filepath.Join(dst, "escape"))
		s := start(t, nil, sendArgs(addr, src, key, "--dest-path", "escape", "--job", "esc", "ok/a")...)
		if err := s.wait(30 * time.Second); err == nil || !strings.Contains(s.output(), "escape/ok/a") || !strings.Contains(s.output(), "outside the root") {
			t.Fatalf("want a refusal naming escape/ok/a; err %v\n%s", err, s.output())
		}
		if _, err := os.Stat(filepath.Join(outside, "ok")); err == nil {
			t.Fatal("the receiver followed a symlink out of its root")
		}
	})
}

// TestStripesJoinAndLeave runs a coordinator with one sender stripe, adds a second
// mid-transfer, kills the first, and checks that the second finishes everything.
func TestStripesJoinAndLeave(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	total := makeTree(t, src, 6, mixed("s", 60, 4, 3<<20))
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	raddr := recv.waitListening()
	co := start(t, nil, append([]string{"coordinate", "--listen", "127.0.0.1:0", "--root", src, "--secret-file", key, "--path", "s",
		"--streams", "2", "--max-rate", "80M", "--report-interval", "200ms"}, smallUnits...)...)
	caddr := co.waitListening()
	sender := func(k int) *proc {
		return start(t, nil, "send", "--stripe", strconv.Itoa(k), "--coordinator", caddr, "--receiver", raddr, "--root", src, "--secret-file", key, "--retry-for", "20s")
	}
	s0 := sender(0)
	pollUntil(t, 30*time.Second, "20%", func() bool { return receivedBytes(t, raddr) >= total/5 })
	s1 := sender(1)
	pollUntil(t, 30*time.Second, "stripe 1 joined", func() bool { return strings.Contains(co.output(), "A stripe joined\" stripe=1") })
	pollUntil(t, 30*time.Second, "50%", func() bool { return receivedBytes(t, raddr) >= total/2 })
	s0.kill()
	if err := co.wait(90 * time.Second); err != nil {
		t.Fatalf("coordinator: %v\n%s\nstripe 1:\n%s", err, co.output(), s1.output())
	}
	if err := s1.wait(30 * time.Second); err != nil {
		t.Fatalf("stripe 1: %v\n%s", err, s1.output())
	}
	if !strings.Contains(co.output(), "A stripe left") {
		t.Errorf("the coordinator did not notice stripe 0 leaving:\n%s", co.output())
	}
	assertSameTree(t, src, dst, "s")
}

// TestFullDisk writes to a small tmpfs: the job fails with a clear error naming the
// path, then completes once there is room, without losing what was verified.
func TestFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs as a full destination disk")
	}
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=6m", "tmpfs", dst).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s)", err, out)
	}
	defer exec.Command("umount", "-l", dst).Run()
	makeTree(t, src, 7, mixed("f", 30, 3, 3<<20))
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	addr := recv.waitListening()
	s := start(t, nil, sendArgs(addr, src, key, "f")...)
	err := s.wait(60 * time.Second)
	if err == nil || !strings.Contains(s.output(), "destination is full") || !strings.Contains(s.output(), "f/") {
		t.Fatalf("want a clear disk-full error naming a path; err %v\n%s", err, s.output())
	}
	if out, err := exec.Command("mount", "-o", "remount,size=64m", dst).CombinedOutput(); err != nil {
		t.Fatalf("growing the tmpfs: %v %s", err, out)
	}
	again := start(t, nil, sendArgs(addr, src, key, "f")...)
	if err := again.wait(60 * time.Second); err != nil {
		t.Fatalf("after freeing space: %v\n%s", err, again.output())
	}
	assertSameTree(t, src, dst, "f")
}

// TestCoordinatorReplaced kills the coordinator mid-transfer and starts a new one on
// the same address: the sender reconnects, the new coordinator learns what is done
// from the receiver's journal, and verified data is not sent again.
func TestCoordinatorReplaced(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	total := makeTree(t, src, 8, mixed("r", 100, 3, 3<<20))
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	raddr := recv.waitListening()
	coordArgs := func(addr string) []string {
		return append([]string{"coordinate", "--listen", addr, "--root", src, "--secret-file", key, "--path", "r",
			"--streams", "2", "--max-rate", "60M", "--report-interval", "200ms"}, smallUnits...)
	}
	co := start(t, nil, coordArgs("127.0.0.1:0")...)
	caddr := co.waitListening()
	s := start(t, nil, "send", "--stripe", "0", "--coordinator", caddr, "--receiver", raddr, "--root", src, "--secret-file", key, "--retry-for", "30s")
	pollUntil(t, 30*time.Second, "60%", func() bool { return receivedBytes(t, raddr) >= total*6/10 })
	co.kill()
	co = start(t, nil, coordArgs(caddr)...)
	co.waitListening()
	if err := co.wait(60 * time.Second); err != nil {
		t.Fatalf("new coordinator: %v\n%s", err, co.output())
	}
	if err := s.wait(30 * time.Second); err != nil {
		t.Fatalf("sender: %v\n%s", err, s.output())
	}
	assertSameTree(t, src, dst, "r")
	// Everything received over both coordinators' lives: the dataset plus at most what
	// was in flight and not yet journaled when the first one died.
	if got := receivedBytes(t, raddr); got > total+(6<<20) {
		t.Errorf("receiver got %d bytes for a %d-byte dataset: verified data was sent again", got, total)
	}
}

func TestPlanWhatIf(t *testing.T) {
	dir := t.TempDir()
	makeTree(t, filepath.Join(dir, "src"), 9, mixed("p", 50, 2, 1<<20))
	in := filepath.Join(dir, "in.json")
	os.WriteFile(in, []byte(`{"tuning": {"mode": "Auto", "limits": {"maxStreamsPerStripe": 16}},
 "samples": [{"streams":1,"bitsPerSecond":900000000,"sourceMillicores":300,"destinationMillicores":320},
             {"streams":2,"bitsPerSecond":1600000000,"sourceMillicores":450,"destinationMillicores":470},
             {"streams":4,"bitsPerSecond":2500000000,"sourceMillicores":700,"destinationMillicores":720},
             {"streams":8,"bitsPerSecond":2700000000,"sourceMillicores":900,"destinationMillicores":950}],
 "sourceNodes": [{"name": "a1", "nicBitsPerSecond": 10000000000}],
 "destinationNodes": [{"name": "b1", "nicBitsPerSecond": 10000000000}]}`), 0o644)
	p := start(t, nil, "plan", "--in", in, "--root", filepath.Join(dir, "src"), "--path", "p")
	if err := p.wait(30 * time.Second); err != nil {
		t.Fatalf("plan: %v\n%s", err, p.output())
	}
	var out struct {
		Plan struct {
			StreamsPerStripe int32  `json:"streamsPerStripe"`
			StripesPerNode   int32  `json:"stripesPerNode"`
			Hash             string `json:"hash"`
			SizeClasses      []struct {
				Class string `json:"class"`
				Files int64  `json:"files"`
			} `json:"sizeClasses"`
			Model *struct {
				Name string `json:"name"`
			} `json:"model"`
		} `json:"plan"`
		Directive struct {
			Mode string `json:"mode"`
		} `json:"directive"`
	}
	if err := json.Unmarshal([]byte(p.stdoutText()), &out); err != nil {
		t.Fatalf("plan output is not JSON: %v\n%s", err, p.stdoutText())
	}
	files := int64(0)
	for _, c := range out.Plan.SizeClasses {
		files += c.Files
	}
	if out.Plan.StreamsPerStripe < 2 || out.Plan.StreamsPerStripe > 16 || out.Plan.Hash == "" || out.Plan.Model == nil || files != 54 || out.Directive.Mode != "Transfer" {
		t.Fatalf("unexpected plan: %+v", out)
	}
	os.WriteFile(in, []byte(`{"tuning": {"mode": "Auto"}, "sampels": []}`), 0o644)
	bad := start(t, nil, "plan", "--in", in)
	if err := bad.wait(30 * time.Second); err == nil || !strings.Contains(bad.output(), `unknown field "sampels"`) {
		t.Fatalf("a misspelt field was not refused: %v\n%s", err, bad.output())
	}
}

var (
	phaseRE     = regexp.MustCompile(`"phase": "(\w+)"`)
	sampleLogRE = regexp.MustCompile(`msg="Probe sample" .*seconds=([0-9.]+) settled=(true|false)`)
)

// TestDirectives drives a coordinator the way the controller does, through its
// directive (here a file instead of the pod annotation): Probe takes samples with
// the optimizer's stepper (for a dataset of small files, no doubling of streams, and
// here no stripe stage: the directive allows one stripe), each ending as soon as its
// rate settles (well before the directive's sampleSeconds, its ceiling), and ends
// Probed, holding the data; Transfer moves it.
func TestDirectives(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	makeTree(t, src, 10, mixed("d", 30, 1, 2<<20))
	key := writeSecret(t, dir, "key", secret)
	directive := filepath.Join(dir, "directive.json")
	const sampleSeconds = 10
	os.WriteFile(directive, []byte(fmt.Sprintf(`{"generation": 1, "mode": "Probe", "probe": {"maxStreams": 4, "sampleSeconds": %d}}`, sampleSeconds)), 0o644)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	raddr := recv.waitListening()
	co := start(t, nil, append([]string{"coordinate", "--listen", "127.0.0.1:0", "--root", src, "--secret-file", key, "--path", "d",
		"--directive-file", directive, "--report-interval", "200ms"}, smallUnits...)...)
	caddr := co.waitListening()
	s := start(t, nil, "send", "--stripe", "0", "--coordinator", caddr, "--receiver", raddr, "--root", src, "--secret-file", key)
	phase := func() string {
		m := phaseRE.FindStringSubmatch(httpGet(t, caddr, "/status"))
		if m == nil {
			return ""
		}
		return m[1]
	}
	if !pollUntil(t, 60*time.Second, "Probed", func() bool { return phase() == "Probed" }) {
		t.Fatalf("phase %q; coordinator:\n%s", phase(), co.output())
	}
	var st struct {
		Samples []struct {
			Streams       int32 `json:"streams"`
			BitsPerSecond int64 `json:"bitsPerSecond"`
		} `json:"samples"`
		FilesDone int64 `json:"filesDone"`
		Dataset   struct {
			Files int64 `json:"files"`
		} `json:"dataset"`
	}
	if err := json.Unmarshal([]byte(httpGet(t, caddr, "/status")), &st); err != nil {
		t.Fatal(err)
	}
	// at loopback rates every file here is Small (≤ a twentieth of a second's bytes), a
	// dataset of small files (coord.SmallFiles): the first sample at one stream, no
	// doubling of streams, and no stripe stage with one stripe allowed
	if len(st.Samples) != 1 || st.Samples[0].Streams != 1 || st.Samples[0].BitsPerSecond <= 0 {
		t.Fatalf("probe samples %+v, want the one sample at one stream for small files", st.Samples)
	}
	// a settled sample ends early: on loopback within settle's smallest ceiling (2 s)
	// the coordinator records a sample, then logs it: the report may be a line ahead
	pollUntil(t, 5*time.Second, "every reported sample logged", func() bool { return len(sampleLogRE.FindAllStringSubmatch(co.output(), -1)) == len(st.Samples) })
	logged := sampleLogRE.FindAllStringSubmatch(co.output(), -1)
	if len(logged) != len(st.Samples) {
		t.Fatalf("%d samples logged, %d reported:\n%s", len(logged), len(st.Samples), co.output())
	}
	for _, m := range logged {
		if secs, err := strconv.ParseFloat(m[1], 64); err != nil || secs >= sampleSeconds {
			t.Errorf("a sample ran %s s, its whole ceiling of %d s: %s", m[1], sampleSeconds, m[0])
		}
	}
	if st.FilesDone != 0 || st.Dataset.Files != 33 {
		t.Fatalf("while probing: %d files done (want 0), dataset %d files (want 33)", st.FilesDone, st.Dataset.Files)
	}
	os.WriteFile(directive, []byte(`{"generation": 2, "mode": "Transfer", "streamsPerStripe": 3, "sizeClasses": [
		{"class": "Small", "maxBytes": 131072, "pipelining": 8, "parallelism": 1, "concurrency": 4},
		{"class": "Large", "pipelining": 1, "parallelism": 3, "concurrency": 2}]}`), 0o644)
	if err := co.wait(60 * time.Second); err != nil {
		t.Fatalf("coordinator: %v\n%s", err, co.output())
	}
	if err := s.wait(30 * time.Second); err != nil {
		t.Fatalf("sender: %v\n%s", err, s.output())
	}
	assertSameTree(t, src, dst, "d")
}

// TestDirectivesProbeOnData drives a coordinator as the controller drives a cold job:
// a Transfer directive with a probe moves the dataset at once on stripe 0 and takes the
// probe's samples as stretches of that transfer (each measured by the sender on its own
// streams), ending Probed with data already moved; the plan's Transfer directive then
// carries the running job to the end. The rate cap makes the dataset outlast the probe.
// After the streams the probe doubles the stripes: stripe 0's sender runs a helper
// stripe and the sample is the two stripes' aggregate (the job's cap, shared between
// them, keeps it at 80 Mbit/s: the doubling does not pay and the stage ends); the
// plan's directive stops the helper.
func TestDirectivesProbeOnData(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	makeTree(t, src, 12, mixed("d", 40, 3, 40<<20))
	key := writeSecret(t, dir, "key", secret)
	directive := filepath.Join(dir, "directive.json")
	os.WriteFile(directive, []byte(`{"generation": 1, "mode": "Transfer", "streamsPerStripe": 1, "stripes": 1, "maxBitsPerSecond": 80000000,
		"probe": {"maxStreams": 4, "sampleSeconds": 10, "maxStripes": 2}}`), 0o644)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	raddr := recv.waitListening()
	co := start(t, nil, append([]string{"coordinate", "--listen", "127.0.0.1:0", "--root", src, "--secret-file", key, "--path", "d",
		"--directive-file", directive, "--report-interval", "200ms"}, smallUnits...)...)
	caddr := co.waitListening()
	s := start(t, nil, "send", "--stripe", "0", "--coordinator", caddr, "--receiver", raddr, "--root", src, "--secret-file", key)
	var st struct {
		Phase   string `json:"phase"`
		Probe   string `json:"probe"`
		Samples []struct {
			Stripes       int32 `json:"stripes"`
			Streams       int32 `json:"streams"`
			BitsPerSecond int64 `json:"bitsPerSecond"`
		} `json:"samples"`
		BytesDone     int64      `json:"bytesDone"`
		BytesTotal    int64      `json:"bytesTotal"`
		FirstByteTime *time.Time `json:"firstByteTime"`
	}
	status := func() {
		if err := json.Unmarshal([]byte(httpGet(t, caddr, "/status")), &st); err != nil {
			t.Fatal(err)
		}
	}
	if !pollUntil(t, 60*time.Second, "Probed", func() bool { status(); return st.Probe == "Probed" }) {
		t.Fatalf("probe %q, phase %q; coordinator:\n%s\nsender:\n%s", st.Probe, st.Phase, co.output(), s.output())
	}
	if st.Phase != "Transferring" || st.BytesDone == 0 || st.BytesDone >= st.BytesTotal || st.FirstByteTime == nil {
		t.Fatalf("at the probe's end: phase %s, %d of %d bytes done, first byte %v; want the job's data moving since the first sample",
			st.Phase, st.BytesDone, st.BytesTotal, st.FirstByteTime)
	}
	if len(st.Samples) < 2 || st.Samples[0].Streams != 1 || st.Samples[1].Streams != 2 {
		t.Fatalf("samples %+v, want ExpSelection's 1, 2, …", st.Samples)
	}
	stripes := 0
	for _, sm := range st.Samples {
		// the cap holds the job at 80 Mbit/s, so every sample is a stretch of it, of
		// one stripe or of the two together
		if sm.BitsPerSecond < 40e6 || sm.BitsPerSecond > 100e6 {
			t.Errorf("sample %+v: want the job's capped 80 Mbit/s\nsender:\n%s\ncoordinator:\n%s", sm, s.output(), co.output())
		}
		if sm.Stripes == 2 {
			stripes++
		} else if sm.Stripes != 1 {
			t.Errorf("sample %+v: want one stripe or two", sm)
		}
	}
	if stripes != 1 || st.Samples[len(st.Samples)-1].Stripes != 2 {
		t.Errorf("samples %+v: want the stream stage, then one sample of two stripes that did not pay", st.Samples)
	}
	if !strings.Contains(s.output(), `msg="Starting a helper stripe for a probe sample of several stripes" stripe=1048576`) {
		t.Errorf("stripe 0's sender started no helper stripe:\n%s", s.output())
	}
	// the coordinator records a sample, then logs it: the report may be a line ahead
	onDataRE := regexp.MustCompile(`msg="Probe sample on the job's data"`)
	if !pollUntil(t, 5*time.Second, "every reported sample logged", func() bool { return len(onDataRE.FindAllString(co.output(), -1)) == len(st.Samples) }) {
		t.Errorf("%d samples on the job's data logged, %d reported", len(onDataRE.FindAllString(co.output(), -1)), len(st.Samples))
	}
	os.WriteFile(directive, []byte(`{"generation": 2, "mode": "Transfer", "streamsPerStripe": 3}`), 0o644)
	if err := co.wait(60 * time.Second); err != nil {
		t.Fatalf("coordinator: %v\n%s", err, co.output())
	}
	if err := s.wait(30 * time.Second); err != nil {
		t.Fatalf("sender: %v\n%s", err, s.output())
	}
	assertSameTree(t, src, dst, "d")
	if !strings.Contains(s.output(), `msg="Stopping a helper stripe" stripe=1048576`) {
		t.Errorf("the plan's directive did not stop the helper stripe:\n%s", s.output())
	}
}

// TestSendAuto runs send --auto end to end: by default the probe runs on the job's own
// data (the first stripe starts at once and the samples are stretches of the
// transfer), with --probe-mem memory to memory before the transfer starts. Either way
// the samples follow ExpSelection (1 then 2 streams …), a plan is made, and the data
// arrives intact. The rate cap keeps the transfer long enough to be probed.
func TestSendAuto(t *testing.T) {
	for name, c := range map[string]struct {
		extra     []string
		largeSize int // on data, enough to outlast the probe at the capped rate
	}{"on data": {nil, 48 << 20}, "memory to memory": {[]string{"--probe-mem"}, 4 << 20}} {
		extra := c.extra
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
			os.MkdirAll(dst, 0o755)
			makeTree(t, src, 21, mixed("a", 200, 4, c.largeSize))
			key := writeSecret(t, dir, "key", secret)
			recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
			addr := recv.waitListening()
			args := append([]string{"--auto", "--stripes", "2", "--max-streams", "8", "--max-rate", "160M"}, extra...)
			send := start(t, nil, sendArgs(addr, src, key, append(args, "a")...)...)
			if err := send.wait(120 * time.Second); err != nil {
				t.Fatalf("send --auto: %v\n%s", err, send.output())
			}
			assertSameTree(t, src, dst, "a")
			out := send.output()
			samples := regexp.MustCompile(`msg="Probe sample" phase=(\w+) stripes=1 streams=(\d+)`).FindAllStringSubmatch(out, -1)
			var streams []string
			for _, s := range samples {
				if s[1] == "Streams" || len(streams) == 0 {
					streams = append(streams, s[2])
				}
			}
			if len(streams) < 3 || streams[0] != "1" || streams[1] != "2" {
				t.Fatalf("probe samples %v, want ExpSelection's 1, 2, …\n%s", samples, out)
			}
			planned, joined := strings.Index(out, `msg=Planned`), strings.Index(out, `msg="A stripe joined"`)
			firstSample := strings.Index(out, `msg="Probe sample"`)
			if planned < 0 || joined < 0 {
				t.Fatalf("no plan or no stripe:\n%s", out)
			}
			if onData := extra == nil; onData != (joined < firstSample) {
				t.Errorf("on data %v, but the first stripe joined at %d and the first sample was logged at %d\n%s", onData, joined, firstSample, out)
			}
		})
	}
}
