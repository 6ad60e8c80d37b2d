// Command peers benchmarks dtnflow-agent side by side with iperf3, GridFTP
// (globus-gridftp-server + globus-url-copy) and, for encryption, OpenSSH's scp and sftp
// (aes128-gcm) on loopback, in one run: memory to memory
// at several stream counts, one large file, and many small files, each with and
// without end-to-end verification. It prints a table and writes JSON lines.
//
// Run it through `make bench-peers`, which builds the agent, installs the peers and
// holds the machine's benchmark lock.
package main

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dtnflow/dtnflow/test/bench/agentbuild"
	"github.com/dtnflow/dtnflow/test/dataset"
)

var (
	agent      = flag.String("agent", "bin/dtnflow-agent", "dtnflow-agent binary")
	workDir    = flag.String("work", "/dev/shm/dtnflow-bench", "scratch directory (tmpfs, so that the disk is not what is measured)")
	jsonOut    = flag.String("json", ".cache/bench-peers.jsonl", "JSON lines output")
	memBytes   = flag.Int64("mem-bytes", 4<<30, "bytes per memory-to-memory run")
	bigBytes   = flag.Int64("big-bytes", 2<<30, "size of the large file")
	smallCount = flag.Int("small-count", 2000, "number of small files")
	smallSize  = flag.Int("small-size", 64<<10, "size of each small file")
	streamList = flag.String("streams", "1,4,8", "stream counts for memory to memory")
	fileStream = flag.Int("file-streams", 4, "streams for the file cases (both tools)")
	cc         = flag.Int("cc", 4, "concurrency for the small files (both tools)")
	repeat     = flag.Int("repeat", 3, "runs of each case; the median (by time) is reported")
	cases      = flag.String("cases", "mem,file,small", "which cases to run: mem (memory to memory), file (the large file), small (the small files)")
	verifyList = flag.String("verify", "false,true", "the verify settings of the file cases")
	withSSH    = flag.Bool("ssh", true, "also run OpenSSH's scp and sftp (aes128-gcm, to an sshd of the run's own on loopback) in the file case, beside dtnflow's Encrypted rows")
	baseline   = flag.String("baseline", "", "another dtnflow-agent binary (an earlier commit) to run beside -agent in every dtnflow case, with its own receiver: the table adds dtnflow ÷ baseline")
	baseAll    = flag.Bool("baseline-every-row", false, "run the baseline beside every dtnflow row, in-flight modes included (a baseline that knows every flag the rows pass); without it, only beside the plain rows")
)

// Result is one row of the table and one JSON line.
type Result struct {
	Tool            string  `json:"tool"`
	Case            string  `json:"case"`
	Streams         int     `json:"streams"`
	Verify          bool    `json:"verify"`
	Seconds         float64 `json:"seconds"`
	BitsPerSecond   int64   `json:"bitsPerSecond"`
	FilesPerSecond  float64 `json:"filesPerSecond"`
	CPUSecondsPerGB float64 `json:"cpuSecondsPerGB"`
	// ClientCPUSecondsPerGB and ServerCPUSecondsPerGB split it: for dtnflow the
	// client is the sender and the server the receiver (what each side's CPU model
	// is fitted from).
	ClientCPUSecondsPerGB float64 `json:"clientCpuSecondsPerGB"`
	ServerCPUSecondsPerGB float64 `json:"serverCpuSecondsPerGB"`
	Command               string  `json:"command"`
	// Build is the digest of the dtnflow-agent binary a dtnflow or baseline row ran
	// (agentbuild.Info.Digest): which build the figures are of.
	Build string `json:"build,omitempty"`
}

func main() {
	flag.Parse()
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "bench-peers:", err)
		os.Exit(1)
	}
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	must(err)
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// server is a long-running peer whose CPU we read from /proc.
type server struct {
	cmd *exec.Cmd
}

func startServer(name string, args ...string) *server {
	c := exec.Command(name, args...)
	c.Stdout, c.Stderr = io.Discard, io.Discard
	must(c.Start())
	return &server{cmd: c}
}

