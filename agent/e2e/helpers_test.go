// Package e2e runs the real dtnflow-agent binary on loopback: transfers, kill -9 and
// resume, corruption in flight, refusals, stripes joining and leaving, a full disk.
package e2e

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

var soak = flag.Bool("soak", false, "run the heavy variants (many more kill -9 runs)")

var agentBin string

func TestMain(m *testing.M) {
	flag.Parse()
	dir, err := os.MkdirTemp("", "dtnflow-e2e-bin")
	if err != nil {
		panic(err)
	}
	agentBin = filepath.Join(dir, "dtnflow-agent")
	args := []string{"build", "-o", agentBin}
	raceLogs := filepath.Join(dir, "races")
	if raceBuild {
		// `go test -race` checks the agents too. A race in an agent the test only
		// kills at its end (a receiver) would fail nothing, so every agent writes
		// its reports under raceLogs, and any report fails the run.
		args = append(args, "-race")
		os.Setenv("GORACE", "log_path="+filepath.Join(raceLogs, "agent"))
		if err := os.MkdirAll(raceLogs, 0o755); err != nil {
			panic(err)
		}
	}
	build := exec.Command("go", append(args, "../../cmd/dtnflow-agent")...)
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building dtnflow-agent:", err)
		os.Exit(1)
	}
	code := m.Run()
	if raceBuild && agentsRaced(raceLogs) {
		code = 1
	}
	os.RemoveAll(dir)
	os.Exit(code)
}

// agentsRaced prints the race reports the agents wrote under dir, and says whether
// there were any.
func agentsRaced(dir string) bool {
	reports, _ := filepath.Glob(filepath.Join(dir, "agent.*"))
	for _, r := range reports {
		b, _ := os.ReadFile(r)
		fmt.Fprintf(os.Stderr, "FAIL: an agent reported a data race (%s):\n%s\n", filepath.Base(r), b)
	}
	return len(reports) > 0
}

// proc is a running agent.
type proc struct {
	t      *testing.T
	cmd    *exec.Cmd
	mu     sync.Mutex
	out    bytes.Buffer // stdout + stderr
	stdout bytes.Buffer
	lines  chan string
	done   chan struct{}
	err    error
}

func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	args = withMetricsAddr(args)
	return startCmd(t, env, exec.Command(agentBin, args...))
}

// startLimited starts the agent with at most nofile file descriptors.
func startLimited(t *testing.T, nofile int, args ...string) *proc {
	t.Helper()
	args = withMetricsAddr(args)
	return startCmd(t, nil, exec.Command("prlimit", append([]string{fmt.Sprintf("--nofile=%d:%d", nofile, nofile), "--", agentBin}, args...)...))
}

func withMetricsAddr(args []string) []string {
	if len(args) > 0 && args[0] != "plan" && !slices.Contains(args, "--metrics-addr") {
		// /metrics and /status on a port of their own (never the default, which
		// parallel tests would fight over); waitListening learns it.
		args = append(args, "--metrics-addr", "127.0.0.1:0")
	}
	return args
}

