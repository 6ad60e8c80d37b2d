package e2e

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSourceChangedWhileRead rewrites part of a large file while its only chunk is
// being read and sent: the sender must notice that the file changed under it and fail
// the job naming the file, rather than verify (and complete with) a copy that is
// neither the version it listed nor the new one. (Found by the chaos suite's
// source-changed fault on the local cluster.)
func TestSourceChangedWhileRead(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	const size = 8 << 20
	makeTree(t, src, 31, []fileSpec{{path: "c/big.bin", size: size}, {path: "c/small.txt", size: 100}})
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	addr := recv.waitListening()
	// One chunk of 128 KiB blocks read as they are sent, at 16 Mbit/s: 4 s for the file.
	send := start(t, nil, "send", "--to", addr, "--root", src, "--secret-file", key, "--retry-for", "30s",
		"--block-size", "128K", "--max-rate", "16M", "--streams", "1", "c")
	pollUntil(t, 30*time.Second, "a quarter of the file received", func() bool { return send.exited() || receivedBytes(t, addr) >= size/4 })
	if send.exited() {
		t.Fatalf("the transfer ended before the file could be changed:\n%s", send.output())
	}
	f, err := os.OpenFile(filepath.Join(src, "c/big.bin"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte(strings.Repeat("changed!", 512)), size*3/4); err != nil {
		t.Fatal(err)
	}
	f.Close()
	err = send.wait(60 * time.Second)
	out := send.output()
	if err == nil {
		t.Fatalf("the job completed although big.bin changed while it was read:\n%s", out)
	}
	if !strings.Contains(out, "changed") || !strings.Contains(out, "c/big.bin") {
		t.Errorf("the failure does not say that c/big.bin changed:\n%s", out)
	}
	if _, err := os.Stat(filepath.Join(dst, "c/big.bin")); err == nil {
		t.Errorf("a copy of the changed file was made final at the destination")
	}
}
