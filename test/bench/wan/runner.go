package wan

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/dtnflow/dtnflow/test/topology"
	"github.com/dtnflow/dtnflow/test/wanem"
)

// Runner is one tool (or one way of running a tool) on a scenario.
type Runner interface {
	// Name is the tool's row label: iperf3, gridftp-default, dtnflow-auto, ...
	Name() string
	// Run transfers env's dataset (or, for a reference, measures the path) and returns
	// its results: one final result (Chosen), plus the samples it probed, if any.
	Run(ctx context.Context, env *Env) ([]Result, error)
}

// Env is what a runner gets: the path, the hosts and the dataset.
type Env struct {
	Scenario Scenario
	// Topo is bench-wan's topology; nil where the path is another's (bench-cluster's
	// cluster WAN), which only leaves the emulator's counters out of the results.
	Topo *topology.Topology
	// Src sends and Dst receives; src1/dst1 carry the cross traffic.
	Src, Dst topology.Host
	Dataset  *Dataset
	// SampleDataset is a smaller dataset of the same kind for probing grid points.
	SampleDataset *Dataset
	// WorkDir is a scratch directory (tmpfs) runners write destinations under; they
	// remove what they write.
	WorkDir string
	// LogDir, when set, receives the tools' own output, one file per run.
	LogDir string
	// RunLimit, when > 0, stops any one transfer that runs longer; its result is
	// measured on what it moved by then and marked Partial.
	RunLimit time.Duration
	// Log receives progress lines.
	Log io.Writer
}

// linkStats is the bottleneck's A→B counters, or zeros when the emulator is not this
// process's (bench-cluster runs these tools over the cluster's WAN: Topo is nil).
func (e *Env) linkStats() wanem.DirectionStats {
	if e.Topo == nil || e.Topo.Link == nil {
		return wanem.DirectionStats{}
	}
	return e.Topo.Link.Stats().AtoB
}

// LinkBitsPerSecond is the bottleneck's rate.
func (e *Env) LinkBitsPerSecond() float64 { return float64(e.Scenario.RateBitsPerSecond) }

// Result is one measured run: a row of the table (the final runs) or a point of the
// plot (every run). JSON names match the markdown columns.
type Result struct {
	Scenario string `json:"scenario"`
	Tool     string `json:"tool"`
	// Config is the tool's settings in its own words ("-p 8 -cc 2 -pp").
	Config string `json:"config"`
	// Streams is the number of TCP data streams the run used (p × cc for GridFTP,
	// streams × stripes for dtnflow).
	Streams int `json:"streams"`
	// Parallelism, Concurrency, Stripes, BufferBytes: the knobs, where they apply.
	Parallelism int   `json:"parallelism,omitempty"`
	Concurrency int   `json:"concurrency,omitempty"`
	Stripes     int   `json:"stripes,omitempty"`
	BufferBytes int64 `json:"bufferBytes,omitempty"`
	Pipelining  bool  `json:"pipelining,omitempty"`
	// Sample marks a probe of a grid point on the sample dataset; Chosen marks the
	// tool's final run on the whole dataset (the table's row).
	Sample bool  `json:"sample,omitempty"`
	Chosen bool  `json:"chosen,omitempty"`
	Bytes  int64 `json:"bytes"`
	Files  int   `json:"files"`
	// Seconds is the transfer's wall time; TotalSeconds adds the tool's own probing
	// (dtnflow-auto probes inside its run, so both are its wall time). ProbeSeconds is
	// what a grid spent on its samples, which a user would pay to find the point.
	Seconds      float64 `json:"seconds"`
	TotalSeconds float64 `json:"totalSeconds"`
	ProbeSeconds float64 `json:"probeSeconds,omitempty"`
	// BitsPerSecond is Bytes·8/Seconds (goodput).
	BitsPerSecond float64 `json:"bitsPerSecond"`
	// PercentOfLink is BitsPerSecond as a share of the bottleneck rate.
	PercentOfLink float64 `json:"percentOfLink"`
	// CPUSecondsPerGB is the CPU time of both ends (client, server and their
	// children) per 10⁹ bytes moved.
	CPUSecondsPerGB float64 `json:"cpuSecondsPerGB"`
	// Retransmits and LinkLoss are what the path did meanwhile (TCP retransmissions
	// where the tool reports them; the emulator's wire losses).
	Retransmits int64  `json:"retransmits,omitempty"`
	LinkLost    uint64 `json:"linkLostSegments"`
	LinkDropped uint64 `json:"linkQueueDroppedSegments"`
	// Partial marks a run stopped at the run limit: MovedBytes and MovedFiles are what
	// it moved; Seconds (and TotalSeconds) the time the whole dataset would take at
	// its rate, and CPUSecondsPerGB its CPU per byte moved.
	Partial    bool      `json:"partial,omitempty"`
	MovedBytes int64     `json:"movedBytes,omitempty"`
	MovedFiles int       `json:"movedFiles,omitempty"`
	Note       string    `json:"note,omitempty"`
	Started    time.Time `json:"started"`
}

// finish fills the derived figures.
func (r *Result) finish(env *Env, cpuSeconds float64) {
	r.Scenario = env.Scenario.Name()
	if r.Seconds > 0 {
		r.BitsPerSecond = float64(r.Bytes) * 8 / r.Seconds
	}
	if r.TotalSeconds == 0 {
		r.TotalSeconds = r.Seconds
	}
	if rate := env.LinkBitsPerSecond(); rate > 0 {
		r.PercentOfLink = 100 * r.BitsPerSecond / rate
	}
	if r.Bytes > 0 {
		r.CPUSecondsPerGB = cpuSeconds / (float64(r.Bytes) / 1e9)
	}
}