func startCmd(t *testing.T, env []string, cmd *exec.Cmd) *proc {
	t.Helper()
	p := &proc{t: t, cmd: cmd, lines: make(chan string, 1024), done: make(chan struct{})}
	p.cmd.Env = append(os.Environ(), env...)
	stderr, _ := p.cmd.StderrPipe()
	stdout, _ := p.cmd.StdoutPipe()
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(stderr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
	}()
	go func() {
		defer wg.Done()
		b, _ := io.ReadAll(stdout)
		p.mu.Lock()
		p.stdout.Write(b)
		p.out.Write(b)
		p.mu.Unlock()
	}()
	go func() {
		wg.Wait()
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

func (p *proc) stdoutText() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stdout.String()
}

func (p *proc) kill() {
	if p.cmd.Process != nil {
		p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.done
}

// wait waits for the process to exit and returns its error.
func (p *proc) wait(timeout time.Duration) error {
	p.t.Helper()
	select {
	case <-p.done:
		return p.err
	case <-time.After(timeout):
		p.kill()
		p.t.Fatalf("%s did not finish within %v; output:\n%s", p.cmd.Args[1], timeout, p.output())
		return nil
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

var (
	listenRE  = regexp.MustCompile(`listen=(\S+)`)
	metricsRE = regexp.MustCompile(`metricsAddr=(\S+)`)
	// metricsOf maps an agent's protocol address to the address of its /metrics and
	// /status, as the agent last started on it logged.
	metricsOf sync.Map
)

// waitListening waits for the "Receiving"/"Coordinating" log line and returns the
// address; the /metrics address logged before it is remembered for httpGet.
func (p *proc) waitListening() string {
	p.t.Helper()
	deadline := time.After(20 * time.Second)
	var maddr string
	for {
		select {
		case l := <-p.lines:
			if m := metricsRE.FindStringSubmatch(l); m != nil {
				maddr = m[1]
			}
			if m := listenRE.FindStringSubmatch(l); m != nil {
				if maddr != "" {
					metricsOf.Store(m[1], maddr)
				}
				return m[1]
			}
		case <-p.done:
			p.t.Fatalf("agent exited before listening: %v\n%s", p.err, p.output())
		case <-deadline:
			p.t.Fatalf("agent did not start listening:\n%s", p.output())
		}
	}
}

func writeSecret(t *testing.T, dir, name, value string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(value+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// fileSpec is a file of a test dataset.
type fileSpec struct {
	path string
	size int
	mode os.FileMode
}

// site is a dataset written under src and a receiver serving dst, for the tests that
// send one dataset several ways.
type site struct{ src, dst, key, addr string }

func newSite(t *testing.T, seed uint64, files []fileSpec) site {
	t.Helper()
	dir := t.TempDir()
	s := site{src: filepath.Join(dir, "src"), dst: filepath.Join(dir, "dst")}
	os.MkdirAll(s.dst, 0o755)
	makeTree(t, s.src, seed, files)
	s.key = writeSecret(t, dir, "key", secret)
	recv := start(t, nil, "receive", "--listen", "127.0.0.1:0", "--root", s.dst, "--secret-file", s.key)
	s.addr = recv.waitListening()
	return s
}

// sendAll empties the destination (the receiver keeps its root open: empty it, do not
// replace it), sends sub with the extra flags, and checks that the job ends Complete
// with its nfiles files, each the source's, and nothing else.
func (s site) sendAll(t *testing.T, sub string, nfiles int, extra ...string) {
	t.Helper()
	emptyDir(t, s.dst)
	send := start(t, nil, sendArgs(s.addr, s.src, s.key, append(extra, sub)...)...)
	if err := send.wait(120 * time.Second); err != nil {
		t.Fatalf("send: %v\n%s", err, send.output())
	}
	assertSameTree(t, s.src, s.dst, sub)
	if want := fmt.Sprintf("Complete: %d files", nfiles); !strings.Contains(send.stdoutText(), want) {
		t.Errorf("summary %q, want %q", send.stdoutText(), want)
	}
}

// makeTree writes random files under root and returns their total size.
func makeTree(t *testing.T, root string, seed uint64, files []fileSpec) int64 {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var total int64
	for i, f := range files {
		p := filepath.Join(root, f.path)
		os.MkdirAll(filepath.Dir(p), 0o755)
		// Random to the last byte: a tail left zero would hide a receiver that drops a
		// file's last partial word and pads the file to its size.
		b := make([]byte, f.size)
		for j := 0; j < len(b); j += 8 {
			v := rng.Uint64()
			for k := 0; k < 8 && j+k < len(b); k++ {
				b[j+k] = byte(v >> (8 * k))
			}
		}
		mode := f.mode
		if mode == 0 {
			mode = 0o644
		}
		if err := os.WriteFile(p, b, mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		mt := time.Date(2024, 1, 2, 3, 4, 5, i*1000, time.UTC)
		os.Chtimes(p, mt, mt)
		total += int64(f.size)
	}
	return total
}

// mixed is a dataset of small files and a few large ones.
func mixed(prefix string, small, large int, largeSize int) []fileSpec {
	var out []fileSpec
	for i := 0; i < small; i++ {
		out = append(out, fileSpec{path: fmt.Sprintf("%s/small/d%d/f%03d.dat", prefix, i%4, i), size: 1 + (i*7919)%(96<<10)})
	}
	out = append(out, fileSpec{path: prefix + "/small/empty", size: 0}, fileSpec{path: prefix + "/private.key", size: 300, mode: 0o600})
	for i := 0; i < large; i++ {
		out = append(out, fileSpec{path: fmt.Sprintf("%s/large/L%d.bin", prefix, i), size: largeSize + i*12345})
	}
	return out
}

type treeEntry struct {
	sum   string
	mode  os.FileMode
	mtime time.Time
}

// nearestInSpan is t, or the nearest instant int64 nanoseconds since the epoch hold
// (1677-09-21 to 2262-04-11): the agent carries a file's mtime so, and a destination
// file gets that instant.
func nearestInSpan(t time.Time) time.Time {
	lo, hi := time.Unix(0, math.MinInt64), time.Unix(0, math.MaxInt64)
	switch {
	case t.Before(lo):
		return lo
	case t.After(hi):
		return hi
	}
	return t
}

// tree lists the regular files under root/sub with digest, mode and mtime. A name
// shaped as our temporary files is listed as any other: a source may hold one (the
// hostile names do), and at a destination it is a file the source does not have.
func tree(t *testing.T, root, sub string) map[string]treeEntry {
	t.Helper()
	out := map[string]treeEntry{}
	base := filepath.Join(root, sub)
	err := filepath.WalkDir(base, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == ".dtnflow" {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		fi, _ := d.Info()
		s := sha256.Sum256(b)
		rel, _ := filepath.Rel(base, p)
		out[rel] = treeEntry{sum: hex.EncodeToString(s[:]), mode: fi.Mode().Perm(), mtime: fi.ModTime()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// assertSameTree checks that dst/sub holds exactly the files of src/sub, byte for
// byte, with their modes and mtimes (nearestInSpan of the source's).
func assertSameTree(t *testing.T, src, dst, sub string) {
	t.Helper()
	a, b := tree(t, src, sub), tree(t, dst, sub)
	for p, e := range a {
		g, ok := b[p]
		switch {
		case !ok:
			t.Errorf("missing at the destination: %q", p)
		case g.sum != e.sum:
			t.Errorf("content differs: %q", p)
		case g.mode != e.mode || !g.mtime.Equal(nearestInSpan(e.mtime)):
			t.Errorf("%q: mode/mtime %v/%v, want %v/%v (source %v)", p, g.mode, g.mtime.UTC(), e.mode, nearestInSpan(e.mtime).UTC(), e.mtime.UTC())
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			t.Errorf("unexpected file at the destination: %q (a temporary file left behind: %v)", p, strings.HasSuffix(p, ".dtnpart"))
		}
	}
	if len(a) == 0 {
		t.Fatal("empty source tree")
	}
}

// httpGet gets path from the /metrics and /status address of the agent listening on
// addr.
func httpGet(t *testing.T, addr, path string) string {
	t.Helper()
	if m, ok := metricsOf.Load(addr); ok {
		addr = m.(string)
	}
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + path)
	if err != nil {
		return ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

// metricsAddr waits for the agent to log its /metrics address and returns it.
func (p *proc) metricsAddr() string {
	p.t.Helper()
	var addr string
	if !pollUntil(p.t, 20*time.Second, "metrics address", func() bool {
		m := metricsRE.FindStringSubmatch(p.output())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	}) {
		p.t.Fatalf("no metrics address logged:\n%s", p.output())
	}
	return addr
}

// metricAt reads one sample of a metric from the /metrics at maddr (0 if absent).
func metricAt(t *testing.T, maddr, series string) float64 {
	t.Helper()
	c := http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + maddr + "/metrics")
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, series+" ") {
			v, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(l, series)), 64)
			return v
		}
	}
	return 0
}

// metric reads one sample of a metric from /metrics (0 if absent).
func metric(t *testing.T, addr, series string) float64 {
	t.Helper()
	for _, l := range strings.Split(httpGet(t, addr, "/metrics"), "\n") {
		if strings.HasPrefix(l, series+" ") {
			v, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(l, series)), 64)
			return v
		}
	}
	return 0
}

var bytesRE = regexp.MustCompile(`"bytes":\s*(\d+)`)

// receivedBytes reads a receiver's byte counter from /status.
func receivedBytes(t *testing.T, addr string) int64 {
	m := bytesRE.FindStringSubmatch(httpGet(t, addr, "/status"))
	if m == nil {
		return -1
	}
	v, _ := strconv.ParseInt(m[1], 10, 64)
	return v
}

// pollUntil polls cond every few milliseconds until it holds or the deadline passes.
func pollUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) bool {
	t.Helper()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(timeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-deadline:
			t.Logf("gave up waiting for %s", what)
			return false
		}
	}
	return true
}