func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// cpu is the server's CPU seconds including reaped children (GridFTP forks a child
// per session); it first waits for live children to exit and be reaped.
func (s *server) cpu() float64 {
	pid := s.cmd.Process.Pid
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && len(children(pid)) > 0 {
		time.Sleep(20 * time.Millisecond)
	}
	return procCPU(pid, true)
}

func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p))
		if err != nil {
			continue
		}
		f := statFields(b)
		if len(f) > 2 && f[1] == strconv.Itoa(pid) {
			out = append(out, p)
		}
	}
	return out
}

// statFields returns the fields of /proc/pid/stat after the command name.
func statFields(b []byte) []string {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

func procCPU(pid int, withChildren bool) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	f := statFields(b)
	// fields after ')': state(0) ppid(1) ... utime(11) stime(12) cutime(13) cstime(14)
	var ticks float64
	n := 13
	if withChildren {
		n = 15
	}
	for i := 11; i < n; i++ {
		v, _ := strconv.ParseFloat(f[i], 64)
		ticks += v
	}
	return ticks / 100
}

// client runs a command to completion and returns wall seconds, its CPU seconds and
// its stdout.
func client(name string, args ...string) (float64, float64, string, error) {
	c := exec.Command(name, args...)
	var out, errb bytes.Buffer
	c.Stdout, c.Stderr = &out, &errb
	t0 := time.Now()
	err := c.Run()
	el := time.Since(t0).Seconds()
	if err != nil {
		return 0, 0, "", fmt.Errorf("%s %s: %v\n%s%s", name, strings.Join(args, " "), err, out.String(), errb.String())
	}
	ru := c.ProcessState.SysUsage().(*syscall.Rusage)
	cpu := float64(ru.Utime.Sec) + float64(ru.Utime.Usec)/1e6 + float64(ru.Stime.Sec) + float64(ru.Stime.Usec)/1e6
	return el, cpu, out.String(), nil
}

func writeRandom(p string, n int64) {
	f, err := os.Create(p)
	must(err)
	buf := make([]byte, 4<<20)
	rand.Read(buf)
	for n > 0 {
		k := min(int64(len(buf)), n)
		_, err := f.Write(buf[:k])
		must(err)
		buf[0]++ // keep blocks distinct
		n -= k
	}
	must(f.Close())
}