// process is a command running in a host's namespace whose CPU time (its own and its
// reaped children's) can be read while it runs.
type process struct {
	cmd    *exec.Cmd
	out    bytes.Buffer
	waited chan struct{}
	err    error
}

// start starts name in host with a deadline from ctx.
func start(ctx context.Context, host topology.Host, name string, args ...string) (*process, error) {
	p := &process{cmd: host.Command(ctx, name, args...), waited: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
	// Its own process group, so that stop reaches whatever it forks.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p.cmd.Cancel = func() error { return syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) }
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.err = p.cmd.Wait(); close(p.waited) }()
	return p, nil
}

// cpu is the process's CPU seconds including reaped children, after waiting (briefly)
// for its live children to exit and be reaped (a GridFTP server forks per session).
func (p *process) cpu() float64 {
	pid := p.cmd.Process.Pid
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) && len(children(pid)) > 0 {
		time.Sleep(20 * time.Millisecond)
	}
	return procCPU(pid)
}

// stop ends the process (SIGTERM to its group, SIGKILL after grace).
func (p *process) stop(grace time.Duration) {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.waited:
	case <-time.After(grace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.waited
	}
}

// errRunLimit says a run was stopped at Env.RunLimit.
var errRunLimit = errors.New("stopped at the run limit")

// runTimed runs name in host to completion and returns wall seconds, CPU seconds
// (its own and its children's) and its combined output. With limit > 0 a run that
// takes longer is killed and errRunLimit returned, with its wall and CPU time.
func runTimed(ctx context.Context, host topology.Host, name string, limit time.Duration, args ...string) (float64, float64, string, error) {
	rctx := ctx
	if limit > 0 {
		var cancel context.CancelFunc
		rctx, cancel = context.WithTimeout(ctx, limit)
		defer cancel()
	}
	cmd := host.Command(rctx, name, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	t0 := time.Now()
	err := cmd.Run()
	wall := time.Since(t0).Seconds()
	cpu := 0.0
	if cmd.ProcessState != nil {
		ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
		cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
	}
	if err != nil && limit > 0 && rctx.Err() != nil && ctx.Err() == nil {
		return wall, cpu, out.String(), errRunLimit
	}
	if err != nil {
		return wall, cpu, out.String(), fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, tail(out.String(), 2000))
	}
	return wall, cpu, out.String(), nil
}

// partial fills a result stopped at the run limit from what it moved (moved bytes in
// files at the destination, of which files complete): the time the whole dataset
// would take at its rate over the wall time. It returns the factor that turns the
// run's CPU seconds into the whole dataset's (for finish).
func (r *Result) partial(ds *Dataset, moved int64, files int, wall float64) float64 {
	r.Partial, r.MovedBytes, r.MovedFiles = true, moved, files
	r.Bytes, r.Files = ds.Total, ds.Count()
	moved = max(moved, 1)
	r.Seconds = wall * float64(ds.Total) / float64(moved)
	r.addNote(fmt.Sprintf("stopped after %.0f s having moved %s (%d of %d files); time extrapolated from its rate",
		wall, humanBytes(moved), files, ds.Count()))
	return float64(ds.Total) / float64(moved)
}

// addNote appends a remark to the result's note: a run stopped at the limit says so,
// and what the caller adds afterwards (the preset's class, the grid's size) must not
// erase that.
func (r *Result) addNote(s string) {
	r.Note = strings.TrimPrefix(r.Note+"; "+s, "; ")
}

// saveLog writes a run's output under env.LogDir.
func (env *Env) saveLog(name, text string) {
	if env.LogDir == "" {
		return
	}
	_ = os.MkdirAll(env.LogDir, 0o755)
	_ = os.WriteFile(filepath.Join(env.LogDir, sanitize(env.Scenario.Name()+"-"+name)+".log"), []byte(text), 0o644)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func children(pid int) []int {
	var out []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		p, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue
		}
		f := statFields(b)
		if len(f) > 2 && f[1] == strconv.Itoa(pid) && f[0] != "Z" {
			out = append(out, p)
		}
	}
	return out
}

// statFields are the fields of /proc/pid/stat after the command name.
func statFields(b []byte) []string {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// procCPU is utime+stime+cutime+cstime of pid, in seconds.
func procCPU(pid int) float64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := statFields(b)
	if len(f) < 15 {
		return 0
	}
	var ticks float64
	for i := 11; i < 15; i++ {
		v, _ := strconv.ParseFloat(f[i], 64)
		ticks += v
	}
	return ticks / float64(clockTicks)
}

// clockTicks is USER_HZ, the unit of /proc/pid/stat times (100 on Linux).
const clockTicks = 100

// waitListening waits until something listens on host's TCP port.
func WaitListening(ctx context.Context, host topology.Host, port int) error {
	deadline := time.Now().Add(15 * time.Second)
	hexPort := fmt.Sprintf(":%04X ", port)
	for time.Now().Before(deadline) {
		out, err := host.Command(ctx, "cat", "/proc/net/tcp").Output()
		if err == nil {
			for _, line := range strings.Split(string(out), "\n") {
				f := strings.Fields(line)
				if len(f) > 3 && strings.HasSuffix(f[1]+" ", hexPort) && f[3] == "0A" {
					return nil
				}
			}
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("nothing listens on %s:%d", host.Addr, port)
}
