package e2e

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRunsAreIncremental is what a recurring TransferJob's runs rely on: the same
// transfer run again (same paths and destination, so the same journal) sends exactly the
// files that are new or changed at the source, or gone from the destination, and
// nothing of the others, which the receiver's journal answers for without reading.
func TestRunsAreIncremental(t *testing.T) {
	for _, mode := range []string{"ReadBack", "OnArrival"} {
		t.Run(mode, func(t *testing.T) { runsAreIncremental(t, mode) })
	}
}

func runsAreIncremental(t *testing.T, verifyMode string) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	makeTree(t, src, 3, mixed("data", 60, 2, 3<<20))
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	addr := recv.waitListening()
	run := func(name string) int64 {
		t.Helper()
		return sendCountingBytes(t, name, sendArgs(addr, src, key, "--stripes", "2", "--streams", "2", "--verify-mode", verifyMode, "data")...)
	}
	run("run 1")
	assertSameTree(t, src, dst, "data")

	// Between runs: a small file rewritten, a large one grown, a file added at the
	// source, and a file lost at the destination.
	rewrite := func(rel string, b []byte) int64 {
		p := filepath.Join(src, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		mt := time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)
		os.Chtimes(p, mt, mt)
		return int64(len(b))
	}
	want := rewrite("data/small/d1/f001.dat", []byte("a new version of a small file"))
	big, err := os.ReadFile(filepath.Join(src, "data/large/L1.bin"))
	if err != nil {
		t.Fatal(err)
	}
	want += rewrite("data/large/L1.bin", append(big, make([]byte, 100_000)...))
	want += rewrite("data/new/added.dat", make([]byte, 12345))
	lost, err := os.Stat(filepath.Join(dst, "data/large/L0.bin"))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dst, "data/large/L0.bin"))
	want += lost.Size()

	if sent := run("run 2"); sent != want {
		t.Errorf("run 2 sent %d bytes, want %d: the changed, added and lost files and nothing else", sent, want)
	}
	assertSameTree(t, src, dst, "data")
	if sent := run("run 3"); sent != 0 {
		t.Errorf("run 3, with nothing changed, sent %d bytes", sent)
	}
}

// TestAnotherDigestOnTheNextRun: the receivers' journals hold each final file's digest
// under the run's algorithm, and a later run of the job may name another (the default
// became BLAKE3 after SHA-256). A file the journal holds as final is neither sent again
// nor compared with a digest of the other algorithm; a file changed at the source is
// sent and verified under the new one.
func TestAnotherDigestOnTheNextRun(t *testing.T) {
	site := newSite(t, 5, mixed("data", 40, 2, 3<<20))
	run := func(checksum string) int64 {
		t.Helper()
		return sendCountingBytes(t, checksum, sendArgs(site.addr, site.src, site.key, "--checksum", checksum, "--chunk-size", "1MiB", "data")...)
	}
	run("SHA256")
	assertSameTree(t, site.src, site.dst, "data")
	changed := filepath.Join(site.src, "data/large/L0.bin")
	big, err := os.ReadFile(changed)
	if err != nil {
		t.Fatal(err)
	}
	big[len(big)/2] ^= 0xff
	mt := time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC)
	if err := os.WriteFile(changed, big, 0o644); err != nil {
		t.Fatal(err)
	}
	os.Chtimes(changed, mt, mt)
	if sent := run("BLAKE3"); sent != int64(len(big)) {
		t.Errorf("the BLAKE3 run sent %d bytes, want the changed file's %d and nothing else", sent, len(big))
	}
	assertSameTree(t, site.src, site.dst, "data")
	if sent := run("MD5"); sent != 0 {
		t.Errorf("the MD5 run, with nothing changed, sent %d bytes", sent)
	}
}

// sendCountingBytes runs a send that must end Complete and returns how many bytes its
// summary says this run sent.
func sendCountingBytes(t *testing.T, name string, args ...string) int64 {
	t.Helper()
	p := start(t, nil, args...)
	if err := p.wait(60 * time.Second); err != nil {
		t.Fatalf("%s: %v\n%s", name, err, p.output())
	}
	m := regexp.MustCompile(`this run sent ([0-9]+) bytes`).FindStringSubmatch(p.stdoutText())
	if m == nil {
		t.Fatalf("%s: no summary in %q", name, p.stdoutText())
	}
	n, _ := strconv.ParseInt(m[1], 10, 64)
	return n
}

// TestDestinationDirectoriesChangedBetweenRuns: a receiver that stays up across runs
// (a site's long-lived receive daemon) while someone reorganises the destination
// between them. A directory moved aside and another removed must be written again at
// their names: the receiver may not keep writing into, or counting as done, a
// directory it opened in an earlier run that is no longer at that name.
func TestDestinationDirectoriesChangedBetweenRuns(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "src"), filepath.Join(dir, "dst")
	os.MkdirAll(dst, 0o755)
	makeTree(t, src, 5, mixed("data", 60, 1, 2<<20))
	key := writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", dst, "--secret-file", key)
	addr := recv.waitListening()
	run := func(name string) {
		t.Helper()
		p := start(t, nil, sendArgs(addr, src, key, "--streams", "2", "data")...)
		if err := p.wait(60 * time.Second); err != nil {
			t.Fatalf("%s: %v\n%s", name, err, p.output())
		}
	}
	run("run 1")
	assertSameTree(t, src, dst, "data")

	moved := filepath.Join(dir, "moved-d1")
	if err := os.Rename(filepath.Join(dst, "data/small/d1"), moved); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dst, "data/small/d2")); err != nil {
		t.Fatal(err)
	}
	run("run 2")
	assertSameTree(t, src, dst, "data")
	// What was moved aside is left as it was: nothing written into it again.
	if a, b := tree(t, src, "data/small/d1"), tree(t, dir, "moved-d1"); len(a) != len(b) {
		t.Errorf("the directory moved aside holds %d files, it had %d", len(b), len(a))
	}
}

// TestAnotherVersionRenamedOntoAFinalFile: after a job, another writer renames its own
// version of two files — same size, same mtime, other bytes — onto their final names
// (a second job writing the same tree, a restore). Size and mtime cannot tell; the
// inode each final record keeps does. The next run sends both again, ends Complete with
// the source's bytes, and only what was replaced is sent.
func TestAnotherVersionRenamedOntoAFinalFile(t *testing.T) {
	files := []fileSpec{{path: "v/small.txt", size: 5000}, {path: "v/large.bin", size: 3 << 20}, {path: "v/kept.txt", size: 7000}}
	s := newSite(t, 41, files)
	s.sendAll(t, "v", len(files))
	for _, p := range []string{"v/small.txt", "v/large.bin"} {
		fi, err := os.Stat(filepath.Join(s.src, p))
		if err != nil {
			t.Fatal(err)
		}
		other := filepath.Join(s.dst, "v", "other-version")
		if err := os.WriteFile(other, bytes.Repeat([]byte{'X'}, int(fi.Size())), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(other, fi.ModTime(), fi.ModTime()); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(other, filepath.Join(s.dst, p)); err != nil {
			t.Fatal(err)
		}
	}
	again := start(t, nil, sendArgs(s.addr, s.src, s.key, "v")...)
	if err := again.wait(60 * time.Second); err != nil {
		t.Fatalf("the run after the replacement: %v\n%s", err, again.output())
	}
	assertSameTree(t, s.src, s.dst, "v")
	if want := fmt.Sprintf("this run sent %d bytes", 5000+3<<20); !strings.Contains(again.stdoutText(), want) {
		t.Errorf("summary %q, want %q: the two replaced files and nothing else", again.stdoutText(), want)
	}
}