func run() error {
	for _, b := range []string{*agent, "iperf3", "globus-url-copy", "globus-gridftp-server"} {
		if b == "" {
			continue
		}
		if _, err := exec.LookPath(b); err != nil {
			return fmt.Errorf("%s not found (make bench-peers installs the peers)", b)
		}
	}
	agentPath, _ := filepath.Abs(*agent)
	agentInfo, err := agentbuild.Describe(agentPath, agentbuild.RepoAbove())
	if err != nil {
		return err
	}
	agentInfo.Report(os.Stderr, "dtnflow-agent")
	os.RemoveAll(*workDir)
	src := filepath.Join(*workDir, "src")
	must(os.MkdirAll(filepath.Join(src, "small"), 0o755))
	dtnDst := filepath.Join(*workDir, "dst-dtnflow")
	gftpDst := filepath.Join(*workDir, "dst-gridftp")
	baseDst := filepath.Join(*workDir, "dst-baseline")
	must(os.MkdirAll(dtnDst, 0o755))
	must(os.MkdirAll(gftpDst, 0o755))
	must(os.MkdirAll(baseDst, 0o755))
	defer os.RemoveAll(*workDir)
	fmt.Fprintln(os.Stderr, "Writing the dataset under", *workDir)
	writeRandom(filepath.Join(src, "big.bin"), *bigBytes)
	chunk := make([]byte, *smallSize)
	for i := 0; i < *smallCount; i++ {
		rand.Read(chunk)
		must(os.WriteFile(filepath.Join(src, "small", fmt.Sprintf("f%05d", i)), chunk, 0o644))
	}
	exec.Command("chmod", "-R", "a+rX", *workDir).Run()
	os.Chmod(filepath.Dir(*workDir), 0o1777|os.ModeSticky)
	secret := filepath.Join(*workDir, "secret")
	must(os.WriteFile(secret, []byte("bench-secret-0123456789abcdef\n"), 0o600))

	// Servers.
	dtnPort, iperfPort, gftpPort := freePort(), freePort(), freePort()
	dtnAddr := fmt.Sprintf("127.0.0.1:%d", dtnPort)
	recv := startServer(agentPath, "receive", "--listen", dtnAddr, "--root", dtnDst, "--secret-file", secret)
	defer recv.stop()
	iperf := startServer("iperf3", "-s", "-p", strconv.Itoa(iperfPort))
	defer iperf.stop()
	gftp := startServer("globus-gridftp-server", "-aa", "-anonymous-user", "nobody", "-p", strconv.Itoa(gftpPort), "-d", "error", "-control-interface", "127.0.0.1", "-data-interface", "127.0.0.1")
	defer gftp.stop()
	for _, p := range []int{dtnPort, iperfPort, gftpPort} {
		if err := waitPort(p); err != nil {
			return err
		}
	}
	gftpURL := fmt.Sprintf("ftp://127.0.0.1:%d", gftpPort)
	sshDst := filepath.Join(*workDir, "dst-ssh")
	must(os.MkdirAll(sshDst, 0o755))
	var ssh *sshPeer
	if *withSSH {
		var err error
		if ssh, err = startSSH(filepath.Join(*workDir, "ssh")); err != nil {
			return err
		}
		defer ssh.srv.stop()
	}
	// The baseline agent may speak an older protocol: it sends to a receiver of its own.
	var basePath, baseAddr string
	var baseRecv *server
	var baseInfo agentbuild.Info
	if *baseline != "" {
		basePath, _ = filepath.Abs(*baseline)
		if baseInfo, err = agentbuild.Describe(basePath, ""); err != nil {
			return err
		}
		baseInfo.Report(os.Stderr, "baseline")
		basePort := freePort()
		baseAddr = fmt.Sprintf("127.0.0.1:%d", basePort)
		baseRecv = startServer(basePath, "receive", "--listen", baseAddr, "--root", baseDst, "--secret-file", secret)
		defer baseRecv.stop()
		if err := waitPort(basePort); err != nil {
			return err
		}
	}
	var results []Result
	add := func(r Result) {
		results = append(results, r)
		fmt.Fprintf(os.Stderr, "  %-8s %-15s streams %d verify %-5v %8.2fs %7.2f Gbit/s %7.0f files/s %6.2f CPU s/GB\n", r.Tool, r.Case, r.Streams, r.Verify, r.Seconds, float64(r.BitsPerSecond)/1e9, r.FilesPerSecond, r.CPUSecondsPerGB)
	}
	// A case runs its contenders in turn, round after round (so that a noisy moment
	// hits all of them), and reports each one's median run.
	type contender struct {
		tool, name string
		streams    int
		srv        *server
		cmd        func() []string
		prep       func()
		parse      func(out string, wall float64) float64
		skip       bool // not in this case (a row that only means something with verify on)
		// copyOf is the source path (under src) the run must leave at its destination,
		// byte for byte and nothing else beside it; checked after every run, outside its
		// time, so that a row's figure is never that of a copy that did not happen.
		copyOf string
	}
	copies := &copyChecker{src: src}
	// destinationOf is where a server's runs write.
	destinationOf := func(srv *server) string {
		switch {
		case srv == recv:
			return dtnDst
		case srv == gftp:
			return gftpDst
		case baseRecv != nil && srv == baseRecv:
			return baseDst
		default:
			return sshDst
		}
	}
	// withBaseline adds, after each dtnflow contender, the same command run by the
	// baseline binary against its own receiver.
	withBaseline := func(cs ...contender) []contender {
		if basePath == "" {
			return cs
		}
		var out []contender
		for _, c := range cs {
			out = append(out, c)
			if c.tool != "dtnflow" || !*baseAll && strings.Contains(c.name, "+") && !strings.HasSuffix(c.name, "+tag") {
				continue // the baseline may not know these flags: such rows compare with its plain row
			}
			b := c
			b.tool, b.srv = "baseline", baseRecv
			cmd := c.cmd
			b.cmd = func() []string {
				args := append([]string(nil), cmd()...)
				args[0] = basePath
				for i, a := range args {
					if a == dtnAddr {
						args[i] = baseAddr
					}
				}
				return args
			}
			out = append(out, b)
		}
		return out
	}

	runCase := func(verify bool, bytes int64, files int, all ...contender) error {
		var cs []contender
		for _, c := range all {
			if !c.skip {
				cs = append(cs, c)
			}
		}
		cs = withBaseline(cs...)
		runs := make([][]Result, len(cs))
		for round := 0; round < *repeat; round++ {
			for i, c := range cs {
				if c.prep != nil {
					c.prep()
					if err := warmMemory(*workDir, bytes); err != nil {
						return err
					}
				}
				cmd := c.cmd()
				s0 := c.srv.cpu()
				wall, ccpu, out, err := client(cmd[0], cmd[1:]...)
				if err != nil {
					return err
				}
				secs := wall
				if c.parse != nil {
					secs = c.parse(out, wall)
				}
				scpu := c.srv.cpu() - s0
				if c.copyOf != "" {
					if err := copies.check(c.copyOf, destinationOf(c.srv)); err != nil {
						return fmt.Errorf("%s %s (%s): %w", c.tool, c.name, strings.Join(cmd, " "), err)
					}
				}
				r := Result{Tool: c.tool, Case: c.name, Streams: c.streams, Verify: verify, Seconds: secs, BitsPerSecond: int64(float64(bytes) * 8 / secs),
					CPUSecondsPerGB: (ccpu + scpu) / (float64(bytes) / 1e9), Command: strings.Join(cmd, " "),
					ClientCPUSecondsPerGB: ccpu / (float64(bytes) / 1e9), ServerCPUSecondsPerGB: scpu / (float64(bytes) / 1e9)}
				if files > 0 {
					r.FilesPerSecond = float64(files) / secs
				}
				switch c.tool {
				case "dtnflow":
					r.Build = agentInfo.Digest
				case "baseline":
					r.Build = baseInfo.Digest
				}
				runs[i] = append(runs[i], r)
			}
		}
		for _, rs := range runs {
			sort.Slice(rs, func(i, j int) bool { return rs[i].Seconds < rs[j].Seconds })
			add(rs[len(rs)/2])
		}
		return nil
	}
	fixed := func(cmd ...string) func() []string { return func() []string { return cmd } }
	agentSeconds := func(out string, wall float64) float64 {
		var r struct{ Seconds float64 }
		json.Unmarshal([]byte(out), &r)
		return r.Seconds
	}

	streams := parseList(*streamList)
	if !strings.Contains(*cases, "mem") {
		streams = nil
	}
	mem := strconv.FormatInt(*memBytes, 10)
	fmt.Fprintln(os.Stderr, "Memory to memory")
	for _, n := range streams {
		ns := strconv.Itoa(n)
		err := runCase(false, *memBytes, 0,
			contender{tool: "dtnflow", name: "mem-to-mem", streams: n, srv: recv, parse: agentSeconds,
				cmd: fixed(agentPath, "send", "--mem", "--to", dtnAddr, "--secret-file", secret, "--streams", ns, "--bytes", mem)},
			contender{tool: "dtnflow", name: "mem-to-mem+tag", streams: n, srv: recv, parse: agentSeconds,
				cmd: fixed(agentPath, "send", "--mem", "--mem-check", "--to", dtnAddr, "--secret-file", secret, "--streams", ns, "--bytes", mem)},
			contender{tool: "dtnflow", name: "mem-to-mem+enc", streams: n, srv: recv, parse: agentSeconds,
				cmd: fixed(agentPath, "send", "--mem", "--in-flight", "Encrypted", "--to", dtnAddr, "--secret-file", secret, "--streams", ns, "--bytes", mem)},
			contender{tool: "iperf3", name: "mem-to-mem", streams: n, srv: iperf,
				cmd: fixed("iperf3", "-c", "127.0.0.1", "-p", strconv.Itoa(iperfPort), "-P", ns, "-n", mem, "-J"),
				parse: func(out string, wall float64) float64 {
					var r struct {
						End struct {
							SumReceived struct {
								Seconds float64 `json:"seconds"`
							} `json:"sum_received"`
						} `json:"end"`
					}
					json.Unmarshal([]byte(out), &r)
					if r.End.SumReceived.Seconds > 0 {
						return r.End.SumReceived.Seconds
					}
					return wall
				}},
			contender{tool: "gridftp", name: "mem-to-mem", streams: n, srv: gftp,
				cmd: fixed("globus-url-copy", "-p", ns, "-fast", "-len", mem, gftpURL+"/dev/zero", "file:///dev/null")})
		if err != nil {
			return err
		}
	}

	fs := strconv.Itoa(*fileStream)
	ccs := strconv.Itoa(*cc)
	run := 0
	job := ""
	fresh := func() {
		run++
		job = fmt.Sprintf("run%d", run)
		// Empty the destinations but keep the directories: the receiver holds its root open.
		for _, d := range []string{dtnDst, gftpDst, baseDst, sshDst} {
			ents, _ := os.ReadDir(d)
			for _, e := range ents {
				os.RemoveAll(filepath.Join(d, e.Name()))
			}
		}
	}
	for _, vs := range strings.Split(*verifyList, ",") {
		verify, err := strconv.ParseBool(strings.TrimSpace(vs))
		if err != nil {
			return fmt.Errorf("-verify: %w", err)
		}
		v := strconv.FormatBool(verify)
		dtn := func(path string, extra ...string) func() []string {
			return func() []string {
				return append([]string{agentPath, "send", "--to", dtnAddr, "--root", src, "--secret-file", secret, "--verify=" + v, "--job", job,
					"--streams", fs, "--concurrency", ccs, path}, extra...)
			}
		}
		gverify := []string{}
		if verify {
			gverify = []string{"-verify-checksum"}
		}
		if strings.Contains(*cases, "file") {
			fmt.Fprintf(os.Stderr, "One %d-byte file, verify %v\n", *bigBytes, verify)
			err = runCase(verify, *bigBytes, 0,
				contender{tool: "dtnflow", name: "file-2GiB", streams: *fileStream, srv: recv, prep: fresh, copyOf: "big.bin", cmd: dtn("big.bin")},
				contender{tool: "dtnflow", name: "file-2GiB+crc", streams: *fileStream, srv: recv, prep: fresh, copyOf: "big.bin", cmd: dtn("big.bin", "--in-flight", "Checksum")},
				contender{tool: "dtnflow", name: "file-2GiB+arrival", streams: *fileStream, srv: recv, prep: fresh, copyOf: "big.bin", cmd: dtn("big.bin", "--verify-mode", "OnArrival"), skip: !verify},
				// The default digest is BLAKE3; SHA-256 (the default before) beside it.
				contender{tool: "dtnflow", name: "file-2GiB+sha256", streams: *fileStream, srv: recv, prep: fresh, copyOf: "big.bin", cmd: dtn("big.bin", "--checksum", "SHA256"), skip: !verify},
				contender{tool: "dtnflow", name: "file-2GiB+headers", streams: *fileStream, srv: recv, prep: fresh, copyOf: "big.bin", cmd: dtn("big.bin", "--in-flight", "HeadersOnly")},
				contender{tool: "dtnflow", name: "file-2GiB+enc", streams: *fileStream, srv: recv, prep: fresh, copyOf: "big.bin", cmd: dtn("big.bin", "--in-flight", "Encrypted")},
				contender{tool: "gridftp", name: "file-2GiB", streams: *fileStream, srv: gftp, prep: fresh, copyOf: "big.bin",
					cmd: fixed(append(append([]string{"globus-url-copy", "-p", fs, "-fast"}, gverify...),
						gftpURL+filepath.Join(src, "big.bin"), "file://"+filepath.Join(gftpDst, "big.bin"))...)},
				// OpenSSH encrypts everything (aes128-gcm here) and checks nothing end to end:
				// run beside the verify=false rows only.
				contender{tool: "scp", name: "file-2GiB+enc", streams: 1, srv: ssh.server(), prep: fresh, copyOf: "big.bin", skip: ssh == nil || verify,
					cmd: func() []string { return ssh.scp(filepath.Join(src, "big.bin"), filepath.Join(sshDst, "big.bin")) }},
				contender{tool: "sftp", name: "file-2GiB+enc", streams: 1, srv: ssh.server(), prep: fresh, copyOf: "big.bin", skip: ssh == nil || verify,
					cmd: func() []string { return ssh.sftp(filepath.Join(src, "big.bin"), filepath.Join(sshDst, "big.bin")) }})
			if err != nil {
				return err
			}
		}
		if !strings.Contains(*cases, "small") {
			continue
		}
		fmt.Fprintf(os.Stderr, "%d files of %d bytes, verify %v\n", *smallCount, *smallSize, verify)
		smallBytes := int64(*smallCount) * int64(*smallSize)
		err = runCase(verify, smallBytes, *smallCount,
			contender{tool: "dtnflow", name: "small-files", streams: *fileStream, srv: recv, prep: fresh, copyOf: "small", cmd: dtn("small")},
			contender{tool: "dtnflow", name: "small-files+crc", streams: *fileStream, srv: recv, prep: fresh, copyOf: "small", cmd: dtn("small", "--in-flight", "Checksum")},
			contender{tool: "dtnflow", name: "small-files+arrival", streams: *fileStream, srv: recv, prep: fresh, copyOf: "small", cmd: dtn("small", "--verify-mode", "OnArrival"), skip: !verify},
			contender{tool: "dtnflow", name: "small-files+sha256", streams: *fileStream, srv: recv, prep: fresh, copyOf: "small", cmd: dtn("small", "--checksum", "SHA256"), skip: !verify},
			contender{tool: "dtnflow", name: "small-files+headers", streams: *fileStream, srv: recv, prep: fresh, copyOf: "small", cmd: dtn("small", "--in-flight", "HeadersOnly")},
			contender{tool: "dtnflow", name: "small-files+enc", streams: *fileStream, srv: recv, prep: fresh, copyOf: "small", cmd: dtn("small", "--in-flight", "Encrypted")},
			contender{tool: "gridftp", name: "small-files", streams: 1, srv: gftp, prep: fresh, copyOf: "small",
				cmd: fixed(append(append([]string{"globus-url-copy", "-cc", ccs, "-fast", "-r", "-cd"}, gverify...),
					gftpURL+filepath.Join(src, "small")+"/", "file://"+filepath.Join(gftpDst, "small")+"/")...)})
		if err != nil {
			return err
		}
	}
	return report(results)
}

func waitPort(p int) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err == nil {
			c.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on port %d", p)
}

func parseList(s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		if err == nil && v > 0 {
			out = append(out, v)
		}
	}
	return out
}

func report(rs []Result) error {
	os.MkdirAll(filepath.Dir(*jsonOut), 0o755)
	f, err := os.Create(*jsonOut)
	if err != nil {
		return err
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, r := range rs {
		enc.Encode(r)
	}
	find := func(tool, c string, streams int, verify bool) *Result {
		for i := range rs {
			r := &rs[i]
			if r.Tool == tool && r.Case == c && r.Verify == verify && (streams == 0 || r.Streams == streams) {
				return r
			}
		}
		return nil
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		fmt.Printf("Load average at the end: %s\n", strings.Join(strings.Fields(string(b))[:3], " "))
	}
	fmt.Println("| case | streams | verify | tool | Gbit/s | files/s | CPU s/GB | dtnflow ÷ GridFTP | dtnflow ÷ iperf3 | dtnflow ÷ baseline |")
	fmt.Println("|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range rs {
		ratioG, ratioI, ratioB := "", "", ""
		if r.Tool == "dtnflow" {
			// the baseline's row of the same case, else its plain row
			b := find("baseline", r.Case, r.Streams, r.Verify)
			if plain, _, _ := strings.Cut(r.Case, "+"); b == nil {
				b = find("baseline", plain, r.Streams, r.Verify)
			}
			if b != nil {
				ratioB = fmt.Sprintf("%.2f× rate, %.2f× CPU/GB", float64(r.BitsPerSecond)/float64(b.BitsPerSecond), r.CPUSecondsPerGB/b.CPUSecondsPerGB)
			}
		}
		if r.Tool == "dtnflow" {
			peerCase, _, _ := strings.Cut(r.Case, "+")
			if g := find("gridftp", peerCase, map[bool]int{true: 0, false: r.Streams}[r.Case == "small-files"], r.Verify); g != nil {
				if r.FilesPerSecond > 0 {
					ratioG = fmt.Sprintf("%.2f× files/s", r.FilesPerSecond/g.FilesPerSecond)
				} else {
					ratioG = fmt.Sprintf("%.2f× rate", float64(r.BitsPerSecond)/float64(g.BitsPerSecond))
				}
			}
			if i := find("iperf3", peerCase, r.Streams, r.Verify); i != nil {
				ratioI = fmt.Sprintf("%.2f× rate, %.2f× CPU/GB", float64(r.BitsPerSecond)/float64(i.BitsPerSecond), r.CPUSecondsPerGB/i.CPUSecondsPerGB)
			}
		}
		files := ""
		if r.FilesPerSecond > 0 {
			files = fmt.Sprintf("%.0f", r.FilesPerSecond)
		}
		fmt.Printf("| %s | %d | %v | %s | %.2f | %s | %.2f | %s | %s | %s |\n", r.Case, r.Streams, r.Verify, r.Tool, float64(r.BitsPerSecond)/1e9, files, r.CPUSecondsPerGB, ratioG, ratioI, ratioB)
	}
	fmt.Fprintln(os.Stderr, "JSON lines in", *jsonOut)
	return nil
}

// sshPeer is an sshd of the run's own on a loopback port (its own host key, config and
// authorized key; ciphers aes128-gcm only) and the client arguments to reach it.
type sshPeer struct {
	srv        *server
	port       int
	dir, user  string
	clientOpts []string
}

// server is the sshd, or nil when OpenSSH is not run.
func (p *sshPeer) server() *server {
	if p == nil {
		return nil
	}
	return p.srv
}

const sshCipher = "aes128-gcm@openssh.com"

func startSSH(dir string) (*sshPeer, error) {
	if _, err := os.Stat("/usr/sbin/sshd"); err != nil {
		return nil, fmt.Errorf("no /usr/sbin/sshd (make bench-peers installs openssh-server; -ssh=false leaves it out)")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	for _, k := range []string{"host_key", "client_key"} {
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", filepath.Join(dir, k)).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("ssh-keygen: %v: %s", err, out)
		}
	}
	pub, err := os.ReadFile(filepath.Join(dir, "client_key.pub"))
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		return nil, err
	}
	// sshd's privilege separation directory (Debian's init script makes it)
	if err := os.MkdirAll("/run/sshd", 0o755); err != nil {
		return nil, err
	}
	p := &sshPeer{port: freePort(), dir: dir, user: os.Getenv("USER")}
	if p.user == "" {
		p.user = "root"
	}
	conf := fmt.Sprintf("Port %d\nListenAddress 127.0.0.1\nHostKey %s\nAuthorizedKeysFile %s\nPidFile %s\nStrictModes no\nUsePAM no\n"+
		"PasswordAuthentication no\nKbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nCiphers %s\nSubsystem sftp internal-sftp\n",
		p.port, filepath.Join(dir, "host_key"), filepath.Join(dir, "authorized_keys"), filepath.Join(dir, "sshd.pid"), sshCipher)
	if err := os.WriteFile(filepath.Join(dir, "sshd_config"), []byte(conf), 0o600); err != nil {
		return nil, err
	}
	p.srv = startServer("/usr/sbin/sshd", "-D", "-e", "-f", filepath.Join(dir, "sshd_config"))
	if err := waitPort(p.port); err != nil {
		p.srv.stop()
		return nil, fmt.Errorf("sshd: %w", err)
	}
	p.clientOpts = []string{"-c", sshCipher, "-i", filepath.Join(dir, "client_key"), "-o", "StrictHostKeyChecking=no",
		"-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"}
	return p, nil
}

// scp copies with the scp protocol (-O; OpenSSH 9 would otherwise speak SFTP).
func (p *sshPeer) scp(from, to string) []string {
	return append(append([]string{"scp", "-O", "-q", "-P", strconv.Itoa(p.port)}, p.clientOpts...), from, fmt.Sprintf("%s@127.0.0.1:%s", p.user, to))
}

// sftp puts one file through a batch file.
func (p *sshPeer) sftp(from, to string) []string {
	batch := filepath.Join(p.dir, "batch")
	must(os.WriteFile(batch, []byte(fmt.Sprintf("put %s %s\n", from, to)), 0o600))
	return append(append([]string{"sftp", "-q", "-b", batch, "-P", strconv.Itoa(p.port)}, p.clientOpts...), fmt.Sprintf("%s@127.0.0.1", p.user))
}

// warmMemory writes n bytes into a scratch file on the destinations' tmpfs and removes
// it, so that the run after it writes into memory the machine has just used. This
// machine is a VM that hands free memory back to its host (virtio-balloon free page
// reporting): a page freed more than a few seconds ago costs a host fault at its first
// touch, and one 2 GiB file moved at 3.5–4.6 Gbit/s into such memory against 14–15 into
// memory freed just before (dtnflow-agent send, 4 streams, three runs each way,
// 2026-11-30). Which contender met which memory depended on the order and the timing
// of the runs before it. Writing, not fallocate: tmpfs hands out fallocated pages
// untouched, and they were as slow.
func warmMemory(dir string, n int64) error {
	name := filepath.Join(dir, "warm-memory")
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	defer os.Remove(name)
	zeros := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(zeros)) {
		if _, err := f.Write(zeros[:min(left, int64(len(zeros)))]); err != nil {
			f.Close()
			return fmt.Errorf("warming the destinations' memory: %w", err)
		}
	}
	return f.Close()
}

// copyChecker checks a run's destination against the source (SHA-256 of every file,
// through test/dataset), hashing the source once for the whole bench.
type copyChecker struct {
	src     string
	sources map[string]string // the source's digests, read at the first check
}

// check says whether dst holds rel exactly as the source does: every regular file under
// rel at the same path with the same bytes, and no other file (the agent's own state
// under .dtnflow aside).
func (c *copyChecker) check(rel, dst string) error {
	if c.sources == nil {
		sums, err := dataset.Digests(c.src)
		if err != nil {
			return fmt.Errorf("reading the source: %w", err)
		}
		c.sources = sums
	}
	want := map[string]string{}
	for p, sum := range c.sources {
		if p == rel || strings.HasPrefix(p, rel+"/") {
			want[p] = sum
		}
	}
	got, err := dataset.Digests(dst)
	if err != nil {
		return fmt.Errorf("reading the copy: %w", err)
	}
	if diff := dataset.CompareDigests(want, got); diff != "" {
		return fmt.Errorf("the copy at %s is not exact:\n%s", dst, diff)
	}
	return nil
}
